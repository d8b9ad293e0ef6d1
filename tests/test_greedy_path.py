"""The prompt's greedy run (pipeline.cached_generation.CachedSteps, kept per prompt by
web.model_state.greedy), computed once and read by the KV cache,
speculative decoding, greedy vs beam search and the generation loop sections: every step is the
step a loop run from the prompt computes, a run made longer is the run computed at once, and a
section that reads what another already asked for computes no step."""
import numpy as np

from pipeline.cached_generation import CachedSteps
from pipeline.generation import decode_loop, generation_steps
from pipeline.kvcache import kv_cache_bytes
from web.model_state.forward import prefilled
from web.model_state.greedy import CAPACITY, greedy_path
from web_support import HX, url

PROMPT = "Elizabeth looked at her sister, and"


def ids_of(model, prompt=PROMPT) -> tuple:
    return tuple(model.tokenizer.encode_ordinary(prompt))


def run_from_prompt(model, ids) -> CachedSteps:
    """The run as web.model_state.greedy starts it: from the prompt's shared run."""
    return CachedSteps(model, ids, CAPACITY, start=prefilled(model, ids, CAPACITY))


def test_each_step_is_the_decode_loops(model):
    """Tokens, logits rows, probabilities and top candidates are decode_loop's from the same
    prompt run, past the end-of-text token too; the KV cache holds the size formula's bytes in
    buffers that start at CAPACITY tokens and double; a run that prefills the prompt itself
    makes the same steps."""
    ids, n = ids_of(model), 12
    path = run_from_prompt(model, ids).upto(n)
    loop = list(decode_loop(model, ids, n, stop_at_eos=False,
                            start=prefilled(model, ids, CAPACITY)))
    assert path.tokens == [p.token for p in loop]
    for k, p in enumerate(loop):
        assert np.array_equal(path.rows[k], p.logits)
        assert path.sizes[k][0] == p.n_context
    steps = list(generation_steps(model, ids, n, stop_at_eos=False,
                                  start=prefilled(model, ids, CAPACITY)))
    assert [(s.prob, s.top) for s in steps] == list(zip(path.probs, path.tops, strict=True))
    capacity = CAPACITY
    for k, (held, nbytes, allocated, cap) in enumerate(path.sizes):
        while capacity < held:
            capacity *= 2
        assert (held, nbytes, allocated, cap) == (
            len(ids) + k, kv_cache_bytes(model.config, held),
            kv_cache_bytes(model.config, capacity), capacity)
    seq, cached, steps = path.first(n - 1)
    assert seq == list(ids) + path.tokens[:n - 1]
    assert [(s.n_tokens, s.next_token) for s in steps] == \
        [(len(ids) + k, path.tokens[k]) for k in range(n)]
    own = CachedSteps(model, ids, CAPACITY).first(n - 1)
    assert own[0] == seq and [s.next_token for s in own[2]] == path.tokens[:n]
    assert all(np.allclose(a, b, atol=1e-4) for a, b in zip(own[1], cached, strict=True))
    assert np.isnan(path.seconds[0]) and all(s > 0 for s in path.seconds[1:])
    assert all(s > 0 for s in CachedSteps(model, ids).upto(2).seconds)


def test_a_longer_run_goes_on_from_the_shorter_one(model, monkeypatch):
    """upto(9) after upto(4) runs the 5 steps not run yet, and gives the run computed at once."""
    ids = ids_of(model, "Mr. Darcy walked into the room")
    steps = []
    decode = model.decode
    monkeypatch.setattr(model, "decode", lambda *a, **k: steps.append(1) or decode(*a, **k))
    grown = run_from_prompt(model, ids).upto(4)
    assert len(steps) == 3 and len(grown.tokens) == 4
    grown.upto(9)
    grown.upto(2)
    assert len(steps) == 8 and len(grown.tokens) == 9
    monkeypatch.setattr(model, "decode", decode)
    once = run_from_prompt(model, ids).upto(9)
    assert grown.tokens == once.tokens and grown.sizes == once.sizes
    assert grown.logprobs == once.logprobs and grown.tops == once.tops
    assert all(np.array_equal(a, b) for a, b in zip(grown.rows, once.rows, strict=True))


def test_the_run_stops_only_at_a_full_context_window(model):
    """A prompt that leaves 3 positions: 4 tokens (the last is never read back), whatever is
    asked; a loop stopping at end-of-text ends where decode_loop ends."""
    ids = ids_of(model, " Darcy" * 300)[-(model.config.n_ctx - 3):]
    path = run_from_prompt(model, ids).upto(50)
    assert len(path.tokens) == 4 == len(list(decode_loop(model, ids, 50, stop_at_eos=False)))
    assert path.ended(50, model.config.eos_token_id) == len(list(decode_loop(model, ids, 50)))


def test_the_sections_read_one_run(app, client, model, monkeypatch):
    """The KV cache section's 8 tokens are one run; greedy vs beam search's greedy line (6),
    the generation loop's greedy steps (limit 8) and the speculative section's target alone
    in greedy mode read it without a decode step of their own; the generation loop's steps are
    generation_steps' from the prompt."""
    prompt = "Jane smiled at her sister and said"
    ids = ids_of(model, prompt)
    for section in ("decoding", "generation", "speculative"):   # their measurements, once
        client.get(url(f"/section/{section}", prompt="Kitty coughed"), headers=HX)
    client.get(url("/section/kvcache", prompt=prompt, kv_new=8), headers=HX)
    with app.app_context():
        path = greedy_path(model, ids)
    assert len(path.tokens) == 9                       # 8 generated, and the 9th step's choice
    steps = []
    decode = model.decode
    monkeypatch.setattr(model, "decode", lambda *a, **k: steps.append(1) or decode(*a, **k))
    for section, query in (("decoding", dict(b_new=6)), ("generation", dict(gen_max=8)),
                           ("speculative", dict(sp_mode="greedy", sp_tokens=8))):
        r = client.get(url(f"/section/{section}", prompt=prompt, **query), headers=HX)
        assert r.status_code == 200
    assert steps == []
    from web.sections.generation import stepped_run
    with app.app_context():
        lm = app.extensions["explainer"].default_model
        shown = stepped_run(lm, ids, 8, None, ("greedy",))
    real = list(generation_steps(model, ids, 8, start=prefilled(model, ids)))
    assert [(s.index, s.phase, s.input_ids, s.n_context, s.token, s.finish, s.prob, s.top)
            for s in shown] == \
        [(s.index, s.phase, s.input_ids, s.n_context, s.token, s.finish, s.prob, s.top)
         for s in real]
