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

Choosing one is opening `/?model=<key>`: the first request naming it in a process loads it
(before the gate: a load is not a computation of the page). With the server's disk cache
(web/disk_cache.py, set by web/serving.py run) the float32 arrays are written once to the data
directory and memory-mapped read-only: every worker that is asked for the model maps the same
pages of the page cache instead of holding a copy of its own (bench/bench_found_memory.py
measures it). A file lock lets one process dequantize while the others wait, then map.
"""
import fcntl
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from flask import render_template, request

from pipeline import ModelLoadError, discovery, load_model
from pipeline.gguf_file import available_memory_bytes
from pipeline.sizes import float32_memory_bytes
from pipeline.speculative import load_draft
from web.explainer import BIG_MODEL_PARAMS, model_key_name
from web.loaded import BIG_MODEL_PROMPT_TOKENS, LoadedModel
from web.params import parse_query_string


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
        """Positions of the KV cache counted: the prompt the page reads (web.loaded's
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


class FoundModels:
    def __init__(self, entries, memory=None):
        self.entries = {e.key: e for e in entries}
        self._memory = memory
        self._lock = threading.Lock()

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
        """Why `entry` cannot be chosen here now ("" when it can). One already loaded, here or
        by another worker of this server (its arrays mapped from the data dir: choosing it
        adds no copy), is never refused for memory: the memory it takes is taken already."""
        if not entry.d.runnable:
            return entry.refusal(None)
        marker = self._marker(app, entry)
        if entry.key in app.extensions["explainer"].models or (marker and os.path.exists(marker)):
            return ""
        return entry.refusal(self.available())

    def load(self, app, entry: Found):
        """Load `entry` into this process's models (once), through the disk cache when the
        server has one; ModelLoadError when it cannot."""
        explainer = app.extensions["explainer"]
        with self._lock:
            if entry.key in explainer.models:
                return explainer.models[entry.key]
            disk = app.extensions.get("disk_cache")
            if disk is not None:
                with _file_lock(os.path.join(disk.root, "found-model.lock")):
                    model = disk.load_model(entry.d.path, load_model)
                    marker = self._marker(app, entry)
                    if marker:
                        os.makedirs(os.path.dirname(marker), exist_ok=True)
                        open(marker, "a").close()
            else:
                model = load_model(entry.d.path)
            draft, problem = load_draft(model)
            lm = LoadedModel.wrap(model, key=entry.key, draft=draft, draft_problem=problem,
                                  other_encodings=explainer.default_model.other_encodings)
            # a request iterating the old dict (the picker) is not disturbed by the new entry
            explainer.models = dict(explainer.models)
            explainer.add(lm)
            shared = app.extensions.get("shared_answers")
            if shared is not None:              # pages made before list one model fewer
                shared.clear()
            return lm


@contextmanager
def _file_lock(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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
        if entry is None or key in app.extensions["explainer"].models:
            return None
        problem = found.refusal(app, entry)
        if not problem:
            try:
                found.load(app, entry)
                return None
            except ModelLoadError as e:
                problem = f"it could not be loaded: {' '.join(str(e).split())}"
        return refused(app, entry, problem)


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
