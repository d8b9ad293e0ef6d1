"""The residual stream between blocks, and the logit lens: what the model would predict if it
stopped after block k.

The residual stream is the [T, d] running sum that every block reads and adds to. The logit lens
(nostalgebraist, 2020) applies the model's own final norm and unembedding to the stream after
each block; after the last block that is exactly the model's output. Here it reuses the engine's
norm functions and weights, so `logit_lens(model, cache)[k]` equals
`model.forward(tokens, n_layers=k)`: the model cut after k blocks.
"""
import numpy as np

from pipeline.model import NORMS, unembed_logits


def residual_stream(cache: dict, n_layers: int) -> np.ndarray:  # -> [N + 1, T, d]
    """The stream entering block 0 (embeddings, + positions for GPT-2), then after each block."""
    return np.stack([cache["blocks.0.hook_resid_pre"]]
                    + [cache[f"blocks.{i}.hook_resid_post"] for i in range(n_layers)])


def residual_norms(cache: dict, n_layers: int) -> tuple:
    """([2N + 1, T] Euclidean norms, names): the stream before each block, between attention and
    feed-forward (resid_mid), and after the last block, per token."""
    names, rows = [], []
    for i in range(n_layers):
        for stage in ("resid_pre", "resid_mid"):
            names.append(f"blocks.{i}.hook_{stage}")
    names.append(f"blocks.{n_layers - 1}.hook_resid_post")
    rows = [np.linalg.norm(cache[n], axis=-1) for n in names]     # each [T]
    return np.stack(rows), names


def unembed(model, x) -> np.ndarray:  # [..., d] -> [..., V]
    """The model's final norm, then its unembedding (and Gemma 2's soft-cap): the last steps of
    its forward pass."""
    c, p = model.config, model.params
    normed = NORMS[c.norm](x, **p["ln_f"], eps=c.norm_eps)
    # one [rows, d] x [d, V] product: a stacked [N + 1, T', d] operand would be N + 1 separate
    # products, each reading the whole unembedding (113 MB for SmolLM2)
    flat = unembed_logits(normed.reshape(-1, normed.shape[-1]), p["unembed"], c.final_softcap)
    return flat.reshape(*normed.shape[:-1], flat.shape[-1])


def logit_lens(model, cache: dict, positions=None) -> np.ndarray:  # -> [N + 1, T', V]
    """Logits read out of the residual stream before block 0 and after every block.

    positions: the token positions to read (default all T); [k] is the model cut after k blocks.
    """
    stream = residual_stream(cache, model.config.n_layers)              # [N + 1, T, d]
    if positions is not None:
        stream = stream[:, positions]                                   # [N + 1, T', d]
    return unembed(model, stream)                                       # [N + 1, T', V]
