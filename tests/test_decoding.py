"""Beam search (pipeline/decoding.py): width 1 is greedy; with width = K^(L-1) over K allowed
tokens the best beam is the exact best of all K^L sequences (brute force); totals are the
model's own log-probabilities; end-of-text finishes a beam."""
import itertools
import math

import numpy as np
import pytest

from engine_support import get_model
from pipeline.decoding import beam_search, length_penalised, sequence_logprobs
from pipeline.generation import decode_loop
from pipeline.model import log_softmax, softmax


def test_log_softmax_is_the_log_of_softmax_and_does_not_underflow():
    x = np.array([0.0, -5.0, 3.0, -200.0], dtype=np.float32)
    np.testing.assert_allclose(np.exp(log_softmax(x)), softmax(x), rtol=1e-6, atol=1e-30)
    assert math.isclose(float(log_softmax(x)[3]), -203.0 - math.log(
        sum(math.exp(v - 3.0) for v in (0.0, -5.0, 3.0, -200.0))), rel_tol=1e-6)


@pytest.mark.parametrize("name, prompt", [("default", "It was a beautiful"),
                                          ("default", "Mr. Darcy"),
                                          ("llama_gqa", "hello there")])
def test_width_one_is_greedy(name, prompt):
    lm = get_model(name)
    ids = lm.tokenizer.encode_ordinary(prompt)
    greedy = [p.token for p in decode_loop(lm, ids, 8)]
    search = beam_search(lm, ids, width=1, max_new_tokens=8)
    assert list(search.final[0].tokens) == greedy
    kept = [n for n in search.nodes if n.status in ("kept", "finished")]
    assert [n.token for n in kept] == greedy


@pytest.mark.parametrize("name, k, length", [("llama_mha", 4, 3), ("llama_gqa", 3, 3),
                                             ("default", 2, 4)])
def test_best_beam_is_the_exact_best_sequence_by_brute_force(name, k, length):
    lm = get_model(name)
    prompt = lm.tokenizer.encode_ordinary("the end")[:3] or [1]
    logits = lm.forward(prompt)[-1]
    eos = lm.config.eos_token_id
    # K allowed tokens: a few plausible ones and an unlikely one, never end-of-text
    order = [t for t in np.argsort(-logits) if t != eos]
    allowed = order[:k - 1] + [order[len(order) // 2]]
    width = k ** (length - 1)
    search = beam_search(lm, prompt, width, length, allowed=allowed)
    totals = {seq: sum(sequence_logprobs(lm, prompt, seq))
              for seq in itertools.product([int(t) for t in allowed], repeat=length)}
    best = max(totals, key=totals.get)
    assert search.final[0].tokens == best
    assert math.isclose(search.final[0].total, totals[best], abs_tol=2e-4)
    top = sorted(totals, key=totals.get, reverse=True)[:width]
    assert {h.tokens for h in search.final} == set(top)


def test_beam_totals_are_the_models_log_probabilities():
    lm = get_model("default")
    ids = lm.tokenizer.encode_ordinary("It is a truth universally acknowledged")
    search = beam_search(lm, ids, width=4, max_new_tokens=6)
    assert len(search.final) == 4
    for h in search.final:
        lps = sequence_logprobs(lm, ids, h.tokens)        # one uncached forward pass each
        assert math.isclose(h.total, sum(lps), abs_tol=1e-3)
        path = search.path(h.node)
        assert [search.nodes[i].token for i in path] == list(h.tokens)
        np.testing.assert_allclose([search.nodes[i].logprob for i in path], lps, atol=5e-4)
    scores = [h.score for h in search.final]
    assert scores == sorted(scores, reverse=True)
    for step in range(search.steps):                       # width beams kept at every step
        assert sum(n.status == "kept" for n in search.nodes if n.step == step) == 4


def test_length_penalty_is_hugging_faces_division_by_length_to_the_alpha():
    assert length_penalised(-6.0, 3, 1.0) == -2.0
    assert length_penalised(-6.0, 3, 0.0) == -6.0
    assert math.isclose(length_penalised(-8.0, 4, 0.5), -4.0)


def test_end_of_text_finishes_a_beam():
    lm = get_model("llama_mha")                    # eos 319
    eos = lm.config.eos_token_id
    prompt = [5, 6, 7]
    logits = lm.forward(prompt)[-1]
    other = int(np.argsort(-logits)[0]) if np.argsort(-logits)[0] != eos else \
        int(np.argsort(-logits)[1])
    # with only {other, eos} allowed, width 2 keeps both after step 0: eos ends one beam
    search = beam_search(lm, prompt, width=2, max_new_tokens=4, allowed=[other, eos])
    ended = [h for h in search.final if h.ended]
    assert ended and all(h.tokens[-1] == eos for h in ended)
    assert all(eos not in h.tokens[:-1] for h in search.final)
    for h in search.final:
        assert math.isclose(h.score, h.total / len(h.tokens), rel_tol=1e-9)


def test_continue_batch_gives_what_generate_gives_one_at_a_time():
    from pipeline.decoding import continue_batch
    from pipeline.sampling import SamplerSettings, greedy, sampler
    lm = get_model("default")
    ids = lm.tokenizer.encode_ordinary("It was a beautiful")
    s = SamplerSettings(temperature=1.1, top_p=0.95)
    got = continue_batch(lm, ids, [greedy, sampler(s, 1), sampler(s, 2)], 7)
    assert got[0].tokens == [p.token for p in decode_loop(lm, ids, 7)]
    for seed, cont in zip((1, 2), got[1:], strict=False):
        assert cont.tokens == [p.token for p in decode_loop(lm, ids, 7, sample=sampler(s, seed))]
        lps = sequence_logprobs(lm, ids, cont.tokens)
        np.testing.assert_allclose(cont.logprobs, lps, atol=5e-4)


def test_continue_batch_stops_a_sequence_at_end_of_text():
    from pipeline.decoding import continue_batch
    lm = get_model("llama_mha")
    eos = lm.config.eos_token_id
    always_eos = lambda logits, hist: eos                       # noqa: E731
    second = lambda logits, hist: int(np.argsort(-logits)[1])   # noqa: E731
    a, b = continue_batch(lm, [5, 6, 7], [always_eos, second], 5)
    assert a.tokens == [eos] and len(b.tokens) == 5
    assert b.tokens == [p.token for p in decode_loop(lm, [5, 6, 7], 5, sample=second)]


@pytest.mark.parametrize("room", [0, 2])
def test_beam_search_and_continue_batch_stop_where_generate_stops(room):
    """One context rule (pipeline.generation.finish_reason): a prompt that leaves `room` free
    positions gets room + 1 new tokens from every loop."""
    from pipeline.decoding import continue_batch
    from pipeline.sampling import greedy
    lm = get_model("default")
    n_ctx = lm.config.n_ctx
    ids = lm.tokenizer.encode_ordinary(" the" * n_ctx)[: n_ctx - room]
    expected = [p.token for p in decode_loop(lm, ids, 12)]
    assert len(expected) == room + 1
    search = beam_search(lm, ids, width=1, max_new_tokens=12)
    assert list(search.final[0].tokens) == expected and search.steps == room + 1
    assert continue_batch(lm, ids, [greedy], 12)[0].tokens == expected
    wide = beam_search(lm, ids, width=3, max_new_tokens=12)
    assert all(len(h.tokens) <= room + 1 for h in wide.final) and wide.steps == room + 1


# --- longer from shorter: a kept search or continuation goes on, exactly ---------------------

def search_view(search):
    return ([(n.id, n.parent, n.step, n.token, n.logprob, n.total, n.status)
             for n in search.nodes], search.steps,
            [(h.tokens, h.total, h.score, h.node, h.ended) for h in search.final])


@pytest.mark.parametrize("name, prompt, width", [("default", "It was a beautiful", 3),
                                                 ("default", "Mr. Darcy", 1),
                                                 ("llama_gqa", "hello there", 4)])
@pytest.mark.parametrize("shorter, longer", [(4, 5), (1, 2), (2, 7)])
def test_a_longer_search_going_on_from_a_shorter_one_is_the_search_from_the_prompt(
        name, prompt, width, shorter, longer):
    """Every node (token, log-probability, total, status) and final beam of the search that goes
    on from a kept shorter one is the search run from the prompt; the kept one is unchanged."""
    lm = get_model(name)
    ids = lm.tokenizer.encode_ordinary(prompt)
    short = beam_search(lm, ids, width, shorter, length_penalty=0.5)
    before = search_view(short)
    grown = beam_search(lm, ids, width, longer, length_penalty=0.5, resume=short)
    assert search_view(grown) == search_view(beam_search(lm, ids, width, longer,
                                                         length_penalty=0.5))
    assert search_view(short) == before


def test_a_search_that_ended_before_its_limit_is_not_gone_on_from():
    """Early stopping (width beams finished at end-of-text) keeps nothing to go on from: a
    longer search runs from the prompt, the same as without it; one stopped by its limit is."""
    lm = get_model("llama_mha")
    eos = lm.config.eos_token_id
    prompt = [5, 6, 7]
    logits = lm.forward(prompt)[-1]
    others = [int(t) for t in np.argsort(-logits) if t != eos][:3]
    ended = beam_search(lm, prompt, width=1, max_new_tokens=3, allowed=[eos])
    assert ended.kept is None and ended.final[0].ended and ended.steps == 1
    assert search_view(beam_search(lm, prompt, 1, 5, allowed=[eos], resume=ended)) == \
        search_view(ended)
    limited = beam_search(lm, prompt, width=2, max_new_tokens=3, allowed=others)
    assert limited.kept is not None and limited.steps == 3
    assert search_view(beam_search(lm, prompt, 2, 5, allowed=others, resume=limited)) == \
        search_view(beam_search(lm, prompt, 2, 5, allowed=others))


@pytest.mark.parametrize("alpha", [0.0, 0.5, 2.0])
def test_rescored_is_the_search_with_that_length_penalty(alpha):
    from pipeline.decoding import rescored
    lm = get_model("llama_mha")
    eos = lm.config.eos_token_id
    logits = lm.forward([5, 6, 7])[-1]
    allowed = [int(t) for t in np.argsort(-logits)[:3]] + [eos]
    search = beam_search(lm, [5, 6, 7], 3, 5, length_penalty=1.0, allowed=allowed)
    assert search_view(rescored(search, alpha)) == search_view(
        beam_search(lm, [5, 6, 7], 3, 5, length_penalty=alpha, allowed=allowed))


def test_an_extendable_continuation_is_continue_batch_at_every_length():
    """Asked for more tokens, the kept continuations go on (their caches, their samplers'
    generators); fewer are their start: each is continue_batch's run from the prompt, tokens
    and log-probabilities, including a sequence that stopped at end-of-text."""
    from pipeline.decoding import Extendable, continue_batch
    from pipeline.sampling import SamplerSettings, greedy, sampler
    lm = get_model("default")
    ids = lm.tokenizer.encode_ordinary("It was a beautiful")
    s = SamplerSettings(temperature=1.1, top_p=0.95)
    grown = Extendable(lm, ids, [greedy, sampler(s, 1), sampler(s, 2)])
    for n in (3, 4, 9, 2, 12):
        want = continue_batch(lm, ids, [greedy, sampler(s, 1), sampler(s, 2)], n)
        got = grown.first(n)
        assert [(c.tokens, c.logprobs) for c in got] == [(c.tokens, c.logprobs) for c in want]
    small = get_model("llama_mha")
    eos = small.config.eos_token_id
    always_eos = lambda logits, hist: eos                       # noqa: E731
    second = lambda logits, hist: int(np.argsort(-logits)[1])   # noqa: E731
    kept = Extendable(small, [5, 6, 7], [always_eos, second])
    for n in (1, 2, 5):
        want = continue_batch(small, [5, 6, 7], [always_eos, second], n)
        assert [(c.tokens, c.logprobs) for c in kept.first(n)] == \
            [(c.tokens, c.logprobs) for c in want]
