"""The KV cache (`KVCache`), how attention reads it (`NoCache`, `LayerKV`, `BatchKV`), what it
saves (measured on the running model) and what it costs.

Decoding token t+1 needs the keys and values of tokens 1..t in every layer. Without a cache the
model recomputes them all at every step (a full forward over the growing sequence); with a
cache (`KVCache`, filled by pipeline.model's attention) it computes only the new token's and
reads the rest back.
Greedy generation with the cache, and its check against recomputing without it, are
pipeline.cached_generation's. `kv_cache_bytes` is the size formula; it must give the cache's own
`nbytes`.
"""
import math

import numpy as np

from pipeline.activations import NO_HOOKS

# bytes per stored number: the engine's float32, the usual fp16/bf16, and 8-bit caches
BYTES_PER_VALUE = {"fp32": 4, "fp16": 2, "int8": 1}


class KVCache:
    """Keys and values of every token seen so far, for each layer: what decoding attends over.

    Arrays k and v are [n_layers, capacity, KVH, hd], preallocated and doubled (up to the
    context window) when full, so a decode step writes one row instead of copying the cache.
    `nbytes` counts the tokens held: 2 (k and v) x n_layers x KVH x hd x 4 bytes x len(self);
    `allocated_nbytes` counts the buffers.
    """

    def __init__(self, n_layers, n_kv_heads, head_dim, max_tokens, capacity=64):
        capacity = min(capacity, max_tokens)
        self.k = np.zeros((n_layers, capacity, n_kv_heads, head_dim), dtype=np.float32)
        self.v = np.zeros_like(self.k)
        self.max_tokens = max_tokens
        self.n_tokens = 0

    def __len__(self):
        return self.n_tokens

    @property
    def nbytes(self):
        return self.k[:, :self.n_tokens].nbytes + self.v[:, :self.n_tokens].nbytes

    @property
    def allocated_nbytes(self):
        return self.k.nbytes + self.v.nbytes

    def reserve(self, n_tokens):
        """Make room for n_tokens in all (doubling the buffers, at most to the context window)."""
        if n_tokens > self.max_tokens:
            raise ValueError(f"{n_tokens} tokens exceed the context window of {self.max_tokens}")
        capacity = self.k.shape[1]
        if n_tokens <= capacity:
            return
        while capacity < n_tokens:
            capacity = min(2 * capacity, self.max_tokens)
        for name in ("k", "v"):
            old = getattr(self, name)
            new = np.zeros((old.shape[0], capacity) + old.shape[2:], dtype=np.float32)
            new[:, :self.n_tokens] = old[:, :self.n_tokens]
            setattr(self, name, new)

    def truncate(self, n_tokens):
        """Forget everything after the first n_tokens (e.g. rejected speculative tokens)."""
        self.n_tokens = min(self.n_tokens, n_tokens)

    def copy(self):
        other = KVCache(self.k.shape[0], self.k.shape[2], self.k.shape[3], self.max_tokens,
                        capacity=max(self.n_tokens, 1))
        other.reserve(self.n_tokens)
        other.k[:, :self.n_tokens] = self.k[:, :self.n_tokens]
        other.v[:, :self.n_tokens] = self.v[:, :self.n_tokens]
        other.n_tokens = self.n_tokens
        return other


# --- what attention attends over: the tokens of this pass, or a KV cache too -----------------
# pipeline.model's attention_layer calls `kv.attend(attention, q, k, v, hook, scale, cap)` with
# its own `attention` function: this module never imports the model.

class NoCache:
    """Attention over the T tokens of this pass only (a full forward)."""

    def attend(self, attention, q, k, v, hook, scale=0.0, cap=0.0):
        return attention(q, k, v, hook, scale, cap)


class LayerKV:
    """One layer of a KVCache: appends this pass's keys and values, attends over all of them."""

    def __init__(self, cache, layer):
        self.cache, self.layer = cache, layer

    def attend(self, attention, q, k, v, hook, scale=0.0, cap=0.0):
        c, start, end = self.cache, self.cache.n_tokens, self.cache.n_tokens + k.shape[0]
        c.k[self.layer, start:end] = k
        c.v[self.layer, start:end] = v
        return attention(q, c.k[self.layer, :end], c.v[self.layer, :end], hook,  # S = end
                         scale, cap)


class BatchKV:
    """One layer of several sequences' caches: row b of the batch attends over cache b only."""

    def __init__(self, layers):
        self.layers = layers

    def attend(self, attention, q, k, v, hook, scale=0.0, cap=0.0):
        # q [B, H, hd], k v [B, KVH, hd]
        return np.concatenate([layer.attend(attention, q[b:b + 1], k[b:b + 1], v[b:b + 1],
                                            NO_HOOKS, scale, cap)
                               for b, layer in enumerate(self.layers)])


def kv_bytes_per_token(config, bytes_per_value: int) -> int:
    """2 (a key and a value) x layers x kv-heads x head_dim x bytes: one token's cache entry.

    `config` is anything with n_layers, n_kv_heads and head_dim (a ModelConfig, or a
    pipeline.published.AttentionShape)."""
    return 2 * config.n_layers * config.n_kv_heads * config.head_dim * bytes_per_value


def kv_cache_bytes(config, n_tokens: int, bytes_per_value: int = 4) -> int:
    """Bytes of the KV cache holding n_tokens: kv_bytes_per_token x n_tokens (one sequence).

    An 8-bit cache also stores scale factors (e.g. one per head per token); they are not
    counted here."""
    return kv_bytes_per_token(config, bytes_per_value) * n_tokens


def attention_kind(config) -> str:
    """Multi-head (every query head has its own k/v), multi-query (one k/v head for all) or
    grouped-query (each k/v head shared by a group of query heads)."""
    if config.n_kv_heads == config.n_heads:
        return "multi-head"
    if config.n_kv_heads == 1:
        return "multi-query"
    return "grouped-query"


def context_lengths(max_tokens: int = 131072, per_octave: int = 4) -> list:
    """Token counts from 1 to max_tokens spaced evenly on a log axis (for curves)."""
    n = int(round(math.log2(max_tokens) * per_octave))
    return sorted({max(1, int(round(2 ** (k / per_octave)))) for k in range(n + 1)}
                  | {max_tokens})
