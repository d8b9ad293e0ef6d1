"""The feed-forward layer's non-linearity and its most active neurons, read from the cache.

    GPT-2 ("gelu"):     pre  = x W_fc + b_fc                     blocks.{i}.mlp.hook_pre
                        post = gelu(pre)                         blocks.{i}.mlp.hook_post
    Llama ("swiglu"):   gate = x W_gate                          blocks.{i}.mlp.hook_pre
                        up   = x W_up                            blocks.{i}.mlp.hook_pre_linear
                        post = silu(gate) * up                   blocks.{i}.mlp.hook_post
    Gemma ("geglu"):    post = gelu(gate) * up, gate and up as Llama's
    all:                out  = post W_down (+ bias)              blocks.{i}.hook_mlp_out

A "neuron" is one of the d_ff columns of `post`. The functions are pipeline.model's own, so the
check below compares the engine's cached output with the same formula applied again.
"""
import numpy as np

from pipeline.model import gelu, silu
from pipeline.ranking import top_k

# The elementwise function applied to hook_pre, per feed-forward kind (ModelConfig.mlp).
ACTIVATIONS = {"gelu": gelu, "swiglu": silu, "geglu": gelu}


def activation(mlp: str):
    """The non-linearity of a feed-forward kind: gelu (GPT-2, tanh form; GeGLU's gate) or silu
    (SwiGLU's gate)."""
    return ACTIVATIONS[mlp]


def post_activation(mlp: str, pre, pre_linear=None):  # [..., d_ff] -> [..., d_ff]
    """gelu(pre), or silu(gate) * up for SwiGLU, gelu(gate) * up for GeGLU (Gemma) (pre is the
    gate, pre_linear the up)."""
    if mlp == "swiglu":
        return silu(pre) * pre_linear
    if mlp == "geglu":
        return gelu(pre) * pre_linear
    return gelu(pre)


def formula_error(mlp: str, pre, pre_linear, post) -> float:
    """max |formula(pre, up) - post|: how far the cached post-activation is from the formula."""
    return float(np.abs(post_activation(mlp, pre, pre_linear) - post).max())


def top_neurons(post_row, k: int):  # [d_ff] -> [k] neuron indices
    """The k neurons with the largest |post-activation| (ties: lower index first)."""
    return top_k(np.abs(post_row), k)


def top_tokens(post, neuron: int, k: int):  # [T, d_ff] -> [<= k] token positions
    """The prompt positions where `neuron` has the largest |post-activation| (ties: earlier)."""
    return top_k(np.abs(post[:, neuron]), k)


def activation_curve(mlp: str, lo: float, hi: float, n: int = 241):  # -> ([n], [n])
    """The non-linearity sampled on n evenly spaced points of [lo, hi], for drawing."""
    x = np.linspace(lo, hi, n, dtype=np.float32)
    return x, activation(mlp)(x)


def histogram(values, bins: int = 40):  # [n] -> ([bins] counts, [bins + 1] edges)
    """np.histogram of the values over their own range."""
    return np.histogram(np.asarray(values, dtype=np.float32), bins=bins)
