"""pipeline/generation.py: decode_loop and the stepped loop, with what happened at each step."""
import numpy as np
import pytest

from engine_support import all_models, get_model
from pipeline.generation import (
    TextStream,
    decode_loop,
    finish_reason,
    generation_steps,
    most_new_tokens,
    top_candidates,
)
from pipeline.model import softmax

PROMPT = "It is a truth universally acknowledged, that a single man in possession"


def prompt_ids(model, text=PROMPT):
    return model.tokenizer.encode(text)


@pytest.mark.parametrize("name", all_models())
def test_stepped_tokens_are_generates_greedy_tokens(name):
    model = get_model(name)
    ids = prompt_ids(model)[: model.config.n_ctx // 2]
    steps = list(generation_steps(model, ids, 24))
    assert [s.token for s in steps] == [p.token for p in decode_loop(model, ids, 24)]


def test_each_step_reads_what_the_loop_says_and_its_candidates_are_the_models():
    model = get_model("default")
    ids = prompt_ids(model)
    steps = list(generation_steps(model, ids, 6, n_top=5))
    assert steps[0].phase == "prefill" and steps[0].input_ids == tuple(ids)
    assert steps[0].n_context == len(ids)
    for i, s in enumerate(steps[1:], start=1):
        assert s.phase == "decode" and s.input_ids == (steps[i - 1].token,)
        assert s.n_context == len(ids) + i
    # the candidates and probabilities are those of a full forward pass over the sequence
    for s in steps:
        sequence = list(ids) + [t.token for t in steps[:s.index]]
        probs = softmax(model.forward(sequence)[-1])
        expected = np.argsort(-probs, kind="stable")[:5]
        assert [i for i, _ in s.top] == [int(i) for i in expected]
        np.testing.assert_allclose([p for _, p in s.top], probs[expected], rtol=1e-4, atol=1e-6)
        assert s.prob == pytest.approx(float(probs[s.token]), rel=1e-4, abs=1e-6)
        assert s.token == s.top[0][0]                       # greedy: the most probable
    assert [s.finish for s in steps] == [None] * 5 + ["limit"]


def test_timing_fields_are_measured_and_positive():
    model = get_model("default")
    steps = list(generation_steps(model, prompt_ids(model), 5))
    for s in steps:
        assert 0 < s.forward_seconds <= s.step_seconds < 5


def test_stops_on_end_of_text_like_generate():
    model = get_model("default")
    eos = model.config.eos_token_id
    ids = prompt_ids(model)

    def eos_at_third(logits, history):  # a sampler that ends the text at the third new token
        return eos if len(history) == len(ids) + 2 else int(np.argmax(logits))

    steps = list(generation_steps(model, ids, 50, sample=eos_at_third))
    assert [s.token for s in steps] == [p.token for p in decode_loop(model, ids, 50,
                                                                     sample=eos_at_third)]
    assert len(steps) == 3 and steps[-1].token == eos and steps[-1].finish == "eos"
    # without the end-of-text rule the loop goes on to the limit
    more = list(generation_steps(model, ids, 5, sample=eos_at_third, stop_at_eos=False))
    assert len(more) == 5 and more[2].token == eos and more[-1].finish == "limit"


def test_stops_at_the_limit_and_when_the_context_is_full():
    model = get_model("default")
    n_ctx = model.config.n_ctx
    assert [s.finish for s in generation_steps(model, prompt_ids(model), 1)] == ["limit"]
    assert list(generation_steps(model, prompt_ids(model), 0)) == []
    ids = (prompt_ids(model) * n_ctx)[: n_ctx - 3]
    steps = list(generation_steps(model, ids, 50))
    assert len(steps) == 4 == len([p.token for p in decode_loop(model, ids, 50)])
    assert steps[-1].finish == "context" and steps[-1].n_context == n_ctx


def test_finish_reason_is_eos_then_context_then_limit():
    # finish_reason(token, n_tokens, n_new, max_new_tokens, n_ctx, eos)
    assert finish_reason(7, 10, 1, 5, 16, eos=7) == "eos"
    assert finish_reason(7, 17, 5, 5, 16, eos=7) == "eos"          # eos before the others
    assert finish_reason(7, 10, 1, 5, 16, eos=None) is None          # no end-of-text rule
    assert finish_reason(None, 10, 1, 5, 16, eos=None) is None       # a length-only check
    assert finish_reason(3, 16, 1, 5, 16, eos=7) is None             # a full window: go on
    assert finish_reason(3, 17, 5, 5, 16, eos=7) == "context"       # one past it: stop
    assert finish_reason(3, 12, 5, 5, 16, eos=7) == "limit"
    assert [most_new_tokens(n, 16) for n in (1, 15, 16, 17, 30)] == [16, 2, 1, 0, 0]


@pytest.mark.parametrize("room", [0, 1, 3])
def test_the_loops_agree_at_the_end_of_the_context(room):
    """decode_loop, generation_steps and most_new_tokens: one rule."""
    model = get_model("default")
    n_ctx = model.config.n_ctx
    ids = (prompt_ids(model) * n_ctx)[: n_ctx - room]
    passes = list(decode_loop(model, ids, 50))
    assert len(passes) == most_new_tokens(len(ids), n_ctx) == room + 1
    assert [p.token for p in passes] == [p.token for p in decode_loop(model, ids, 50)]
    assert [s.token for s in generation_steps(model, ids, 50)] == [p.token for p in passes]
    assert [p.finish for p in passes] == [None] * room + ["context"]
    assert [p.n_context for p in passes] == list(range(len(ids), n_ctx + 1))
    assert [p.phase for p in passes] == ["prefill"] + ["decode"] * room
    np.testing.assert_array_equal(passes[0].logits, model.forward(ids)[-1])


def test_closing_or_should_stop_ends_the_work(monkeypatch):
    model = get_model("default")
    calls = []
    original = model.decode

    def counting_decode(token, kv):
        calls.append(token)
        return original(token, kv)

    monkeypatch.setattr(model, "decode", counting_decode)
    steps = generation_steps(model, prompt_ids(model), 100)
    next(steps), next(steps), next(steps)
    steps.close()
    assert len(calls) == 2                       # no model pass after the consumer stopped
    flag = []
    stopped = generation_steps(model, prompt_ids(model), 100, should_stop=lambda: bool(flag))
    first = [next(stopped), next(stopped)]
    flag.append(True)
    assert list(stopped) == [] and len(first) == 2 and len(calls) == 3


def test_top_candidates_orders_by_probability_then_id():
    p = np.array([0.1, 0.3, 0.05, 0.3, 0.25], dtype=np.float32)
    assert top_candidates(p, 3) == ((1, pytest.approx(0.3)), (3, pytest.approx(0.3)),
                                    (4, pytest.approx(0.25)))
    assert len(top_candidates(p, 99)) == 5


def test_text_stream_holds_back_a_split_character():
    model = get_model("default")
    text = "a parrot 🦜 and a café"
    ids = model.tokenizer.encode(text)
    pieces = [model.tokenizer.decode_single_token_bytes(i) for i in ids]
    assert any(_broken(p) for p in pieces), "expected the emoji to be split across tokens"
    stream = TextStream(model.tokenizer)
    outputs = [stream.push(i) for i in ids]
    assert "\ufffd" not in "".join(outputs)
    assert "".join(outputs) + stream.flush() == text
    # a character cut off at the end becomes one replacement character when the stream ends
    cut = TextStream(model.tokenizer)
    first_emoji_byte = next(i for i, p in zip(ids, pieces, strict=False) if p.startswith(b"\xf0"))
    assert cut.push(first_emoji_byte) == "" and cut.flush() == "\ufffd"


def _broken(b):
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


@pytest.mark.parametrize("name", all_models())
def test_a_loop_started_from_the_prompts_recording_is_the_same_loop(name):
    """The overview's loop starts from the prompt's shared run (start=): the same tokens and
    logits at every step, and its prefill pass says it was not timed (NaN), not 0."""
    model = get_model(name)
    ids = prompt_ids(model)
    _, cache = model.run_with_cache(ids, compact=True)
    start = (model.kv_from_recording(cache, len(ids)), model.forward(ids)[-1])
    plain = list(decode_loop(model, ids, 6, stop_at_eos=False, record=True))
    started = list(decode_loop(model, ids, 6, stop_at_eos=False, record=True, start=start))
    assert [p.token for p in started] == [p.token for p in plain]
    for a, b in zip(started, plain, strict=True):
        np.testing.assert_array_equal(a.logits, b.logits)
        assert a.phase == b.phase and a.n_context == b.n_context
    assert np.isnan(started[0].forward_seconds) and np.isnan(started[0].step_seconds)
    assert all(p.forward_seconds > 0 for p in started[1:])
