"""The sampler (pipeline/sampling.py): each filter's exact effect, the documented order, seeded
draws, draw frequencies within statistical bounds, greedy at T = 0, and the chi-square test."""
import math

import numpy as np
import pytest

from engine_support import get_model
from pipeline.generation import decode_loop
from pipeline.model import softmax
from pipeline.sampling import (
    SamplerSettings,
    apply_repetition_penalty,
    apply_temperature,
    draw,
    final_distribution,
    inverse_cdf,
    min_p_keep,
    sample_next,
    sampler,
    sampling_stages,
    top_k_keep,
    top_p_keep,
)
from pipeline.statistics import chi_square_sf, goodness_of_fit

P = np.array([0.4, 0.3, 0.15, 0.1, 0.05], dtype=np.float32)   # a known distribution
LOGITS = np.log(P)


def ids(mask):
    return [int(i) for i in np.flatnonzero(mask)]


# --- settings -------------------------------------------------------------------------------

def test_defaults_are_neutral_and_leave_the_distribution_alone():
    s = SamplerSettings()
    assert (s.repetition_penalty, s.temperature, s.top_k, s.top_p, s.min_p) == (1, 1, 0, 1, 0)
    stages = sampling_stages(LOGITS, [0, 1], s)
    assert [st.name for st in stages] == ["model", "repetition penalty", "temperature",
                                          "top-k", "top-p", "min-p"]
    assert not any(st.active for st in stages[1:])
    for st in stages:
        np.testing.assert_allclose(st.probs, P, rtol=1e-6)
        assert st.kept.all()


@pytest.mark.parametrize("kwargs", [
    dict(temperature=-0.1), dict(temperature=2.01), dict(temperature=float("nan")),
    dict(top_k=-1), dict(top_k=1.5), dict(top_k=True),
    dict(top_p=0), dict(top_p=1.01), dict(top_p=float("inf")),
    dict(min_p=-0.01), dict(min_p=1.5),
    dict(repetition_penalty=0), dict(repetition_penalty=2.5), dict(repetition_penalty=-1),
])
def test_out_of_range_settings_are_refused_naming_the_parameter(kwargs):
    (name, _), = kwargs.items()
    with pytest.raises(ValueError, match=name):
        SamplerSettings(**kwargs)


def test_range_ends_are_accepted():
    SamplerSettings(temperature=0, top_k=0, top_p=1, min_p=0, repetition_penalty=2)
    SamplerSettings(temperature=2, top_k=4096, top_p=1e-9, min_p=1, repetition_penalty=1e-3)


# --- each stage on its own ------------------------------------------------------------------

def test_repetition_penalty_divides_positive_and_multiplies_negative_scores_once():
    logits = np.array([2.0, -1.0, 0.5, 3.0, 0.0], dtype=np.float32)
    out = apply_repetition_penalty(logits, [0, 1, 0, 0, 4], 2.0)   # 0 three times: once
    np.testing.assert_array_equal(out, [1.0, -2.0, 0.5, 3.0, 0.0])
    np.testing.assert_array_equal(apply_repetition_penalty(logits, [0, 1], 0.5),
                                  [4.0, -0.5, 0.5, 3.0, 0.0])
    np.testing.assert_array_equal(logits, [2.0, -1.0, 0.5, 3.0, 0.0])   # input untouched


def test_temperature_divides_scores_and_zero_keeps_only_the_best():
    np.testing.assert_allclose(softmax(apply_temperature(LOGITS, 2.0)),
                               np.sqrt(P) / np.sqrt(P).sum(), rtol=1e-6)
    np.testing.assert_array_equal(softmax(apply_temperature(LOGITS, 0)), [1, 0, 0, 0, 0])


def test_top_k_keeps_exactly_the_k_most_probable():
    assert ids(top_k_keep(P, 2)) == [0, 1]
    assert ids(top_k_keep(P, 1)) == [0]
    assert ids(top_k_keep(P, 0)) == [0, 1, 2, 3, 4]
    assert ids(top_k_keep(P, 99)) == [0, 1, 2, 3, 4]
    assert ids(top_k_keep(np.array([0.2, 0.4, 0.2, 0.2]), 2)) == [0, 1]   # tie: lower id


def test_top_p_keeps_the_smallest_set_reaching_p_including_the_crossing_token():
    assert ids(top_p_keep(P, 0.65)) == [0, 1]          # 0.4 < 0.65, 0.4 + 0.3 crosses it
    assert ids(top_p_keep(P, 0.75)) == [0, 1, 2]
    assert ids(top_p_keep(P, 0.1)) == [0]              # the top token always survives
    assert ids(top_p_keep(P, 0.96)) == [0, 1, 2, 3, 4]
    assert ids(top_p_keep(P, 1.0)) == [0, 1, 2, 3, 4]
    shuffled = P[[3, 0, 4, 2, 1]]                       # order of ids does not matter
    assert ids(top_p_keep(shuffled, 0.65)) == [1, 4]


def test_min_p_keeps_tokens_at_least_min_p_times_the_top_probability():
    assert ids(min_p_keep(P, 0.3)) == [0, 1, 2]         # p >= 0.12
    assert ids(min_p_keep(P, 0.25)) == [0, 1, 2, 3]     # p >= 0.1: the equal one stays
    assert ids(min_p_keep(P, 1.0)) == [0]
    assert ids(min_p_keep(P, 0.0)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("kwargs, survivors", [
    (dict(top_k=2), [0, 1]), (dict(top_p=0.65), [0, 1]), (dict(min_p=0.3), [0, 1, 2])])
def test_each_filter_renormalises_the_survivors(kwargs, survivors):
    stages = sampling_stages(LOGITS, [], SamplerSettings(**kwargs))
    probs = stages[-1].probs
    expected = np.zeros_like(P)
    expected[survivors] = P[survivors] / P[survivors].sum()
    np.testing.assert_allclose(probs, expected, rtol=1e-6, atol=1e-7)
    assert ids(stages[-1].kept) == survivors
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-6)
    (on,) = [st.name for st in stages[1:] if st.active]
    assert on == {"top_k": "top-k", "top_p": "top-p", "min_p": "min-p"}[next(iter(kwargs))]


# --- the order ------------------------------------------------------------------------------

def compose(logits, context, s, order):
    """An independent composition of the stages in a given order."""
    scores = np.asarray(logits, dtype=np.float32)
    for step in order:
        if step == "rep":
            scores = apply_repetition_penalty(scores, context, s.repetition_penalty)
        elif step == "temp":
            scores = apply_temperature(scores, s.temperature)
        else:
            keep = {"top_k": top_k_keep, "top_p": top_p_keep, "min_p": min_p_keep}[step](
                softmax(scores), getattr(s, step))
            scores = np.where(keep, scores, -np.inf).astype(np.float32)
    return softmax(scores)


DOCUMENTED = ["rep", "temp", "top_k", "top_p", "min_p"]


def test_stages_follow_the_documented_order_on_the_real_model():
    lm = get_model("default")
    context = lm.tokenizer.encode_ordinary("It was a beautiful morning, and the")
    logits = lm.forward(context)[-1]
    s = SamplerSettings(repetition_penalty=1.3, temperature=1.4, top_k=40, top_p=0.8,
                        min_p=0.05)
    np.testing.assert_allclose(final_distribution(logits, context, s),
                               compose(logits, context, s, DOCUMENTED), atol=1e-7)


def test_order_matters_top_k_before_top_p():
    s = SamplerSettings(top_k=2, top_p=0.5)
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.1], dtype=np.float32))
    # top-k renormalises {0, 1} to 0.57 / 0.43: 0.57 already reaches 0.5, token 1 is dropped
    assert ids(sampling_stages(logits, [], s)[-1].kept) == [0]
    assert ids(compose(logits, [], s, ["top_p", "top_k"]) > 0) == [0, 1]   # the other order


def test_order_matters_top_p_before_min_p():
    s = SamplerSettings(top_p=0.75, min_p=0.45)
    logits = np.log(np.array([0.4, 0.3, 0.2, 0.1], dtype=np.float32))
    assert ids(sampling_stages(logits, [], s)[-1].kept) == [0, 1, 2]
    assert ids(compose(logits, [], s, ["min_p", "top_p"]) > 0) == [0, 1]


def test_order_matters_temperature_before_top_p():
    s = SamplerSettings(temperature=2.0, top_p=0.45)
    logits = np.log(np.array([0.5, 0.3, 0.2], dtype=np.float32))
    # T = 2 flattens to 0.42 / 0.32 / 0.26: the top token alone no longer reaches 0.45
    assert ids(sampling_stages(logits, [], s)[-1].kept) == [0, 1]
    assert ids(compose(logits, [], s, ["top_p", "temp"]) > 0) == [0]


def test_kept_masks_only_shrink_and_removed_tokens_have_zero_probability():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, 500).astype(np.float32)
    s = SamplerSettings(repetition_penalty=1.5, temperature=0.7, top_k=50, top_p=0.9, min_p=0.02)
    stages = sampling_stages(logits, list(range(0, 500, 7)), s)
    for before, after in zip(stages, stages[1:], strict=False):
        assert not (after.kept & ~before.kept).any()
        assert (after.probs[~after.kept] == 0).all()
        assert math.isclose(float(after.probs.sum()), 1.0, rel_tol=1e-5)


# --- drawing --------------------------------------------------------------------------------

def test_same_seed_same_tokens_and_different_seeds_vary():
    lm = get_model("default")
    prompt = lm.tokenizer.encode_ordinary("It was a beautiful")
    s = SamplerSettings(temperature=1.2)
    runs = [[p.token for p in decode_loop(lm, prompt, 8, sample=sampler(s, seed))]
            for seed in (5, 5, 6, 7, 8)]
    assert runs[0] == runs[1]
    assert len({tuple(r) for r in runs}) > 1


def test_temperature_zero_is_greedy_whatever_the_seed():
    lm = get_model("default")
    prompt = lm.tokenizer.encode_ordinary("It was a beautiful")
    greedy = [p.token for p in decode_loop(lm, prompt, 10)]
    for seed in (0, 1, 2):
        sample = sampler(SamplerSettings(temperature=0), seed)
        assert [p.token for p in decode_loop(lm, prompt, 10, sample=sample)] == greedy
    logits = lm.forward(prompt)[-1]
    s = SamplerSettings(temperature=0, repetition_penalty=1.8, top_p=0.1)
    best = int(np.argmax(apply_repetition_penalty(logits, prompt, 1.8)))
    assert {sample_next(logits, prompt, s, np.random.default_rng(k)) for k in range(20)} == {best}


def test_draw_never_picks_a_removed_token():
    probs = final_distribution(LOGITS, [], SamplerSettings(top_k=2))
    drawn = draw(probs, np.random.default_rng(3), 5000)
    assert set(drawn.tolist()) == {0, 1}


def test_draw_frequencies_within_statistical_bounds():
    n = 20_000
    probs = final_distribution(LOGITS, [], SamplerSettings(temperature=1.5, min_p=0.2))
    counts = np.bincount(draw(probs, np.random.default_rng(2024), n), minlength=len(P))
    expected = n * probs.astype(np.float64)
    sigma = np.sqrt(expected * (1 - probs))
    assert (np.abs(counts - expected) <= 5 * sigma).all(), (counts, expected)
    assert counts[probs == 0].sum() == 0
    assert goodness_of_fit(counts, probs).p_value > 1e-4


def test_goodness_of_fit_rejects_draws_from_another_distribution():
    n = 20_000
    q = np.array([0.35, 0.35, 0.15, 0.1, 0.05])
    counts = np.bincount(draw(q, np.random.default_rng(1), n), minlength=5)
    fit = goodness_of_fit(counts, P)
    assert fit.p_value < 1e-6 and fit.dof == 4


def test_goodness_of_fit_pools_small_expected_counts():
    probs = np.array([0.5, 0.3, 0.19, 0.004, 0.003, 0.003])
    counts = np.array([52, 29, 18, 1, 0, 0])       # n = 100: the last three expect 0.4, 0.3, 0.3
    fit = goodness_of_fit(counts, probs)
    # the pooled bin (expected 1.0) is too small, so it joins the smallest token bin (19 -> 20)
    assert fit.bins == 3 and fit.dof == 2
    expected = (52 - 50) ** 2 / 50 + (29 - 30) ** 2 / 30 + (19 - 20) ** 2 / 20
    assert math.isclose(fit.statistic, expected, rel_tol=1e-12)
    assert math.isclose(fit.p_value, math.exp(-expected / 2), rel_tol=1e-10)
    assert math.isclose(fit.tv_distance, 0.5 * (0.02 + 0.01 + 0.01 + 0.006 + 0.003 + 0.003))


@pytest.mark.parametrize("x", [0.01, 0.5, 1.0, 3.84, 7.0, 15.0, 40.0, 120.0])
def test_chi_square_tail_matches_closed_forms(x):
    assert math.isclose(chi_square_sf(x, 1), math.erfc(math.sqrt(x / 2)), rel_tol=1e-9)
    assert math.isclose(chi_square_sf(x, 2), math.exp(-x / 2), rel_tol=1e-9)
    y = x / 2            # even dof = 2m: Q(m, y) = e^-y sum_{k<m} y^k / k!
    for m in (2, 5, 20):
        exact = math.exp(-y) * sum(y ** k / math.factorial(k) for k in range(m))
        assert math.isclose(chi_square_sf(x, 2 * m), exact, rel_tol=1e-9, abs_tol=1e-300)


def test_the_first_of_n_draws_is_the_single_draw_of_the_same_seed():
    probs = final_distribution(LOGITS, [], SamplerSettings(temperature=1.3))
    for seed in range(20):
        many = draw(probs, np.random.default_rng(seed), 50)
        assert draw(probs, np.random.default_rng(seed)) == many[0]


def test_inverse_cdf_gives_each_token_its_slice_most_probable_first():
    probs = np.array([0.25, 0.0, 0.5, 0.25])
    # slices: token 2 [0, 0.5), token 0 [0.5, 0.75), token 3 [0.75, 1); ties by lower id
    u = np.array([0.0, 0.4999, 0.5, 0.7499, 0.75, 0.9999])
    assert inverse_cdf(probs, u).tolist() == [2, 2, 0, 0, 3, 3]
