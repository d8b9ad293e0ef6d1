"""pipeline/sampling.py as the logits section uses it: softmax with temperature against the
engine's softmax, entropy against hand-computed cases, monotonic in T, mass counts vs brute
force."""
import numpy as np
import pytest

from engine_support import get_model
from pipeline.model import softmax
from pipeline.sampling import entropy_bits, softmax_with_temperature, tokens_holding_mass

PROMPT = "It is a truth universally acknowledged, that a single man"


@pytest.fixture(scope="module")
def logits():
    model = get_model("default")
    return model.forward(model.tokenizer.encode_ordinary(PROMPT))[-1]


def test_temperature_one_is_the_engines_softmax(logits):
    np.testing.assert_array_equal(softmax_with_temperature(logits, 1.0), softmax(logits))


def test_temperature_divides_the_logits(logits):
    np.testing.assert_allclose(softmax_with_temperature(logits, 0.5), softmax(logits * 2),
                               rtol=1e-6, atol=1e-9)


def test_temperature_zero_is_greedy(logits):
    p = softmax_with_temperature(logits, 0)
    assert p[np.argmax(logits)] == 1.0 and p.sum() == 1.0
    assert entropy_bits(p) == 0.0 and tokens_holding_mass(p, 0.9) == 1


def test_entropy_by_hand():
    assert entropy_bits([0.5, 0.25, 0.25]) == pytest.approx(1.5)          # 0.5*1 + 2*0.25*2
    assert entropy_bits(np.full(8, 1 / 8)) == pytest.approx(3.0)
    assert entropy_bits([1.0, 0.0, 0.0]) == 0.0


def test_higher_temperature_flattens_monotonically(logits):
    temps = np.arange(0.05, 2.0001, 0.05)
    dists = [softmax_with_temperature(logits, float(t)) for t in temps]
    entropies = [entropy_bits(p) for p in dists]
    tops = [float(p.max()) for p in dists]
    assert all(b >= a - 1e-9 for a, b in zip(entropies, entropies[1:], strict=False))
    assert all(b <= a + 1e-9 for a, b in zip(tops, tops[1:], strict=False))
    assert entropies[-1] > entropies[0] + 1                                 # a real change
    assert entropies[-1] < np.log2(len(logits))                             # never uniform


def test_tokens_holding_mass_by_hand():
    p = [0.2, 0.5, 0.3]
    assert [tokens_holding_mass(p, m) for m in (0.3, 0.5, 0.6, 0.8, 0.9, 1.0)] == [1, 1, 2, 2,
                                                                              3, 3]


def test_tokens_holding_mass_vs_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = softmax(rng.normal(size=40).astype(np.float32) * 3)
        for mass in (0.5, 0.9):
            brute = next(k for k in range(1, 41) if np.sort(p)[::-1][:k].sum() >= mass)
            assert tokens_holding_mass(p, mass) == brute
