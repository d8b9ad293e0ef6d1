"""The overview (web/presentation/overview.py, templates/overview.html, GET /overview): every number
on it is
the pipeline's: token ids, tensor shapes from the activation cache, the residual norms, the KV
cache's bytes, the top five and the chosen token of the generation loop; bad input gives a 4xx
with a message; token text stays text."""
import dataclasses
import html
import re

import numpy as np
import pytest

from engine_support import get_model
from pipeline.generation import decode_loop, generation_steps
from pipeline.model import softmax
from pipeline.sampling import SamplerSettings, final_distribution, sampler
from web.core.params import PROMPT
from web.core.registry import SECTIONS
from web.core.sampler_settings import DEFAULT_TEMPERATURE
from web.model_state.forward import prompt_ids, prompt_run
from web.presentation.overview import CHIPS_HEAD, CHIPS_TAIL, OV_LIMIT
from web.sections.sampling import PARAMS as SAMPLING_PARAMS
from web_support import HX, chip_ids, error_message, ordered_list, reading_text, text_of, url

LIVE = {**HX, "HX-Target": "overview-live", "HX-Trigger": "ov-next"}
# the page's one sampler (the Sampling section's parameters) when the URL sets none of them
_D = {p.name: p.default for p in SAMPLING_PARAMS}
DEFAULT_SETTINGS = SamplerSettings(repetition_penalty=_D["s_rep"], temperature=_D["s_temp"],
                                   top_k=_D["s_topk"], top_p=_D["s_topp"], min_p=_D["s_minp"])
OV_SEED = _D["s_seed"]
assert DEFAULT_SETTINGS.temperature == DEFAULT_TEMPERATURE


def settings_with(**changed) -> SamplerSettings:
    """The page's default sampler with some settings changed."""
    return dataclasses.replace(DEFAULT_SETTINGS, **changed)


def shapes(page: str) -> dict:
    return {k: [int(n) for n in v.split(", ") if n]
            for k, v in re.findall(
                r'<code class="ov-shape" data-shape="(\w+)">[^<\[]*\[([\d, ]*)\]', page)}


def top_five(page: str) -> list:
    """[(id, probability as written in data-prob)] of the top-5 bars."""
    return [(int(i), float(p)) for i, p in re.findall(
        r'<li class="ov-cand[^"]*" data-id="(\d+)" data-prob="([\d.]+)"', page)]


def sampled(page: str) -> dict:
    """{id: the sampler's probability as written in data-sampled} of the top-5 bars."""
    return {int(i): float(p) for i, p in re.findall(
        r'<li class="ov-cand[^"]*" data-id="(\d+)" data-prob="[\d.]+" data-sampled="([^"]+)"',
        page)}


def chosen_id(page: str) -> int:
    return chip_ids(page, "Chosen next token")[0]


def chosen_sampled(page: str) -> tuple:
    """(data-sampled, the text written) of the chosen token's probability."""
    m = re.search(r'class="ov-note ov-chosen-p" data-sampled="([^"]+)">sampler p '
                  r'<strong>([^<]+)</strong>', html.unescape(page))
    return float(m.group(1)), m.group(2)


def live_value(page: str, name: str) -> str:
    return re.search(r'<div id="overview-live"[^>]*\b%s="([^"]*)"' % name, page).group(1)


def expected_sequence(model, prompt, steps, settings=DEFAULT_SETTINGS):
    ids = list(model.tokenizer.encode_ordinary(prompt))
    return ids + [p.token for p in decode_loop(model, ids, steps, sampler(settings, OV_SEED),
                                               stop_at_eos=False)]


def check_pass(page: str, model, sequence: list, n_prompt: int, settings=DEFAULT_SETTINGS):
    """Shapes, norms, KV bytes and the prediction on the page against the pipeline, run afresh.
    The shapes are those of the pass that chose the next token: the prefill of the prompt
    (T rows), or after a Next token the KV-cached decode step of the last token (one row,
    attending over the T cached positions)."""
    cfg = model.config
    T = len(sequence)
    _, cache = model.run_with_cache(sequence)
    rows = T if T == n_prompt else 1
    step = cache
    if rows == 1:                          # the loop's own decode step, recorded
        step, kv = {}, model.new_kv_cache()
        model.prefill(sequence[:-1], kv)
        model.decode(sequence[-1], kv, cache=step)
        assert "the KV-cached decode step of the last token (one row)" in page
    else:
        assert f"the prefill, all {T} tokens of the prompt in one pass" in reading_text(page)
    s = shapes(page)
    assert s["ids"] == [T]
    assert s["wte"] == list(model.params["wte"].shape)
    assert s["embed"] == list(step["hook_embed"].shape) == [rows, cfg.d_model]
    for key, hook in (("ln1", "blocks.0.ln1.hook_normalized"), ("q", "blocks.0.attn.hook_q"),
                      ("k", "blocks.0.attn.hook_k"), ("pattern", "blocks.0.attn.hook_pattern"),
                      ("ln2", "blocks.0.ln2.hook_normalized"), ("ffn", "blocks.0.mlp.hook_post"),
                      ("resid", "blocks.0.hook_resid_pre"),
                      ("final_norm", "ln_final.hook_normalized")):
        assert s[key] == list(step[hook].shape), key
    assert s["q"] == [rows, cfg.n_heads, cfg.head_dim]
    assert s["k"] == list(step["blocks.0.attn.hook_v"].shape) == \
        [rows, cfg.n_kv_heads, cfg.head_dim]
    assert s["pattern"] == [cfg.n_heads, rows, T]
    assert s["unembed"] == list(model.params["unembed"].shape)
    assert s["logits"] == [rows, cfg.vocab_size] and s["next_logits"] == [cfg.vocab_size]
    assert s["kv"] == [cfg.n_layers, 2, T, cfg.n_kv_heads, cfg.head_dim]
    # the KV cache's bytes: a real cache after the prefill of the whole sequence
    kv = model.new_kv_cache()
    model.prefill(sequence, kv)
    written = re.search(r'<span class="ov-kvbytes">([\d,]+)</span>', page).group(1)
    assert int(written.replace(",", "")) == kv.nbytes
    # residual stream norms of the last token, entering block 0 and after each block
    bars = dict(re.findall(r'data-hook="([^"]+)" data-value="([\d.]+)"', page))
    assert len(bars) == cfg.n_layers + 1
    for hook, value in bars.items():
        assert float(value) == pytest.approx(float(np.linalg.norm(cache[hook][-1])), abs=2e-4)
    # the prediction: the generation loop's step after the sequence, greedy by default
    step = list(generation_steps(model, sequence, 1, n_top=5, stop_at_eos=False))[0]
    got = top_five(page)
    assert [i for i, _ in got] == [i for i, _ in step.top]
    for (_, p), (_, q) in zip(got, step.top, strict=True):
        assert p == pytest.approx(q, abs=2e-6)
    # beside them, what the overview's sampler draws from (pipeline.sampling), for the same ids
    logits = next(decode_loop(model, sequence, 1, stop_at_eos=False)).logits
    final = final_distribution(logits, sequence, settings)
    shown = sampled(page)
    assert list(shown) == [i for i, _ in got]
    for i, p in shown.items():
        assert p == pytest.approx(float(final[i]), rel=1e-5, abs=1e-7)
    tail = min(T, CHIPS_TAIL)
    assert chip_ids(page, "Tokens of the pass")[-tail:] == sequence[-tail:]
    assert f"{n_prompt} from the prompt" in page


def test_default_prompt(client, model):
    r = client.get(url("/overview"))
    page = text_of(r)
    assert r.status_code == 200
    ids = list(model.tokenizer.encode_ordinary(PROMPT.default))
    check_pass(page, model, ids, len(ids))
    # the default sampler (temperature DEFAULT_TEMPERATURE, seed OV_SEED) drew it
    logits = prompt_run(client.application.extensions["explainer"].default_model,
                        PROMPT.default).logits[-1]
    assert chosen_id(page) == sampler(DEFAULT_SETTINGS, OV_SEED)(logits, ids)
    assert f"temperature {DEFAULT_TEMPERATURE:g}, seed {OV_SEED}" in reading_text(page)
    cfg = model.config
    assert f"{cfg.n_heads} query heads, {cfg.n_kv_heads} key/value heads" in page
    assert "RoPE, base θ = 10000" in reading_text(page) and "RMSNorm" in page and "SwiGLU" in page
    assert f"× {cfg.n_layers} blocks" in page
    assert live_value(page, "data-steps") == "0" and live_value(page, "data-finish") == ""


@pytest.mark.parametrize("steps", [1, 3])
def test_steps_are_the_generation_loop(client, model, steps):
    """ov_steps=N: the prompt plus the loop's first N greedy tokens; the next token and top five
    are the loop's next step. The Next token button asks for N + 1."""
    r = client.get(url("/overview", ov_steps=steps), headers=LIVE)
    page = text_of(r)
    assert r.status_code == 200
    seq = expected_sequence(model, PROMPT.default, steps)
    n_prompt = len(seq) - steps
    check_pass(page, model, seq, n_prompt)
    assert chip_ids(page, "Tokens of the pass")[-steps:] == seq[-steps:]
    assert page.count('ov-new"') >= steps           # the generated chips are marked
    assert f"{steps} generated" in page
    assert html.unescape(re.search(r'id="ov-next"[^>]*hx-vals=\'([^\']*)\'', page).group(1)) \
        == '{"ov_steps": "%d"}' % (steps + 1)
    assert r.headers["HX-Replace-Url"] == url("/", ov_steps=steps)
    assert "HX-Push-Url" not in r.headers


def test_sampler_with_its_seed(client, model):
    """Temperature, top-k and top-p of the overview: the sampler of pipeline/sampling.py with the
    overview's seed, so the same URL gives the same tokens."""
    q = dict(ov_steps=5, s_temp=1.3, s_topk=20, s_topp=0.9)
    page = text_of(client.get(url("/overview", **q), headers=LIVE))
    settings = settings_with(temperature=1.3, top_k=20, top_p=0.9)
    seq = expected_sequence(model, PROMPT.default, 5, settings)
    assert chip_ids(page, "Tokens of the pass")[-5:] == seq[-5:]
    step = list(generation_steps(model, seq[:-5], 6, sampler(settings, OV_SEED),
                                 stop_at_eos=False))[-1]
    assert chosen_id(page) == step.token
    assert text_of(client.get(url("/overview", **q), headers=LIVE)) == page
    said = reading_text(page)
    assert "temperature 1.3, seed 0" in said and "top-k 20, top-p 0.9, min-p 0.05" in said
    # the prompt alone: the sampler's first draw, as the loop's first step makes it
    page = text_of(client.get(url("/overview", **{**q, "ov_steps": 0}), headers=LIVE))
    first = list(generation_steps(model, seq[:-5], 1, sampler(settings, OV_SEED),
                                  stop_at_eos=False))[0]
    assert chosen_id(page) == first.token == seq[-5]


def test_greedy_is_one_setting_away(client, model):
    """Temperature 0: the sampler keeps only the highest score, so the chosen token is the
    model's most probable one, drawn with probability 1, and the other four bars are 0."""
    page = text_of(client.get(url("/overview", s_temp=0), headers=LIVE))
    ids = list(model.tokenizer.encode_ordinary(PROMPT.default))
    check_pass(page, model, ids, len(ids), settings_with(temperature=0.0))
    best = int(np.argmax(model.forward(ids)[-1]))
    assert chosen_id(page) == best
    assert chosen_sampled(page) == (1.0, "100.0%")
    assert sampled(page) == {i: (1.0 if i == best else 0.0) for i, _ in top_five(page)}
    assert "temperature 0: greedy" in reading_text(page)


@pytest.mark.parametrize("steps", [0, 2])
def test_the_chosen_tokens_probability_is_the_samplers(client, model, steps):
    """At temperature 1.5 the sampler can draw a token far down the list: the probability
    written beside the chosen token is the one the sampler drew it with (pipeline.sampling's
    final distribution), not the model's T = 1 softmax, and it is written with enough digits
    not to read 0."""
    from web.presentation.numbers import probability as pct
    settings = settings_with(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0)
    page = text_of(client.get(url("/overview", s_temp=1.5, s_topk=0, s_topp=1, s_minp=0,
                                  ov_steps=steps), headers=LIVE))
    seq = expected_sequence(model, PROMPT.default, steps, settings)
    check_pass(page, model, seq, len(seq) - steps, settings)
    logits = next(decode_loop(model, seq, 1, stop_at_eos=False)).logits
    final = final_distribution(logits, seq, settings)
    token = chosen_id(page)
    assert final[token] > 0
    value, written = chosen_sampled(page)
    assert value == pytest.approx(float(final[token]), rel=1e-5)
    assert written == pct(float(final[token])) and written not in ("0%", "0.0%")
    t1 = re.search(r'\(model p ([^)]+)\)', page.split('ov-chosen-p', 1)[1]).group(1)
    assert t1 == pct(float(softmax(logits)[token]))
    assert float(final[token]) != pytest.approx(float(softmax(logits)[token]), rel=1e-3)


def test_top_k_changes_the_bars_at_the_default_temperature(client, model):
    """At the default temperature the knobs act: top-k 3 leaves three of the five bars,
    renormalised; the faint T = 1 values stay the model's."""
    off = dict(s_topk=0, s_topp=1, s_minp=0)            # temperature alone
    default = text_of(client.get(url("/overview", **off), headers=LIVE))
    cut = text_of(client.get(url("/overview", **{**off, "s_topk": 3}), headers=LIVE))
    ids = list(model.tokenizer.encode_ordinary(PROMPT.default))
    check_pass(cut, model, ids, len(ids), settings_with(top_k=3, top_p=1.0, min_p=0.0))
    assert top_five(cut) == top_five(default)
    before, after = list(sampled(default).values()), list(sampled(cut).values())
    assert after[3:] == [0.0, 0.0] and all(p > 0 for p in before)
    assert all(a > b for a, b in zip(after[:3], before[:3], strict=False))
    assert sum(after[:3]) == pytest.approx(1.0, abs=1e-5)
    assert cut.count("ov-cut") == 2 and "ov-cut" not in default
    # and top-p too
    nucleus = text_of(client.get(url("/overview", **{**off, "s_topp": 0.5}), headers=LIVE))
    assert sampled(nucleus) != sampled(default)


def test_gpt2_fixture():
    """Learned positions (a table added to the embeddings), no key/value grouping."""
    from app import create_app
    m = get_model("gpt2")
    c = create_app({"MODEL": m, "TESTING": True, "PROBE_ENCODINGS": False}).test_client()
    r = c.get(url("/overview", prompt="the cat sat", ov_steps=2), headers=LIVE)
    page = text_of(r)
    assert r.status_code == 200, error_message(page, "ov_steps")
    cfg = m.config
    assert cfg.n_kv_heads == cfg.n_heads
    seq = expected_sequence(m, "the cat sat", 2)
    check_pass(page, m, seq, len(seq) - 2)
    s = shapes(page)
    # the decode step adds the last position's row of the table
    assert s["wpe"] == [cfg.n_ctx, cfg.d_model] and s["pos_embed"] == [1, cfg.d_model]
    assert f"row {len(seq) - 1} of it" in page
    assert "a learned table" in page and "RoPE" not in page
    assert "grouped-query" not in page and "multi-query" not in page
    assert "LayerNorm" in page and "GELU" in page


def test_page_holds_the_overview_and_its_map(client):
    page = text_of(client.get(url("/", ov_steps=2)))
    # the prompt is typed in the overview's first box (Text), the form field the page's own
    assert page.index('id="overview"') < page.index('id="prompt"') < page.index('id="sections"')
    text_box = page[page.index('id="prompt"'):page.index('aria-label="Tokens of the pass"')]
    assert re.search(r'<textarea id="prompt-input" name="prompt"[^>]*hx-preserve="true"', text_box)
    assert page.count('name="prompt"') == 1
    # the slim map is the page's one list of sections: the prompt, then every section in order
    nav = re.search(r'<nav id="ov-map"[^>]*>(.*?)</nav>', page, re.S).group(1)
    assert page.count("<nav") == 1
    assert re.findall(r'href="#([\w-]+)"', nav) == ["prompt"] + [s.id for s in SECTIONS]
    # each entry's full name is its accessible name (a narrow screen shows a short one)
    names = re.findall(r'<a href="#[\w-]+"(?: aria-label="([^"]+)">|>([^<]+)</a>)', nav)
    names = [a or b for a, b in names]
    assert "Tokenization" in names and "KV cache" in names and len(names) == len(SECTIONS) + 1
    assert "2 generated" in page
    # a prompt change sends the overview out of band, computed for the new prompt
    r = client.get(url("/", prompt="Emma was"), headers=HX)
    body = text_of(r)
    assert re.search(r'<section id="overview"[^>]*hx-swap-oob="true"', body)
    tokenizer = client.application.extensions["explainer"].default_model.tokenizer
    assert chip_ids(body, "Tokens of the pass") == list(tokenizer.encode_ordinary("Emma was"))


@pytest.mark.parametrize("query, status, name, words", [
    (dict(ov_steps=OV_LIMIT + 1), 422, "ov_steps", "between 0 and 20"),
    (dict(ov_steps="two"), 400, "ov_steps", "whole number"),
    # the page's sampler: one line in the overview names its messages
    (dict(s_topp=0), 422, "ov-sampler", "greater than 0"),
    (dict(s_temp=5), 422, "ov-sampler", "between 0 and 2"),
    (dict(s_topk=-1), 422, "ov-sampler", "between 0"),
])
def test_bad_values(client, query, status, name, words):
    for headers in (LIVE, {}):
        r = client.get(url("/overview", **query), headers=headers)
        page = text_of(r)
        assert r.status_code == status
        assert words in error_message(page, name)
        assert 'id="overview-live"' in page           # shown with the default instead


def test_a_full_context_leaves_no_room(client, model):
    """256 tokens fill the window: the overview shows them (summarised) and refuses a step."""
    lm = client.application.extensions["explainer"].default_model
    prompt = " the" * 256
    assert len(prompt_ids(lm, prompt)) == lm.n_ctx
    r = client.get(url("/overview", prompt=prompt))
    page = text_of(r)
    assert r.status_code == 200 and live_value(page, "data-finish") == "context"
    chips = ordered_list(page, "Tokens of the pass")
    shown = CHIPS_HEAD + CHIPS_TAIL
    assert f"… {lm.n_ctx - shown} more …" in chips
    assert chips.count('<span class="tid">') == shown
    assert re.search(r'id="ov-next"[^>]*disabled', page)
    r = client.get(url("/overview", prompt=prompt, ov_steps=1), headers=LIVE)
    assert r.status_code == 422
    assert "at most 0 can be generated" in error_message(text_of(r), "ov_steps")


@pytest.mark.parametrize("prompt", [
    "Emma",                                   # one token
    "a\n\n\n     \t  b",                      # tokens of whitespace alone
    "I 🦜 love 🤔 tea",                       # emoji split into bytes
    "مرحبا بالعالم שלום",                     # right-to-left text
    '<img src=x onerror=alert(1)> "quoted" & done',
])
def test_odd_prompts(client, model, prompt):
    r = client.get(url("/overview", prompt=prompt, ov_steps=2), headers=LIVE)
    page = text_of(r)
    assert r.status_code == 200
    ids = list(model.tokenizer.encode_ordinary(prompt))
    seq = expected_sequence(model, prompt, 2)
    shown = seq if len(seq) <= CHIPS_HEAD + CHIPS_TAIL + 1 else (
        seq[:CHIPS_HEAD] + seq[-CHIPS_TAIL:])
    assert chip_ids(page, "Tokens of the pass") == shown
    if shown != seq:
        assert f"… {len(seq) - len(shown)} more …" in page
    check_pass(page, model, seq, len(ids))
    assert "<img src=x" not in page


def test_hostile_text_stays_text(client):
    prompt = '<img src=x onerror=alert(1)><script>alert(2)</script>'
    r = client.get(url("/", prompt=prompt))
    page = text_of(r)
    assert r.status_code == 200
    assert "<img src=x" not in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page       # the overview's text box
    # the thumbnails' labels go through web.figures.label (Plotly draws a little HTML): the
    # embedding strip's (the last tokens: "pt", ">") and the attention heatmap's (every token: "<",
    # "im", ...)
    for plot, escaped in (("ov-embed-plot", "&gt;"), ("ov-attn-plot", "&lt;")):
        fig = html.unescape(re.search(rf'id="{plot}" data-figure="([^"]*)"', page).group(1))
        assert "<img" not in fig and "<script" not in fig and escaped in fig


def test_invalid_prompt_shows_no_overview(client):
    for headers in ({}, LIVE):
        r = client.get(url("/overview", prompt="   "), headers=headers)
        if headers:                              # the message goes next to the prompt box
            assert "The prompt is empty" in error_message(text_of(r), "prompt")
        assert r.status_code == 422
        assert "Nothing to show until the prompt is fixed" in text_of(r)
        assert "The prompt is empty" in text_of(r)


def test_end_of_text_ends_the_loop(model):
    """A model whose end-of-text token is the second token the overview's default sampler
    draws: two steps end the text (Next
    token and Play are off), a third is refused with the reason."""
    import copy
    import dataclasses

    from app import create_app
    greedy_tokens = expected_sequence(model, PROMPT.default, 2)[-2:]   # the default sampler's
    eos_model = copy.copy(model)
    eos_model.config = dataclasses.replace(model.config, eos_token_id=greedy_tokens[1])
    c = create_app({"MODEL": eos_model, "TESTING": True, "PROBE_ENCODINGS": False}).test_client()
    page = text_of(c.get(url("/overview", ov_steps=2), headers=LIVE))
    assert live_value(page, "data-finish") == "eos"
    assert chip_ids(page, "Tokens of the pass")[-2:] == greedy_tokens
    assert re.search(r'id="ov-next"[^>]*disabled', page)
    assert re.search(r'id="ov-play"[^>]*disabled', page)
    assert "the model ended the text" in page
    r = c.get(url("/overview", ov_steps=3), headers=LIVE)
    assert r.status_code == 422
    assert error_message(text_of(r), "ov_steps") == (
        "The model ends the text (its end-of-text token) after 2 new tokens; 3 go past it.")


def test_the_last_free_positions(client, model):
    """250 tokens leave 6 positions: six steps fill the window (the sixth token is the last the
    model reads), a seventh is refused."""
    prompt = " the" * 250
    r = client.get(url("/overview", prompt=prompt, ov_steps=6), headers=LIVE)
    page = text_of(r)
    assert r.status_code == 200 and live_value(page, "data-finish") == "context"
    seq = expected_sequence(model, prompt, 6)
    assert len(seq) == model.config.n_ctx
    check_pass(page, model, seq, 250)
    r = client.get(url("/overview", prompt=prompt, ov_steps=7), headers=LIVE)
    assert r.status_code == 422
    assert "at most 6 can be generated" in error_message(text_of(r), "ov_steps")


# --- SmolLM2-135M-Instruct (30 blocks): skipped when its package is absent ---

def test_smollm2_residual_strip_holds_the_31_norms_of_the_cache(smol_app):
    from web.model_state.forward import prompt_run
    app = smol_app
    lm = app.extensions["explainer"].models["smollm2"]
    prompt = "The capital of France is"
    page = app.test_client().get("/overview?model=smollm2&prompt=The%20capital%20of%20France%20is"
                                 ).get_data(as_text=True)
    cache = prompt_run(lm, prompt).cache
    strip = page.split('class="ov-resid ov-resid-strip"', 1)[1].split("</div>", 1)[0]
    bars = re.findall(r'data-hook="([^"]+)" data-value="([\d.]+)"', strip)
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(30)]
    assert [h for h, _ in bars] == names
    for hook, value in bars:
        assert float(value) == pytest.approx(float(np.linalg.norm(cache[hook][-1])), abs=2e-3)
    # a few labels under the strip, every value in the text for a screen reader
    assert re.findall(r'<span class="ov-rtick">([^<]+)</span>', strip) == \
        ["in", "5", "10", "15", "20", "25", "30"]          # blocks counted from 1
    assert strip.count("after ") >= 30 and "ov-rlabel" not in strip
    assert 'title="after 30 (blocks.29.hook_resid_post)' in strip
    assert "ov-kvgrid ov-kvgrid-deep" in page


def test_the_text_grows_with_each_step(client, model):
    """After two Next tokens the Text box holds the prompt and the 2 generated tokens (decoded by
    the model's tokenizer from the chips' ids, the new ones marked)."""
    page = text_of(client.get(url("/overview", prompt=PROMPT.default, ov_steps=2), headers=LIVE))
    prompt = list(model.tokenizer.encode_ordinary(PROMPT.default))
    new = [int(i) for i in re.findall(
        r'<li class="chip [^"]*ov-new"[^>]*>.*?<span class="tid">(\d+)</span>',
        ordered_list(page, "Tokens of the pass"))]
    assert len(new) == 2 and new == expected_sequence(model, PROMPT.default, 2)[len(prompt):]
    whole = model.tokenizer.decode(prompt + new)
    added = whole[len(model.tokenizer.decode(prompt)):]
    box = re.search(r'<p class="ov-clamp ov-grown" dir="auto" id="ov-text">(.*?)</p>', page,
                    re.S).group(1)
    assert html.unescape(re.sub(r"<[^>]+>", "", box)) == whole
    assert html.unescape(re.search(r'<mark class="ov-gen"[^>]*>(.*?)</mark>', box,
                                   re.S).group(1)) == added
    assert "after step 2: the prompt" in page
    assert chosen_id(page) == expected_sequence(model, PROMPT.default, 3)[-1]
    # the prompt alone: the Text box is the prompt, nothing marked
    first = text_of(client.get(url("/overview", prompt=PROMPT.default, ov_steps=0), headers=LIVE))
    assert "ov-gen" not in first and "the prompt alone (step 0)" in first


# --- the first screen: the prompt typed in the Text box, the chosen head's pattern, the
#     embedding strip, and the top token kept for the Logits section's prediction ---

def figure_of(page: str, element_id: str) -> dict:
    import json
    return json.loads(html.unescape(
        re.search(rf'id="{element_id}" data-figure="([^"]*)"', page).group(1)))


def decoded(array: dict) -> np.ndarray:
    import base64
    data = np.frombuffer(base64.b64decode(array["bdata"]), dtype={"f4": np.float32}[array["dtype"]])
    return data.reshape([int(n) for n in str(array["shape"]).split(",")])


@pytest.mark.parametrize("query, layer, head", [
    ({}, -1, 0),                                           # the Attention section's defaults
    ({"att_layer": 1, "att_head": "3"}, 1, 3),             # its chosen layer and head
    ({"att_layer": 0, "att_head": "mean"}, 0, None),       # the mean of a layer's heads
])
def test_the_attention_box_draws_the_chosen_heads_pattern(client, model, query, layer, head):
    prompt = "Emma Woodhouse, handsome, clever, and rich"
    page = text_of(client.get(url("/", prompt=prompt, **query)))
    ids = list(model.tokenizer.encode_ordinary(prompt))
    _, cache = model.run_with_cache(ids)                   # a pass of its own, run afresh
    layer = layer % model.config.n_layers
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
    weights = pattern.mean(0) if head is None else pattern[head]
    heat = figure_of(page, "ov-attn-plot")["data"][0]
    z = decoded(heat["z"])
    T = len(ids)
    assert z.shape == (T, T) and heat["x"] == list(range(T)) and heat["y"] == list(range(T))
    masked = np.triu(np.ones((T, T), bool), 1)
    assert np.isnan(z[masked]).all()                       # the causal mask: not drawn
    np.testing.assert_allclose(z[~masked], weights[~masked], rtol=1e-6, atol=1e-7)
    which = "the mean of its heads" if head is None else f"head {head}"
    assert f"layer {layer}, {which}" in html.unescape(page)
    top = int(np.argmax(weights[-1]))
    note = html.unescape(re.search(r'<span class="ov-note ov-attn-note">(.*?)</span></div>', page,
                                   re.S).group(1))
    assert f"({weights[-1, top]:.2f})" in note
    assert model.tokenizer.decode([ids[top]]).replace(" ", "·") in re.sub(r"<[^>]+>", "", note)


def test_after_a_step_the_attention_box_draws_the_decode_steps_one_row(client, model):
    """After Next token the pass is the KV-cached decode step: one query row over every cached
    position (the latest 40), the weights of that step."""
    prompt = "It is a truth universally acknowledged, that a single man"
    page = text_of(client.get(url("/overview", prompt=prompt, ov_steps=2), headers=LIVE))
    ids = list(model.tokenizer.encode_ordinary(prompt))
    steps = list(decode_loop(model, ids, 3, sampler(DEFAULT_SETTINGS, OV_SEED),
                             stop_at_eos=False, record=True))
    step = steps[2]
    T = step.n_context
    weights = step.cache[f"blocks.{model.config.n_layers - 1}.attn.hook_pattern"][0]   # [1, T]
    heat = figure_of(page, "ov-attn-plot")["data"][0]
    z = decoded(heat["z"])
    first = max(0, T - 40)
    assert z.shape == (1, T - first) and heat["y"] == [T - 1]
    np.testing.assert_allclose(z[0], weights[0, first:], rtol=1e-6, atol=1e-7)
    assert "(this step: one row)" in page


def test_the_embedding_strip_labels_the_last_tokens_rows(client, model):
    prompt = "Elizabeth looked at Mr. Darcy and"
    page = text_of(client.get(url("/", prompt=prompt)))
    ids = list(model.tokenizer.encode_ordinary(prompt))
    fig = figure_of(page, "ov-embed-plot")
    z = decoded(fig["data"][0]["z"])
    last = ids[-4:]
    np.testing.assert_array_equal(z, model.params["wte"][last].astype(np.float32))
    ticks = fig["layout"]["yaxis"]["ticktext"]
    assert [t.replace("·", " ") for t in ticks] == [
        html.unescape(model.tokenizer.decode([t]))[:8] if len(model.tokenizer.decode([t])) <= 8
        else model.tokenizer.decode([t])[:7] + "…" for t in last]
    # the last token's first values, written out
    values = re.search(r'<p class="ov-note ov-embed-values">.*?\[(.*?)…', page, re.S).group(1)
    written = [float(v) for v in re.findall(r'<span class="ov-num">(-?[\d.]+)</span>', values)]
    assert written == [round(float(v), 3) for v in model.params["wte"][ids[-1]][:3]]


def test_the_top_token_waits_for_the_logits_prediction(client, model):
    """Before any step, the overview's top five and chosen token carry the answer of the Logits
    section's prediction under the same key (static/predict.js blurs them until it is shown);
    after a step there is nothing to hide."""
    for prompt in ("She was the youngest of the two daughters", "Emma Woodhouse, handsome"):
        page = text_of(client.get(url("/", prompt=prompt)))
        logits = text_of(client.get(url("/section/logits", prompt=prompt), headers=HX))
        answer = re.search(r'data-predict="next-token" data-answer="([^"]*)"', logits).group(1)
        gates = re.findall(r'<li class="ov-box (ov-top|ov-next-box) ov-gate gated" '
                           r'data-answer-of="next-token" data-answer="([^"]*)">', page)
        assert [g for g, _ in gates] == ["ov-top", "ov-next-box"]
        assert {a for _, a in gates} == {answer}
        top = int(np.argmax(model.forward(model.tokenizer.encode_ordinary(prompt))[-1]))
        assert html.unescape(answer) == model.tokenizer.decode([top]).strip()
        assert ('class="ov-reveal linkish" aria-label="show the top 5 now, without a guess">'
                'show</button>') in page
    stepped = text_of(client.get(url("/overview", prompt=prompt, ov_steps=1), headers=LIVE))
    assert "data-answer-of" not in stepped and "ov-gate" not in stepped


def test_a_refused_prompt_keeps_the_text_box(client):
    """The prompt's box stays, with its message, whatever replaces the overview: the page, a
    step of the loop (live part) and a new prompt (sent out of band)."""
    for path, headers in (("/", {}), ("/overview", LIVE), ("/", HX)):
        r = client.get(url(path, prompt="   "), headers=headers)
        page = text_of(r)
        assert r.status_code == 422
        assert re.search(r'<textarea id="prompt-input" name="prompt"[^>]*aria-invalid="true"', page)
        assert "The prompt is empty" in error_message(page, "prompt")
        assert "Nothing to show until the prompt is fixed" in page


# --- the page's one sampler: the overview, Sampling and the generation loop share it ----------

def input_value(page: str, element_id: str) -> str:
    return html.unescape(re.search(r'<input id="%s"[^>]*\bvalue="([^"]*)"' % element_id,
                                   page).group(1))


def test_one_sampler_for_the_overview_sampling_and_the_loop(client, model):
    """The overview's controls carry the Sampling section's names: one set of parameters in the
    URL, shown by both, used by both and by a sampled generation loop; the overview has none of
    its own."""
    from web.core.registry import all_params
    names = [p.name for p in all_params()]
    assert not [n for n in names if n.startswith("ov_") and n != "ov_steps"]
    q = dict(s_temp=1.3, s_topk=20, s_topp=0.75, s_minp=0.02, gen_choose="sampler")
    page = text_of(client.get(url("/", **q), headers={**HX, "X-Sections": "sampling,generation"}))
    assert re.search(r'<input id="ov-temp"[^>]*name="s_temp"', page)
    assert input_value(page, "ov-temp") == input_value(page, "s_temp-range") == "1.3"
    assert input_value(page, "ov-topk") == input_value(page, "s_topk-input") == "20"
    assert input_value(page, "ov-topp") == input_value(page, "s_topp-range") == "0.75"
    said = reading_text(page)
    assert "temperature 1.3, seed 0" in said and "top-k 20, top-p 0.75, min-p 0.02" in said
    assert ("by the sampler of the Sampling section (repetition penalty 1, temperature 1.3, "
            "top-k 20, top-p 0.75, min-p 0.02; seed 0)") in said
    # the overview's chosen token is that sampler's draw
    ids = list(model.tokenizer.encode_ordinary(PROMPT.default))
    settings = settings_with(temperature=1.3, top_k=20, top_p=0.75, min_p=0.02)
    logits = model.forward(ids)[-1]
    assert chosen_id(page) == sampler(settings, OV_SEED)(logits, ids)
    # and the seed is the Sampling section's too
    seeded = text_of(client.get(url("/overview", s_temp=1.3, s_seed=7), headers=LIVE))
    assert chosen_id(seeded) == sampler(settings_with(temperature=1.3), 7)(logits, ids)
    assert "temperature 1.3, seed 7" in reading_text(seeded)


def test_moving_the_sampler_here_moves_it_there(client):
    """An overview sampler control's answer names sampler-moved, which the Sampling section's
    distribution and the readers of the sampler follow; the Sampling section's own controls name
    sampling-changed, which the overview follows. A step of the loop names nothing."""
    moved = client.get(url("/overview", s_temp=0.5),
                       headers={**HX, "HX-Target": "overview-live", "HX-Trigger": "ov-temp"})
    assert moved.status_code == 200 and moved.headers["HX-Trigger"] == "sampler-moved"
    step = client.get(url("/overview", ov_steps=1), headers=LIVE)
    assert "HX-Trigger" not in step.headers
    page = text_of(client.get(url("/", open="dec-beams"),
                              headers={**HX, "X-Sections": "sampling,decoding"}))
    follow = re.search(r'<div hidden id="sampling-follow"([^>]*)>', page).group(1)
    assert 'hx-trigger="sampler-moved from:body"' in follow
    assert 'hx-target="#sampling-distribution"' in follow
    over = re.search(r'<div hidden id="overview-follow"([^>]*)>', page).group(1)
    assert 'hx-trigger="sampling-changed from:body"' in over
    assert 'hx-target="#overview-live"' in over


def test_a_lazy_section_does_not_repeat_what_the_overview_holds(client):
    """A section not computed yet carries its own values from the address (hx-vals), except the
    sampler's that the overview's controls hold in the form: moved since, the form's value wins."""
    import json
    page = text_of(client.get(url("/", s_temp=1.3, s_minp=0.02)))
    lazy = re.search(r'<section id="sampling" class="section lazy"[^>]*>', page).group(0)
    own = json.loads(html.unescape(re.search(r"hx-vals='([^']*)'", lazy).group(1)))
    assert own == {"s_minp": "0.02"}


def test_two_probabilities_are_labelled_side_by_side(client):
    page = text_of(client.get(url("/overview"), headers=LIVE))
    head = re.search(r'<div class="ov-cand ov-chead"[^>]*>(.*?)</div>', page).group(1)
    assert re.findall(r'<span class="ov-c\w+">([^<]+)</span>', head) == [
        "sampler p", "model p"]
    assert re.search(r"sampler p <strong>[^<]+</strong> "
                     r'<span class="ov-cbasep">\(model p [^)]+\)</span>', page)
    said = reading_text(page)
    assert "T = 1" not in said
    assert "sampler p: after its settings" in said and "model p: softmax" in said


@pytest.mark.parametrize("choose, how", [("greedy", "greedy"),
                                         ("sampler", "sampled: the page's sampler")])
def test_a_section_that_generates_says_how_in_its_heading(client, choose, how):
    page = text_of(client.get(url("/section/generation", gen_choose=choose), headers=HX))
    heading = re.search(r'<h2 id="generation-h">(.*?)</h2>', page, re.S).group(1)
    assert f'<small class="how" id="generation-how">({how})</small>' in html.unescape(heading)
    # the chooser asks for the whole section: the heading follows it
    select = re.search(r'<select id="gen-choose"[^>]*>', page).group(0)
    assert 'hx-target="#generation"' in select and 'hx-swap="outerHTML"' in select
    kv = text_of(client.get(url("/section/kvcache"), headers=HX))
    assert '<small class="how" id="kvcache-how">(greedy generation)</small>' in kv
    q = text_of(client.get(url("/section/quantization"), headers=HX))
    assert '<small class="how" id="quantization-how">(greedy texts)</small>' in q
