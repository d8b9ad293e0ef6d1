"""Attention computed tile by tile with an online softmax (the FlashAttention idea), and the
traffic to slow memory that it saves.

An accelerator has a large, slow memory (HBM on a GPU) and a small, fast one next to the
arithmetic units (SRAM: "shared memory", a few hundred KB per streaming multiprocessor). Plain
attention writes the T x T score matrix to slow memory, reads it back for the softmax, writes the
probabilities, and reads them again for the weighted sum of values. FlashAttention (Dao et al.,
2022) never stores that matrix: it loads a tile of queries, streams tiles of keys and values past
it, and keeps for every query row the running maximum `m` and the running sum `l` of
exp(score - m), rescaling its partial output whenever `m` grows. The result is exact, not an
approximation: `tiled_attention` equals `plain_attention` to float rounding.

Traffic is counted in elements moved between slow memory and the fast one, following the
algorithms of the FlashAttention paper (its Algorithm 0 for the plain version); multiply by the
bytes per element (2 for fp16/bf16, 4 for fp32). `plain_traffic` and `tiled_traffic` are the
formulas; `tiled_attention` counts what it really loads and stores, and the tests check that
both agree.
"""
import math
from dataclasses import dataclass, field

import numpy as np

from pipeline.activations import NO_HOOKS
from pipeline.model import attention


@dataclass
class Traffic:
    """Elements moved between slow and fast memory, by tensor."""
    read: dict = field(default_factory=dict)       # name -> elements read
    written: dict = field(default_factory=dict)    # name -> elements written

    def load(self, name, n):
        self.read[name] = self.read.get(name, 0) + int(n)

    def store(self, name, n):
        self.written[name] = self.written.get(name, 0) + int(n)

    @property
    def total(self) -> int:
        return sum(self.read.values()) + sum(self.written.values())


@dataclass(frozen=True)
class RowStep:
    """The online softmax of one query row after one key tile."""
    key_tile: int          # index of the key tile just processed
    keys: tuple            # (first, last) key position of that tile
    m: float               # running maximum of the scores seen so far
    l: float               # running sum of exp(score - m) over the keys seen so far
    rescale: float         # exp(m_old - m_new): how much the earlier partial sums shrank


def plain_attention(q, k, v, causal=True):  # q [T, hd], k v [S, hd] -> [T, hd]
    """One head's attention, as the engine computes it (scores, softmax, weighted values)."""
    if not causal:
        raise ValueError("the engine's attention is causal")
    return attention(q[:, None, :], k[:, None, :], v[:, None, :], NO_HOOKS)[:, 0, :]


def key_tiles_needed(q_start, q_stop, n_keys, block_k, causal):
    """Key tiles the query tile [q_start, q_stop) must see (queries and keys share positions):
    under the causal mask, only the tiles that start at or before its last query."""
    n_tiles = math.ceil(n_keys / block_k)
    return range(n_tiles if not causal else min(n_tiles, (q_stop - 1) // block_k + 1))


def tiled_attention(q, k, v, block_q, block_k, causal=True, watch_row=None):
    """FlashAttention's forward pass for one head, in NumPy.

    q [T, hd], k v [T, hd] -> (out [T, hd], Traffic, [RowStep] of query row `watch_row`).
    """
    T, hd = q.shape
    if k.shape[0] != T:
        raise ValueError("queries and keys must cover the same positions")
    if block_q < 1 or block_k < 1:
        raise ValueError("tile sizes must be at least 1")
    scale = np.float32(hd ** -0.5)
    out = np.empty_like(q)
    traffic, steps = Traffic(), []
    for q0 in range(0, T, block_q):
        q1 = min(q0 + block_q, T)
        q_tile = q[q0:q1]                                    # load Q_i      [Bq, hd]
        traffic.load("Q", q_tile.size)
        m = np.full(q1 - q0, -np.inf, dtype=np.float32)      # running max   [Bq]
        l = np.zeros(q1 - q0, dtype=np.float32)              # running sum   [Bq]
        acc = np.zeros((q1 - q0, hd), dtype=np.float32)      # unnormalised output [Bq, hd]
        for j in key_tiles_needed(q0, q1, T, block_k, causal):
            k0, k1 = j * block_k, min((j + 1) * block_k, T)
            k_tile, v_tile = k[k0:k1], v[k0:k1]              # load K_j, V_j [Bk, hd] each
            traffic.load("K", k_tile.size)
            traffic.load("V", v_tile.size)
            s = q_tile @ k_tile.T * scale                    # [Bq, Bk] scores, in fast memory
            if causal:
                s = np.where(np.arange(k0, k1)[None, :] > np.arange(q0, q1)[:, None],
                             np.float32(-np.inf), s)
            m_new = np.maximum(m, s.max(axis=1))
            rescale = np.exp(m - m_new)                      # shrink what was summed before
            p = np.exp(s - m_new[:, None])                   # [Bq, Bk]
            l = l * rescale + p.sum(axis=1)
            acc = acc * rescale[:, None] + p @ v_tile
            m = m_new
            if watch_row is not None and q0 <= watch_row < q1:
                r = watch_row - q0
                steps.append(RowStep(j, (k0, k1 - 1), float(m[r]), float(l[r]),
                                     float(rescale[r])))
        out[q0:q1] = acc / l[:, None]                        # store O_i     [Bq, hd]
        traffic.store("O", out[q0:q1].size)
    return out, traffic, steps


def plain_traffic(T, hd) -> Traffic:
    """Standard attention (FlashAttention paper, Algorithm 0): S = QK^T written to slow memory,
    read back for P = softmax(S), P written, read again for O = PV. 4 T hd + 4 T^2 elements."""
    t = Traffic()
    t.load("Q", T * hd)
    t.load("K", T * hd)
    t.store("S", T * T)
    t.load("S", T * T)
    t.store("P", T * T)
    t.load("P", T * T)
    t.load("V", T * hd)
    t.store("O", T * hd)
    return t


def tiled_traffic(T, hd, block_q, block_k, causal=True) -> Traffic:
    """What tiled_attention moves, without running it: Q read once, K and V once per query
    tile that needs them, O written once. Nothing of size T x T."""
    t = Traffic()
    for q0 in range(0, T, block_q):
        q1 = min(q0 + block_q, T)
        tiles = key_tiles_needed(q0, q1, T, block_k, causal)
        key_rows = min((tiles[-1] + 1) * block_k, T)     # the needed tiles are 0 .. last
        t.load("Q", (q1 - q0) * hd)
        t.load("K", key_rows * hd)
        t.load("V", key_rows * hd)
        t.store("O", (q1 - q0) * hd)
    return t


def tiles_computed(T, block_q, block_k, causal=True) -> int:
    """Tiles of the T x T score matrix that the run computes (causal: the others lie wholly
    above the diagonal and are skipped)."""
    return sum(len(key_tiles_needed(q0, min(q0 + block_q, T), T, block_k, causal))
               for q0 in range(0, T, block_q))


def fast_memory_elements(block_q, block_k, hd) -> int:
    """Elements one query tile holds in fast memory at once: Q_i, K_j, V_j, the score tile,
    the output accumulator and the running max and sum."""
    return block_q * hd + 2 * block_k * hd + block_q * block_k + block_q * hd + 2 * block_q
