"""The GGUF files this machine already holds, offered in the page's model picker and loaded when
chosen (pipeline/discovery.py finds and describes them from their headers).

    app.extensions["found_models"]   FoundModels: key -> Found, in the order found

Where: the folders of app.py --models DIR (FOUND_MODEL_DIRS) and, unless FIND_STORES is False
(it is when a test gives MODEL), Ollama's, LM Studio's and Hugging Face's stores under
STORE_HOME (default: the user's home) as STORE_ENV (default os.environ) places them. A file
already offered (the installed SmolLM2, a --model file) is not listed twice.

The picker lists each with its architecture, parameters (from the tensor shapes), tensor
types, file size and the memory the engine would take here (pipeline.sizes.float32_memory_bytes:
its float32 copy of every parameter plus the KV cache of the prompt the page reads), and
refuses, with the reason, one the engine cannot run or one too big for the memory available now
(MemAvailable, or MEMORY_AVAILABLE: bytes or a function giving them, for tests).

Choosing one is opening `/?model=<key>`. The request answers at once (before the gate: a load
is not a computation of the page) with a 503 page saying the model is loading, with its progress
(hashing the file, reading its header and vocabulary, dequantizing tensor i of n, writing,
mapping), that reloads itself, as the built-in models' warming page does (web/serving/server.py);
the
model loads in a thread of the process behind it. Two students choosing it start one load. A
load that fails is a 422 page with the reason, the next requests too (until the file changes).

With the server's disk cache (web/model_state/disk_cache.py, set by web/serving/server.py run) the
float32 arrays
are written once to the data directory and memory-mapped read-only: every worker that is asked
for the model maps the same pages of the page cache instead of holding a copy of its own
(bench/bench_found_memory.py measures it). A file lock lets one process dequantize while the
others wait, then map. Each model's state (loading and its step, ready, failed and why) is kept
in memory every process of the server shares (LoadStates, made before the first fork), so a
student whose reload reaches another worker sees the same progress, and each new generation of
workers maps the models already chosen as it starts (FoundModels.worker_started).

A found model's card suggests the prompts of a general language model (SmolLM2's card's), those
that fit in half the prompt the page reads of it (the other half is left for the tokens the
sections generate); in a context too small for any, the first cut to fit (found_card).
"""
import dataclasses
import fcntl
import json
import mmap
import os
import struct
import threading
import time
import urllib.parse
from contextlib import contextmanager
from dataclasses import dataclass

from flask import render_template, request

from pipeline import ModelLoadError, discovery
from pipeline.gguf_file import available_memory_bytes, load_gguf
from pipeline.sizes import float32_memory_bytes
from pipeline.speculative import load_draft
from web.core.params import parse_query_string
from web.model_state.explainer import (
    BIG_MODEL_PARAMS,
    KNOWN_CARDS,
    card_for,
    is_big,
    model_key_name,
)
from web.model_state.loaded import BIG_MODEL_PROMPT_TOKENS, LoadedModel


def fmt_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class Found:
    key: str                       # its name in the URL (model=)
    d: object                      # pipeline.discovery.Description

    @property
    def context(self) -> int:
        """Positions of the KV cache counted: the prompt the page reads (web.model_state.loaded's
        prompt_limit: a big model's is BIG_MODEL_PROMPT_TOKENS)."""
        c = self.d.config
        if c is None:
            return 0
        return min(c.n_ctx, BIG_MODEL_PROMPT_TOKENS) if self.d.n_params >= BIG_MODEL_PARAMS \
            else c.n_ctx

    @property
    def memory_bytes(self) -> int:
        """float32 parameters + the KV cache at `context` (0 when the engine cannot run it)."""
        if self.d.config is None:
            return 0
        return float32_memory_bytes(self.d.config, self.d.n_params, self.context)

    def refusal(self, available) -> str:
        """Why it cannot be chosen here ("" when it can): the engine cannot run it, or it does
        not fit in the memory available (None: unknown, not refused)."""
        if not self.d.runnable:
            return f"the engine cannot run it: {self.d.problem}"
        if available is not None and self.memory_bytes > available:
            return (f"needs {fmt_bytes(self.memory_bytes)} as float32, this machine has "
                    f"{fmt_bytes(available)} free")
        return ""


class LoadStates:
    """Each found model's load as every process of the server sees it: one record a model in an
    anonymous shared map made before the first fork (as web.serving.server.Progress is), written
    under
    a lock (FoundModels._state_lock) by whichever process loads: {"state": "loading" | "ready" |
    "failed", "step", "done", "steps", "problem", "file": [size, mtime_ns]}. A sequence number,
    odd while a write is under way, lets a reader tell a torn read and read again."""

    RECORD = 2048
    _HEAD = struct.Struct("<QI")          # sequence number, length of the JSON that follows

    def __init__(self, keys):
        self.index = {k: i for i, k in enumerate(keys)}
        self._map = mmap.mmap(-1, max(1, len(self.index)) * self.RECORD)

    def set(self, key: str, record: dict):
        """Write `key`'s record (the caller holds the state lock: one writer at a time)."""
        at = self.index[key] * self.RECORD
        body = json.dumps(record).encode()[:self.RECORD - self._HEAD.size]
        seq = self._HEAD.unpack(self._map[at:at + self._HEAD.size])[0]
        self._map[at:at + self._HEAD.size] = self._HEAD.pack(seq + 1, 0)      # odd: writing
        self._map[at + self._HEAD.size:at + self._HEAD.size + len(body)] = body
        self._map[at:at + self._HEAD.size] = self._HEAD.pack(seq + 2, len(body))

    def read(self, key: str) -> dict:
        """`key`'s record ({} before its first write)."""
        at = self.index[key] * self.RECORD
        for _ in range(1000):
            seq, n = self._HEAD.unpack(self._map[at:at + self._HEAD.size])
            if seq % 2 == 0:
                body = bytes(self._map[at + self._HEAD.size:at + self._HEAD.size + n])
                if self._HEAD.unpack(self._map[at:at + self._HEAD.size])[0] == seq:
                    return json.loads(body) if n else {}
            time.sleep(0.0005)
        return {}


@dataclass
class Load:
    """One load of a found model in this process: its thread, `done` once it ended (the model is
    offered, or `problem` says why not) and the record its page shows."""
    key: str
    done: threading.Event
    record: dict
    problem: str = ""
    file: list = None              # [size, mtime_ns] of the file it read (file_stamp)


def file_stamp(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


class FoundModels:
    def __init__(self, entries, memory=None):
        self.entries = {e.key: e for e in entries}
        self._memory = memory
        self.states = LoadStates(self.entries)
        self._reset()

    def _reset(self):
        """This process's own loads (none yet: in a new worker, those of the process it was
        forked from ran in threads it does not have)."""
        self._lock = threading.Lock()          # guards _loads
        self._load_lock = threading.Lock()     # one dequantization at a time in this process
        self._loads = {}
        self.loads_started = 0                 # loads this process began (tests read it)

    def __iter__(self):
        return iter(self.entries.values())

    def __len__(self):
        return len(self.entries)

    def get(self, key):
        return self.entries.get(key)

    def available(self):
        m = self._memory
        return m() if callable(m) else m if m is not None else available_memory_bytes()

    @staticmethod
    def _marker(app, entry: Found):
        """A file in the data dir saying that a process of this server loaded `entry` (its
        float32 arrays are kept there, mapped by whoever maps them next), or None."""
        disk = app.extensions.get("disk_cache")
        if disk is None:
            return None
        try:
            st = os.stat(entry.d.path)
        except OSError:
            return None
        return os.path.join(disk.root, "found", f"{discovery.short_id(entry.d.path)}-"
                            f"{st.st_size}-{st.st_mtime_ns}")

    def refusal(self, app, entry: Found) -> str:
        """Why `entry` cannot be chosen here now ("" when it can). One already loaded or being
        loaded, here or by another worker of this server (its arrays mapped from the data dir:
        choosing it adds no copy), is never refused for memory: the memory it takes is taken
        already."""
        if not entry.d.runnable:
            return entry.refusal(None)
        marker = self._marker(app, entry)
        if (entry.key in app.extensions["explainer"].models or (marker and os.path.exists(marker))
                or self.states.read(entry.key).get("state") in ("loading", "ready")):
            return ""
        return entry.refusal(self.available())

    def failure(self, entry: Found) -> str:
        """Why the last load of `entry` failed, in this process or another ("" when none did,
        or the file has changed since)."""
        stamp = file_stamp(entry.d.path)
        shared = self.states.read(entry.key)
        if shared.get("state") == "failed" and shared.get("file") == stamp:
            return shared.get("problem", "see the server log")
        with self._lock:
            load = self._loads.get(entry.key)
        if load is not None and load.done.is_set() and load.problem and load.file == stamp:
            return load.problem
        return ""

    def choose(self, app, entry: Found) -> Load:
        """The load of `entry` in this process, begun in a thread now unless one is under way
        or has ended well (one for any number of students choosing it)."""
        with self._lock:
            load = self._loads.get(entry.key)
            if load is None or (load.done.is_set() and load.problem):
                load = Load(entry.key, threading.Event(),
                            {"state": "loading", "step": "starting its load", "done": 0,
                             "steps": entry.d.n_tensors + 4},
                            file=file_stamp(entry.d.path))
                self._loads[entry.key] = load
                self.loads_started += 1
                threading.Thread(target=self._run, args=(app, entry, load), daemon=True,
                                 name=f"load-{entry.key}").start()
            return load

    def job(self, key: str):
        """This process's load of `key` (its `done` event), or None before it is chosen here."""
        with self._lock:
            return self._loads.get(key)

    def progress(self, entry: Found) -> dict:
        """What the loading page shows: the record of the process dequantizing it (any worker),
        else this process's own (waiting for the lock, mapping kept arrays)."""
        shared = self.states.read(entry.key)
        if shared.get("state") == "loading":
            return shared
        with self._lock:
            load = self._loads.get(entry.key)
        return dict(load.record) if load else {"state": "loading", "step": "starting its load",
                                               "done": 0, "steps": entry.d.n_tensors + 4}

    @contextmanager
    def load_lock(self, app):
        """Held while a process of this server dequantizes a found model (one at a time in the
        server: each takes its float32 size in memory until written and mapped)."""
        disk = app.extensions.get("disk_cache")
        with self._load_lock:
            if disk is None:
                yield
            else:
                with _file_lock(os.path.join(disk.root, "found-model.lock")):
                    yield

    def _share(self, app, key: str, record: dict):
        disk = app.extensions.get("disk_cache")
        if disk is None:
            with self._lock:
                self.states.set(key, record)
        else:
            with self._lock, _file_lock(os.path.join(disk.root, "found-state.lock")):
                self.states.set(key, record)

    def _run(self, app, entry: Found, load: Load):
        try:
            fresh = entry.key not in app.extensions["explainer"].models
            self.load(app, entry, load)
            if fresh and warms_found_models(app):
                self.warm(app, entry, load)
            load.record = {"state": "ready", "step": "ready", "done": 1, "steps": 1}
        except Exception as e:                         # the page says why; never a 500
            if isinstance(e, ModelLoadError):
                problem = " ".join(str(e).split())
            else:
                app.logger.exception("loading the found model %s failed", entry.key)
                problem = f"{type(e).__name__}: {' '.join(str(e).split())}"
            load.problem = problem[:1000]
            load.record = {"state": "failed", "problem": load.problem}
            self._share(app, entry.key, {"state": "failed", "problem": load.problem,
                                         "file": load.file})
        finally:
            load.done.set()

    def load(self, app, entry: Found, job: Load = None):
        """Load `entry` into this process's models (once), through the disk cache when the
        server has one; ModelLoadError when it cannot. `load`'s record follows its steps, and
        so does the shared one while this process dequantizes (web/serving/server.py's warming page
        shows the same kind of record)."""
        explainer = app.extensions["explainer"]
        if entry.key in explainer.models:
            return explainer.models[entry.key]
        path = entry.d.path
        if not os.path.isfile(path):
            raise ModelLoadError(f"{path}: no such file")
        n = entry.d.n_tensors
        steps = n + 4                 # hashing, header and vocabulary, n tensors, writing, mapping
        shared = {"on": False}

        def say(step, done):
            record = {"state": "loading", "step": step, "done": done, "steps": steps}
            if job is not None:
                job.record = record
            if shared["on"]:
                self._share(app, entry.key, record)

        def tensor(i, total, name):
            say(f"dequantizing tensor {i} of {total} ({name})", 1 + i)

        def step(what):
            say({"hashing": "hashing the file (it names the kept arrays)",
                 "loading": "reading its header and vocabulary",
                 "writing": "writing its float32 arrays to the data directory",
                 "mapping": "mapping its float32 arrays from the data directory"}[what],
                {"hashing": 0, "loading": 1, "writing": n + 2, "mapping": n + 3}[what])

        disk = app.extensions.get("disk_cache")
        if disk is not None and disk.has_model(path):      # kept: mapped, no lock needed
            model = disk.load_model(path, load_gguf, progress=step)
        else:
            say("waiting for another found model's load to finish", 0)
            with self.load_lock(app):
                shared["on"] = True
                if disk is not None:
                    model = disk.load_model(
                        path, lambda p: load_gguf(p, progress=tensor), progress=step)
                    marker = self._marker(app, entry)
                    if marker:
                        os.makedirs(os.path.dirname(marker), exist_ok=True)
                        open(marker, "a").close()
                else:
                    step("loading")
                    model = load_gguf(path, progress=tensor)
                shared["on"] = False
        draft, problem = load_draft(model)
        lm = LoadedModel.wrap(model, key=entry.key, draft=draft, draft_problem=problem,
                              card=found_card(entry.key, model),
                              other_encodings=explainer.default_model.other_encodings)
        with self._lock:
            if entry.key in explainer.models:
                return explainer.models[entry.key]
            # a request iterating the old dict (the picker) is not disturbed by the new entry
            explainer.models = dict(explainer.models)
            explainer.add(lm)
        shared_answers = app.extensions.get("shared_answers")
        if shared_answers is not None:              # pages made before list one model fewer
            shared_answers.clear()
        self._share(app, entry.key, {"state": "ready", "step": "ready", "done": steps,
                                     "steps": steps, "file": file_stamp(path)})
        return lm

    def warm(self, app, entry: Found, job: Load):
        """Warm the model just loaded as the built-in models are warmed at start: every
        section's `warm` (web.serving.server.warm, the same function), its steps in the load's
        record; requests for it get the loading page until it is done (init_app)."""
        from web.serving.server import warm

        def tell(key, step, done, steps):
            job.record = {"state": "loading", "step": step, "done": done, "steps": steps}
        warm(app, progress=tell, keys=[entry.key])

    def worker_started(self, app):
        """In a new worker (web/serving/server.py serve_worker): its own loads start afresh, and
        every
        model a process of this server has loaded is mapped again from the data dir, in the
        background (the worker serves meanwhile; a request for one shows its loading page)."""
        self._reset()
        for entry in self:
            record = self.states.read(entry.key)
            if (record.get("state") == "ready" and record.get("file") == file_stamp(entry.d.path)
                    and entry.key not in app.extensions["explainer"].models):
                self.choose(app, entry)


@contextmanager
def _file_lock(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def warms_found_models(app) -> bool:
    """Whether a found model is warmed once loaded: WARM_FOUND_MODELS, which
    web/serving/server.py run sets (it warms the built-in models), else as WARM_CACHES says
    (create_app's background warm-up of the built-in ones)."""
    return bool(app.config.get("WARM_FOUND_MODELS", app.config.get("WARM_CACHES", True)))


def discover(app) -> FoundModels:
    """The found files as app.config says where to look (see the module docstring)."""
    cfg = app.config
    files = discovery.find_gguf_files(
        cfg.get("FOUND_MODEL_DIRS", ()), stores=cfg.get("FIND_STORES", not cfg.get("MODEL")),
        home=cfg.get("STORE_HOME"), env=cfg.get("STORE_ENV"))
    explainer = app.extensions["explainer"]
    startup = app.extensions.get("startup")
    offered = {os.path.realpath(lm.model.path) for lm in explainer.models.values()
               if lm.model.path}
    offered |= {os.path.realpath(p) for p, _ in (startup.pending.values() if startup else ())}
    taken = set(explainer.models) | set(startup.pending if startup else ())
    entries = []
    for f in files:
        if os.path.realpath(f.path) in offered:
            continue
        d = discovery.describe(f)
        key = model_key_name(f.name.replace(":", "-").replace("/", "-")
                             if f.source == "Ollama" else os.path.basename(f.name))
        key = key if key not in taken else f"{key}-{discovery.short_id(f.path)}"
        taken.add(key)
        entries.append(Found(key, d))
    return FoundModels(entries, cfg.get("MEMORY_AVAILABLE"))


def init_app(app):
    """Discover the files, list them in the picker, load one when a request names it.
    Registered after serving.init_startup and before the gate (serving.init_app)."""
    found = app.extensions["found_models"] = discover(app)
    if found:
        app.logger.info("found %d GGUF file(s): %s", len(found),
                        ", ".join(f"{e.key} ({e.d.source})" for e in found))

    @app.context_processor
    def found_models():
        return dict(found_models=list(found), found_memory=found.available(),
                    found_refusal=lambda entry: found.refusal(app, entry),
                    fmt_bytes=fmt_bytes)

    @app.before_request
    def load_chosen_model():
        if not found or request.endpoint in (None, "static") or \
                request.endpoint.startswith("assets."):
            return None
        key = dict(parse_query_string(request.query_string)).get("model")
        entry = found.get(key) if key else None
        if entry is None:
            return None
        job = found.job(key)
        if key in app.extensions["explainer"].models and (job is None or job.done.is_set()):
            return None                   # loaded, and warmed when it is warmed (FoundModels.warm)
        problem = found.refusal(app, entry)
        if problem:
            return refused(app, entry, problem)
        if not os.path.isfile(entry.d.path):         # gone since it was listed
            return refused(app, entry, f"it could not be loaded: {entry.d.path}: no such file")
        failed = found.failure(entry)
        if failed:
            return refused(app, entry, f"it could not be loaded: {failed}")
        job = found.choose(app, entry)           # a thread loads it; this request answers now
        if job.done.is_set():
            if key in app.extensions["explainer"].models:
                return None
            return refused(app, entry, f"it could not be loaded: {job.problem}")
        return loading_response(app, entry, found.progress(entry))

    # each new worker of web/serving/server.py maps again the models chosen before it was forked
    app.extensions.setdefault("worker_start", []).append(lambda: found.worker_started(app))


def loading_response(app, entry: Found, record: dict):
    """503 with Retry-After, at once: `entry` is loading, and where the load is (the page of
    web/serving/server.py's warming_response, templates/warming.html, which reloads itself)."""
    from web.serving.server import WARMING_REFRESH_SECONDS, progress_line
    if str(record.get("step", "")).startswith("warming"):       # FoundModels.warm
        message = (f"{entry.d.title} is loaded and warming up, as the server warms its own "
                   f"models: each section measures it once and fills the caches every prompt "
                   f"shares: {progress_line(record)}.")
    else:
        message = (f"{entry.d.title} is loading: the server reads this file once, dequantizes "
                   f"its weights to float32 and keeps them in its data directory, which every "
                   f"worker maps: {progress_line(record)}.")
    if request.headers.get("HX-Request") == "true":
        body, mimetype = message, "text/plain"
    else:
        without = [(n, v) for n, v in parse_query_string(request.query_string) if n != "model"]
        body = render_template(
            "warming.html", title=entry.d.title, message=message, record=record,
            state="loading", refresh=WARMING_REFRESH_SECONDS,
            default_url="/" + ("?" + urllib.parse.urlencode(without, quote_via=urllib.parse.quote)
                               if without else ""),
            default_title=app.extensions["explainer"].default_model.card.title)
        mimetype = "text/html"
    response = app.response_class(body, status=503, mimetype=mimetype)
    response.headers["Retry-After"] = str(WARMING_REFRESH_SECONDS)
    response.headers["Cache-Control"] = "no-store"
    return response


# the prompts a found model's card suggests: a general language model's (SmolLM2's card's)
GENERAL_CARD = KNOWN_CARDS["smollm2"]


def found_card(key: str, model):
    """The card of a found model (web.model_state.explainer.card_for: its title and source from its
    metadata) suggesting GENERAL_CARD's prompts and examples rather than the Austen line. A
    prompt is suggested when it fits in half the prompt the page reads of the model (the other
    half is left for the tokens the sections generate); when the first does not, it is cut to
    its longest run of whole tokens that fits, and comes first."""
    base = card_for(key, model)
    n_ctx = model.config.n_ctx
    limit = min(n_ctx, BIG_MODEL_PROMPT_TOKENS) if is_big(model) else n_ctx
    room = max(1, limit // 2)
    tok = model.tokenizer
    fits = tuple(p for p in GENERAL_CARD.prompts if len(tok.encode_ordinary(p)) <= room)
    first = GENERAL_CARD.prompts[0]
    if first not in fits:
        ids = tok.encode_ordinary(first)[:room]
        cut = ""
        while ids:
            cut = tok.decode(ids).rstrip()
            if cut and len(tok.encode_ordinary(cut)) <= room:
                break
            ids, cut = ids[:-1], ""
        fits = ((cut,) if cut else ()) + fits
    return dataclasses.replace(base, prompts=fits or base.prompts,
                               examples=GENERAL_CARD.examples)


def refused(app, entry: Found, problem: str):
    """422: the chosen model cannot run here, and why (text for htmx, else a short page)."""
    message = f"{entry.d.title} ({entry.d.path}) is not offered: {problem}."
    if request.headers.get("HX-Request") == "true":
        body, mimetype = message, "text/plain"
    else:
        body, mimetype = render_template("found_refused.html", message=message,
                                         entry=entry), "text/html"
    response = app.response_class(body, status=422, mimetype=mimetype)
    response.headers["Cache-Control"] = "no-store"
    return response
