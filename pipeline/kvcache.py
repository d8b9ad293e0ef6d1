"""The KV cache (`KVCache`), what it saves (measured on the running model) and what it costs.

Decoding token t+1 needs the keys and values of tokens 1..t in every layer. Without a cache the
model recomputes them all at every step (a full forward over the growing sequence); with a
cache (`KVCache`, filled by pipeline.model's attention) it computes only the new token's and
reads the rest back.
`cache_vs_recompute` runs both on the same tokens, step by step, timing each and comparing the
logits. `kv_cache_bytes` is the size formula; it must give the cache's own `nbytes`.
"""
import math
import time
from dataclasses import dataclass

import numpy as np

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


@dataclass(frozen=True)
class Step:
    """One step of generation, run both ways on the same tokens."""
    n_tokens: int              # sequence length this step reads (prompt + tokens so far)
    new_token: int             # the token it feeds in (the prompt's last for step 0)
    next_token: int            # greedy choice from the cached logits (fed in at the next step)
    cached_ms: float           # prefill (step 0) or one decode step with the cache
    uncached_ms: float         # a full forward over all n_tokens tokens
    max_abs_diff: float        # max |cached logits - uncached logits| for the next token
    same_argmax: bool          # both pick the same next token
    nbytes: int                # KVCache.nbytes after the step: the tokens held
    allocated_nbytes: int      # KVCache.allocated_nbytes: the buffers reserved
    capacity: int              # tokens the buffers have room for


@dataclass(frozen=True)
class CacheRun:
    prompt_ids: tuple
    steps: tuple               # Step 0 is the prompt (prefill); then one per generated token
    measured_at: float         # time.time() when it was measured
    repeats: int = 1           # each time is the fastest of this many runs

    @property
    def cached_total_ms(self) -> float:
        return sum(s.cached_ms for s in self.steps)

    @property
    def uncached_total_ms(self) -> float:
        return sum(s.uncached_ms for s in self.steps)

    @property
    def max_abs_diff(self) -> float:
        return max(s.max_abs_diff for s in self.steps)

    @property
    def generated(self) -> list:
        return [s.next_token for s in self.steps]


def _best_of(repeats, fn, *args):
    """(fn's result, its fastest time in ms over `repeats` calls): the least disturbed run."""
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(*args)
        best = min(best, (time.perf_counter() - t0) * 1000.0)
    return out, best


def _cached_step(model, kv, ids, first):
    """Prefill the prompt (first step) or decode the newest token, appending to the cache."""
    return model.prefill(ids, kv) if first else model.decode(ids[-1], kv)


def cache_vs_recompute(model, prompt_ids, n_new: int, capacity: int = 64,
                       repeats: int = 2) -> CacheRun:
    """Greedy generation of n_new tokens after the prompt, each step done twice: with the KV
    cache (prefill, then decode) and without (a full forward of the whole sequence so far).

    The two are interleaved step by step so both see the same machine load, and each is timed
    `repeats` times, keeping the fastest (a cached step is undone with KVCache.truncate before
    it is repeated). The tokens fed in are the cached path's greedy choices (the uncached path
    agrees: `same_argmax`). The cache starts with room for `capacity` tokens and doubles when
    full (KVCache.reserve)."""
    ids = [int(t) for t in prompt_ids]
    n_new = min(n_new, model.config.n_ctx - len(ids))
    kv = model.new_kv_cache(capacity)
    steps = []
    for i in range(n_new + 1):
        full, uncached_ms = _best_of(repeats, model.forward, ids)
        held = len(kv)

        def cached_step():
            kv.truncate(held)
            return _cached_step(model, kv, ids, i == 0)

        cached, cached_ms = _best_of(repeats, cached_step)
        cached, full = cached.reshape(-1, full.shape[-1])[-1], full[-1]   # [V], [V]
        nxt = int(np.argmax(cached))
        steps.append(Step(
            n_tokens=len(ids), new_token=ids[-1], next_token=nxt, cached_ms=cached_ms,
            uncached_ms=uncached_ms,
            max_abs_diff=float(np.max(np.abs(cached - full))),
            same_argmax=nxt == int(np.argmax(full)), nbytes=kv.nbytes,
            allocated_nbytes=kv.allocated_nbytes, capacity=kv.k.shape[1]))
        if i < n_new:
            ids.append(nxt)
    return CacheRun(tuple(int(t) for t in prompt_ids), tuple(steps), time.time(), repeats)


def context_lengths(max_tokens: int = 131072, per_octave: int = 4) -> list:
    """Token counts from 1 to max_tokens spaced evenly on a log axis (for curves)."""
    n = int(round(math.log2(max_tokens) * per_octave))
    return sorted({max(1, int(round(2 ** (k / per_octave)))) for k in range(n + 1)}
                  | {max_tokens})
