"""Tiled attention with an online softmax (pipeline/tiling.py): equal to the engine's attention,
and its counted traffic equal to the formulas."""
import math

import numpy as np
import pytest

from pipeline.tiling import (
    fast_memory_elements,
    plain_attention,
    plain_traffic,
    tiled_attention,
    tiled_traffic,
    tiles_computed,
)


def qkv(T, hd, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(scale * rng.standard_normal((T, hd))).astype(np.float32) for _ in range(3)]


def reference(q, k, v, causal=True):
    """Attention written out in float64, independently of the engine."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s[np.triu_indices(len(q), 1)] = -np.inf
    p = np.exp(s - s.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)) @ v


@pytest.mark.parametrize("T,hd,bq,bk", [(1, 4, 1, 1), (7, 8, 2, 3), (30, 16, 8, 8),
                                         (33, 16, 5, 11), (40, 32, 64, 64), (17, 8, 1, 17)])
def test_tiled_equals_plain_and_a_float64_reference(T, hd, bq, bk):
    q, k, v = qkv(T, hd, seed=T)
    out, _, _ = tiled_attention(q, k, v, bq, bk)
    np.testing.assert_allclose(out, plain_attention(q, k, v), atol=2e-6)
    np.testing.assert_allclose(out, reference(q, k, v), atol=2e-6)
    full, _, _ = tiled_attention(q, k, v, bq, bk, causal=False)
    np.testing.assert_allclose(full, reference(q, k, v, causal=False), atol=2e-6)


def test_large_scores_do_not_overflow():
    """The running maximum keeps every exponent <= 0, as the plain softmax's max-shift does."""
    q, k, v = qkv(24, 8, seed=3, scale=30.0)
    out, _, _ = tiled_attention(q, k, v, 4, 4)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, reference(q, k, v), atol=1e-4)


def test_tiled_equals_the_engines_heads_on_the_default_model(model):
    """On real rotated queries and keys (grouped-query: query head h reads kv head h // 4)."""
    ids = model.tokenizer.encode("It is a truth universally acknowledged, that a single man")
    _, cache = model.run_with_cache(ids)
    group = model.config.n_heads // model.config.n_kv_heads
    for layer in range(model.config.n_layers):
        for head in range(model.config.n_heads):
            q = cache[f"blocks.{layer}.attn.hook_rot_q"][:, head]
            k = cache[f"blocks.{layer}.attn.hook_rot_k"][:, head // group]
            v = cache[f"blocks.{layer}.attn.hook_v"][:, head // group]
            out, _, _ = tiled_attention(q, k, v, 3, 5)
            np.testing.assert_allclose(out, cache[f"blocks.{layer}.attn.hook_z"][:, head],
                                       atol=1e-5)


def test_the_online_softmax_ends_at_the_rows_max_and_sum():
    q, k, v = qkv(21, 8, seed=5)
    row = 19
    _, _, steps = tiled_attention(q, k, v, 4, 3, watch_row=row)
    s = (q[row].astype(np.float64) @ k[:row + 1].T.astype(np.float64)) / math.sqrt(8)
    assert [st.key_tile for st in steps] == list(range(row // 3 + 1))
    assert steps[-1].m == pytest.approx(s.max(), abs=1e-5)
    assert steps[-1].l == pytest.approx(np.exp(s - s.max()).sum(), rel=1e-5)
    assert steps[0].rescale == 0.0                        # nothing was summed before
    assert all(0 < st.rescale <= 1 for st in steps[1:])
    assert all(a.m <= b.m for a, b in zip(steps, steps[1:], strict=False))


@pytest.mark.parametrize("T,bq,bk", [(1, 1, 1), (10, 3, 4), (26, 8, 8), (31, 1, 7), (64, 16, 4),
                                      (50, 64, 64)])
def test_counted_traffic_equals_the_formula(T, bq, bk):
    hd = 8
    _, counted, _ = tiled_attention(*qkv(T, hd), bq, bk)
    formula = tiled_traffic(T, hd, bq, bk)
    assert counted.read == formula.read and counted.written == formula.written


def test_traffic_by_hand():
    # T = 4, hd = 2, 2 x 2 tiles: query tile 0 needs key tile 0, query tile 1 needs both.
    t = tiled_traffic(4, 2, 2, 2)
    assert t.read == {"Q": 8, "K": 2 * 2 + 4 * 2, "V": 2 * 2 + 4 * 2}
    assert t.written == {"O": 8}
    assert tiles_computed(4, 2, 2) == 3
    assert tiles_computed(4, 2, 2, causal=False) == 4
    p = plain_traffic(4, 2)
    assert p.total == 4 * 4 * 2 + 4 * 4 * 4
    assert fast_memory_elements(2, 3, 4) == 2 * 4 + 2 * 3 * 4 + 2 * 3 + 2 * 4 + 2 * 2


def test_one_tile_reads_everything_once_and_long_sequences_save():
    T, hd = 40, 16
    assert tiled_traffic(T, hd, T, T).total == 4 * T * hd
    # At T >> hd the plain version's T^2 terms dominate; 128-wide tiles move far less.
    n = 8192
    assert plain_traffic(n, 128).total > 3 * tiled_traffic(n, 128, 128, 128).total
    # Larger tiles never move more (for tiles that divide T).
    totals = [tiled_traffic(256, 32, b, b).total for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    assert totals == sorted(totals, reverse=True)


def test_bad_tiles_are_refused():
    q, k, v = qkv(4, 2)
    with pytest.raises(ValueError):
        tiled_attention(q, k, v, 0, 2)
    with pytest.raises(ValueError):
        tiled_attention(q, k[:3], v[:3], 2, 2)
