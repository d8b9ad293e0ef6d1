"""web.presentation.distribution.Distribution: a distribution at temperature T and its numbers, each
the
pipeline function's own result, computed once."""
import numpy as np
import pytest

from pipeline.sampling import softmax_with_temperature, top_p_keep
from web.presentation.distribution import Distribution

LOGITS = np.array([2.0, 1.0, 0.5, 0.5, -1.0, -3.0], dtype=np.float32)


@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 1.7])
def test_probabilities_are_softmax_at_the_temperature(temperature):
    d = Distribution.at(LOGITS, temperature)
    assert d.temperature == temperature and d.size == len(LOGITS)
    np.testing.assert_array_equal(d.probs, softmax_with_temperature(LOGITS, temperature))


def test_the_numbers_of_a_distribution():
    p = np.array([0.5, 0.25, 0.125, 0.125, 0.0], dtype=np.float32)
    d = Distribution(p, 1.0)
    assert d.entropy == pytest.approx(1.75)         # 0.5*1 + 0.25*2 + 2 * 0.125*3
    assert d.top == 0.5
    assert d.mass50 == 1 and d.mass90 == 4          # 0.5 >= 50%; 0.875 < 90% <= 1
    assert d.survivors == 4
    assert d.nucleus(0.6) == (2, 0.75)
    assert d.nucleus(1.0) == (4, 1.0)
    assert d.nucleus(0.6).kept == int(top_p_keep(p, 0.6).sum())


def test_greedy_is_one_hot_with_zero_entropy_not_minus_zero():
    d = Distribution.at(LOGITS, 0.0)
    assert d.top == 1.0 and d.survivors == 1 and d.mass90 == 1
    assert d.entropy == 0.0 and str(d.entropy) == "0.0"


def test_each_number_is_computed_once(monkeypatch):
    import web.presentation.distribution as module
    calls = []
    real = module.entropy_bits
    monkeypatch.setattr(module, "entropy_bits", lambda p: calls.append(1) or real(p))
    d = Distribution.at(LOGITS, 0.8)
    assert d.entropy == d.entropy and len(calls) == 1
