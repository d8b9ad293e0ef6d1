"""pipeline/feedforward.py: the activation function applied to the cache's pre-activation is its
post-activation, on the default model (SwiGLU) and the GPT-2 (GELU) and Llama fixtures; the
rankings equal brute-force sorts."""
import numpy as np
import pytest

import pipeline.model
from engine_support import all_models, get_model
from pipeline.feedforward import (
    activation,
    activation_curve,
    formula_error,
    histogram,
    post_activation,
    top_neurons,
    top_tokens,
)

PROMPT = [11, 40, 7, 200, 33, 40, 150, 2, 99, 64, 11, 5, 120, 40, 3, 70]


def test_the_functions_are_the_engines_own():
    assert activation("gelu") is pipeline.model.gelu
    assert activation("swiglu") is pipeline.model.silu


@pytest.mark.parametrize("name", all_models())
def test_formula_on_the_cached_pre_activation_gives_the_cached_post(name):
    model = get_model(name)
    mlp = model.config.mlp
    assert mlp == ("gelu" if model.config.model_type == "gpt2" else "swiglu")
    _, cache = model.run_with_cache([t % model.config.vocab_size for t in PROMPT])
    for layer in range(model.config.n_layers):
        b = f"blocks.{layer}.mlp."
        pre, post = cache[b + "hook_pre"], cache[b + "hook_post"]
        up = cache.get(b + "hook_pre_linear")
        assert (up is not None) == (mlp == "swiglu")
        np.testing.assert_allclose(post_activation(mlp, pre, up), post, rtol=1e-6, atol=1e-7)
        assert formula_error(mlp, pre, up, post) < 1e-6
        # and the formula is not trivially satisfied: a wrong function is far off
        wrong = "gelu" if mlp == "swiglu" else "swiglu"
        assert formula_error(wrong, pre, up if up is not None else pre, post) > 1e-3


def test_gelu_and_silu_values_by_hand():
    x = np.array([-2.0, 0.0, 1.0], dtype=np.float32)
    gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(post_activation("gelu", x), gelu, rtol=1e-6)
    up = np.array([3.0, 5.0, -1.0], dtype=np.float32)
    np.testing.assert_allclose(post_activation("swiglu", x, up), x / (1 + np.exp(-x)) * up,
                               rtol=1e-6)


def test_top_neurons_equal_a_brute_force_sort():
    rng = np.random.default_rng(0)
    row = rng.normal(size=50).astype(np.float32)
    row[7], row[30] = 4.0, -4.0                          # a tie in |value|: lower index first
    want = sorted(range(50), key=lambda i: (-abs(float(row[i])), i))[:10]
    assert top_neurons(row, 10).tolist() == want
    assert want[:2] == [7, 30]


def test_top_tokens_equal_a_brute_force_sort():
    rng = np.random.default_rng(1)
    post = rng.normal(size=(12, 20)).astype(np.float32)
    for neuron in (0, 5, 19):
        want = sorted(range(12), key=lambda t: (-abs(float(post[t, neuron])), t))[:5]
        assert top_tokens(post, neuron, 5).tolist() == want
    assert top_tokens(post[:3], 0, 5).shape == (3,)


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_activation_curve_is_the_function(mlp):
    x, y = activation_curve(mlp, -4.0, 3.0, 71)
    assert x[0] == -4.0 and x[-1] == 3.0 and len(x) == 71 and y.dtype == np.float32
    np.testing.assert_array_equal(y, activation(mlp)(x))


def test_histogram_counts_every_value_once():
    values = np.array([0.0, 0.1, 0.1, 0.5, 1.0], dtype=np.float32)
    counts, edges = histogram(values, bins=2)
    assert counts.tolist() == [3, 2] and edges.tolist() == [0.0, 0.5, 1.0]
