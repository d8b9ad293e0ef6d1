"""How well N draws match a distribution: Pearson's chi-square goodness-of-fit test.

The sampling section draws N tokens and tests their counts against the sampler's final
distribution; the speculative-decoding tests use the same test to check that speculative
sampling draws from the target's distribution. The chi-square tail probability comes from the
regularized upper incomplete gamma function, computed here so the engine needs only NumPy.
"""
import math
from typing import NamedTuple

import numpy as np


def regularized_gamma_q(a: float, x: float) -> float:
    """Q(a, x) = Gamma(a, x) / Gamma(a), the upper tail of the gamma distribution: a series for
    x < a + 1, a continued fraction (modified Lentz) otherwise (Numerical Recipes, 6.2)."""
    if x <= 0:
        return 1.0
    log_prefactor = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:      # P(a, x) = e^-x x^a / Gamma(a + 1) * sum x^n / ((a+1)...(a+n))
        term = total = 1.0 / a
        for n in range(1, 10_000):
            term *= x / (a + n)
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_prefactor))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(log_prefactor) * h


def chi_square_sf(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X chi-square with dof degrees of freedom: Q(dof/2, statistic/2)."""
    return regularized_gamma_q(dof / 2, statistic / 2)


class GoodnessOfFit(NamedTuple):
    statistic: float     # Pearson's chi-square: sum (observed - expected)^2 / expected
    dof: int             # bins - 1
    p_value: float       # chance of a statistic at least this large if the draws follow probs
    bins: int            # tokens with expected count >= min_expected, plus one "all others" bin
    tv_distance: float   # half the L1 distance between the draw frequencies and probs


def goodness_of_fit(counts, probs, min_expected: float = 5.0) -> GoodnessOfFit:
    """Pearson's chi-square test of drawn counts [V] against probabilities [V]. Tokens expected
    fewer than min_expected times are pooled into one bin (the usual rule for the test to hold);
    a pooled bin that is still too small joins the smallest token bin."""
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    probs = probs / probs.sum()
    n = counts.sum()
    expected = n * probs
    big = expected >= min_expected
    obs_bins, exp_bins = list(counts[big]), list(expected[big])
    rest_obs, rest_exp = counts[~big].sum(), expected[~big].sum()
    if rest_exp >= min_expected or (rest_exp > 0 and not exp_bins):
        obs_bins.append(rest_obs)
        exp_bins.append(rest_exp)
    elif rest_exp > 0 or rest_obs > 0:
        i = int(np.argmin(exp_bins))
        obs_bins[i] += rest_obs
        exp_bins[i] += rest_exp
    obs_bins, exp_bins = np.array(obs_bins), np.array(exp_bins)
    statistic = float(((obs_bins - exp_bins) ** 2 / exp_bins).sum())
    dof = len(exp_bins) - 1
    p_value = chi_square_sf(statistic, dof) if dof > 0 else 1.0
    tv = float(0.5 * np.abs(counts / n - probs).sum()) if n else 0.0
    return GoodnessOfFit(statistic, dof, p_value, len(exp_bins), tv)
