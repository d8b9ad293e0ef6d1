"""Speculative decoding: the draft model proposes, the running model verifies, live.

Everything comes from `pipeline.speculative` run on the loaded target and draft models. The
proposals with both models' probabilities, the accept / reject decisions and the text are this
prompt's run (computed once per setting, not timed). The wall times are measured once per
model pair (`speed_table`, in the section's warm): the target alone, the draft alone and
speculative decoding at every γ in both modes, on a reference text, with `time.perf_counter`;
every prompt and every worker shows the same measurement, with when it was made.
"""
import time
from dataclasses import dataclass

import numpy as np

from pipeline.speculative import (expected_speedup, expected_tokens_per_pass, speculative_generate,
                                  timed_generate)
from web.figures import speculative as figures
from web.forward import prompt_ids
from web.cache import memo
from web.measured import measured, model_key, stamp
from web.params import Param
from web.tokens import token_plain

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


_runs = memo("speculative runs", 32)


def live_run(target, draft, ids: tuple, gamma: int, n_tokens: int, mode: str, seed: int):
    """This prompt's speculative run and the target alone with the same seed (for the text),
    once per setting. Their times are not shown: see speed_table."""
    temperature = MODES[mode]

    def run():
        spec = speculative_generate(target, draft, list(ids), n_tokens, gamma, temperature,
                                    np.random.default_rng(seed))
        alone = timed_generate(target, list(ids), n_tokens, temperature,
                               np.random.default_rng(seed))
        return spec, tuple(alone.tokens)
    key = (model_key(target), model_key(draft), ids, gamma, n_tokens, mode, seed)
    return _runs.get(key, run)


# --- times: measured once per model pair, on a reference text ---------------------------------

SPEED_TEXT = ("It is a truth universally acknowledged, that a single man in possession of a "
              "good fortune")
SPEED_TOKENS = 32          # new tokens per timed run (end-of-text does not stop it)
SPEED_SEED = 0


@dataclass(frozen=True)
class SpeedRow:
    """Speculative decoding at one γ on the reference text, timed."""
    gamma: int
    acceptance: float        # accepted / proposed there
    n_tokens: int
    seconds: float           # the whole generation
    prefill_s: float         # both models reading the prompt
    draft_s: float           # the draft's proposals, all rounds
    target_s: float          # the target's verification passes, all rounds
    verify_s: float          # one verification pass (mean)


@dataclass(frozen=True)
class Speed:
    """One mode's timings: each model alone and speculative decoding at every γ."""
    target_step: float       # the target's mean decode step, run alone
    draft_step: float        # the draft's
    alone_seconds: float     # the target alone, the whole generation
    n_alone: int
    rows: tuple              # SpeedRow for γ = 1 .. MAX_GAMMA

    @property
    def cost_ratio(self) -> float:
        return self.draft_step / self.target_step


@dataclass(frozen=True)
class SpeedTable:
    modes: dict              # mode -> Speed
    measured_at: float
    n_prompt: int            # tokens of SPEED_TEXT


def measure_speed(target, draft) -> SpeedTable:
    ids = list(target.tokenizer.encode_ordinary(SPEED_TEXT))
    modes = {}
    for mode, temperature in MODES.items():
        def rng():
            return np.random.default_rng(SPEED_SEED)
        alone = timed_generate(target, ids, SPEED_TOKENS, temperature, rng(), stop_at_eos=False)
        draft_alone = timed_generate(draft, ids, SPEED_TOKENS, temperature, rng(),
                                     stop_at_eos=False)
        rows = []
        for gamma in range(1, MAX_GAMMA + 1):
            spec = speculative_generate(target, draft, ids, SPEED_TOKENS, gamma, temperature,
                                        rng(), stop_at_eos=False)
            passes = [r.target_seconds for r in spec.rounds]
            rows.append(SpeedRow(gamma, spec.acceptance_rate, len(spec.tokens), spec.seconds,
                                 spec.prefill_seconds, sum(r.draft_seconds for r in spec.rounds),
                                 sum(passes), mean(passes)))
        modes[mode] = Speed(alone.seconds_per_step, draft_alone.seconds_per_step, alone.seconds,
                            len(alone.tokens), tuple(rows))
    return SpeedTable(modes, time.time(), len(ids))


def speed_table(lm) -> SpeedTable:
    """The timings every setting shows, measured once per (target, draft)."""
    return measured(("speculative-speed", model_key(lm.model), model_key(lm.draft), SPEED_TEXT,
                     SPEED_TOKENS, SPEED_SEED, MAX_GAMMA),
                    lambda: measure_speed(lm.model, lm.draft))


def warm(lm):
    if lm.draft is not None:
        speed_table(lm)


def token_text(tokenizer, token: int) -> str:
    return token_plain(tokenizer, token)


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


_figures = memo("speculative figures", 32)


def time_figure(lm, table, mode: str, gamma: int) -> str:
    """Where the reference run's time went, built once per measurement and setting."""
    def build():
        speed = table.modes[mode]
        ref = speed.rows[gamma - 1]
        other = ref.seconds - ref.prefill_s - ref.draft_s - ref.target_s
        return figures.time_figure(speed.alone_seconds, speed.n_alone,
                                   dict(prefill=ref.prefill_s, draft=ref.draft_s,
                                        target=ref.target_s, other=max(other, 0.0)),
                                   ref.n_tokens)
    return _figures.get((model_key(lm.model), model_key(lm.draft), table.measured_at, mode,
                         gamma), build)


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
    spec, alone_tokens = live_run(target, draft, ids, gamma, n_tokens, mode, seed)
    table = speed_table(lm)
    speed = table.modes[mode]
    ref = speed.rows[gamma - 1]
    c = speed.cost_ratio
    a = spec.acceptance_rate
    measured_a = a if spec.proposed else None
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
        alone_text=[token_text(tok, t) for t in alone_tokens],
        same_as_alone=tuple(spec.tokens) == alone_tokens,
        measured_at=stamp(table.measured_at), speed_text=SPEED_TEXT, speed_tokens=SPEED_TOKENS,
        speed_prompt_tokens=table.n_prompt, speed_seed=SPEED_SEED,
        ref_acceptance=ref.acceptance,
        spec_seconds=ref.seconds, alone_seconds=speed.alone_seconds, n_alone=speed.n_alone,
        n_ref=ref.n_tokens,
        target_step=speed.target_step, draft_step=speed.draft_step,
        verify_pass=ref.verify_s, cost_ratio=c,
        speedup=(speed.alone_seconds / speed.n_alone) / (ref.seconds / ref.n_tokens),
        expected_tokens_per_pass=None if measured_a is None
        else expected_tokens_per_pass(a, gamma),
        expected_speedup=None if measured_a is None else expected_speedup(a, gamma, c),
        time_figure=time_figure(lm, table, mode, gamma),
    )
