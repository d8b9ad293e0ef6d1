"""From the model's scores for the next token to the token that is chosen.

The logits section and the sampler both turn scores into probabilities here, so a temperature
means the same thing everywhere on the page.

The sampler, in a fixed order (the order of Hugging Face transformers' default logits
processors, `GenerationMixin._get_logits_processor`):

    scores -> repetition penalty -> temperature -> top-k -> top-p -> min-p -> draw

Each control has a neutral value at which it does nothing (repetition penalty 1, temperature 1,
top-k 0, top-p 1, min-p 0); temperature 0 means greedy: the highest score is always chosen.
The penalty comes first because it edits raw scores (its rule depends on their sign); the
temperature next because the three filters that follow read probabilities, and those depend on
the temperature. vLLM's sampler applies the penalties and the temperature first too, but then
min-p before top-k and top-p. Each filter reads the renormalised output of the one before, so
another order can leave other tokens (tests/test_sampling.py shows cases); the page says so.

A removed token's score becomes -inf, so it has probability 0 and the survivors' probabilities
are renormalised (softmax over what is left).
"""
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from pipeline.model import softmax
from pipeline.ranking import top_k

TEMPERATURE_MAX = 2.0          # OpenAI's API accepts [0, 2]; vLLM and HF any value >= 0 / > 0
REPETITION_PENALTY_MAX = 2.0   # vLLM / HF accept any value > 0; CTRL used 1.2; 2 is plenty


def softmax_with_temperature(logits, temperature: float):  # [V] -> [V] probabilities
    """softmax(logits / T). T = 1 is the model's own distribution; T -> 0 puts all the
    probability on the highest score (greedy), so T = 0 is taken to mean exactly that."""
    logits = np.asarray(logits, dtype=np.float32)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, not {temperature}")
    if temperature == 0:
        p = np.zeros_like(logits)
        p[int(np.argmax(logits))] = 1.0
        return p
    return softmax(logits * np.float32(1.0 / temperature))


def entropy_bits(p) -> float:
    """Shannon entropy -sum p log2 p of a distribution, in bits (0 log 0 = 0). Never below 0:
    a one-hot distribution gives -0.0, and float32 probabilities summing to a hair over 1 a tiny
    negative sum, which a page would write "-0.00 bits"."""
    p = np.asarray(p, dtype=np.float64)
    nz = p[p > 0]
    return max(0.0, float(-(nz * np.log2(nz)).sum()))


# --- the settings ------------------------------------------------------------------------------

@dataclass(frozen=True)
class SamplerSettings:
    """Every control of the sampler; the defaults are the neutral values (plain sampling from
    the model's own distribution)."""
    repetition_penalty: float = 1.0   # (0, 2]: > 1 discourages tokens already in the context
    temperature: float = 1.0          # [0, 2]: 0 = greedy, < 1 sharper, > 1 flatter
    top_k: int = 0                    # >= 0: keep the k most probable tokens (0 = off)
    top_p: float = 1.0                # (0, 1]: keep the smallest most-probable set of mass >= p
    min_p: float = 0.0                # [0, 1]: keep tokens with p >= min_p * p_max (0 = off)

    def __post_init__(self):
        def number(name):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, not {value!r}")
            return value
        if not 0 < number("repetition_penalty") <= REPETITION_PENALTY_MAX:
            raise ValueError(f"repetition_penalty must be in (0, {REPETITION_PENALTY_MAX}], "
                             f"not {self.repetition_penalty}")
        if not 0 <= number("temperature") <= TEMPERATURE_MAX:
            raise ValueError(f"temperature must be in [0, {TEMPERATURE_MAX}], "
                             f"not {self.temperature}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, (int, np.integer)) \
                or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0, not {self.top_k!r}")
        if not 0 < number("top_p") <= 1:
            raise ValueError(f"top_p must be in (0, 1], not {self.top_p}")
        if not 0 <= number("min_p") <= 1:
            raise ValueError(f"min_p must be in [0, 1], not {self.min_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


# --- the stages: small functions named after the rule they apply --------------------------------

def apply_repetition_penalty(logits, context_ids, penalty: float):  # [V] -> [V]
    """CTRL's rule as Hugging Face applies it: for every token already in the context (counted
    once however often it occurs), a positive score is divided by the penalty and a negative one
    multiplied by it, so penalty > 1 always makes the token less likely."""
    out = np.array(logits, dtype=np.float32)
    if penalty == 1 or len(context_ids) == 0:
        return out
    seen = np.unique(np.asarray(context_ids, dtype=np.int64))
    s = out[seen]
    out[seen] = np.where(s > 0, s * np.float32(1.0 / penalty), s * np.float32(penalty))
    return out


def apply_temperature(logits, temperature: float):  # [V] -> [V]
    """Scores divided by T. T = 0 (greedy) keeps only the highest score: the limit T -> 0."""
    logits = np.asarray(logits, dtype=np.float32)
    if temperature == 0:
        out = np.full_like(logits, -np.inf)
        best = int(np.argmax(logits))
        out[best] = logits[best]
        return out
    return logits * np.float32(1.0 / temperature)


def top_k_keep(probs, k: int):  # [V] -> [V] bool
    """The k most probable tokens (ties broken by the lower id); k = 0 keeps all."""
    alive = probs > 0
    if k == 0 or k >= int(alive.sum()):
        return alive
    keep = np.zeros(probs.shape, dtype=bool)
    keep[top_k(probs, k)] = True
    return keep & alive


def top_p_keep(probs, p: float):  # [V] -> [V] bool
    """Nucleus: the smallest set of most probable tokens whose mass reaches p. Going down the
    sorted list, a token is kept if the mass before it is still below p, so the token that
    crosses p is kept. p = 1 keeps all."""
    alive = probs > 0
    if p >= 1:
        return alive
    order = top_k(probs)
    mass_before = np.cumsum(probs[order], dtype=np.float64) - probs[order]
    keep = np.zeros(probs.shape, dtype=bool)
    keep[order[mass_before < p]] = True
    return keep & alive


def min_p_keep(probs, min_p: float):  # [V] -> [V] bool
    """Tokens at least min_p times as probable as the most probable one; 0 keeps all."""
    alive = probs > 0
    if min_p == 0:
        return alive
    return alive & (probs >= np.float32(min_p) * probs.max())


class Stage(NamedTuple):
    name: str              # "model", "repetition penalty", "temperature", "top-k", ...
    probs: np.ndarray      # [V] float32: the distribution after this stage (renormalised)
    kept: np.ndarray       # [V] bool: tokens that survive this stage (and all before it)
    active: bool           # False when the control is at its neutral value (the stage is off)


def _masked(scores, keep):  # [V], [V] bool -> [V]: removed tokens get -inf
    return np.where(keep, scores, np.float32(-np.inf)).astype(np.float32)


def sampling_stages(logits, context_ids, settings: SamplerSettings) -> list:
    """The distribution after each stage of the sampler, in order (see the module docstring).
    The last stage's `probs` is the distribution the token is drawn from."""
    scores = np.asarray(logits, dtype=np.float32)
    s = settings
    stages = [Stage("model", softmax(scores), np.ones(scores.shape, dtype=bool), True)]

    scores = apply_repetition_penalty(scores, context_ids, s.repetition_penalty)
    stages.append(Stage("repetition penalty", softmax(scores), stages[-1].kept,
                        s.repetition_penalty != 1 and len(context_ids) > 0))

    scores = apply_temperature(scores, s.temperature)
    probs = softmax(scores)
    stages.append(Stage("temperature", probs, probs > 0, s.temperature != 1))

    for name, keep_fn, value, active in (
            ("top-k", top_k_keep, s.top_k, s.top_k != 0),
            ("top-p", top_p_keep, s.top_p, s.top_p != 1),
            ("min-p", min_p_keep, s.min_p, s.min_p != 0)):
        keep = keep_fn(stages[-1].probs, value)
        scores = _masked(scores, keep)
        stages.append(Stage(name, softmax(scores), keep, active))
    return stages


def final_distribution(logits, context_ids, settings: SamplerSettings):  # -> [V]
    return sampling_stages(logits, context_ids, settings)[-1].probs


# --- the draw ----------------------------------------------------------------------------------

def slice_order(probs):  # [V] -> [V] token ids, most probable first (ties: lower id first)
    """The order in which the draw lays the tokens' slices end to end."""
    return top_k(np.asarray(probs, dtype=np.float64))


def laid_end_to_end(probs):  # [V] -> (order [V], cdf [V]): the slices, most probable first
    order = slice_order(probs)                                               # [V]
    return order, np.cumsum(np.asarray(probs, dtype=np.float64)[order])     # [V]


def inverse_cdf(probs, u):  # [V], [n] uniforms in [0, 1) -> [n] token ids
    """Inverse-CDF sampling: the tokens' probabilities laid end to end, most probable first,
    cover [0, 1); the uniform number u falls in one token's slice, and that token is drawn. A
    token of probability 0 has an empty slice and is never drawn."""
    order, cdf = laid_end_to_end(probs)
    u = np.asarray(u, dtype=np.float64) * cdf[-1]
    return order[np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)]


def draw_slice(probs, token: int) -> tuple:
    """(start, end) of `token`'s slice of [0, 1) as inverse_cdf lays the slices: a uniform u
    with start <= u < end draws it."""
    order, cdf = laid_end_to_end(probs)
    i = int(np.flatnonzero(order == token)[0])
    total = cdf[-1]
    return (float(cdf[i - 1] / total) if i else 0.0, float(cdf[i] / total))


def draw(probs, rng: np.random.Generator, n: int = None):
    """n=None: one token id (int) drawn from probs; else an array of n ids. Each draw uses the
    next uniform number of rng, so the first of n draws is the single draw of the same seed."""
    ids = inverse_cdf(probs, rng.random(1 if n is None else n))
    return int(ids[0]) if n is None else ids


def greedy(logits, tokens=None):
    """The default sampler: the highest-scoring token."""
    return int(np.argmax(logits))


def sample_next(logits, context_ids, settings: SamplerSettings, rng: np.random.Generator) -> int:
    """One token id drawn from the sampler's final distribution."""
    return draw(final_distribution(logits, context_ids, settings), rng)


def sampler(settings: SamplerSettings, seed: int):
    """A `sample(logits [V], tokens_so_far) -> int` for `decode_loop`: its own generator,
    seeded, so the same seed gives the same tokens. The context for the repetition penalty is
    every token so far, prompt included (as in Hugging Face)."""
    rng = np.random.default_rng(seed)

    def sample(logits, tokens_so_far=()):
        return sample_next(logits, tokens_so_far, settings, rng)
    return sample


# --- logits section: how spread out a distribution is ----------------------------------------

def tokens_holding_mass(p, mass: float) -> int:
    """The fewest tokens whose probabilities add up to at least `mass` (the most likely first)."""
    cumulative = np.cumsum(np.sort(np.asarray(p, dtype=np.float64))[::-1])   # [V], ascending
    return int(min(np.searchsorted(cumulative, mass * (1 - 1e-12)) + 1, len(cumulative)))
