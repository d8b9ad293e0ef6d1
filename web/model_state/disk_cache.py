"""What one start of the server keeps on disk for the next: timing measurements, and a GGUF model's
float32 weights (dequantized once, then memory-mapped).

    <data dir>/startup-cache/<code version>/measurements/<key hash>.pickle
    <data dir>/startup-cache/<code version>/models/<model hash>/model.pickle + NNN.npy
    <data dir>/startup-cache/arrays/<kind>/<key hash>/<its code's hash>/kept.pickle + NNN.npy

The data dir is the server's --data-dir (default data/classroom, which .gitignore leaves out).

Keys. A model is named by the SHA-256 of its file (a .gguf) or of its directory's files (names
and bytes), never by its path: a changed file is a new model, a moved one the same. The code
version is a hash of the code that computes what is kept (CODE: pipeline/, web/sections/,
web/model_state/measured.py...): a change there starts a new directory (the old ones can be
deleted). A
measurement's key also holds
this machine's identity (host name, CPU, cores, NumPy version, BLAS threads): a data dir copied to
another machine measures again. Keys that name a model loaded without a path (tests) are not
kept.

A measurement read back keeps the time it was made (its `measured_at`):
web.model_state.measured.stamp shows
it with its date and "by an earlier start of this server on this machine". It is read in the
supervisor before the workers fork, so every worker still shows the same one.

Weights. Dequantizing SmolLM2's Q4_1 file to float32 and reading its tokenizer takes ~4 s; the
arrays are written once as .npy files and later starts map them (np.load mmap_mode="r"):
read-only pages of the page cache, shared by every process that maps them (the supervisor and
each generation of workers), given back to the system under memory pressure without swapping.
The first start maps them too, once written, so both starts hold the weights the same way.

Arrays (`arrays`, `kept_arrays`). A result made of big arrays that a section computes once per
model (SmolLM2's quantized schemes: each scheme's float32 weights, 424 MB, and its codes) is
kept the same way: .npy files mapped read-only. Such a result names the few files of code it
depends on, and is kept under their hash rather than under the code version: a change
elsewhere in the code does not write gigabytes again. When a result is written, the copies of
the same key made by other versions of that code are deleted (a process that still maps one
keeps reading it: a deleted file lives on while it is mapped).
"""
import functools
import glob
import hashlib
import os
import pickle
import platform
import shutil
import tempfile

import numpy as np

from web.core.cache import ModelKey

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR_NAME = "startup-cache"
# The code whose results are kept: the engine, the sections' measurements and this module (the
# page's templates, views and the class's code may change without measuring again).
CODE = ("pipeline/**/*.py", "web/sections/**/*.py", "web/model_state/measured.py",
        "web/model_state/disk_cache.py", "web/model_state/explainer.py",
        "web/model_state/loaded.py")


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    h = hashlib.sha256()
    for pattern in CODE:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
            h.update(os.path.relpath(path, ROOT).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def machine_identity() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    return (f"{platform.node()}|{cpu}|{os.cpu_count()} cores|numpy {np.__version__}|"
            f"BLAS threads {os.environ.get('OPENBLAS_NUM_THREADS', '?')}")


@functools.lru_cache(maxsize=32)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    files = ([path] if os.path.isfile(path) else
             sorted(os.path.join(path, n) for n in os.listdir(path)
                    if os.path.isfile(os.path.join(path, n))))
    for name in files:
        h.update(os.path.basename(name).encode() + b"\0")
        with open(name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:32]


def model_digest(path: str) -> str:
    """SHA-256 of the model's file or directory (computed once per size and mtime seen)."""
    st = os.stat(path)
    newest = max([st.st_mtime_ns] + ([os.stat(os.path.join(path, n)).st_mtime_ns
                                      for n in os.listdir(path)] if os.path.isdir(path) else []))
    return _digest(os.path.realpath(path), st.st_size, newest)


def stable(key):
    """The key as text that names the same thing in every process, or None when it cannot (a
    model loaded without a file, an object without a stable repr)."""
    if isinstance(key, ModelKey):
        if key.startswith("id:") or not os.path.exists(key):
            return None
        return f"model:{model_digest(key)}"
    if isinstance(key, (str, int, float, bool)) or key is None:
        return repr(key)
    if isinstance(key, (tuple, list)):
        parts = [stable(k) for k in key]
        return None if any(p is None for p in parts) else "(" + ",".join(parts) + ")"
    return None


class DiskCache:
    def __init__(self, data_dir: str):
        self.root = os.path.join(data_dir, DIR_NAME, code_version())
        self.read = self.written = 0           # counts (the start-up's log says them)

    def prune_older_versions(self) -> list:
        """Delete what earlier versions of the code kept (each version's folder holds its own
        measurements and a GGUF model's float32 copy, ~0.5 GB for SmolLM2, that this version
        never reads); the array results (`arrays`) name their own code and replace their older
        copies themselves. A server still running an older version keeps the files it has
        mapped (the system frees them when it stops). Returns the folders deleted."""
        top = os.path.dirname(self.root)
        try:
            names = os.listdir(top)
        except OSError:
            return []
        gone = []
        for name in names:
            path = os.path.join(top, name)
            if name in (os.path.basename(self.root), "arrays") or not os.path.isdir(path):
                continue
            shutil.rmtree(path, ignore_errors=True)
            gone.append(name)
        return gone

    # --- results (measurements) --------------------------------------------------------------

    def get(self, kind: str, key, compute):
        """compute() once per key across starts: read back when kept, else computed and kept."""
        text = stable(key)
        if text is None:
            return compute()
        path = os.path.join(self.root, kind,
                            hashlib.sha256(text.encode()).hexdigest()[:32] + ".pickle")
        try:
            with open(path, "rb") as f:
                kept_text, value = pickle.load(f)
            if kept_text == text:
                self.read += 1
                return value
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, AttributeError,
                ImportError, TypeError):
            pass                      # not kept yet, or by a version that no longer reads
        value = compute()
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=os.path.dirname(path), delete=False) as f:
                pickle.dump((text, value), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(f.name, path)
            self.written += 1
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            pass                      # a value that cannot be kept is computed next time
        return value

    def arrays(self, kind: str, key, compute, code: tuple):
        """compute() once per key across starts, its arrays kept as .npy files and mapped
        read-only when read back (also right after they are written: every start holds them
        the same way). compute() returns arrays in dicts, lists and tuples (other values are
        pickled); `code`: the files of code (paths from the repository's root) the result
        depends on besides what the key names. A key that is not stable is computed and not
        kept."""
        return _arrays(self, kind, key, compute, code)

    # --- a GGUF model's float32 weights, memory-mapped ---------------------------------------

    def model_folder(self, path: str) -> str:
        """Where a .gguf file's float32 arrays are kept (named by the file's hash)."""
        return os.path.join(self.root, "models", model_digest(path))

    def has_model(self, path: str) -> bool:
        """The float32 arrays of the .gguf file at `path` are kept (mapping them is cheap)."""
        return os.path.exists(os.path.join(self.model_folder(path), "model.pickle"))

    def load_model(self, path: str, load, progress=None):
        """load(path), for a .gguf file through its kept float32 arrays (mapped read-only).
        progress(step), when given, is told "hashing", "loading", "writing" and "mapping" as
        each starts (web/model_state/found.py shows them)."""
        if not str(path).lower().endswith(".gguf") or not os.path.isfile(path):
            return load(path)
        say = progress or (lambda step: None)
        say("hashing")
        folder = self.model_folder(path)
        if not os.path.exists(os.path.join(folder, "model.pickle")):
            say("loading")
            model = load(path)
            say("writing")
            self._keep_model(model, folder)
            del model
            self.written += 1
        else:
            self.read += 1
        say("mapping")
        return self._mapped(folder, path)

    def _keep_model(self, model, folder: str):
        arrays = []

        def swap(node):
            if isinstance(node, dict):
                return {k: swap(v) for k, v in node.items()}
            if isinstance(node, list):
                return [swap(v) for v in node]
            if isinstance(node, np.ndarray):
                arrays.append(node)
                return ("kept array", len(arrays) - 1)
            return node
        params = dict(model.params)
        tied = model.config.tied_embeddings and "unembed" in params
        if tied:
            params.pop("unembed")                # a view of wte: made again when read
        skeleton = swap(params)
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        work = tempfile.mkdtemp(dir=os.path.dirname(folder))
        try:
            for i, a in enumerate(arrays):
                np.save(os.path.join(work, f"{i:04d}.npy"), np.ascontiguousarray(a))
            shell = object.__new__(type(model))
            shell.__dict__.update(model.__dict__, params=skeleton, _n_params=None)
            with open(os.path.join(work, "model.pickle"), "wb") as f:
                pickle.dump((shell, tied), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(work, folder)
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
            if not os.path.exists(os.path.join(folder, "model.pickle")):
                raise

    @staticmethod
    def _mapped(folder: str, path: str):
        from pipeline import gguf_file
        with open(os.path.join(folder, "model.pickle"), "rb") as f:
            model, tied = pickle.load(f)

        def back(node):
            if isinstance(node, dict):
                return {k: back(v) for k, v in node.items()}
            if isinstance(node, list):
                return [back(v) for v in node]
            if isinstance(node, tuple) and len(node) == 2 and node[0] == "kept array":
                return np.load(os.path.join(folder, f"{node[1]:04d}.npy"), mmap_mode="r")
            return node
        model.params = back(model.params)
        if tied:
            model.params["unembed"] = model.params["wte"].T
        model.path = path
        gguf_file._PATTERNS[os.path.realpath(path)] = model.pat_str
        return model


class KeptArray:
    """In a kept result's pickled skeleton: an array, `size` elements from `offset` of the file
    of its dtype, in `shape`."""

    def __init__(self, dtype: str, offset: int, shape: tuple):
        self.dtype, self.offset, self.shape = dtype, offset, shape


def _arrays_out(node, arrays: dict):
    """`node` with every ndarray replaced by a KeptArray; the arrays gathered by dtype in
    `arrays` (dtype -> [arrays], written as one file each: a scheme's 840 arrays are 4
    files, mapped once each when read)."""
    if isinstance(node, np.ndarray):
        same = arrays.setdefault(node.dtype.str, [])
        offset = sum(a.size for a in same)
        same.append(node)
        return KeptArray(node.dtype.str, offset, node.shape)
    if isinstance(node, dict):
        return {k: _arrays_out(v, arrays) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return type(node)(_arrays_out(v, arrays) for v in node)
    return node


def _write_arrays(arrays: dict, folder: str):
    for i, (dtype, same) in enumerate(sorted(arrays.items())):
        out = np.lib.format.open_memmap(os.path.join(folder, f"{i:04d}.npy"), mode="w+",
                                        dtype=np.dtype(dtype), shape=(sum(a.size for a in same),))
        at = 0
        for a in same:
            out[at:at + a.size] = a.reshape(-1)
            at += a.size
        out.flush()
        del out


def _arrays_in(node, files: dict):
    """The skeleton with each KeptArray replaced by its part of its dtype's file (mapped
    read-only: files maps a dtype to it)."""
    if isinstance(node, KeptArray):
        flat = files[node.dtype]
        return flat[node.offset:node.offset + int(np.prod(node.shape))].reshape(node.shape)
    if isinstance(node, dict):
        return {k: _arrays_in(v, files) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return type(node)(_arrays_in(v, files) for v in node)
    return node


def _mapped_arrays(skeleton, dtypes: list, folder: str):
    files = {dtype: np.load(os.path.join(folder, f"{i:04d}.npy"), mmap_mode="r")
             for i, dtype in enumerate(dtypes)}
    return _arrays_in(skeleton, files)


@functools.lru_cache(maxsize=16)
def code_hash(files: tuple) -> str:
    """A hash of the named files of code (paths from the repository's root)."""
    h = hashlib.sha256()
    for name in files:
        h.update(name.encode() + b"\0")
        with open(os.path.join(ROOT, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def _arrays(disk: "DiskCache", kind: str, key, compute, code: tuple):
    """DiskCache.arrays (see there)."""
    text = stable(key)
    if text is None:
        return compute()
    home = os.path.join(os.path.dirname(disk.root), "arrays", kind,
                        hashlib.sha256(text.encode()).hexdigest()[:32])
    # the files kept are written by this module: its code names them too
    folder = os.path.join(home, code_hash(tuple(code) + ("web/model_state/disk_cache.py",)))
    try:
        with open(os.path.join(folder, "kept.pickle"), "rb") as f:
            kept_text, skeleton, dtypes = pickle.load(f)
        if kept_text == text:
            value = _mapped_arrays(skeleton, dtypes, folder)
            disk.read += 1
            return value
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, AttributeError,
            ImportError, TypeError):
        # not kept yet, or kept but unreadable here: made again
        shutil.rmtree(folder, ignore_errors=True)
    value = compute()
    arrays = {}
    skeleton = _arrays_out(value, arrays)
    dtypes = sorted(arrays)
    try:
        os.makedirs(home, exist_ok=True)
        work = tempfile.mkdtemp(dir=home)
        try:
            _write_arrays(arrays, work)
            with open(os.path.join(work, "kept.pickle"), "wb") as f:
                pickle.dump((text, skeleton, dtypes), f, protocol=pickle.HIGHEST_PROTOCOL)
            if os.path.exists(folder):        # another process kept it meanwhile
                shutil.rmtree(work, ignore_errors=True)
            else:
                os.replace(work, folder)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        disk.written += 1
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return value              # not kept: computed again next time
    for other in os.listdir(home):           # this key as other versions of the code kept it
        if other != os.path.basename(folder) and not other.startswith("tmp"):
            shutil.rmtree(os.path.join(home, other), ignore_errors=True)
    del value, arrays
    return _mapped_arrays(skeleton, dtypes, folder)


def kept(kind: str, key, compute):
    """compute() through the current app's DiskCache (app.extensions["disk_cache"]), when it
    has one; else compute()."""
    from flask import current_app, has_app_context
    disk = current_app.extensions.get("disk_cache") if has_app_context() else None
    return compute() if disk is None else disk.get(kind, key, compute)


def current_disk():
    """The current app's DiskCache (app.extensions["disk_cache"]: the server's), or None."""
    from flask import current_app, has_app_context
    return current_app.extensions.get("disk_cache") if has_app_context() else None


def kept_arrays(kind: str, key, compute, code: tuple):
    """compute() through the current app's DiskCache.arrays, when it has one; else compute()
    (held in memory: the caller keeps it its own way)."""
    disk = current_disk()
    return compute() if disk is None else disk.arrays(kind, key, compute, code)
