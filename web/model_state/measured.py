"""Measurements shown on the page (timings of the running model), taken once per process.

A timing is a real measurement, so it is not repeated for every render or every prompt: it is
made once per model (the sections' `warm`, which app.py runs before the worker processes fork,
so every worker shows the same one; in a single process, the first request that needs it), and
every render shows the same numbers with the time they were taken. The times of the model's
passes are one table per model (cost_table: pipeline.costs); where a time depends on the
prompt's length, a prompt's point is interpolated between the table's lengths, and says so.
Measurements run one at a time, so two of them never share the cores and disturb
each other.
"""
import contextlib
import threading
import time

from web.core.cache import Memo, memo, model_key  # noqa: F401  (model_key: the sections import it here)
from web.model_state.disk_cache import kept, machine_identity

_results = memo("measurements", 64)
_measuring = threading.RLock()     # one measurement at a time (a measurement may use another)
_NOTHING = object()


def measured(key: tuple, measure, results=None):
    """measure() the first time `key` is asked for, the remembered result afterwards. Remembered
    in `results` (default: the app's measurements; the machine's roof: the process's)."""
    results = _results if results is None else results
    known = results.peek(key, _NOTHING)
    if known is not _NOTHING:
        return known
    # kept on disk between starts when the app has a web.model_state.disk_cache
    with _measuring:
        return results.get(key, lambda: kept("measurements", (machine_identity(), key),
                                              measure))


def measurements() -> int:
    """How many measurements this app (outside an app: this process) has made (tests read
    it)."""
    return _results.computed


# When this process (a worker: the supervisor it was forked from) started: a measurement made
# earlier was read back from the disk cache (web/model_state/disk_cache.py), made by an earlier
# start.
STARTED = time.time()


def stamp(epoch_seconds: float) -> str:
    """When a measurement was made, as the page shows it; one kept from an earlier start of the
    server (web/model_state/disk_cache.py) says so, with its date."""
    when = time.strftime("%H:%M:%S UTC", time.gmtime(epoch_seconds))
    if epoch_seconds < STARTED:
        return (f"{when} on {time.strftime('%d %b %Y', time.gmtime(epoch_seconds))} (by an "
                f"earlier start of this server on this machine, kept in its data directory)")
    return when


# --- this server's roof ------------------------------------------------------------------------

# The roof is the machine's, not a model's or an app's: one per process, whichever app asks
# first (a worker inherits the supervisor's, measured by its warm before the fork). The apps of
# one process (the tests make dozens) share it.
_machine = Memo("machine", 1)
MACHINE_KEY = ("machine",)


def machine_measurement() -> tuple:
    """(this server's roof: pipeline.roofline.Machine, when it was measured): measured once per
    process (under a second), or read back from the asking app's disk cache."""
    from pipeline.roofline import measure_machine
    return measured(MACHINE_KEY, lambda: (measure_machine(), time.time()), results=_machine)


@contextlib.contextmanager
def machine_measured_again():
    """Within the block the roof is measured again at its next ask (a test that counts one
    app's measurements); after it, the process's earlier one is back, so that what the other
    apps rendered with it still agrees with it."""
    before = _machine.peek(MACHINE_KEY, _NOTHING)
    _machine.clear()
    try:
        yield
    finally:
        _machine.clear()
        if before is not _NOTHING:
            _machine.get(MACHINE_KEY, lambda: before)


def machine():
    """This server's roof (peak FLOP/s, memory bandwidth), measured once per process."""
    return machine_measurement()[0]


# --- the cost table: one measurement per model, the only times the timing sections quote ------

# Which tokens are timed does not matter (every token costs the same arithmetic); this text is
# repeated to the length needed.
GRID_TEXT = ("It is a truth universally acknowledged, that a single man in possession of a "
             "good fortune, must be in want of a wife.")


def lengths_for(lm) -> tuple:
    """The table's lengths that a prompt on the page can have (lm.prompt_limit; a big model
    reads at most 128 tokens), with room after them for a decode step."""
    from pipeline.costs import LENGTHS
    return tuple(n for n in LENGTHS if n + 1 <= lm.n_ctx and n <= lm.prompt_limit)


def cost_table(lm):
    """pipeline.costs.CostTable of the model (and its draft model's decode step), measured once
    per model (the sections' warm, or read back from the disk cache): prefill and decode at
    several lengths, verification passes of 1..6 tokens, batched steps of 1..8 sequences. The
    generation loop, KV cache, roofline, batching and speculative sections quote it."""
    from pipeline.costs import BATCH_SIZES, PASS_CONTEXT, REPEATS, measure_costs
    lengths, sizes = lengths_for(lm), verify_sizes_for(lm)
    draft = lm.draft
    return measured(("cost-table", model_key(lm.model),
                     None if draft is None else model_key(draft), lengths, PASS_CONTEXT,
                     sizes, BATCH_SIZES, REPEATS, GRID_TEXT),
                    lambda: measure_costs(lm.model, lm.tokenizer.encode_ordinary(GRID_TEXT),
                                          lengths, verify_sizes=sizes, draft=draft))


# a model with a draft model verifies up to γ + 1 = 9 tokens (the speculative section's
# largest γ); prompt lookup's measured run uses γ = 4 (5 tokens), one size more for room
DRAFT_VERIFY_SIZES = tuple(range(1, 10))


def verify_sizes_for(lm) -> tuple:
    from pipeline.costs import VERIFY_SIZES
    return DRAFT_VERIFY_SIZES if lm.draft is not None else VERIFY_SIZES
