"""Sampling: the real next-token distribution of the prompt, through every control of the
sampler in order, then drawn from: once with a seed, and N times against the prediction.

Every probability is computed by pipeline/sampling.py from the logits of the prompt's last
position (web/model_state/forward.py's one cached forward pass); every draw is a real draw of
NumPy's
seeded generator. The context names its parts: the model's own and the final distribution
(web.presentation.distribution.Distribution), the stages (StageView), one seeded draw (SeededDraw),
many
draws against the prediction (ManyDraws) and the "It was a beautiful" example (Example).
"""
import urllib.parse
from dataclasses import dataclass

import numpy as np

from pipeline.ranking import top_k
from pipeline.sampling import (
    REPETITION_PENALTY_MAX,
    TEMPERATURE_MAX,
    draw,
    draw_slice,
    entropy_bits,
    inverse_cdf,
    sampling_stages,
)
from pipeline.statistics import goodness_of_fit
from web.core.cache import memoized
from web.core.params import Param
from web.core.sampler_settings import DEFAULT_TEMPERATURE, settings_from, top_p_param
from web.figures import ROLES
from web.figures import sampling as figures
from web.model_state.forward import prompt_run
from web.presentation.distribution import Distribution
from web.presentation.tokens import token_plain
from web.sections import Section

SHOWN = 12            # tokens drawn in the figures and the table (most probable first)
EXAMPLE = "It was a beautiful"     # a common example of explainers of sampling, run on this model

PARAMS = (
    Param("s_rep", "Repetition penalty", kind="float", default=1.0, min=0.0,
          max=REPETITION_PENALTY_MAX, min_open=True, min_why="0 would remove every token"),
    # The defaults are common chat settings, each of which changes the default prompt's
    # distribution (tests/test_web_sampling.py checks that every one of them does).
    Param("s_temp", "Temperature", kind="float", default=DEFAULT_TEMPERATURE, min=0.0,
          max=TEMPERATURE_MAX),
    Param("s_topk", "Top-k", kind="int", default=40, min=0, max=1_000_000),
    top_p_param("s_topp", 0.9),
    Param("s_minp", "Min-p", kind="float", default=0.05, min=0.0, max=1.0),
    Param("s_seed", "Seed", kind="int", default=0, min=0, max=999_999_999),
    Param("s_draws", "Number of draws", kind="int", default=1000, min=1),   # max: web.core.limits
)
# The sampler's settings and seed: what the other sections that sample read (decoding's samples,
# the generation loop; web.core.sampler_settings turns them into a sampler), declared here only.
SAMPLER = ("s_rep", "s_temp", "s_topk", "s_topp", "s_minp", "s_seed")
assert set(SAMPLER) <= {p.name for p in PARAMS}

# What each stage does, in the page's words; the order is pipeline.sampling's.
STAGE_TEXT = {
    "model": "the model's own distribution: softmax of the logits",
    "repetition penalty": "tokens already in the prompt: positive scores divided by the "
                          "penalty, negative ones multiplied",
    "temperature": "every score divided by T, then softmax again",
    "top-k": "only the k most probable tokens survive",
    "top-p": "only the smallest set of most probable tokens whose mass reaches p survives",
    "min-p": "only tokens at least min-p times as probable as the top token survive",
}
STAGE_PARAM = {"repetition penalty": "s_rep", "temperature": "s_temp", "top-k": "s_topk",
               "top-p": "s_topp", "min-p": "s_minp"}


@dataclass(frozen=True)
class StageView:
    name: str
    param: str            # its control's parameter name ("" for the model)
    setting: str          # its value as written on the page
    active: bool
    survivors: int
    removed: int          # tokens this stage removed
    removed_mass: float   # the probability they had just before
    entropy: float        # bits, after the stage
    probs: tuple          # probabilities of the shown tokens after the stage
    kept: tuple           # bool for the shown tokens
    other: float          # mass of every token not shown, after the stage
    changed: bool         # the stage changed the distribution (removed or reshaped)
    had: tuple            # probabilities of the shown tokens just before the stage (the model's
    #                       own for the first): a token this stage removed is drawn at it


@dataclass(frozen=True)
class SeededDraw:
    """One draw: the seed fixes u in [0, 1), which lands in one token's slice."""
    seed: int
    u: float
    token: int
    name: str             # the token as the page writes it
    p: float              # its probability
    slice: tuple          # [start, end) of its slice


@dataclass(frozen=True)
class ManyDraws:
    """n draws from the same seed against the prediction, over the shown tokens and the rest."""
    n: int
    counts: list          # draws of each shown token
    other: int            # draws of every other token
    probs: list           # each shown token's probability: its expected share
    other_p: float        # the probability of every other token
    fit: object           # pipeline.statistics.goodness_of_fit over all tokens
    tv_shown: float       # total-variation distance over the shown tokens and the rest


@dataclass(frozen=True)
class Example:
    """The common example prompt, run on this model with the same settings."""
    prompt: str
    url: str              # the page with it as the prompt, the settings kept
    top: list             # (token, the model's probability, after the controls), top five
    is_prompt: bool       # it is the prompt in the box


def shown_tokens(stages, n=SHOWN) -> list:
    """The tokens in the figures: the most probable after the last stage, then the model's
    own most probable, n in all, ordered by the model's probability."""
    final, model = stages[-1].probs, stages[0].probs
    picked = []
    for probs in (final, model):
        for t in top_k(probs):
            if len(picked) >= n or (probs is final and probs[t] == 0):
                break
            if int(t) not in picked:
                picked.append(int(t))
    return sorted(picked, key=lambda t: (-model[t], t))


def mass_not_shown(probs, idx) -> float:
    """The probability of every token not in idx, summed (exactly 0 when they are all 0)."""
    rest = np.ones(probs.shape, dtype=bool)
    rest[idx] = False
    return float(probs[rest].sum(dtype=np.float64))


def stage_views(stages, shown, settings) -> list:
    values = {"repetition penalty": f"{settings.repetition_penalty:g}",
              "temperature": f"{settings.temperature:g}", "top-k": str(settings.top_k),
              "top-p": f"{settings.top_p:g}", "min-p": f"{settings.min_p:g}", "model": ""}
    out, before = [], None
    idx = np.array(shown)
    for st in stages:
        removed = before.kept & ~st.kept if before is not None else np.zeros_like(st.kept)
        out.append(StageView(
            st.name, STAGE_PARAM.get(st.name, ""), values[st.name], st.active,
            int(st.kept.sum()), int(removed.sum()),
            float(before.probs[removed].sum(dtype=np.float64)) if before is not None else 0.0,
            entropy_bits(st.probs), tuple(float(p) for p in st.probs[idx]),
            tuple(bool(k) for k in st.kept[idx]),
            mass_not_shown(st.probs, idx),
            before is None or bool(removed.any())
            or not np.array_equal(before.probs, st.probs),
            tuple(float(p) for p in (before or st).probs[idx])))
        before = st
    return out


# The stage table's bars (inline styles: colours that read on the light and the dark theme), in
# the figures' roles: after a stage, after all of them (drawn from), removed
BAR_KEPT, BAR_FINAL, BAR_GONE = ROLES["STAGE_P"], ROLES["SAMPLER_P"], ROLES["REMOVED"]


def stage_bars(views) -> list:
    """One row of bars per shown token, one bar per stage: (width in % of the widest bar,
    colour) or None. A survivor's bar is its probability after the stage; a token the stage
    removed keeps a grey bar of the probability it had just before; one removed earlier has none.
    Every bar is on one scale (the tallest of all): a stage that sharpens or flattens the
    distribution is seen to; the last stage (the distribution drawn from) in the accent colour.
    Drawn in the table, not as a figure of one plot per stage: a slider's answer has one Plotly
    figure fewer to redraw (six rows of axes cost ~50 ms of the browser's time per move)."""
    heights = [[st.probs[i] if st.kept[i] else (st.had[i] if was else None)
                for st, was in zip(views, kept_before(views, i), strict=True)]
               for i in range(len(views[0].probs))]
    top = max((h for row in heights for h in row if h), default=0.0) or 1.0
    last = len(views) - 1
    return [[None if h is None else
             (round(100 * h / top, 1),
              BAR_GONE if not st.kept[i] else BAR_FINAL if j == last else BAR_KEPT)
             for j, (st, h) in enumerate(zip(views, row, strict=True))]
            for i, row in enumerate(heights)]


def kept_before(views, i) -> list:
    """For each stage, whether shown token i survived every stage before it."""
    return [True] + [bool(v.kept[i]) for v in views[:-1]]


@memoized(64)
def draws(final_bytes: bytes, seed: int, n: int):
    """The seeded single draw (its uniform u and token) and n draws' counts, cached because a
    slider elsewhere on the page re-renders this section with the same values."""
    final = np.frombuffer(final_bytes, dtype=np.float32)
    u = float(np.random.default_rng(seed).random())
    one = int(inverse_cdf(final, [u])[0])
    ids = draw(final, np.random.default_rng(seed), n)
    counts = np.bincount(ids, minlength=len(final))
    return u, one, counts


def drawn_tv_distance(counts, probs) -> float:
    """Total-variation distance between draw frequencies and probabilities, over the given
    groups (counts and probs each add up to the whole): half the sum of |share - p|."""
    n = sum(counts)
    return 0.5 * sum(abs(c / n - p) for c, p in zip(counts, probs, strict=True)) if n else 0.0


def example_url(state) -> str:
    """The page with EXAMPLE as the prompt, the sampling settings kept."""
    pairs = [("prompt", EXAMPLE)] + [
        (p.name, str(state[p.name])) for p in PARAMS
        if p.name not in state.errors and state[p.name] != p.default]
    return "/?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote) + "#sampling"


def build(lm, state) -> dict:
    settings = settings_from(state)
    run = prompt_run(lm, state["prompt"])
    logits, context = run.next_logits, list(run.ids)      # = run.logits[-1], not all T rows
    stages = sampling_stages(logits, context, settings)
    model = Distribution(stages[0].probs)                          # softmax of the logits
    final = Distribution(stages[-1].probs, settings.temperature)   # what the token is drawn from
    shown = shown_tokens(stages)
    tok = lm.tokenizer
    names = [token_plain(tok, t) for t in shown]
    views = stage_views(stages, shown, settings)
    one, many = seeded_draws(final, shown, state["s_seed"], state["s_draws"], tok)
    return dict(
        settings=settings, stages=views, names=names, model=model, final=final,
        context_unique=len(set(context)),
        changed=[v for v in views if v.changed], unchanged=[v for v in views if not v.changed],
        bars=stage_bars(views),
        headline_figure=figures.model_vs_final_figure(
            names, views[0].probs, views[-1].probs, views[-1].kept),
        draw=one, many=many, draws_figure=figures.draws_figure(names, many),
        example=example_run(lm, state, settings),
        # predict-then-reveal: what top-p = 0.5 alone keeps of the model's own distribution
        half=model.nucleus(0.5),
        stage_text=STAGE_TEXT,
    )


def seeded_draws(final, shown, seed: int, n: int, tok) -> tuple:
    """The seeded single draw and n draws from `final` (a Distribution), counted over the
    shown tokens and the rest."""
    probs = final.probs
    u, token, counts = draws(probs.tobytes(), seed, n)
    idx = np.array(shown)
    drawn_shown = [int(c) for c in counts[idx]]
    other = int(n - sum(drawn_shown))
    expected = [float(probs[t]) for t in shown]
    other_p = mass_not_shown(probs, idx)
    # the total-variation distance over what the figure draws: the shown tokens and the rest
    # lumped together (over all V tokens it also counts the noise of thousands of tiny ones)
    tv_shown = drawn_tv_distance(drawn_shown + [other], expected + [other_p])
    one = SeededDraw(seed, u, token, token_plain(tok, token), float(probs[token]),
                     draw_slice(probs, token))
    return one, ManyDraws(n, drawn_shown, other, expected, other_p,
                          goodness_of_fit(counts, probs), tv_shown)


def example_run(lm, state, settings) -> Example:
    """EXAMPLE's five most probable next tokens on this model, before and after the controls."""
    ex = prompt_run(lm, EXAMPLE)
    ex_stages = sampling_stages(ex.next_logits, list(ex.ids), settings)
    ex_model, ex_final = ex_stages[0].probs, ex_stages[-1].probs
    top = [(token_plain(lm.tokenizer, int(t)), float(ex_model[t]), float(ex_final[t]))
           for t in top_k(ex_model, 5)]
    return Example(EXAMPLE, example_url(state), top, state["prompt"] == EXAMPLE)


SECTION = Section("sampling", "Sampling", PARAMS, build,
                  gives_away=("next-token",),
                  tour=("A probability list is not yet a word. The sampler picks one token from "
                        "it, after a chain of filters: repetition penalty, temperature, top-k, "
                        "top-p, min-p. Move each knob and watch which tokens it removes, in the "
                        "order the filters act."))
