"""Speculative decoding: the draft model proposes, the running model verifies, live.

Everything comes from `pipeline.speculative` run on the loaded target and draft models: the
proposals with both models' probabilities, the accept / reject decisions, and wall times
measured with `time.perf_counter` while the page was computed (the speculative run, the target
alone and the draft alone, same prompt and length). One setting is measured once per process
and then served from the cache (`web.measured`: one measurement at a time, so two never share
the cores), so its timings stay put while one looks at them.
"""
import numpy as np

from pipeline.speculative import (expected_speedup, expected_tokens_per_pass, speculative_generate,
                                  timed_generate)
from web.figures import speculative as figures
from web.forward import prompt_ids
from web.measured import measured, model_key
from web.params import Param
from web.tokens import plain

MODES = {"sample": 1.0, "greedy": 0.0}     # mode -> temperature of both models
MAX_GAMMA = 8
MAX_TOKENS = 48

PARAMS = (
    Param("sp_mode", "Decoding", default="sample", max_chars=16),
    Param("sp_gamma", "Draft tokens per round (γ)", kind="int", default=4, min=1,
          max=MAX_GAMMA),
    Param("sp_tokens", "New tokens", kind="int", default=12, min=4, max=MAX_TOKENS),
    Param("sp_seed", "Seed", kind="int", default=0, min=0, max=9999),
)


def measure(target, draft, ids: tuple, gamma: int, n_tokens: int, mode: str, seed: int):
    """The speculative run and both baselines, each timed live; once per setting."""
    temperature = MODES[mode]

    def run():
        alone = timed_generate(target, list(ids), n_tokens, temperature,
                               np.random.default_rng(seed))
        spec = speculative_generate(target, draft, list(ids), n_tokens, gamma, temperature,
                                    np.random.default_rng(seed))
        draft_alone = timed_generate(draft, list(ids), n_tokens, temperature,
                                     np.random.default_rng(seed))
        return spec, alone, draft_alone
    key = ("speculative", model_key(target), model_key(draft), ids, gamma, n_tokens, mode, seed)
    return measured(key, run)


def token_text(tokenizer, token: int) -> str:
    return plain(tokenizer.decode_single_token_bytes(token))


def rounds_view(tokenizer, spec) -> list:
    rows = []
    for i, r in enumerate(spec.rounds):
        items = [dict(text=token_text(tokenizer, p.token), id=p.token, q=p.q, p=p.p, u=p.u,
                      ratio=min(1.0, p.p / p.q), outcome="accepted" if p.accepted else "rejected")
                 for p in r.proposals]
        items.append(dict(text=token_text(tokenizer, r.token), id=r.token, p=r.p,
                          outcome=r.kind))
        rows.append(dict(index=i + 1, chips=items, n_accepted=r.n_accepted,
                         n_proposed=len(r.proposals), n_tokens=len(r.tokens)))
    return rows


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def build(lm, state) -> dict:
    """Template context for the speculative-decoding section."""
    if lm.draft is None:
        return dict(draft=None, problem=lm.draft_problem, model_name=lm.name)
    mode = state["sp_mode"]
    if mode not in MODES:
        state.reject("sp_mode", f"Decoding must be one of {', '.join(MODES)}; got "
                     f"{mode[:20]!r}.")
        mode = state["sp_mode"]
    gamma, n_tokens, seed = state["sp_gamma"], state["sp_tokens"], state["sp_seed"]
    ids = prompt_ids(lm, state["prompt"])
    target, draft = lm.model, lm.draft
    spec, alone, draft_alone = measure(target, draft, ids, gamma, n_tokens, mode, seed)
    a = spec.acceptance_rate
    c = draft_alone.seconds_per_step / alone.seconds_per_step   # nan if one stopped at once
    if c != c:
        c, measured_a = None, None
    else:
        measured_a = a if spec.proposed else None
    per_token_alone = alone.seconds / len(alone.tokens)
    per_token_spec = spec.seconds / len(spec.tokens)
    passes = [r.target_seconds for r in spec.rounds]
    draft_time = sum(r.draft_seconds for r in spec.rounds)
    target_time = sum(passes)
    other_time = spec.seconds - spec.prefill_seconds - draft_time - target_time
    tok = target.tokenizer
    return dict(
        draft=draft, model_name=lm.name, draft_name=getattr(draft, "path", "") or "draft",
        target_params=target.n_params(), draft_params=draft.n_params(),
        target_layers=target.config.n_layers, draft_layers=draft.config.n_layers,
        target_width=target.config.d_model, draft_width=draft.config.d_model,
        mode=mode, modes=list(MODES), gamma=gamma, n_tokens=n_tokens, seed=seed,
        max_gamma=MAX_GAMMA, max_tokens=MAX_TOKENS,
        rounds=rounds_view(tok, spec), n_rounds=len(spec.rounds),
        proposed=spec.proposed, accepted=spec.accepted, acceptance_rate=measured_a,
        tokens_per_pass=spec.tokens_per_pass, n_new=len(spec.tokens),
        draft_steps=spec.draft_steps,
        spec_text=[token_text(tok, t) for t in spec.tokens],
        alone_text=[token_text(tok, t) for t in alone.tokens],
        same_as_alone=spec.tokens == alone.tokens,
        spec_seconds=spec.seconds, alone_seconds=alone.seconds, n_alone=len(alone.tokens),
        draft_alone_seconds=draft_alone.seconds,
        target_step=alone.seconds_per_step, draft_step=draft_alone.seconds_per_step,
        verify_pass=mean(passes), cost_ratio=c,
        speedup=per_token_alone / per_token_spec,
        expected_tokens_per_pass=None if measured_a is None
        else expected_tokens_per_pass(a, gamma),
        expected_speedup=None if measured_a is None else expected_speedup(a, gamma, c),
        time_figure=figures.time_figure(
            alone.seconds, len(alone.tokens),
            dict(prefill=spec.prefill_seconds, draft=draft_time, target=target_time,
                 other=max(other_time, 0.0)), len(spec.tokens)),
    )
