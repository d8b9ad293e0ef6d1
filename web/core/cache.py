"""The one way results are kept between requests: `Memo`, a thread-safe LRU keyed on explicit
keys, and `cached_build`, a section's context per (model, prompt, the section's values).

A key names everything the result depends on, starting with the model's identity
(`model_key`: models loaded from the same file or directory share entries), never a
Python object's id. Each entry is computed once: a request asking for a key another request is
computing waits for that result instead of computing it again. Results are shared between
requests and threads: treat them as read-only.

Where results live: a module declares a cache by name and size (`memo(name, size)`, or the
`@memoized(size)` decorator); the entries live in the app's `Caches` (one per app, in
`app.extensions["explainer"].caches`: web/model_state/explainer.py), one LRU per (model, cache
name), the
model read from the `ModelKey` in the entry's key. A second model is a second set of entries
with its own budget, and a bigger model keeps fewer (`Caches.share`). Outside an app (a unit
test calling a section's helper) the entries live in one `Caches` of the process.

Timings do not go through a Memo directly: `web.model_state.measured.measured` adds the
one-measurement-
at-a-time lock on top of one.
"""
import functools
import threading
from collections import OrderedDict

from flask import current_app, has_app_context

from web.core.params import Query


class ModelKey(str):
    """A model's identity in a cache key (its file or directory): a str, marked so that the
    app's Caches can tell which model an entry belongs to."""


def model_key(model) -> ModelKey:
    """Models loaded from the same file or directory have the same weights: one key for all."""
    return ModelKey(model.path or f"id:{id(model)}")


def model_in(key):
    """The ModelKey inside a cache key (nested tuples searched), or None: shared by all."""
    if isinstance(key, ModelKey):
        return key
    if isinstance(key, tuple):
        for part in key:
            found = model_in(part)
            if found is not None:
                return found
    return None


class _Pending:
    """An entry being computed by one thread; the others wait on `done`."""

    def __init__(self):
        self.done = threading.Event()
        self.failed = False
        self.value = None


class Memo:
    """LRU memo: get(key, compute) returns compute()'s result, computed once per key (while
    it is remembered: the `maxsize` most recently used keys are)."""

    def __init__(self, name: str, maxsize: int, max_bytes: int = None, weigh=None):
        """max_bytes: also keep the entries' total weigh(value) within it (weighed again at
        each insertion: an entry may grow while kept, as a compact prompt run does when read);
        the newest entry is always kept."""
        self.name, self.maxsize = name, maxsize
        self.max_bytes, self.weigh = max_bytes, weigh
        self._entries = OrderedDict()
        self._pending = {}
        self._lock = threading.Lock()
        self.computed = 0             # how many times compute() ran (tests read it)

    def get(self, key, compute):
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key]
                pending = self._pending.get(key)
                owner = pending is None
                if owner:
                    pending = self._pending[key] = _Pending()
                    self.computed += 1
            if not owner:
                pending.done.wait()
                if pending.failed:        # the computing request failed (e.g. over its time
                    continue              # budget): this one tries for itself
                return pending.value
            try:
                value = compute()
            except BaseException:
                with self._lock:
                    del self._pending[key]
                pending.failed = True
                pending.done.set()
                raise
            with self._lock:
                self._entries[key] = value
                while len(self._entries) > self.maxsize:
                    self._entries.popitem(last=False)
                if self.max_bytes is not None:
                    weights = [self.weigh(v) for v in self._entries.values()]
                    total = sum(weights)
                    while total > self.max_bytes and len(self._entries) > 1:
                        self._entries.popitem(last=False)
                        total -= weights.pop(0)
                del self._pending[key]
            pending.value = value
            pending.done.set()
            return value

    def peek(self, key, default=None):
        """The remembered value of `key`, or `default` (nothing is computed)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            return default

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._entries

    def clear(self):
        with self._lock:
            self._entries.clear()


class Caches:
    """Every remembered result of one app: a Memo per (model, cache name). `share[model]` scales
    the declared sizes for that model (a 135 M-parameter model's activations are ~30 times a
    4 M one's, so it keeps fewer of them)."""

    def __init__(self):
        self._memos = {}
        self._lock = threading.Lock()
        self.share = {}                 # ModelKey -> fraction of each declared size kept

    def memo(self, model, name: str, maxsize: int, big_size: int = None,
             big_bytes: int = None, weigh=None) -> Memo:
        """big_size: the size for a big model (one with a share below 1) instead of the share of
        maxsize, for a cache whose entries are big for it; big_bytes: a big model's entries
        are also kept within that many bytes, weighed by weigh(value)."""
        with self._lock:
            box = self._memos.get((model, name))
            if box is None:
                big = self.share.get(model, 1.0) < 1
                size = (big_size if big and big_size is not None
                        else max(1, round(maxsize * self.share.get(model, 1.0))))
                box = self._memos[(model, name)] = Memo(
                    name, size, big_bytes if big else None, weigh)
            return box

    def memos(self, name: str) -> list:
        """Every model's Memo of cache `name`."""
        with self._lock:
            return [m for (_, n), m in self._memos.items() if n == name]

    def computed(self, name: str) -> int:
        """How many entries of cache `name` were computed, over every model."""
        return sum(m.computed for m in self.memos(name))

    def clear(self):
        with self._lock:
            self._memos.clear()


PROCESS_CACHES = Caches()        # outside an app


def current_caches() -> Caches:
    if has_app_context():
        explainer = current_app.extensions.get("explainer")
        if explainer is not None:
            return explainer.caches
    return PROCESS_CACHES


class NamedCache:
    """A cache a module declares: a name and a size. Its entries live in the current app's
    Caches, one Memo per model (see the module docstring)."""

    def __init__(self, name: str, maxsize: int, big_size: int = None, big_bytes: int = None,
                 weigh=None):
        self.name, self.maxsize, self.big_size = name, maxsize, big_size
        self.big_bytes, self.weigh = big_bytes, weigh

    def box(self, key) -> Memo:
        return current_caches().memo(model_in(key), self.name, self.maxsize, self.big_size,
                                     self.big_bytes, self.weigh)

    def get(self, key, compute):
        return self.box(key).get(key, compute)

    def peek(self, key, default=None):
        return self.box(key).peek(key, default)

    def __contains__(self, key) -> bool:
        return key in self.box(key)

    @property
    def computed(self) -> int:
        return current_caches().computed(self.name)


def memo(name: str, maxsize: int, big_size: int = None, big_bytes: int = None,
         weigh=None) -> NamedCache:
    """A cache of `maxsize` entries per model (big_size for a big model, when given, and at
    most big_bytes of weigh(entry) for it)."""
    return NamedCache(name, maxsize, big_size, big_bytes, weigh)


def key_of(value):
    """A value as a key: a loaded model (web.model_state.loaded.LoadedModel) by lm_key, a pipeline
    model by
    model_key, anything else (hashable) as it is."""
    if hasattr(value, "other_encodings") and hasattr(value, "model"):
        return lm_key(value)
    if hasattr(value, "config") and hasattr(value, "params") and hasattr(value, "path"):
        return ("model", model_key(value))
    return value


def memoized(maxsize: int):
    """Decorator: fn(*args) computed once per key_of(each argument), through a cache of the
    function's name (positional arguments only). `fn.memo` is the NamedCache."""
    def wrap(fn):
        box = NamedCache(f"{fn.__module__}.{fn.__qualname__}", maxsize)

        @functools.wraps(fn)
        def cached(*args):
            return box.get(tuple(key_of(a) for a in args), lambda: fn(*args))
        cached.memo = box
        return cached
    return wrap


def lm_key(lm) -> tuple:
    """The identity of a loaded model as a section sees it: the model, its draft model (or why
    there is none) and the other encodings found for the tokenization section."""
    draft = model_key(lm.draft) if lm.draft is not None else ("no draft", lm.draft_problem)
    encodings = tuple(getattr(e, "name", repr(e)) for e in lm.other_encodings)
    return model_key(lm.model), draft, lm.name, encodings


# --- a section's context, per (model, prompt, the section's own values) -----------------------

SECTION_BUILDS = NamedCache("section builds", 128)   # contexts hold figure JSON: tens of kB each


def cached_build(section, lm, state, deadline=None) -> dict:
    """section.build(lm, query), computed once per (model, prompt, values and messages of the
    section's parameters and of the other sections' it reads). The build reads the request
    through a read-only web.core.params.Query; what it found (a value it refused, a default it
    worked
    out: its Outcome) is cached with the context and applied to the state of every request the
    entry answers, so the page shows the same messages and status as on the first build. The
    context is shared: the caller gets a copy of the top-level dict, and rendering must not
    change the values in it. `deadline`: the time budget the build runs in
    (web.core.limits.Deadline;
    the request's, web.core.request_state.deadline; by default one that starts now)."""
    names = ("prompt", *section.reads, *(p.name for p in section.params))
    key = (section.id, lm_key(lm),
           tuple((n, state.values.get(n), state.errors.get(n), state.statuses.get(n))
                 for n in names))

    def build():
        query = Query(state, deadline)
        return section.build(lm, query), query.outcome

    ctx, outcome = SECTION_BUILDS.get(key, build)
    outcome.apply(state)
    return dict(ctx)
