"""Measurements shown on the page (timings of the running model), taken once per process.

A timing is a real measurement, so it is not repeated for every render: the first request that
needs it measures, later ones (the page, the section's own fragment, a slider that only changes
what is drawn) show the same numbers, with the time they were taken. Measurements run one at a
time, so two of them never share the cores and disturb each other.
"""
import threading
from collections import OrderedDict

KEEP = 64

_results = OrderedDict()
_lock = threading.Lock()          # guards _results
_measuring = threading.Lock()     # one measurement at a time


def model_key(model) -> str:
    """Models loaded from the same directory have the same weights: one key for all of them."""
    return model.path or f"id:{id(model)}"


def measured(key: tuple, measure):
    """measure() the first time `key` is asked for, the remembered result afterwards."""
    with _lock:
        if key in _results:
            _results.move_to_end(key)
            return _results[key]
    with _measuring:
        with _lock:
            if key in _results:          # measured by another request while this one waited
                return _results[key]
        result = measure()
        with _lock:
            _results[key] = result
            while len(_results) > KEEP:
                _results.popitem(last=False)
    return result
