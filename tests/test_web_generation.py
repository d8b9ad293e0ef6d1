"""The generation-loop section and the stream route show what the running model really does."""
import html
import json
import re

import numpy as np
import pytest

from pipeline.costs import LENGTHS
from pipeline.generation import TextStream, decode_loop
from pipeline.model import softmax
from pipeline.sampling import SamplerSettings, sampler
from web.model_state.measured import cost_table, stamp
from web.sections import generation
from web.serving import streaming
from web_support import HX, chip_ids, error_message, every_section, table_rows, text_of, url

PROMPT = "Mr. Darcy looked at Elizabeth and said"


def greedy_tokens(model, prompt, n):
    return [p.token for p in decode_loop(model, model.tokenizer.encode_ordinary(prompt), n)]


@pytest.mark.parametrize("step", [0, 1, 7])
def test_each_step_shows_the_sequence_and_the_models_candidates(client, model, step):
    r = client.get(url("/section/generation", prompt=PROMPT, gen_max="8", gen_step=str(step)),
                   headers=HX)
    assert r.status_code == 200
    page = text_of(r)
    ids = model.tokenizer.encode_ordinary(PROMPT)
    new = greedy_tokens(model, PROMPT, 8)
    assert chip_ids(page, "Sequence at this step") == ids + new[:step + 1]
    # the candidates are the top 5 of a full forward pass over the sequence before this step
    probs = softmax(model.forward(ids + new[:step])[-1])
    top = np.argsort(-probs, kind="stable")[:5]
    rows = table_rows(page, "Top candidates at this step")
    assert [int(r[1]) for r in rows] == [int(i) for i in top]
    for row, i in zip(rows, top, strict=True):
        assert float(row[2].rstrip(" %")) == pytest.approx(100 * probs[i], abs=0.006)
    assert "← chosen" in rows[0][0]                        # greedy picks the most probable
    caption = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page.split(
        'id="gen-caption">', 1)[1].split("</p>", 1)[0])))
    assert f"Step {step} of 7." in caption
    if step == 0:
        assert f"all {len(ids)} prompt tokens go through the model together" in caption
    else:
        assert f"only the token chosen at step {step - 1}" in caption
        assert f"It attends over {len(ids) + step} tokens" in caption
    finish = page.split('id="gen-finish">', 1)[1].split("</p>", 1)[0]
    assert ("8 new tokens is the limit" in finish) == (step == 7)


@pytest.mark.parametrize("query, name, message", [
    ({"gen_max": "0"}, "gen_max", "New-token limit must be between 1 and 200; got 0."),
    ({"gen_max": "201"}, "gen_max", "New-token limit must be between 1 and 200 "
     "(the server's limit per request); got 201."),
    ({"gen_max": "ten"}, "gen_max", "New-token limit must be a whole number, not 'ten'."),
    ({"gen_step": "-1"}, "gen_step", "Generation step must be between 0 and 199; got -1."),
    ({"gen_max": "3", "gen_step": "5"}, "gen_step",
     "Step 5 does not exist: with this prompt and limit the loop makes 3 steps (0 to 2)."),
    ({"gen_pace": "501"}, "gen_pace",
     "Pause between streamed tokens (ms) must be between 0 and 500; got 501."),
    ({"gen_pace": "1e3"}, "gen_pace",
     "Pause between streamed tokens (ms) must be a whole number, not '1e3'."),
    ({"gen_choose": "beam"}, "gen_choose", "The token chooser must be one of greedy, sampler; "
     "got 'beam'."),
    ({"gen_choose": "sampler", "s_topp": "0"}, "s_topp",
     "Top-p must be greater than 0 (0 would remove every token); got 0."),
])
def test_bad_values_are_4xx_with_the_message_next_to_the_control(client, query, name, message):
    for path in ("/", "/section/generation"):
        r = client.get(url(path, **query), headers=HX if path != "/" else every_section())
        assert r.status_code in (400, 422)
        if name.startswith("gen_") or path == "/":
            assert error_message(text_of(r), name) == message
        else:   # a sampler setting: its control is in the Sampling section; named here too
            assert message in html.unescape(text_of(r))


def sse_events(body: str) -> list:
    out = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


@pytest.mark.parametrize("prompt", [PROMPT, "She wrote: « café » and 🦜"])
def test_stream_text_is_the_decoded_greedy_continuation(client, model, prompt):
    r = client.get(url("/generate/stream", prompt=prompt, gen_max="25", gen_pace="0"))
    assert r.status_code == 200 and r.mimetype == "text/event-stream"
    assert r.headers["Cache-Control"].startswith("no-cache")
    events = sse_events(text_of(r))
    names = [e for e, _ in events]
    assert names == ["start"] + ["token"] * 25 + ["done"]
    tokens = [d for e, d in events if e == "token"]
    expected = greedy_tokens(model, prompt, 25)
    assert [t["id"] for t in tokens] == expected
    stream = TextStream(model.tokenizer)
    text = "".join(stream.push(t) for t in expected) + stream.flush()
    assert "".join(t["text"] for t in tokens) == text
    assert all(t["ms"] > 0 for t in tokens)
    assert [t["phase"] for t in tokens] == ["prefill"] + ["decode"] * 24
    start, done = events[0][1], events[-1][1]
    assert start["prompt_tokens"] == len(model.tokenizer.encode_ordinary(prompt))
    assert done["reason"] == "limit" and done["n_tokens"] == 25
    assert done["prefill_ms"] == tokens[0]["ms"]
    assert done["decode_ms"] == pytest.approx(float(np.median([t["ms"] for t in tokens[1:]])),
                                              abs=0.002)


def test_stream_holds_back_a_split_character(client, model, monkeypatch):
    """Greedy decoding rarely writes an emoji, so the chooser is replaced by one that writes the
    tokens of "🦜!" and then ends the text: the event that completes the character carries it."""
    script = model.tokenizer.encode("🦜!") + [model.config.eos_token_id]
    assert len(script) >= 3

    def scripted(state):
        return lambda logits, history: script[len(history) - n_prompt]

    n_prompt = len(model.tokenizer.encode_ordinary(PROMPT))
    monkeypatch.setattr(streaming, "sampler_for", scripted)
    events = sse_events(text_of(client.get(url("/generate/stream", prompt=PROMPT,
                                                gen_pace="0"))))
    tokens = [d for e, d in events if e == "token"]
    assert [t["id"] for t in tokens] == script
    texts = [t["text"] for t in tokens]
    assert "\ufffd" not in "".join(texts) and "".join(texts) == "🦜!"
    assert texts[0] == "" and tokens[-1]["eos"] and texts[-1] == ""
    assert events[-1] == ("done", {**events[-1][1], "reason": "eos", "n_tokens": len(script)})


@pytest.mark.parametrize("query, name", [
    ({"gen_max": "500"}, "gen_max"), ({"gen_pace": "-3"}, "gen_pace"),
    ({"prompt": ""}, "prompt"), ({"prompt": "word " * 400}, "prompt"),
    ({"gen_choose": "beam"}, "gen_choose"), ({"gen_choose": "sampler", "s_temp": "2.5"}, "s_temp"),
])
def test_stream_refuses_bad_values_before_any_work(client, query, name):
    r = client.get(url("/generate/stream", **query))
    assert r.status_code in (400, 422)
    assert r.is_json and name in r.get_json()["errors"]
    assert r.get_json()["errors"][name]


def test_stream_answers_503_when_every_slot_is_taken(client):
    slots = client.application.extensions["explainer"].slots
    taken = [slots.acquire() for _ in range(streaming.MAX_STREAMS)]
    try:
        assert all(p is not None for p in taken)
        r = client.get(url("/generate/stream", gen_max="2"))
        assert r.status_code == 503 and r.headers["Retry-After"] == "5"
        assert "already being generated" in r.get_json()["errors"]["stream"]
    finally:
        for p in taken:
            slots.release(p)
    with client.get(url("/generate/stream", gen_max="2", gen_pace="0")) as r:   # close: free
        assert r.status_code == 200                                              # the slot
    assert slots.active == 0


def test_generate_button_streams_the_state_on_the_page(client):
    page = text_of(client.get(url("/", prompt=PROMPT, gen_max="12", gen_pace="0"),
                              headers=every_section()))
    m = re.search(r'class="gen-start" data-stream-url="([^"]+)"', page)
    assert m
    r = client.get(html.unescape(m.group(1)))
    events = sse_events(text_of(r))
    assert sum(e == "token" for e, _ in events) == 12


def _arrays(node):
    if isinstance(node, dict):
        return [a for v in node.values() for a in _arrays(v)]
    if isinstance(node, list):
        return [a for v in node for a in _arrays(v)]
    return [node]


def test_the_counts_are_the_loaded_model_s(client, model):
    lm = client.application.extensions["explainer"].default_model
    c = generation.costs(lm, 10, prefill_s=0.01, decode_s=0.002)
    # every loaded array once (the tied unembedding is the token table itself)
    loaded = _arrays({k: v for k, v in model.params.items() if k != "unembed"})
    assert model.config.tied_embeddings
    assert c["weight_bytes"] == sum(a.nbytes for a in loaded)
    # the KV cache read by the step after a 10-token prompt: the engine's own cache, 11 tokens
    kv = model.new_kv_cache()
    model.prefill(list(range(11)), kv)
    assert c["kv_bytes"] == kv.nbytes
    cfg = model.config
    attention = 4 * cfg.n_layers * cfg.n_heads * cfg.head_dim * 11
    assert c["decode"].flops == 2 * model.n_params() + attention
    assert c["decode"].bytes == c["weight_bytes"] + kv.nbytes
    assert c["decode_gbps"] == pytest.approx(c["decode"].bytes / 0.002 / 1e9)
    assert c["prefill_gflops"] == pytest.approx(c["prefill"].flops / 0.01 / 1e9)
    assert c["per_token_ratio"] == pytest.approx(0.002 / (0.01 / 10))


def test_prefill_and_decode_are_read_from_the_cost_table(client, model):
    page = text_of(client.get(url("/", prompt=PROMPT, open="gen-prefill"),
                              headers=every_section()))
    lm = client.application.extensions["explainer"].default_model
    table = cost_table(lm)
    lengths = sorted(table.decode)
    assert lengths == [n for n in LENGTHS if n <= lm.prompt_limit]
    assert all(table.prefill[n].median > 0 and table.decode[n].median > 0 for n in lengths)
    # a whole 248-token prefill takes longer than an 8-token one; per token it is cheaper
    # than a decode step (the point of the figure; measured, with a wide margin)
    longest = lengths[-1]
    assert table.prefill[longest].median > table.prefill[lengths[0]].median
    assert table.prefill[longest].median / longest < table.decode[longest].median
    assert cost_table(lm) is table                                   # measured once
    figure = json.loads(html.unescape(re.search(r'data-figure="([^"]+)"', page.split(
        'id="gen-prefill-h"', 1)[1]).group(1)))
    assert figure["data"][0]["x"] == lengths
    assert figure["data"][0]["y"] == pytest.approx([table.prefill[n].median * 1000
                                                    for n in lengths])
    # the prompt's point is the table interpolated to the prompt's length
    n = len(model.tokenizer.encode_ordinary(PROMPT))
    prefill, decode = table.prefill_at(n), table.decode_at(n)
    assert f'id="prefill-ms" class="prefill-ms">{prefill.shown} ms' in page
    assert f'id="decode-ms" class="decode-ms">{decode.shown} ms' in page
    assert f"measured once at {stamp(table.measured_at)}" in page
    # the whole table is listed, each entry its median and range
    rows = table_rows(page, "The cost table: prefill and decode")
    assert [r[0] for r in rows] == [str(m) for m in lengths]
    for row, m in zip(rows, lengths, strict=True):
        assert row[1].startswith(f"{table.prefill_at(m).shown} ms")
        assert row[2].startswith(f"{table.decode_at(m).shown} ms")
        assert table.decode_at(m).how() in row[2]


def test_the_sampler_of_the_sampling_section_drives_the_loop_and_the_stream(client, model):
    query = dict(prompt=PROMPT, gen_choose="sampler", s_temp="0.9", s_topk="40", s_topp="0.95",
                 s_rep="1.2", s_minp="0", s_seed="7", gen_max="12", gen_pace="0")
    settings = SamplerSettings(repetition_penalty=1.2, temperature=0.9, top_k=40, top_p=0.95)
    ids = model.tokenizer.encode_ordinary(PROMPT)
    expected = [p.token for p in decode_loop(model, ids, 12, sample=sampler(settings, 7))]
    assert expected != greedy_tokens(model, PROMPT, 12)          # it is not greedy
    page = text_of(client.get(url("/section/generation", gen_step="11", **query),
                              headers=every_section()))
    assert chip_ids(page, "Sequence at this step") == ids + expected
    assert "temperature 0.9, top-k 40, top-p 0.95, min-p 0; seed 7" in page
    events = sse_events(text_of(client.get(url("/generate/stream", **query))))
    assert [d["id"] for e, d in events if e == "token"] == expected
    # the Generate button carries the same settings
    full = text_of(client.get(url("/", **query), headers=every_section()))
    stream_url = html.unescape(re.search(r'data-stream-url="([^"]+)"', full).group(1))
    assert "gen_choose=sampler" in stream_url and "s_seed=7" in stream_url


def test_a_prompt_between_the_tables_lengths_is_interpolated_and_says_so(client, model):
    """The times cited for a prompt between two of the table's lengths are interpolated
    linearly between them, and the caption names both lengths; a prompt at a measured length
    quotes that entry."""
    prompt = ("It is a truth universally acknowledged, that a single man in possession of a "
              "good fortune, must be in want of a")
    n = len(model.tokenizer.encode_ordinary(prompt))
    lm = client.application.extensions["explainer"].default_model
    table = cost_table(lm)
    assert n not in table.prefill
    a = max(m for m in table.prefill if m < n)
    b = min(m for m in table.prefill if m > n)
    w = (n - a) / (b - a)
    prefill = table.prefill_at(n)
    assert prefill.seconds == pytest.approx((1 - w) * table.prefill[a].median
                                            + w * table.prefill[b].median)
    page = re.sub(r"\s+", " ", text_of(client.get(url("/section/generation", prompt=prompt,
                                                      gen_step="0"), headers=HX)))
    caption = re.search(r'id="gen-caption">(.*?)</p>', page).group(1)
    assert f"<strong>{prefill.shown} ms</strong>" in caption
    assert f"a prefill at {n} tokens, from the cost table" in caption
    assert f"interpolated from {a} and {b} tokens" in caption
    # a decode step's caption quotes the decode step at the prompt's length
    page = re.sub(r"\s+", " ", text_of(client.get(url("/section/generation", prompt=prompt,
                                                      gen_step="1"), headers=HX)))
    caption = re.search(r'id="gen-caption">(.*?)</p>', page).group(1)
    assert (f"one decode step at {n} tokens, from the cost table: "
            f"<strong>{table.decode_at(n).shown} ms</strong>") in caption
    # a prompt at a measured length is not interpolated
    on_grid = next(p for p in (" ".join(["Elizabeth"] * k) for k in range(1, 40))
                   if len(model.tokenizer.encode_ordinary(p)) in table.prefill)
    page = text_of(client.get(url("/section/generation", prompt=on_grid, gen_step="0"),
                              headers=HX))
    caption = re.search(r'id="gen-caption">(.*?)</p>', re.sub(r"\s+", " ", page)).group(1)
    assert "interpolated" not in caption and "from the cost table" in caption


def test_the_stepped_run_starts_from_the_prompts_shared_run(client, model, monkeypatch):
    """The loop's steps are the ones a prefill would give, but the prompt is not run again: its
    times are not shown (the page's one measurement is), so it starts from the prompt's run."""
    prompt = "Mr. Darcy looked at Elizabeth and"
    from web.core.registry import sections
    lm = client.application.extensions["explainer"].default_model
    for s in sections():                  # the measurements, as the server makes them at start
        if s.warm is not None:
            s.warm(lm)
    client.get(url("/", prompt=prompt))                       # the prompt's shared run
    passes = []
    original = model.prefill

    def counting(tokens, kv, cache=None):
        passes.append(len(tokens))
        return original(tokens, kv, cache)
    monkeypatch.setattr(model, "prefill", counting)
    page = client.get(url("/section/generation", prompt=prompt, gen_max=5, gen_choose="greedy"),
                      headers=HX)
    assert page.status_code == 200 and passes and set(passes) == {1}    # decode steps only
    monkeypatch.undo()
    shown = chip_ids(page.get_data(as_text=True), "Sequence at this step")
    ids = model.tokenizer.encode_ordinary(prompt)
    assert shown[:len(ids)] == ids
    assert shown[len(ids):] == greedy_tokens(model, prompt, 5)[:len(shown) - len(ids)]


def test_a_sampled_loop_follows_the_sampling_sections_changes(client):
    """Drawing with the Sampling section's settings, the loop has an element that fetches it
    again on the event a sampling control's answer names; a greedy loop has none."""
    sampled = client.get(url("/section/generation", gen_choose="sampler"), headers=HX)
    text = sampled.get_data(as_text=True)
    assert 'id="generation-refresh"' in text
    # the Sampling section's controls, and the overview's (the page's one sampler)
    assert 'hx-trigger="sampling-changed from:body, sampler-moved from:body"' in text
    assert 'hx-target="#generation-run"' in text
    greedy = client.get(url("/section/generation", gen_choose="greedy"), headers=HX)
    assert 'id="generation-refresh"' not in greedy.get_data(as_text=True)
    moved = client.get(url("/section/sampling", s_temp=0.5),
                       headers={"HX-Request": "true", "HX-Trigger": "s-temp"})
    assert moved.headers["HX-Trigger"] == "sampling-changed"


def test_a_loop_past_the_time_budget_says_so_next_to_its_limit(client, model, monkeypatch):
    """The generation loop checks the request's time budget before each step: past it, the
    new-token limit shows the budget's message (422) and the section shows the loop at the
    limit's default, in a budget of its own."""
    import web.core.request_state
    from web.core import limits
    budgets = []

    def short():                                      # this request's budget: 1 ms
        budgets.append(limits.Deadline(0.001))
        return budgets[-1]
    monkeypatch.setattr(web.core.request_state, "Deadline", short)
    prompt = "Elizabeth walked to the window and the budget"     # a loop no test has cached
    page = client.get(url("/section/generation", prompt=prompt, gen_max=150,
                          gen_choose="greedy"), headers=HX)
    assert budgets and page.status_code == 422
    assert "more than the 0.001 s of computing one request" in error_message(
        page.get_data(as_text=True), "gen_max")
    text = page.get_data(as_text=True)
    default = next(p.default for p in generation.PARAMS if p.name == "gen_max")
    last = int(re.search(r'hx-vals=\'\{"gen_step": "(\d+)"\}\'[^>]*>To the last token',
                         text).group(1))
    run = greedy_tokens(model, prompt, default)
    assert last == len(run) - 1 and len(run) <= default < 150      # the default's loop
    assert len(budgets) == 1                          # the rebuild had a budget of its own
