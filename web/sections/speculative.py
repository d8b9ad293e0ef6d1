"""Speculative decoding: the draft model proposes, the running model verifies, live.

A model with a draft model (same tokenizer: models/austen-draft for the Austen model) uses it; a
model without one (SmolLM2, any --model checkpoint) uses prompt lookup (`NgramDraft`: the
proposals are found earlier in the text, q = 1), verified by the same rule.

Everything comes from `pipeline.speculative` run on the loaded target and draft models. The
proposals with both models' probabilities, the accept / reject decisions and the text are this
prompt's run (computed once per setting, not timed). The wall times are measured once per
model pair (`speed_table`, in the section's warm): the target alone and speculative decoding
at every γ in both modes, on a reference text, with `time.perf_counter`; every prompt and every
worker shows the same measurement, with when it was made. With prompt lookup the measurement is
smaller (`lookup_speed`): the target alone and lookup at γ = LOOKUP_GAMMA in greedy mode, on a
text that repeats itself (LOOKUP_TEXT).

On a big model (web.model_state.explainer.is_big) greedy mode's run reads the target's rows
from its own greedy run on the prompt (`greedy_run`: the prompt's greedy run the other sections
read too, web.model_state.greedy, computed once per prompt, as far as asked, and shared by every
γ, length and seed): greedy verification only reads
rows on the target's own greedy path, so no pass is run again for them
(pipeline.speculative.speculative_generate's known_rows). That greedy run is also the target
alone's text the section sets beside it.

That run is the section's own experiment: its measured speed-up. The prediction it is set
against is the same run priced from the model's cost table (web.model_state.measured.cost_table, the
table
every timing section quotes; pipeline.costs.price_speculative): each verification pass over k
tokens costs the table's pass of k tokens in decode steps, each draft step the table's c.
"""
import functools
import time
import urllib.parse
from dataclasses import dataclass

import numpy as np

from pipeline.costs import price_speculative
from pipeline.decoding import Extendable
from pipeline.sampling import draw
from pipeline.speculative import (
    DraftMismatch,
    NgramDraft,
    check_draft,
    distribution_at,
    expected_tokens_per_pass,
    rounds_in_common,
    speculative_generate,
    timed_generate,
)
from web.core.cache import memo
from web.core.params import Param
from web.figures import speculative as figures
from web.model_state.explainer import is_big
from web.model_state.forward import prefilled, prompt_ids
from web.model_state.greedy import greedy_path
from web.model_state.measured import cost_table, measured, model_key, stamp
from web.presentation.tokens import token_plain
from web.presentation.tour import open_disclosures
from web.sections import Section

MODES = {"sample": 1.0, "greedy": 0.0}     # mode -> temperature of both models
MAX_GAMMA = 8
MAX_TOKENS = 48

PARAMS = (
    Param("sp_mode", "Decoding", default="sample", choices=MODES),
    Param("sp_gamma", "Draft tokens per round (γ)", kind="int", default=4, min=1,
          max=MAX_GAMMA),
    Param("sp_tokens", "New tokens", kind="int", default=12, min=4, max=MAX_TOKENS,
          big_default=8),
    Param("sp_seed", "Seed", kind="int", default=0, min=0, max=9999),
)
# A big model's sampled run is computed when asked, a pass of the model per round, and so is the
# target alone beside it: at most this many new tokens there (its tokens' big default). Its
# greedy runs read its greedy run (greedy_run, computed once per prompt): every length.
BIG_SAMPLED_TOKENS = next(p.big_default for p in PARAMS if p.name == "sp_tokens")


def run_length(target, mode: str, n_tokens: int) -> int:
    """The new tokens a run of `mode` makes when n_tokens are asked for."""
    return min(n_tokens, BIG_SAMPLED_TOKENS) if MODES[mode] and is_big(target) else n_tokens


_runs = memo("speculative runs", 32)

LOOKUP = NgramDraft(max_n=3, min_n=1)      # the draft of a model without a draft model


def draft_of(lm):
    """The draft model of `lm`, or prompt lookup (LOOKUP) when it has none."""
    return lm.draft if lm.draft is not None else LOOKUP


def draft_key(draft):
    if isinstance(draft, NgramDraft):
        return ("ngram", draft.max_n, draft.min_n)
    return model_key(draft)


_recent = memo("speculative recent runs", 8)
RECENT = 3         # runs kept per prompt, mode and seed to continue from


def live_run(target, draft, ids: tuple, gamma: int, n_tokens: int, mode: str, seed: int):
    """This prompt's speculative run, once per setting. Its times are not shown: see
    speed_table. It starts from the prompt's shared run (web.model_state.forward.prefilled),
    or continues one of the last runs of the same prompt, mode and seed at another length or
    γ (pipeline.speculative.speculative_generate's resume: the rounds both make are taken, the
    rest run from its caches and generator state: the same run exactly), the one with the
    most rounds in common; a big model's greedy run reads the target's rows from its greedy
    run (see the docstring)."""
    base = (model_key(target), draft_key(draft), ids, mode, seed)

    def run():
        # a greedy run's rows after its first n - 1 tokens: every one its rounds read
        known = greedy_run(target, ids, n_tokens) if MODES[mode] == 0 and is_big(target) \
            else None
        recent = _recent.get(base, list)
        taken = [(rounds_in_common(r, target, draft, n_tokens, gamma), i)
                 for i, r in enumerate(list(recent))]
        best = max(taken, default=(-1, 0))
        prev = recent[best[1]] if best[0] >= 0 else None
        out = speculative_generate(target, draft, list(ids), n_tokens, gamma, MODES[mode],
                                   np.random.default_rng(seed),
                                   prompt_kv=None if prev else prefilled(target, ids)[0],
                                   known_rows=known, resume=prev)
        recent.append(out)
        del recent[:-RECENT]
        return out
    return _runs.get(base[:3] + (gamma, n_tokens) + base[3:], run)


class GreedyRun:
    """The target's own greedy run on a prompt as speculative decoding reads it: its tokens, to
    the end-of-text token and at most MAX_TOKENS, and before each the logits it was chosen from
    (rows[k]: after the prompt and the first k tokens). It is the prompt's shared greedy run
    (web.model_state.greedy: computed once per prompt, as far as a reader asked). As known_rows
    of pipeline.speculative.speculative_generate: get(text) is the row after `text` when
    `text` is the prompt and a start of the run, else None."""

    def __init__(self, path):
        n = path.ended(min(len(path.tokens), MAX_TOKENS), path.model.config.eos_token_id)
        self.ids, self.tokens, self.rows = path.ids, tuple(path.tokens[:n]), path.rows[:n]

    def get(self, text):
        k = len(text) - len(self.ids)
        if 0 <= k < len(self.tokens) and tuple(text[:len(self.ids)]) == self.ids \
                and tuple(text[len(self.ids):]) == self.tokens[:k]:
            return self.rows[k]
        return None


def greedy_run(target, ids: tuple, n: int = MAX_TOKENS) -> GreedyRun:
    """The target's greedy run on the prompt, at least n tokens of it (or to the end-of-text
    token): the prompt's one greedy run, made longer when a longer one is asked for, for every
    length (a run's first k tokens and rows do not depend on how long it goes on: each is the
    same decode step), γ and seed."""
    return GreedyRun(greedy_path(target, ids, min(n, MAX_TOKENS)))


def alone_run(target, ids: tuple, n_tokens: int, mode: str, seed: int) -> tuple:
    """The target alone with the same seed, from the prompt's shared run: its tokens, once per
    setting (γ does not change it). The template asks for it only where it is shown: greedy
    mode's check in the core, the texts side by side in the spec-rule disclosure. A big
    model's greedy text is its greedy_run's (which its speculative run reads)."""
    if MODES[mode] == 0 and is_big(target):
        return greedy_run(target, ids, n_tokens).tokens[:n_tokens]
    if MODES[mode] == 0:      # greedy: every draw is the top token, whatever the seed: one
        seed = 0              # run per prompt, not one per seed

    def run():                # kept going: a longer text continues it (Extendable)
        rng, probs = np.random.default_rng(seed), distribution_at(MODES[mode])
        return Extendable(target, ids, [lambda logits, _: draw(probs(logits), rng)],
                          start=prefilled(target, ids))
    alone = _alone.get((model_key(target), ids, mode, seed), run)
    return tuple(alone.first(n_tokens)[0].tokens)


_alone = memo("speculative alone runs", 8)


def alone_view(target, ids: tuple, n_tokens: int, mode: str, seed: int, spec_tokens: tuple):
    """What the page shows of the target alone: its text, and whether speculative decoding gave
    the same tokens."""
    tokens = alone_run(target, ids, n_tokens, mode, seed)
    return dict(text=[token_text(target.tokenizer, t) for t in tokens],
                same=spec_tokens == tokens)


def alone_shown(state) -> bool:
    return state["sp_mode"] == "greedy" or TEXT_DISCLOSURE in open_disclosures(state)


TEXT_DISCLOSURE = "spec-rule"


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
    pass_sizes: tuple        # tokens each verification pass read
    draft_steps: int         # the draft's decode steps, all rounds


@dataclass(frozen=True)
class Speed:
    """One mode's timings: the target alone and speculative decoding at every γ."""
    target_step: float       # the target's mean decode step, run alone (its sampler included)
    alone_seconds: float     # the target alone, the whole generation
    n_alone: int
    rows: tuple              # SpeedRow for γ = 1 .. MAX_GAMMA


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
        rows = []
        for gamma in range(1, MAX_GAMMA + 1):
            spec = speculative_generate(target, draft, ids, SPEED_TOKENS, gamma, temperature,
                                        rng(), stop_at_eos=False)
            passes = [r.target_seconds for r in spec.rounds]
            rows.append(SpeedRow(gamma, spec.acceptance_rate, len(spec.tokens), spec.seconds,
                                 spec.prefill_seconds, sum(r.draft_seconds for r in spec.rounds),
                                 sum(passes), mean(passes),
                                 tuple(r.n_fed for r in spec.rounds), spec.draft_steps))
        modes[mode] = Speed(alone.seconds_per_step, alone.seconds, len(alone.tokens),
                            tuple(rows))
    return SpeedTable(modes, time.time(), len(ids))


def speed_table(lm) -> SpeedTable:
    """The timings every setting shows, measured once per (target, draft)."""
    return measured(("speculative-speed", model_key(lm.model), model_key(lm.draft), SPEED_TEXT,
                     SPEED_TOKENS, SPEED_SEED, MAX_GAMMA),
                    lambda: measure_speed(lm.model, lm.draft))


# --- prompt lookup's times: one smaller measurement per model ---------------------------------

# A text that repeats itself, so lookup has something to find: each function's body is the one
# before with one more factor (the same kind of text lookup serves in editors: code).
LOOKUP_TEXT = ("def square(x):\n    return x * x\n\n\ndef cube(x):\n    return x * x * x\n\n\n"
               "def fourth_power(x):\n    return")
LOOKUP_GAMMA = 4           # γ of the timed run (the default)
LOOKUP_MODE = "greedy"     # prompt lookup is used mostly with greedy decoding
LOOKUP_TOKENS = 24         # new tokens per timed run (end-of-text does not stop it)


@dataclass(frozen=True)
class LookupSpeed:
    """Prompt lookup against the target alone on LOOKUP_TEXT."""
    alone_step: float        # the target alone's mean decode step (its sampler included)
    alone_seconds: float     # the target alone, LOOKUP_TOKENS tokens, prefill included
    n_alone: int
    seconds: float           # prompt lookup + verification, the same tokens
    n_tokens: int
    prefill_s: float
    lookup_s: float          # all rounds' lookups
    target_s: float          # all rounds' verification passes
    n_rounds: int
    n_empty: int             # rounds where lookup found nothing (a one-token pass)
    proposed: int
    accepted: int
    same_text: bool          # greedy: the target's own tokens
    measured_at: float
    n_prompt: int
    pass_sizes: tuple        # tokens each verification pass read

    @property
    def acceptance(self) -> float:
        return self.accepted / self.proposed if self.proposed else float("nan")

    @property
    def tokens_per_pass(self) -> float:
        return self.n_tokens / self.n_rounds

    @property
    def mean_pass(self) -> float:        # a verification pass of the run, on average
        return self.target_s / self.n_rounds

    @property
    def speedup(self) -> float:
        return (self.alone_seconds / self.n_alone) / (self.seconds / self.n_tokens)


def measure_lookup_speed(target) -> LookupSpeed:
    ids = list(target.tokenizer.encode_ordinary(LOOKUP_TEXT))
    # a model with a short context window (a test checkpoint's 64) measures the text's end
    room = target.config.n_ctx - LOOKUP_TOKENS - LOOKUP_GAMMA - 2
    ids = ids[-max(room, 1):]
    temperature = MODES[LOOKUP_MODE]
    alone = timed_generate(target, ids, LOOKUP_TOKENS, temperature,
                           np.random.default_rng(SPEED_SEED), stop_at_eos=False)
    spec = speculative_generate(target, LOOKUP, ids, LOOKUP_TOKENS, LOOKUP_GAMMA, temperature,
                                np.random.default_rng(SPEED_SEED), stop_at_eos=False)
    return LookupSpeed(
        alone.seconds_per_step, alone.seconds, len(alone.tokens), spec.seconds, len(spec.tokens),
        spec.prefill_seconds, sum(r.draft_seconds for r in spec.rounds),
        sum(r.target_seconds for r in spec.rounds), len(spec.rounds),
        sum(not r.proposals for r in spec.rounds), spec.proposed, spec.accepted,
        spec.tokens == alone.tokens, time.time(), len(ids),
        tuple(r.n_fed for r in spec.rounds))


def lookup_speed(lm) -> LookupSpeed:
    """The timings prompt lookup's section shows, measured once per model."""
    return measured(("lookup-speed", model_key(lm.model), LOOKUP, LOOKUP_TEXT, LOOKUP_GAMMA,
                     LOOKUP_MODE, LOOKUP_TOKENS, SPEED_SEED),
                    lambda: measure_lookup_speed(lm.model))


def warm(lm):
    cost_table(lm)
    if lm.draft is not None:
        speed_table(lm)
    else:
        lookup_speed(lm)
    if is_big(lm.model):      # the page opens on the default prompt: both modes' runs at
        ids = prompt_ids(lm, lm.default_prompt)       # its settings (greedy: from the greedy
        default = {p.name: lm.default_of(p) for p in PARAMS}      # run), the target alone
        for mode in MODES:                                        # beside each
            n = run_length(lm.model, mode, default["sp_tokens"])
            live_run(lm.model, draft_of(lm), ids, default["sp_gamma"], n, mode,
                     default["sp_seed"])
            alone_run(lm.model, ids, n, mode, default["sp_seed"])


def other_drafts(lm, text: str) -> list:
    """The draft models loaded for the app's other models, each with why it cannot serve `lm`
    (check_draft on the loaded models) and `text`'s ids in both tokenizers."""
    from web.core.request_state import explainer
    out = []
    for other in explainer().models.values():
        d = other.draft
        if other is lm or d is None or any(d is o["model"] for o in out):
            continue
        try:
            check_draft(lm.model, d)
        except DraftMismatch as e:
            out.append(dict(model=d, owner=other.name, reason=str(e),
                            name=(getattr(d, "path", "") or "draft").rstrip("/").split("/")[-1],
                            vocab=d.config.vocab_size,
                            ids=list(d.tokenizer.encode_ordinary(text)),
                            own_ids=list(lm.tokenizer.encode_ordinary(text))))
    return out


def token_text(tokenizer, token: int) -> str:
    return token_plain(tokenizer, token)


def rounds_view(tokenizer, spec) -> list:
    rows = []
    for i, r in enumerate(spec.rounds):
        items = [dict(text=token_text(tokenizer, p.token), id=p.token, q=p.q, p=p.p, u=p.u,
                      ratio=min(1.0, p.p / p.q), outcome="accepted" if p.accepted else "rejected")
                 for p in r.proposals]
        # a round that proposed nothing is a plain step: its token is the target's own
        items.append(dict(text=token_text(tokenizer, r.token), id=r.token, p=r.p,
                          outcome=r.kind if r.proposals else "own"))
        found = None
        if r.lookup is not None:        # what prompt lookup matched, and where
            x = spec.prompt + spec.tokens
            lk = r.lookup
            found = dict(n=lk.n, at=lk.at,
                         text="".join(token_text(tokenizer, t) for t in x[lk.at:lk.at + lk.n])
                         if lk.n else "")
        rows.append(dict(index=i + 1, chips=items, n_accepted=r.n_accepted,
                         n_proposed=len(r.proposals), n_tokens=len(r.tokens), lookup=found))
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
    mode = state["sp_mode"]
    gamma, n_tokens, seed = state["sp_gamma"], state["sp_tokens"], state["sp_seed"]
    ids = prompt_ids(lm, state["prompt"])
    target, draft = lm.model, draft_of(lm)
    n_asked, n_tokens = n_tokens, run_length(target, mode, n_tokens)
    spec = live_run(target, draft, ids, gamma, n_tokens, mode, seed)
    a = spec.acceptance_rate
    measured_a = a if spec.proposed else None
    tok = target.tokenizer
    common = dict(
        model_name=lm.name, target_params=target.n_params(),
        target_layers=target.config.n_layers, target_width=target.config.d_model,
        mode=mode, modes=list(MODES), gamma=gamma, n_tokens=n_tokens, n_asked=n_asked,
        seed=seed,
        max_gamma=MAX_GAMMA, max_tokens=MAX_TOKENS,
        rounds=rounds_view(tok, spec), n_rounds=len(spec.rounds),
        n_empty=sum(not r.proposals for r in spec.rounds),
        proposed=spec.proposed, accepted=spec.accepted, acceptance_rate=measured_a,
        tokens_per_pass=spec.tokens_per_pass, n_new=len(spec.tokens),
        draft_steps=spec.draft_steps,
        spec_text=[token_text(tok, t) for t in spec.tokens],
        # asked for by the template only where shown (the build is cached without `open`)
        alone_shown=alone_shown,
        alone=functools.partial(alone_view, target, ids, n_tokens, mode, seed,
                                tuple(spec.tokens)),
        speed_seed=SPEED_SEED)
    if isinstance(draft, NgramDraft):
        return dict(common, **lookup_context(lm, measured_a, gamma))
    table = speed_table(lm)
    speed = table.modes[mode]
    ref = speed.rows[gamma - 1]
    costs = cost_table(lm)
    priced = price_speculative(costs, ref.pass_sizes, ref.n_tokens, ref.draft_steps)
    return dict(
        common, lookup=False,
        draft=draft, draft_name=getattr(draft, "path", "") or "draft",
        draft_params=draft.n_params(),
        draft_layers=draft.config.n_layers, draft_width=draft.config.d_model,
        measured_at=stamp(table.measured_at), speed_text=SPEED_TEXT, speed_tokens=SPEED_TOKENS,
        speed_prompt_tokens=table.n_prompt, ref_gamma=gamma, ref_mode=mode,
        ref_acceptance=ref.acceptance,
        spec_seconds=ref.seconds, alone_seconds=speed.alone_seconds, n_alone=speed.n_alone,
        n_ref=ref.n_tokens, alone_step=speed.target_step,
        verify_pass=ref.verify_s, cost_ratio=costs.draft_ratio,
        draft_step=costs.draft_decode.median,
        speedup=(speed.alone_seconds / speed.n_alone) / (ref.seconds / ref.n_tokens),
        expected_tokens_per_pass=None if measured_a is None
        else expected_tokens_per_pass(a, gamma),
        time_figure=time_figure(lm, table, mode, gamma),
        **priced_context(lm, costs, priced, gamma),
    )


def priced_context(lm, costs, priced, gamma: int) -> dict:
    """The cost table's side: its decode step and passes, and the reference run priced from
    them (the prediction), for both kinds of draft."""
    steps = {k: costs.verify_steps(k) for k in sorted(costs.verify)}
    return dict(
        costs=costs, priced=priced, predicted=priced.speedup,
        table_step=costs.decode_at(costs.pass_context), pass_context=costs.pass_context,
        verify_k=gamma + 1, verify_steps=steps.get(gamma + 1),
        passes=[dict(n=k, seconds=costs.verify[k].median, steps=v) for k, v in steps.items()],
        pass_figure=_figures.get((model_key(lm.model), "passes", costs.measured_at),
                                 lambda: figures.pass_figure(
                                     {k: t.median for k, t in costs.verify.items()})),
        costs_measured_at=stamp(costs.measured_at),
    )


def lookup_context(lm, a, gamma: int) -> dict:
    """The part of the context that is prompt lookup's: its measurement on LOOKUP_TEXT, priced
    from the cost table."""
    sp = lookup_speed(lm)
    costs = cost_table(lm)
    # prompt lookup runs no model: c = 0; its own measured time is counted, in steps
    priced = price_speculative(costs, sp.pass_sizes, sp.n_tokens, 0, c=0.0,
                               other_seconds=sp.lookup_s)
    return dict(
        lookup=True, draft=LOOKUP, problem=lm.draft_problem,
        model_name=lm.card.title if lm.card else lm.name,
        other_drafts=other_drafts(lm, "Elizabeth"),
        vocab=lm.model.config.vocab_size,
        measured_at=stamp(sp.measured_at), speed=sp, speed_text=LOOKUP_TEXT,
        speed_tokens=LOOKUP_TOKENS, speed_prompt_tokens=sp.n_prompt, ref_gamma=LOOKUP_GAMMA,
        ref_mode=LOOKUP_MODE, ref_acceptance=sp.acceptance,
        alone_step=sp.alone_step, speedup=sp.speedup, cost_ratio=0.0,
        lookup_steps=priced.other_steps,
        try_url="/?" + urllib.parse.urlencode({"model": lm.key, "prompt": LOOKUP_TEXT})
        + "#speculative",
        expected_tokens_per_pass=None if a is None else expected_tokens_per_pass(a, gamma),
        time_figure=lookup_time_figure(lm, sp),
        **priced_context(lm, costs, priced, LOOKUP_GAMMA),
    )


def lookup_time_figure(lm, sp) -> str:
    def build():
        other = sp.seconds - sp.prefill_s - sp.lookup_s - sp.target_s
        return figures.time_figure(sp.alone_seconds, sp.n_alone,
                                   dict(prefill=sp.prefill_s, draft=sp.lookup_s,
                                        target=sp.target_s, other=max(other, 0.0)),
                                   sp.n_tokens, names=figures.LOOKUP_NAMES)
    return _figures.get((model_key(lm.model), "lookup", sp.measured_at), build)


SECTION = Section("speculative", "Speculative decoding", PARAMS, build,
                  short="Speculative", shorter="Spec.", warm=warm,
                  gives_away=("next-token",),
                  tour=("A small, fast draft guesses a few tokens ahead; the big model checks all "
                        "the guesses in one pass and keeps those it agrees with. The output "
                        "follows the big model's probabilities exactly, and it can arrive sooner: "
                        "when checking several tokens costs about one step and the guesses are "
                        "often right. The section measures whether it does here."))
