"""The model's own greedy continuation of a prompt, computed once per (model, prompt) and read by
every section that shows one.

Four sections show greedy generation on the prompt: the KV cache section (its cached steps and
the cache's size after each), speculative decoding (the target's rows its greedy verification
reads, and the target alone's text), greedy vs beam search (greedy's line) and the generation
loop (its steps with the greedy chooser). A greedy step depends only on the tokens before it,
so they are one run: `greedy_path(model, ids)` starts it from the prompt's shared run
(web.model_state.forward.prefilled: the prompt is not run again) and `upto(n)` makes it longer
when a reader asks for more, one `Model.decode` step per token in the same KV cache, each step
once. A shorter run is the first steps of a longer one.

The run goes on past the end-of-text token (the KV cache section feeds every greedy token back;
the other readers stop there) and stops only when the context window is full. Its KV cache
starts with room for CAPACITY tokens and doubles when full (KVCache.reserve), so the sizes it
records after each step are the ones the KV cache section shows. What it keeps per step: the
token, the logits it was chosen from (the first KEEP_ROWS steps' rows: speculative decoding
and the KV cache check read them; a longer run keeps each later step's summary only), the
cache's size, and the wall time of the decode step.
"""
import threading
import time

import numpy as np

from pipeline.generation import finish_reason, top_candidates
from pipeline.model import log_softmax, softmax
from web.core.cache import memo, model_key
from web.model_state.forward import prefilled

CAPACITY = 16           # tokens the run's KV cache reserves at first (then it doubles)
KEEP_ROWS = 64          # steps whose whole logits row is kept (readers ask for at most 49)
N_TOP = 5               # candidates kept per step (the generation loop shows them)


class GreedyPath:
    """A prompt's greedy run, as long as asked for. Step k reads the prompt and the first k
    tokens: `tokens[k]` is the argmax of its logits, `rows[k]` those logits (k < KEEP_ROWS),
    `sizes[k]` the KV cache after it (tokens held, nbytes, allocated bytes, capacity),
    `seconds[k]` its model pass and `step_seconds[k]` the pass and the choice of the token (NaN
    for step 0: the prompt's run is shared, not timed here),
    `logprobs[k]` / `probs[k]` the token's log-probability / probability, `tops[k]` the N_TOP
    most probable tokens with their probabilities. Thread-safe: one caller makes it longer."""

    def __init__(self, model, ids: tuple):
        self.model, self.ids = model, tuple(int(t) for t in ids)
        self.kv, logits = prefilled(model, self.ids, CAPACITY)
        self.tokens, self.rows, self.sizes, self.seconds, self.step_seconds = [], [], [], [], []
        self.logprobs, self.probs, self.tops = [], [], []
        self._lock = threading.Lock()
        self._record(logits, int(np.argmax(logits)), float("nan"), float("nan"))

    def _record(self, logits, token: int, seconds: float, step_seconds: float):
        logits = np.asarray(logits, dtype=np.float32)
        kv = self.kv
        probs = softmax(logits)
        self.tokens.append(token)
        if len(self.rows) < KEEP_ROWS:
            self.rows.append(logits)
        self.sizes.append((len(kv), kv.nbytes, kv.allocated_nbytes, kv.k.shape[1]))
        self.seconds.append(seconds)
        self.step_seconds.append(step_seconds)
        self.logprobs.append(float(log_softmax(logits)[token]))
        self.probs.append(float(probs[token]))
        self.tops.append(top_candidates(probs, N_TOP))

    @property
    def room(self) -> int:
        """The most steps the run can make: until the cache fills the context window."""
        return self.model.config.n_ctx - len(self.ids) + 1

    def upto(self, n: int) -> "GreedyPath":
        """The run at least n steps long (or as long as the context window allows)."""
        with self._lock:
            while len(self.tokens) < min(n, self.room):
                began = time.perf_counter()
                logits = self.model.decode(self.tokens[-1], self.kv)
                passed = time.perf_counter()
                token = int(np.argmax(logits))        # pipeline.sampling.greedy
                self._record(logits, token, passed - began, time.perf_counter() - began)
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
        """What pipeline.kvcache.CachedSteps.first gives, for cache_vs_recompute's `steps`:
        (the prompt and the first n_new tokens, the logits of the n_new + 1 steps, each step's
        (tokens read, greedy next token, cache bytes held, bytes reserved, capacity))."""
        if n_new + 1 > KEEP_ROWS:
            raise ValueError(f"the run keeps the rows of its first {KEEP_ROWS} steps")
        self.upto(n_new + 1)
        rows = [(n, self.tokens[k], nbytes, alloc, cap)
                for k, (n, nbytes, alloc, cap) in enumerate(self.sizes[:n_new + 1])]
        return list(self.ids) + self.tokens[:n_new], self.rows[:n_new + 1], rows

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.rows) + self.kv.allocated_nbytes


# A big model's runs are kept for a class's prompts (each student's, from the section that
# first asks for it to the others they open later): SmolLM2's 20-token run is ~5 MB (its rows
# and its cache), and a run evicted is made again, a decode step per token.
_paths = memo("greedy paths", 16, big_size=32, big_bytes=160 << 20,
              weigh=lambda path: path.nbytes)


def greedy_path(model, ids: tuple, n: int = 1) -> GreedyPath:
    """The model's greedy run on these token ids, at least n steps of it: one per (model,
    prompt), made longer when a longer one is asked for."""
    return _paths.get((model_key(model), tuple(int(t) for t in ids)),
                      lambda: GreedyPath(model, ids)).upto(n)

