"""The KV-cache section shows the measured run of the live model and the formula's numbers."""
import re

import numpy as np
import pytest

from pipeline.cached_generation import cache_vs_recompute
from pipeline.kvcache import kv_cache_bytes
from pipeline.published import KV_ONLY, PUBLISHED
from web.figures.kvcache import human_bytes
from web.model_state.forward import prompt_ids
from web.model_state.measured import cost_table, stamp
from web.sections import kvcache
from web_support import HX, error_message, every_section, table_rows, text_of, url

PROMPT = "Elizabeth walked to Netherfield"


def prompt_ids_of(model, prompt):
    return tuple(model.tokenizer.encode_ordinary(prompt))


def measured_run(app, prompt, n_new):
    lm = app.extensions["explainer"].default_model
    return kvcache.cache_check(lm.model, prompt_ids(lm, prompt), n_new)


def test_nbytes_and_formula_on_screen_are_the_caches(app, client, model):
    page = text_of(client.get(url("/", prompt=PROMPT, kv_new=5), headers=every_section()))
    run = measured_run(app, PROMPT, 5)          # the measurement the page showed (cached)
    last = run.steps[-1]
    n = len(model.tokenizer.encode_ordinary(PROMPT)) + 5
    assert last.n_tokens == n and last.nbytes == kv_cache_bytes(model.config, n, 4)
    assert (f"The formula gives\n      2,048 × {n} = <strong>{n * 2048:,} bytes</strong>;"
            in page)
    assert f"<code>nbytes</code> is <strong>{last.nbytes:,} bytes</strong> ✓ the same" in page
    assert f"<strong>{last.allocated_nbytes:,} bytes allocated</strong>" in page


def test_checked_steps_table_is_the_run(app, client):
    page = text_of(client.get(url("/section/kvcache", prompt=PROMPT, kv_new=4,
                                  open="kv-how"), headers=HX))
    run = measured_run(app, PROMPT, 4)
    rows = table_rows(page, "Checked steps")
    assert [[r[0], r[1], r[3], r[4]] for r in rows] == [
        [str(i), str(s.n_tokens), f"{s.max_abs_diff:.1e}", f"{s.nbytes:,}"]
        for i, s in enumerate(run.steps)]
    assert f"<strong>{run.max_abs_diff:.2e}</strong>" in page
    assert "every step picks the same\n      next token both ways" in page


def test_the_check_is_recomputing_step_by_step(model):
    """Row t of one forward pass over the final sequence is what recomputing step t gives:
    compared with a forward pass over each step's own prefix."""
    ids = prompt_ids_of(model, PROMPT)
    run = cache_vs_recompute(model, ids, 6, kvcache.START_CAPACITY)
    seq = list(ids) + run.generated[:-1]
    for s in run.steps:
        alone = model.forward(seq[:s.n_tokens])[-1]
        assert int(np.argmax(alone)) == s.next_token
    assert run.max_abs_diff < 1e-3 and all(s.same_argmax for s in run.steps)
    assert [s.n_tokens for s in run.steps] == list(range(len(ids), len(ids) + 7))


def test_step_times_are_the_cost_tables_at_lengths_where_they_grow(app, client):
    lm = app.extensions["explainer"].default_model
    table = cost_table(lm)
    page = re.sub(r"\s+", " ", text_of(client.get(url("/section/kvcache", prompt=PROMPT,
                                                      open="kv-how"), headers=HX)))
    lengths = [n for n in sorted(table.decode) if n in kvcache.SHOWN_LENGTHS]
    assert lengths == [16, 64, 128, 248]      # up to the context of 256
    listed = re.search(r'id="kv-lengths">(.*?)</p>', page).group(1)
    for n in lengths:
        assert f"<strong>{table.prefill[n].shown} ms</strong></span> at {n} tokens" in listed
        assert f"<strong>{table.decode[n].shown} ms</strong></span> at {n}" in listed
    assert f"once at {stamp(table.measured_at)}" in page


def test_a_second_render_shows_the_same_measurement(client):
    a = text_of(client.get(url("/section/kvcache", prompt=PROMPT, kv_new=3),
                           headers=every_section()))
    b = text_of(client.get(url("/", prompt=PROMPT, kv_new=3), headers=every_section()))
    assert a in b


@pytest.mark.parametrize("ctx", [1024, 131072, 3000])
def test_published_table_is_the_formula(client, ctx):
    page = text_of(client.get(url("/section/kvcache", kv_ctx=ctx), headers=HX))
    rows = table_rows(page, "KV cache of published models")
    assert len(rows) == len(PUBLISHED) + len(KV_ONLY)
    for row, p in zip(rows, PUBLISHED + KV_ONLY, strict=True):
        c = p.config
        assert row[0].startswith(p.name)
        assert ("(window" in row[0]) == (ctx > c.n_ctx)
        assert row[2] == f"{c.n_heads} / {c.n_kv_heads}"
        assert row[3] == f"{kv_cache_bytes(c, 1, 2):,} B"
        assert row[4] == human_bytes(kv_cache_bytes(c, ctx, 2))
        assert row[5] == human_bytes(kv_cache_bytes(c, ctx, 1))
    assert f'<option value="{ctx}" selected>' in page


def test_llama3_70b_at_128k_is_40_gib(client):
    page = text_of(client.get(url("/section/kvcache", kv_ctx=131072), headers=HX))
    row = next(r for r in table_rows(page, "KV cache of published models")
               if r[0].startswith("Llama 3 70B "))
    assert row[4] == "40 GiB" and row[5] == "20 GiB"


@pytest.mark.parametrize("query, name, status, message", [
    ({"kv_new": "0"}, "kv_new", 422, "Tokens to generate must be between 1 and 48; got 0."),
    ({"kv_new": "many"}, "kv_new", 400, "Tokens to generate must be a whole number"),
    ({"kv_ctx": "200000"}, "kv_ctx", 422, "Context length (tokens) must be between 1 and 131072"),
    ({"kv_ctx": "1e3"}, "kv_ctx", 400, "must be a whole number"),
])
def test_bad_values_get_a_message_and_a_4xx(client, query, name, status, message):
    for path in ("/", "/section/kvcache"):
        r = client.get(url(path, **query), headers=HX if path != "/" else {})
        assert r.status_code == status
        assert message in error_message(text_of(r), name)


def test_too_many_tokens_for_the_window_is_refused_with_the_room_left(client, model):
    prompt = " Darcy" * 250
    n = len(model.tokenizer.encode_ordinary(prompt))
    assert n < 256
    r = client.get(url("/section/kvcache", prompt=prompt, kv_new=40), headers=HX)
    assert r.status_code == 422
    assert error_message(text_of(r), "kv_new") == (
        f"The prompt is {n} tokens long, so only {256 - n} more fit in the context window "
        f"of 256 tokens; choose at most {256 - n}.")
    # what fits is still measured and shown
    assert f"{n} prompt tokens, then {256 - n} generated" in text_of(r)


def test_state_round_trips_through_the_url(client):
    r = client.get(url("/section/kvcache", kv_new=7, kv_ctx=2048), headers=every_section())
    assert r.headers["HX-Push-Url"] == "/?kv_new=7&kv_ctx=2048"
    page = text_of(client.get(r.headers["HX-Push-Url"], headers=every_section()))
    assert re.search(r'id="kv-new"[^>]*value="7"', page)
    assert '<option value="2048" selected>' in page


def test_tokens_to_generate_changes_the_cache_size_shown_beside_it(client, model):
    """The slider's effect is in the section's core, not only in the hidden question: the bytes
    of the cache after the prompt and that many generated tokens, kv_cache_bytes' formula."""
    n_prompt = len(model.tokenizer.encode_ordinary(PROMPT))
    shown = {}
    for n_new in (3, 20):
        page = text_of(client.get(url("/section/kvcache", prompt=PROMPT, kv_new=n_new), headers=HX))
        core = page.split('id="kv-how', 1)[0]                   # before the Go-deeper part
        m = re.search(r'id="kv-after">(.*?)</p>', core, re.S)
        assert m, "no cache size beside the slider"
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", m.group(1)))
        expected = kv_cache_bytes(model.config, n_prompt + n_new, 4)
        assert f"After {n_prompt} prompt tokens and {n_new} generated greedily" in text
        assert f"{expected:,} bytes" in text
        shown[n_new] = expected
    assert shown[3] != shown[20]


def test_the_step_after_the_prompt_is_the_table_at_the_prompts_length(client, model):
    """With the cache: the decode step with the prompt in the cache; without: a pass over the
    prompt and the new token, the prefill of n + 1; both interpolated, and saying so."""
    prompt = ("It is a truth universally acknowledged, that a single man in possession of a "
              "good fortune, must be in want of a")
    n = len(model.tokenizer.encode_ordinary(prompt))
    table = cost_table(client.application.extensions["explainer"].default_model)
    assert n not in table.decode and n + 1 not in table.prefill
    page = re.sub(r"\s+", " ",
                  text_of(client.get(url("/section/kvcache", prompt=prompt), headers=HX)))
    now = re.search(r'id="kv-now">(.*?)</p>', page).group(1)
    cached, uncached = table.decode_at(n), table.prefill_at(n + 1)
    assert (f"one decode step at {n} tokens, from the cost table: <strong>{cached.shown} ms"
            f"</strong> ({cached.how()})") in now
    assert (f"a prefill at {n + 1} tokens, from the cost table: <strong>{uncached.shown} ms"
            f"</strong> ({uncached.how()})") in now
    assert "interpolated from" in cached.how() and "interpolated from" in uncached.how()


def test_the_core_gives_real_models_caches_by_the_formula(client):
    """The core's sentence on real models: Llama 2 7B, Llama 3 8B and Falcon 7B at one stated
    length, each kv_cache_bytes on its published config in fp16, whatever the disclosure's
    length is set to."""
    from pipeline.kvcache import kv_cache_bytes
    from pipeline.published import attention_config
    from web.figures.kvcache import human_bytes
    from web.sections.kvcache import HEADLINE_CTX
    for ctx in ("8192", "1024"):
        page = text_of(client.get(url("/section/kvcache", prompt="It is a truth", kv_ctx=ctx),
                                  headers=HX))
        from web_support import reading_text
        said = reading_text(re.search(r'<p id="kv-headline">(.*?)</p>', page, re.S).group(1))
        assert f"for one {HEADLINE_CTX:,}-token sequence in 16-bit floats" in said
        for name, kind, kv in (("Llama 2 7B", "multi-head", 32), ("Llama 3 8B", "grouped-query", 8),
                               ("Falcon 7B", "multi-query", 1)):
            n = kv_cache_bytes(attention_config(name), HEADLINE_CTX, 2)
            assert (f"{name} ({kind}, {kv} kv head{'s' if kv != 1 else ''}) keeps "
                    f"{human_bytes(n)}") in said
        assert "Llama 2 7B (multi-head, 32 kv heads) keeps 4 GiB" in said


def test_a_big_model_generates_its_most_and_says_so(smol_app):
    """SmolLM2: each token is a decode step of a 135 M-parameter model and a longer forward to
    check against, so a run asks for at most BIG_MAX_NEW; the page says how many of those asked
    it ran, and its checked steps are that run's. The default model runs what is asked."""
    lm = smol_app.extensions["explainer"].models["smollm2"]
    asked = kvcache.BIG_MAX_NEW + 4
    with smol_app.app_context():
        client = smol_app.test_client()
        page = text_of(client.get(url("/section/kvcache", model="smollm2", prompt=PROMPT,
                                      kv_new=asked, open="kv-how"), headers=HX))
        ids = tuple(lm.tokenizer.encode_ordinary(PROMPT))
        run = cache_vs_recompute(lm.model, ids, kvcache.BIG_MAX_NEW, kvcache.START_CAPACITY)
        rows = table_rows(page, "Checked steps")
        assert [[r[0], r[1], r[3], r[4]] for r in rows] == [
            [str(i), str(s.n_tokens), f"{s.max_abs_diff:.1e}", f"{s.nbytes:,}"]
            for i, s in enumerate(run.steps)]
        assert len(rows) == kvcache.BIG_MAX_NEW + 1
        cap = re.sub(r"\s+", " ", re.search(r'<span id="kv-big-cap">(.*?)</span>', page,
                                            re.S).group(1))
        assert f"generates {kvcache.BIG_MAX_NEW} tokens here, not {asked}" in cap
        assert f"{lm.model.n_params():,} parameters" in cap
        assert f"{run.steps[-1].nbytes:,} bytes" in page
        small = text_of(client.get(url("/section/kvcache", model="smollm2", prompt=PROMPT,
                                       kv_new=kvcache.BIG_MAX_NEW), headers=HX))
        assert 'id="kv-big-cap"' not in small


def test_the_check_is_computed_when_its_disclosure_is_open(app, client):
    """The slider shows the cache's size (the shared greedy run's steps) without the forward
    pass it is checked against; opening "Go deeper" asks for the check part, which is that
    check exactly."""
    prompt = "Mr. Bennet read the letter twice"
    checks = kvcache._checks.box((kvcache.model_key(app.extensions["explainer"]
                                                    .default_model.model),))
    before = checks.computed
    closed = text_of(client.get(url("/section/kvcache", prompt=prompt, kv_new=5), headers=HX))
    assert checks.computed == before and 'id="kv-check-wait"' in closed
    assert 'id="kv-diff"' not in closed and "Checked steps" not in closed
    opened = text_of(client.get(url("/section/kvcache", prompt=prompt, kv_new=5, open="kv-how"),
                                headers={**HX, "HX-Target": "kvcache-check"}))
    assert checks.computed == before + 1
    run = measured_run(app, prompt, 5)
    assert [[r[0], r[1], r[3], r[4]] for r in table_rows(opened, "Checked steps")] == [
        [str(i), str(s.n_tokens), f"{s.max_abs_diff:.1e}", f"{s.nbytes:,}"]
        for i, s in enumerate(run.steps)]
    assert 'id="kv-check-wait"' not in opened
