"""One measured cost table per model: what a prefill, a decode step, a verification pass and a
batched step cost on this machine. Every time the page quotes is read from it.

    table = measure_costs(model, ids)            # ids: any tokens, repeated to the lengths timed
    table.decode_at(26)      # Estimate: one decode step with 26 tokens in the cache
    table.prefill_at(26)     # a prefill of 26 tokens into an empty cache
    table.verify[3]          # one pass over 3 new tokens with PASS_CONTEXT tokens in the cache
    table.batch[4]           # one decode_batch step of 4 sequences, PASS_CONTEXT tokens each

Each entry is REPEATS timings; they are interleaved (every repeat goes once through every
entry, in turn), so a busy moment of the machine disturbs all entries alike rather than one.
An entry is quoted as the median of its timings with their range (min-max).

One decode step has one value per context length: the verification pass over 1 token and the
batch of 1 sequence ARE the decode step at PASS_CONTEXT (the same timings, not a second
measurement). A length between two measured ones is interpolated linearly between them (value
and range), and the quote says so; outside the measured lengths, the nearest one is quoted.
"""
import time
from dataclasses import dataclass, field

LENGTHS = (8, 16, 32, 64, 128, 248)   # prompt lengths (prefill) and cache lengths (decode step)
PASS_CONTEXT = 32                      # tokens in each cache for the verify and batch entries
VERIFY_SIZES = (1, 2, 3, 4, 5, 6)      # tokens per verification pass (γ + 1 for γ = 0..5)
BATCH_SIZES = (1, 2, 3, 4, 5, 6, 7, 8)  # sequences per batched decode step
REPEATS = 5


@dataclass(frozen=True)
class Timing:
    """One entry's timings (seconds), in the order taken."""
    samples: tuple

    @property
    def median(self) -> float:
        """np.median's value (the middle sample, or the mean of the two middle ones), worked
        out in Python: a page quotes the table's medians by the hundred, and np.median costs
        ~0.1 ms a call on five numbers."""
        s = sorted(self.samples)
        m = len(s) // 2
        return float(s[m]) if len(s) % 2 else float((s[m - 1] + s[m]) / 2)

    @property
    def lo(self) -> float:
        return float(min(self.samples))

    @property
    def hi(self) -> float:
        return float(max(self.samples))

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def shown(self) -> str:
        """The median as the page prints it (fmt_ms, ms without the unit)."""
        return fmt_ms(1000.0 * self.median)


@dataclass(frozen=True)
class Estimate:
    """A value read from the table: measured at `at` tokens, or interpolated between the two
    measured lengths `between`, or the nearest measured length `nearest` (outside the grid)."""
    what: str                # "one decode step", "a prefill"
    at: int                  # tokens (in the cache for a step, in the prompt for a prefill)
    seconds: float           # the median (interpolated)
    lo: float                # the range's ends (interpolated alike)
    hi: float
    repeats: int
    between: tuple = None    # (shorter, longer) measured lengths, when interpolated
    nearest: int = None      # the measured length quoted, when `at` is outside them

    @property
    def ms(self) -> float:
        return 1000.0 * self.seconds

    @property
    def shown(self) -> str:
        """The median as the page prints it (fmt_ms), without the unit."""
        return fmt_ms(self.ms)

    def how(self) -> str:
        """'median of 5, range 1.8-2.1 ms; interpolated from 16 and 32 tokens'"""
        text = (f"median of {self.repeats}, range {fmt_ms(1000 * self.lo)}–"
                f"{fmt_ms(1000 * self.hi)} ms")
        if self.between:
            text += f"; interpolated from {self.between[0]} and {self.between[1]} tokens"
        elif self.nearest is not None:
            text += (f"; measured at {self.nearest} tokens, the "
                     f"{'shortest' if self.nearest > self.at else 'longest'} length timed")
        return text

    def phrase(self) -> str:
        """'one decode step at 26 tokens: 1.9 ms (median of 5, range 1.8-2.1 ms; interpolated
        from 16 and 32 tokens)'"""
        return f"{self.what} at {self.at} tokens: {self.shown} ms ({self.how()})"


def fmt_ms(ms: float) -> str:
    """Milliseconds as the page prints a measured time: 3 significant figures, at most 2
    decimals (0.45, 1.85, 46.6, 154)."""
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"


@dataclass(frozen=True)
class CostTable:
    prefill: dict            # n -> Timing: a prefill of n tokens into an empty cache
    decode: dict             # n -> Timing: one decode step with n tokens in the cache
    verify: dict             # k -> Timing: one pass over k tokens, PASS_CONTEXT in the cache
    batch: dict              # b -> Timing: one decode_batch step of b sequences
    pass_context: int
    repeats: int
    measured_at: float       # time.time() when the last timing was taken
    draft_decode: Timing = None   # the draft model's decode step at pass_context, if any
    seconds: float = 0.0     # how long the whole measurement took
    extra: dict = field(default_factory=dict)

    # --- reading it ---

    def decode_at(self, n: int) -> Estimate:
        return self._at(self.decode, n, "one decode step")

    def prefill_at(self, n: int) -> Estimate:
        return self._at(self.prefill, n, "a prefill")

    def _at(self, entries: dict, n: int, what: str) -> Estimate:
        xs = sorted(entries)
        if n in entries:
            t = entries[n]
            return Estimate(what, n, t.median, t.lo, t.hi, t.n)
        if n < xs[0] or n > xs[-1]:
            m = xs[0] if n < xs[0] else xs[-1]
            t = entries[m]
            return Estimate(what, n, t.median, t.lo, t.hi, t.n, nearest=m)
        a = max(x for x in xs if x < n)
        b = min(x for x in xs if x > n)
        w = (n - a) / (b - a)
        ta, tb = entries[a], entries[b]

        def mix(u, v):
            return (1 - w) * u + w * v
        return Estimate(what, n, mix(ta.median, tb.median), mix(ta.lo, tb.lo),
                        mix(ta.hi, tb.hi), min(ta.n, tb.n), between=(a, b))

    @property
    def step(self) -> float:
        """One decode step at pass_context (s): the unit passes and batches are priced in."""
        return self.decode[self.pass_context].median

    def verify_steps(self, k: int) -> float:
        """A pass over k tokens, in decode steps (both at pass_context)."""
        return self.verify[k].median / self.step

    def batch_steps(self, b: int) -> float:
        """A batched step of b sequences, in decode steps of one sequence."""
        return self.batch[b].median / self.step

    @property
    def draft_ratio(self) -> float:
        """c: the draft model's decode step / the target's, both at pass_context."""
        return self.draft_decode.median / self.step if self.draft_decode else float("nan")

    def rows(self, entries: dict) -> list:
        return [dict(n=n, ms=1000 * t.median, lo_ms=1000 * t.lo, hi_ms=1000 * t.hi,
                     samples_ms=[1000 * s for s in t.samples]) for n, t in sorted(entries.items())]


def repeated(ids, n: int) -> list:
    ids = [int(t) for t in ids]
    return (ids * (n // len(ids) + 1))[:n]


def measure_costs(model, ids, lengths=LENGTHS, pass_context: int = PASS_CONTEXT,
                  verify_sizes=VERIFY_SIZES, batch_sizes=BATCH_SIZES, repeats: int = REPEATS,
                  draft=None) -> CostTable:
    """Time every entry `repeats` times, interleaved. `ids` is repeated to each length (which
    tokens are timed does not change the arithmetic). Lengths that do not fit the context
    (with room for the largest pass) are left out; pass_context must be one of `lengths`."""
    n_ctx = model.config.n_ctx
    room = max(max(verify_sizes), 1)
    lengths = tuple(n for n in lengths if n + 1 <= n_ctx)
    if pass_context not in lengths or pass_context + room > n_ctx:
        pass_context = max((n for n in lengths if n + room <= n_ctx and n <= pass_context),
                           default=lengths[0])
    started = time.perf_counter()
    prefill = {n: [] for n in lengths}
    decode = {n: [] for n in lengths}
    verify = {k: [] for k in verify_sizes if k > 1}
    batch = {b: [] for b in batch_sizes if b > 1}
    draft_samples = []
    base = model.new_kv_cache(capacity=pass_context + room)
    model.prefill(repeated(ids, pass_context), base)
    batch_caches = {b: [base.copy() for _ in range(b)] for b in batch}
    draft_kv = None
    if draft is not None:
        draft_kv = draft.new_kv_cache(capacity=pass_context + 1)
        draft.prefill(repeated(ids, pass_context), draft_kv)
    token = int(ids[0])
    for _ in range(repeats):
        for n in lengths:
            kv = model.new_kv_cache(capacity=n + 1)
            fed = repeated(ids, n)
            t0 = time.perf_counter()
            model.prefill(fed, kv)
            t1 = time.perf_counter()
            model.decode(token, kv)
            t2 = time.perf_counter()
            prefill[n].append(t1 - t0)
            decode[n].append(t2 - t1)
        for k in verify:
            fed = repeated(ids, k)
            t0 = time.perf_counter()
            model.prefill(fed, base)
            verify[k].append(time.perf_counter() - t0)
            base.truncate(pass_context)
        for b, kvs in batch_caches.items():
            t0 = time.perf_counter()
            model.decode_batch([token] * b, kvs)
            batch[b].append(time.perf_counter() - t0)
            for kv in kvs:
                kv.truncate(pass_context)
        if draft is not None:
            t0 = time.perf_counter()
            draft.decode(token, draft_kv)
            draft_samples.append(time.perf_counter() - t0)
            draft_kv.truncate(pass_context)
    decode_t = {n: Timing(tuple(s)) for n, s in decode.items()}
    step = decode_t[pass_context]            # a pass over 1 token, a batch of 1: this step
    return CostTable(
        prefill={n: Timing(tuple(s)) for n, s in prefill.items()},
        decode=decode_t,
        verify={1: step, **{k: Timing(tuple(s)) for k, s in verify.items()}},
        batch={1: step, **{b: Timing(tuple(s)) for b, s in batch.items()}},
        pass_context=pass_context, repeats=repeats, measured_at=time.time(),
        draft_decode=Timing(tuple(draft_samples)) if draft is not None else None,
        seconds=time.perf_counter() - started)


# --- speculative decoding priced in decode steps -------------------------------------------------

@dataclass(frozen=True)
class PricedRun:
    """A speculative run priced from the cost table, in decode steps of the target (the target
    alone costs 1 step per token)."""
    n_tokens: int
    pass_sizes: tuple        # tokens each verification pass read
    pass_steps: float        # all passes, in steps: sum of verify_steps(k)
    draft_steps: int         # the draft model's decode steps, all rounds
    c: float                 # a draft step / a target step (0: prompt lookup runs no model)
    other_steps: float = 0.0  # other measured work, in steps (prompt lookup's own time)

    @property
    def n_passes(self) -> int:
        return len(self.pass_sizes)

    @property
    def tokens_per_pass(self) -> float:
        return self.n_tokens / self.n_passes

    @property
    def mean_pass_steps(self) -> float:
        return self.pass_steps / self.n_passes

    @property
    def steps(self) -> float:
        return self.pass_steps + self.c * self.draft_steps + self.other_steps

    @property
    def speedup(self) -> float:
        """Tokens per step against the target alone's 1: the predicted speed-up."""
        return self.n_tokens / self.steps


def price_speculative(table: CostTable, pass_sizes, n_tokens: int, draft_steps: int = 0,
                      c: float = None, other_seconds: float = 0.0) -> PricedRun:
    """Price a run's verification passes (each over k tokens) and draft steps in target decode
    steps from the table (c: the table's draft_ratio unless given; other_seconds: further
    measured time, converted at the table's step)."""
    sizes = tuple(int(k) for k in pass_sizes)
    c = table.draft_ratio if c is None else c
    return PricedRun(n_tokens, sizes, sum(table.verify_steps(k) for k in sizes), draft_steps,
                     c, other_seconds / table.step)
