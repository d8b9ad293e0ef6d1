"""How a transformer knows where a token is: sinusoidal encodings, RoPE, and what order does.

RoPE's math is the engine's own (`pipeline.model.rope`, `rope_cos_sin`, the model's
`inv_freq`): this module only places real vectors at chosen positions and compares.
"""
from collections import Counter

import numpy as np

from pipeline.model import rope, rope_cos_sin, softcap


def sinusoidal_encoding(n_positions, d_model, base=10000.0):  # -> [n_positions, d_model]
    """Vaswani et al. (2017), section 3.5: PE[pos, 2i] = sin(pos / base^(2i/d)),
    PE[pos, 2i+1] = cos(pos / base^(2i/d)). Pair i turns once every 2 pi base^(2i/d) positions."""
    pos = np.arange(n_positions, dtype=np.float32)[:, None]                 # [P, 1]
    rates = np.float32(base) ** (-np.arange(0, d_model, 2, dtype=np.float32) / d_model)
    angles = pos * rates[None, :]                                           # [P, d/2]
    pe = np.zeros((n_positions, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)[:, :d_model // 2]
    return pe


def rope_angles(positions, inv_freq):  # [T] -> [T, hd/2]: radians each pair is turned by
    """The rotation RoPE applies at each position to each dimension pair, read back from the
    engine's own cos and sin (so it is the angle the engine uses, wrapped to (-pi, pi])."""
    cos, sin = rope_cos_sin(np.asarray(positions), inv_freq)               # [T, hd] each
    half = len(inv_freq)
    return np.arctan2(sin[:, :half], cos[:, :half])


def _cos_sin(positions, inv_freq, mscale):
    cos, sin = rope_cos_sin(np.asarray(positions), inv_freq)
    if mscale != 1.0:                     # LongRoPE's attention factor, as pipeline.model
        cos, sin = cos * np.float32(mscale), sin * np.float32(mscale)
    return cos, sin


def rope_at(x, position, inv_freq, mscale=1.0):  # [hd] -> [hd]: x rotated as if at `position`
    """mscale: the config's rope_attn_factor (LongRoPE), which lengthens the rotated vector."""
    cos, sin = _cos_sin([position], inv_freq, mscale)
    return rope(np.asarray(x, dtype=np.float32)[None, None, :], cos, sin)[0, 0]


def rope_relative_scores(q, k, inv_freq, pairs, mscale=1.0, scale=None, cap=0.0):
    """The attention score after RoPE, with q placed at position m and k at n, for each (m, n)
    in `pairs`: q.k times `scale` (default 1 / sqrt(hd); the config's score_scale()), soft-capped
    at `cap` (Gemma 2), RoPE's cos and sin times `mscale` (LongRoPE). RoPE turns q by m * theta and
    k by n * theta, so the score depends on m - n only. q, k: [hd] (before rotation) ->
    [len(pairs)] scores."""
    hd = len(q)
    m = np.array([p[0] for p in pairs])
    n = np.array([p[1] for p in pairs])
    q_rot = rope(np.broadcast_to(q, (len(pairs), 1, hd)), *_cos_sin(m, inv_freq, mscale))[:, 0]
    k_rot = rope(np.broadcast_to(k, (len(pairs), 1, hd)), *_cos_sin(n, inv_freq, mscale))[:, 0]
    return softcap((q_rot * k_rot).sum(-1) * (scale or hd ** -0.5), cap)


# --- word order ---------------------------------------------------------------------------

def same_multiset(a, b) -> bool:
    return Counter(a) == Counter(b)


def reordered_positions(a, b) -> list:
    """Positions t where both sequences hold the same token after the same BAG of earlier
    tokens in a different order: there, order is the only difference between them."""
    return [t for t in range(min(len(a), len(b)))
            if a[t] == b[t] and a[:t] != b[:t] and same_multiset(a[:t], b[:t])]


def residual_stream(cache, n_layers):
    """[(name, [T, d])]: the residual entering block 0 (embeddings, plus the position table
    in a learned-position model), then after each block."""
    return [("embeddings", cache["blocks.0.hook_resid_pre"])] + [
        (f"after block {i}", cache[f"blocks.{i}.hook_resid_post"]) for i in range(n_layers)]


def word_order_differences(model, a, b, use_positions=True):
    """Run two orders of the same tokens through the engine and compare the residual stream at
    `reordered_positions(a, b)`, layer by layer.

    Returns (positions, rows, logits_a [V], logits_b [V]) where rows are
    [(layer name, max |resid_a - resid_b| over those positions, largest |resid| there)] and the
    logits are each order's next-token scores at its last position.
    """
    positions = reordered_positions(a, b)
    logits_a, cache_a = model.run_with_cache(list(a), use_positions=use_positions)
    logits_b, cache_b = model.run_with_cache(list(b), use_positions=use_positions)
    n = model.config.n_layers
    rows = []
    for (name, ra), (_, rb) in zip(residual_stream(cache_a, n), residual_stream(cache_b, n),
                                   strict=True):
        if positions:
            diff = float(np.abs(ra[positions] - rb[positions]).max())
            scale = float(np.abs(ra[positions]).max())
        else:
            diff = scale = float("nan")
        rows.append((name, diff, scale))
    return positions, rows, logits_a[-1], logits_b[-1]
