"""The GGUF files already on this machine: found in folders and in the stores of the tools that
download models, described from their headers alone (the weights are never read).

    find_gguf_files(folders, home, env)   every .gguf file found: (path, source, name)
    read_header(path)                     a GGUF file's metadata and tensor infos
    describe(path, ...)                   what the picker says of one: architecture, parameters,
                                          tensor types, size, memory it would take, runnable?

Where files are found (each looked at only when it exists):

    folders given (app.py --models DIR)   every *.gguf below them, recursively
    Ollama     $OLLAMA_MODELS, else ~/.ollama/models:
               manifests/<registry>/<namespace>/<name>/<tag> is a JSON manifest whose "layers"
               entry of mediaType "application/vnd.ollama.image.model" has the digest
               "sha256:<hex>" of the blob blobs/sha256-<hex>, the GGUF file itself (named here
               <name>:<tag>, or <namespace>/<name>:<tag> outside the "library" namespace)
    LM Studio  ~/.lmstudio/models and ~/.cache/lm-studio/models: <publisher>/<repo>/*.gguf
    Hugging Face's cache   $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub:
               models--<org>--<repo>/snapshots/<revision>/**.gguf (links into blobs/)

A file found twice (a snapshot's link and the folder holding its blob, say) is listed once, by
its real path.

The header is parsed here with the GGUF layout (llama.cpp's gguf.md): "GGUF", version (2 or 3),
tensor count, metadata count, the metadata (key, type, value), then per tensor its name, shape
(innermost first), ggml type and offset; the data starts at the next multiple of
general.alignment (32). Only the header's bytes are read: a 4 GB file costs the few MB of its
vocabulary. Type names and block sizes come from llama.cpp's `gguf` package.
"""
import hashlib
import json
import os
import struct
from dataclasses import dataclass, field

from .errors import ModelLoadError

OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"

# GGUF metadata value types (gguf.md: GGUFValueType)
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
            11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# bounds a header of a real model stays far inside; past them the file is not a GGUF header
_MAX_STRING = 1 << 24
_MAX_COUNT = 1 << 26
_MAX_DIMS = 8
# tensors that are not parameters: llama.cpp's converter writes Llama 3.1's RoPE scaling as
# one divisor per pair of RoPE dimensions, computed from the config, and Phi-3's LongRoPE as two
# such sets (pipeline/gguf_file.py). The header has no values: a config read from it has none of
# these divisors (the picker needs its sizes only)
NOT_PARAMETERS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple          # GGUF order: innermost dimension first
    type_name: str        # ggml type: "Q4_K", "F32", ...
    offset: int           # from the start of the data section
    n_bytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Header:
    version: int
    metadata: dict        # key -> value; an array is summarised as ("array", length)
    tensors: tuple        # TensorInfo, in the file's order
    data_start: int       # file offset of the tensor data
    file_size: int


class _Reader:
    def __init__(self, f, path):
        self.f, self.path = f, path

    def take(self, n: int) -> bytes:
        b = self.f.read(n)
        if len(b) != n:
            raise ModelLoadError(f"{self.path}: the GGUF header ends early (truncated file)")
        return b

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > _MAX_STRING:
            raise ModelLoadError(f"{self.path}: a GGUF string of {n} bytes: not a GGUF header")
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, kind: int, keep_array: bool = False):
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner, n = self.unpack("<I"), self.unpack("<Q")
            if n > _MAX_COUNT:
                raise ModelLoadError(f"{self.path}: an array of {n} values: not a GGUF header")
            if inner in _SCALARS and not keep_array:          # skipped at once
                self.f.seek(n * struct.calcsize(_SCALARS[inner]), os.SEEK_CUR)
                return ("array", n)
            if inner == _STRING and not keep_array:           # lengths read, bytes skipped
                for _ in range(n):
                    k = self.unpack("<Q")
                    if k > _MAX_STRING:
                        raise ModelLoadError(f"{self.path}: a GGUF string of {k} bytes")
                    self.f.seek(k, os.SEEK_CUR)
                return ("array", n)
            items = [self.value(inner) for _ in range(n)]
            return items if keep_array else ("array", n)
        raise ModelLoadError(f"{self.path}: unknown GGUF value type {kind}")


def read_header(path: str) -> Header:
    """The header of the GGUF file at `path` (ModelLoadError, one line naming the file, when it
    is not one). Reads the header's bytes only."""
    import gguf
    try:
        size = os.path.getsize(path)
        f = open(path, "rb")
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot be read ({e.strerror})") from None
    with f:
        r = _Reader(f, path)
        if f.read(4) != b"GGUF":
            raise ModelLoadError(f"{path}: not a GGUF file (it does not start with 'GGUF')")
        version = r.unpack("<I")
        if version not in (2, 3):
            raise ModelLoadError(f"{path}: GGUF version {version} (versions 2 and 3 are read)")
        n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
        if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
            raise ModelLoadError(f"{path}: {n_tensors} tensors, {n_kv} keys: not a GGUF header")
        meta = {}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.unpack("<I"))
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            n_dims = r.unpack("<I")
            if n_dims > _MAX_DIMS:
                raise ModelLoadError(f"{path}: tensor {name!r} has {n_dims} dimensions")
            shape = tuple(r.unpack("<Q") for _ in range(n_dims))
            kind, offset = r.unpack("<I"), r.unpack("<Q")
            try:
                qtype = gguf.GGMLQuantizationType(kind)
                block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
            except (ValueError, KeyError):
                raise ModelLoadError(f"{path}: tensor {name!r} has an unknown ggml type "
                                     f"{kind}") from None
            n = 1
            for s in shape:
                n *= s
            infos.append(TensorInfo(name, shape, qtype.name, offset,
                                    n // block * block_bytes))
        align = meta.get("general.alignment", 32)
        if not isinstance(align, int) or align <= 0:
            align = 32
        end = f.tell()
    data_start = (end + align - 1) // align * align
    last = max((data_start + t.offset + t.n_bytes for t in infos), default=data_start)
    if last > size:
        raise ModelLoadError(f"{path}: its tensors need {last:,} bytes, the file has "
                             f"{size:,} (truncated)")
    return Header(version, meta, tuple(infos), data_start, size)


# --- what the engine would make of it -----------------------------------------------------------

class _Value:
    def __init__(self, value):
        self._value = value

    def contents(self):
        return self._value


class _HeaderFields:
    """The header as pipeline.gguf_file reads a GGUFReader's fields, for its read_config."""

    def __init__(self, header: Header):
        self.fields = {k: _Value(v) for k, v in header.metadata.items()}


class _Shape:
    """A tensor as gguf_file.read_config looks at it (its shape, its type's name)."""

    def __init__(self, t: TensorInfo):
        import gguf
        self.name, self.shape = t.name, t.shape
        self.tensor_type = gguf.GGMLQuantizationType[t.type_name]
        self.n_elements = t.n_elements


def engine_config(header: Header, path: str):
    """(the ModelConfig the engine would run, None) or (None, why it cannot run the file),
    from the header alone, with the loader's own checks (pipeline.gguf_file)."""
    from . import gguf_file, loader
    arch = header.metadata.get("general.architecture")
    if not isinstance(arch, str):
        return None, "no general.architecture in its metadata"
    runs = loader.gguf_architectures()
    if arch not in runs:
        return None, (f"architecture {arch!r}: this engine runs {', '.join(runs)}")
    tensors = {t.name: _Shape(t) for t in header.tensors if t.name not in NOT_PARAMETERS}
    try:
        config = gguf_file.read_config(gguf_file._Fields(_HeaderFields(header), path), tensors,
                                       path)
    except ModelLoadError as e:
        return None, str(e).removeprefix(f"{path}: ")
    unsupported = sorted({t.type_name for t in header.tensors}
                         - set(gguf_file.SUPPORTED_TYPES))
    if unsupported:
        return None, (f"tensor type {', '.join(unsupported)}: this engine reads "
                      f"{', '.join(gguf_file.SUPPORTED_TYPES)}")
    expected = gguf_file.expected_tensors(config, arch)
    for name, (_, shape) in expected.items():
        if name not in tensors:
            return None, f"no tensor {name!r} (the engine's {arch} needs it)"
        if tuple(reversed(tensors[name].shape)) != shape:
            return None, f"tensor {name!r} has shape {list(tensors[name].shape)}"
    extra = sorted(set(tensors) - set(expected))
    if extra:
        return None, f"tensor {extra[0]!r} is not part of the {arch} model this engine runs"
    tok = header.metadata.get("tokenizer.ggml.model")
    if tok not in ("gpt2", "llama"):
        return None, f"tokenizer.ggml.model {tok!r} (the engine reads \"gpt2\" and \"llama\")"
    pre = header.metadata.get("tokenizer.ggml.pre", "default")
    if tok == "gpt2" and pre not in gguf_file.PRE_PATTERNS:
        return None, f"pre-tokenizer {pre!r} is not one the engine reproduces"
    return config, None


def n_parameters(header: Header) -> int:
    """Parameters, from the tensors' shapes (a tied unembedding is stored, and counted, once)."""
    return sum(t.n_elements for t in header.tensors if t.name not in NOT_PARAMETERS)


def type_shares(header: Header) -> list:
    """[(ggml type, share of the parameters)], the largest first."""
    counts = {}
    for t in header.tensors:
        if t.name not in NOT_PARAMETERS:
            counts[t.type_name] = counts.get(t.type_name, 0) + t.n_elements
    total = sum(counts.values()) or 1
    return sorted(((k, v / total) for k, v in counts.items()), key=lambda kv: (-kv[1], kv[0]))


def types_text(shares) -> str:
    """ "Q4_K 60%, Q6_K 10%, F32 0.1%": each type's share of the parameters."""
    def pct(s):
        return f"{s * 100:.0f}%" if s >= 0.01 else f"{s * 100:.2g}%"
    return ", ".join(f"{k} {pct(s)}" for k, s in shares)


# --- where the files are ------------------------------------------------------------------------

@dataclass(frozen=True)
class FoundFile:
    path: str             # the file (for Ollama: the blob)
    source: str           # "folder", "Ollama", "LM Studio", "Hugging Face cache"
    name: str             # as its store names it


def _gguf_below(folder: str):
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if f.lower().endswith(".gguf"):
                yield os.path.join(root, f)


def ollama_root(home: str, env) -> str:
    return env.get("OLLAMA_MODELS") or os.path.join(home, ".ollama", "models")


def hf_hub_root(home: str, env) -> str:
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    if env.get("HF_HOME"):
        return os.path.join(env["HF_HOME"], "hub")
    return os.path.join(home, ".cache", "huggingface", "hub")


def lm_studio_roots(home: str) -> tuple:
    return (os.path.join(home, ".lmstudio", "models"),
            os.path.join(home, ".cache", "lm-studio", "models"))


def ollama_models(root: str):
    """(name:tag, blob path) of each manifest whose model layer's blob is present."""
    manifests = os.path.join(root, "manifests")
    if not os.path.isdir(manifests):
        return
    for dirpath, dirs, files in os.walk(manifests):
        dirs.sort()
        for tag in sorted(files):
            path = os.path.join(dirpath, tag)
            parts = os.path.relpath(path, manifests).split(os.sep)
            if len(parts) != 4:                        # registry/namespace/name/tag
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    layers = json.load(f).get("layers", [])
            except (OSError, ValueError, AttributeError):
                continue
            for layer in layers if isinstance(layers, list) else []:
                if not isinstance(layer, dict) or layer.get("mediaType") != OLLAMA_MODEL_LAYER:
                    continue
                digest = str(layer.get("digest", ""))
                algo, _, hexdigest = digest.partition(":")
                if algo != "sha256" or not hexdigest.isalnum():
                    continue
                blob = os.path.join(root, "blobs", f"sha256-{hexdigest}")
                if os.path.isfile(blob):
                    _, namespace, name, _ = parts
                    shown = name if namespace == "library" else f"{namespace}/{name}"
                    yield f"{shown}:{tag}", blob


def hf_models(root: str):
    """(org/repo/file, path) of each .gguf in a snapshot of Hugging Face's cache."""
    if not os.path.isdir(root):
        return
    for repo in sorted(os.listdir(root)):
        if not repo.startswith("models--"):
            continue
        snapshots = os.path.join(root, repo, "snapshots")
        if not os.path.isdir(snapshots):
            continue
        repo_id = repo[len("models--"):].replace("--", "/")
        for revision in sorted(os.listdir(snapshots)):
            base = os.path.join(snapshots, revision)
            for path in _gguf_below(base):
                yield f"{repo_id}/{os.path.relpath(path, base)}", path


def find_gguf_files(folders=(), stores: bool = True, home: str = None, env=None) -> list:
    """Every GGUF file in `folders` (recursively) and, with stores=True, in Ollama's, LM
    Studio's and Hugging Face's stores under `home` (default: the user's) as `env` (default:
    os.environ) places them. Each real file once, the first place it was found."""
    env = os.environ if env is None else env
    home = home or os.path.expanduser("~")
    found, seen = [], set()

    def add(path, source, name):
        real = os.path.realpath(path)
        if real not in seen and os.path.isfile(real):
            seen.add(real)
            found.append(FoundFile(path, source, name))

    for folder in folders:
        for path in _gguf_below(folder):
            add(path, "folder", os.path.relpath(path, folder))
    if stores:
        for name, blob in ollama_models(ollama_root(home, env)):
            add(blob, "Ollama", name)
        for root in lm_studio_roots(home):
            if os.path.isdir(root):
                for path in _gguf_below(root):
                    add(path, "LM Studio", os.path.relpath(path, root))
        for name, path in hf_models(hf_hub_root(home, env)):
            add(path, "Hugging Face cache", name)
    return found


# --- one file, as the picker lists it ----------------------------------------------------------

@dataclass(frozen=True)
class Description:
    path: str
    source: str
    name: str
    file_size: int
    architecture: str = ""
    title: str = ""               # general.name, else the store's name
    n_params: int = 0
    types: tuple = ()             # (ggml type, share of the parameters)
    config: object = None         # the engine's ModelConfig, None when it cannot run the file
    problem: str = ""             # why the engine cannot run it ("" when it can)
    extra: dict = field(default_factory=dict)
    n_tensors: int = 0            # parameter tensors (the loader dequantizes each in turn)

    @property
    def runnable(self) -> bool:
        return self.config is not None and not self.problem

    @property
    def types_text(self) -> str:
        return types_text(self.types)


def describe(found: FoundFile) -> Description:
    """What the header of a found file says, and whether the engine can run it."""
    size = os.path.getsize(found.path)
    try:
        header = read_header(found.path)
    except ModelLoadError as e:
        return Description(found.path, found.source, found.name, size,
                           problem=str(e).removeprefix(f"{found.path}: "))
    arch = header.metadata.get("general.architecture")
    title = header.metadata.get("general.name")
    config, problem = engine_config(header, found.path)
    return Description(found.path, found.source, found.name, size,
                       architecture=arch if isinstance(arch, str) else "",
                       title=title if isinstance(title, str) and title else found.name,
                       n_params=n_parameters(header), types=tuple(type_shares(header)),
                       config=config, problem=problem or "",
                       n_tensors=sum(1 for t in header.tensors if t.name not in NOT_PARAMETERS))


def short_id(path: str) -> str:
    """A short name of a file's real path, the same in every process of one server."""
    return hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:8]
