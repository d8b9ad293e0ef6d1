"""Greedy generation with the KV cache (`CachedSteps`: a prompt's greedy run, kept so that it can
go on) and its check against recomputing without the cache (`cache_vs_recompute`).

Decoding with the cache (pipeline.kvcache.KVCache) computes only the new token's keys and values
and reads the others back; without it every step is a forward pass over the whole sequence. The
check compares every cached step's logits with that forward pass's row: they agree to float32
rounding, and greedy decoding picks the same tokens.
"""
import threading
import time
from dataclasses import dataclass

import numpy as np

from pipeline.generation import finish_reason, top_candidates
from pipeline.model import log_softmax, softmax


@dataclass(frozen=True)
class CachedStep:
    """One step of greedy generation with the cache: what it read, chose and left in the cache."""
    n_tokens: int              # sequence length this step reads (prompt + tokens so far)
    next_token: int            # greedy choice from the cached logits (fed in at the next step)
    nbytes: int                # KVCache.nbytes after the step: the tokens held
    allocated_nbytes: int      # KVCache.allocated_nbytes: the buffers reserved
    capacity: int              # tokens the buffers have room for


@dataclass(frozen=True)
class CheckStep(CachedStep):
    """A step checked against recomputing without the cache."""
    max_abs_diff: float        # max |cached logits - recomputed logits| for the next token
    same_argmax: bool          # both pick the same next token


@dataclass(frozen=True)
class Check:
    prompt_ids: tuple
    steps: tuple               # step 0 reads the prompt (prefill); then one per generated token

    @property
    def max_abs_diff(self) -> float:
        return max(s.max_abs_diff for s in self.steps)

    @property
    def generated(self) -> list:
        return [s.next_token for s in self.steps]


def cache_vs_recompute(model, prompt_ids, n_new: int, capacity: int = 64,
                       steps: "CachedSteps" = None) -> Check:
    """Greedy generation of n_new tokens after the prompt with the KV cache (prefill, then one
    decode step per token; the cache starts with room for `capacity` tokens and doubles when
    full, KVCache.reserve), every step's logits compared with recomputing without the cache.

    Recomputing is one forward pass over the whole final sequence: the model is causal, so its
    row t is what a forward pass over the first t + 1 tokens gives. Nothing here is timed (a
    step's time both ways is a prefill and a decode of that length: web.model_state.measured times
    them).
    steps: the cached steps kept for this prompt and capacity (CachedSteps), made longer if
    needed, instead of running them here: a step does not depend on how many follow, so the
    check is the same."""
    n_new = min(n_new, model.config.n_ctx - len(prompt_ids))
    steps = steps if steps is not None else CachedSteps(model, prompt_ids, capacity)
    seq, cached, rows = steps.first(n_new)
    full = model.forward(seq)                                                   # [T, V]
    out = tuple(CheckStep(**vars(r), max_abs_diff=float(np.max(np.abs(c - full[r.n_tokens - 1]))),
                          same_argmax=r.next_token == int(np.argmax(full[r.n_tokens - 1])))
                for c, r in zip(cached, rows, strict=True))
    return Check(tuple(int(t) for t in prompt_ids), out)


KEEP_ROWS = 64          # steps whose whole logits row CachedSteps keeps (readers ask for 49)
N_TOP = 5               # candidates CachedSteps keeps per step (the generation loop shows them)


class CachedSteps:
    """Greedy generation with the KV cache, kept so that it can go on: a prompt's greedy run, as
    long as asked for. Step k reads the prompt and the first k tokens: `tokens[k]` is the argmax
    of its logits, `rows[k]` those logits (k < KEEP_ROWS; a longer run keeps each later step's
    summary only), `sizes[k]` the KV cache after it (tokens held, nbytes, allocated bytes,
    capacity), `seconds[k]` its model pass and `step_seconds[k]` the pass and the choice of the
    token (NaN for step 0, the prompt's pass, when it was run before: `start`),
    `logprobs[k]` / `probs[k]` the token's log-probability / probability, `tops[k]` the N_TOP
    most probable tokens with their probabilities.

    `upto(n)` makes it longer (one `Model.decode` step per token, in the same cache, each step
    once); a shorter run is the first steps of a longer one. The run goes on past the
    end-of-text token and stops only when the context window is full. The cache starts with
    room for `capacity` tokens and doubles when full (KVCache.reserve). start: (KV cache, logits
    [V]) of the prompt already run (Model.kv_from_recording); else the prompt is prefilled here.
    Thread-safe: one caller at a time makes it longer."""

    def __init__(self, model, prompt_ids, capacity: int = 64, start=None):
        self.model, self.ids = model, tuple(int(t) for t in prompt_ids)
        self.tokens, self.rows, self.sizes, self.seconds, self.step_seconds = [], [], [], [], []
        self.logprobs, self.probs, self.tops = [], [], []
        self._lock = threading.Lock()
        began = time.perf_counter()
        if start is None:
            self.kv = model.new_kv_cache(capacity)
            logits = model.prefill(list(self.ids), self.kv)[-1]
            passed = time.perf_counter()
        else:
            self.kv, logits = start
            logits = np.asarray(logits)
            if logits.ndim != 1:
                raise ValueError(f"start's logits are the next token's, [V]: {logits.shape}")
            began = passed = float("nan")
        self._record(logits, began, passed)

    def _record(self, logits, began: float, passed: float):
        logits = np.asarray(logits, dtype=np.float32)
        token = int(np.argmax(logits))                      # pipeline.sampling.greedy
        chosen = time.perf_counter()
        kv = self.kv
        probs = softmax(logits)
        self.tokens.append(token)
        if len(self.rows) < KEEP_ROWS:
            self.rows.append(logits)
        self.sizes.append((len(kv), kv.nbytes, kv.allocated_nbytes, kv.k.shape[1]))
        self.seconds.append(passed - began)
        self.step_seconds.append(chosen - began)
        self.logprobs.append(float(log_softmax(logits)[token]))
        self.probs.append(float(probs[token]))
        self.tops.append(top_candidates(probs, N_TOP))

    @property
    def room(self) -> int:
        """The most steps the run can make: until the cache fills the context window."""
        return self.model.config.n_ctx - len(self.ids) + 1

    def upto(self, n: int) -> "CachedSteps":
        """The run at least n steps long (or as long as the context window allows)."""
        with self._lock:
            while len(self.tokens) < min(n, self.room):
                began = time.perf_counter()
                logits = self.model.decode(self.tokens[-1], self.kv)
                self._record(logits, began, time.perf_counter())
        return self

    def ended(self, n: int, eos=None) -> int:
        """How many of the first n tokens a loop that stops at `eos` (and at a full context
        window, as pipeline.generation.finish_reason) makes: up to and with the first eos."""
        for k in range(min(n, self.room)):
            t = self.upto(k + 1).tokens[k]        # a step at a time: none after the end
            if finish_reason(t, len(self.ids) + k + 1, k + 1, n, self.model.config.n_ctx,
                             eos) in ("eos", "context"):
                return k + 1
        return min(n, len(self.tokens))

    def first(self, n_new: int) -> tuple:
        """(the prompt and the first n_new tokens, the logits of the n_new + 1 steps, each
        step's CachedStep), for cache_vs_recompute."""
        if n_new + 1 > KEEP_ROWS:
            raise ValueError(f"the run keeps the rows of its first {KEEP_ROWS} steps")
        if n_new + 1 > self.room:
            raise ValueError(f"{len(self.ids) + n_new} tokens exceed the context window of "
                             f"{self.model.config.n_ctx}")
        self.upto(n_new + 1)
        steps = [CachedStep(n, self.tokens[k], nbytes, alloc, cap)
                 for k, (n, nbytes, alloc, cap) in enumerate(self.sizes[:n_new + 1])]
        return list(self.ids) + self.tokens[:n_new], self.rows[:n_new + 1], steps

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.rows) + self.kv.allocated_nbytes
