"""Measurements shown on the page (timings of the running model), taken once per process.

A timing is a real measurement, so it is not repeated for every render or every prompt: it is
made once per model (the sections' `warm`, which app.py runs before the worker processes fork,
so every worker shows the same one; in a single process, the first request that needs it), and
every render shows the same numbers with the time they were taken. Where a time depends on the
prompt's length, it is measured once over a grid of lengths and a prompt reads its point from
the grid. Measurements run one at a time, so two of them never share the cores and disturb
each other.
"""
import threading
import time
from dataclasses import dataclass

from web.cache import memo, model_key  # noqa: F401  (model_key: the sections import it here)
from web.disk_cache import kept, machine_identity

_results = memo("measurements", 64)
_measuring = threading.RLock()     # one measurement at a time (a measurement may use another)
_NOTHING = object()


def measured(key: tuple, measure):
    """measure() the first time `key` is asked for, the remembered result afterwards."""
    known = _results.peek(key, _NOTHING)
    if known is not _NOTHING:
        return known
    with _measuring:      # kept on disk between starts when the app has a web.disk_cache
        return _results.get(key, lambda: kept("measurements", (machine_identity(), key),
                                               measure))


def measurements() -> int:
    """How many measurements this app (outside an app: this process) has made (tests read
    it)."""
    return _results.computed


# When this process (a worker: the supervisor it was forked from) started: a measurement made
# earlier was read back from the disk cache (web/disk_cache.py), made by an earlier start.
STARTED = time.time()


def stamp(epoch_seconds: float) -> str:
    """When a measurement was made, as the page shows it; one kept from an earlier start of the
    server (web/disk_cache.py) says so, with its date."""
    when = time.strftime("%H:%M:%S UTC", time.gmtime(epoch_seconds))
    if epoch_seconds < STARTED:
        return (f"{when} on {time.strftime('%d %b %Y', time.gmtime(epoch_seconds))} (by an "
                f"earlier start of this server on this machine, kept in its data directory)")
    return when


# --- this server's roof ------------------------------------------------------------------------

def machine_measurement() -> tuple:
    """(this server's roof: pipeline.roofline.Machine, when it was measured): measured once per
    process (under a second)."""
    from pipeline.roofline import measure_machine
    return measured(("machine",), lambda: (measure_machine(), time.time()))


def machine():
    """This server's roof (peak FLOP/s, memory bandwidth), measured once per process."""
    return machine_measurement()[0]


# --- prefill and decode over a grid of prompt lengths: one measurement, cited everywhere -----

GRID = (8, 16, 24, 32, 48, 64, 96, 128, 192, 248)   # prompt lengths timed (ctx 256 leaves room)
PREFILL_REPEATS = 5      # prefills timed per length (their median is kept)
BIG_MODEL_REPEATS = 3    # for a big model (a 128-token prefill of SmolLM2 takes ~0.4 s)
DECODE_STEPS = 5         # decode steps timed after each prefill (their median is kept)

# Which tokens are timed does not matter (every token costs the same arithmetic); this text is
# repeated to the length needed.
GRID_TEXT = ("It is a truth universally acknowledged, that a single man in possession of a "
             "good fortune, must be in want of a wife.")


@dataclass(frozen=True)
class Point:
    n: int               # prompt length timed (tokens)
    prefill_s: float     # median of PREFILL_REPEATS prefills of n tokens into an empty cache
    decode_s: float      # median of DECODE_STEPS decode steps right after that prefill


@dataclass(frozen=True)
class PrefillDecode:
    points: tuple        # Point per grid length that fits the context, shortest first
    measured_at: float   # time.time() when the measurement finished
    repeats: int
    decode_steps: int

    @property
    def when(self) -> str:
        return stamp(self.measured_at)

    def at(self, n: int) -> Point:
        """The measured point for a prompt of n tokens: the grid length nearest n (the shorter
        of two equally near)."""
        return min(self.points, key=lambda p: (abs(p.n - n), p.n))

    def rows(self) -> list:
        return [dict(n=p.n, prefill_s=p.prefill_s, decode_s=p.decode_s) for p in self.points]


def measure_prefill_decode(lm) -> PrefillDecode:
    from pipeline.generation import time_decode, time_prefill
    model = lm.model
    base = list(lm.tokenizer.encode_ordinary(GRID_TEXT))
    repeats = repeats_for(lm)
    points = []
    for n in grid_for(lm):
        ids = (base * (n // len(base) + 1))[:n]
        points.append(Point(n, time_prefill(model, ids, repeats),
                            time_decode(model, ids, DECODE_STEPS)))
    return PrefillDecode(tuple(points), time.time(), repeats, DECODE_STEPS)


def grid_for(lm) -> tuple:
    """The GRID lengths that fit the context (with the decode steps after them) and that a
    prompt on the page can have (lm.prompt_limit)."""
    return tuple(n for n in GRID if n + DECODE_STEPS <= lm.n_ctx and n <= lm.prompt_limit)


def repeats_for(lm) -> int:
    return PREFILL_REPEATS if lm.prompt_limit == lm.n_ctx else BIG_MODEL_REPEATS


def prefill_decode_timings(lm) -> PrefillDecode:
    """Prefill and decode-step times of the model over GRID, measured once per model: the one
    prefill measurement the generation loop, the KV cache and the roofline sections cite."""
    return measured(("prefill-decode", model_key(lm.model), grid_for(lm), repeats_for(lm),
                     DECODE_STEPS), lambda: measure_prefill_decode(lm))
