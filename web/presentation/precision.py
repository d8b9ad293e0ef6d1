"""How the running model's numbers are stored, told once on the page (the generation loop's
"How the numbers are stored", templates/sections/generation.html) and referred to elsewhere:
the types of its file's tensors (read from the file: GGUF's stored types, or a safetensors
header's dtypes), the engine's float32 copy (NumPy's math here is float32), and the bytes one
token adds to its float32 KV cache against a 16-bit one."""
import os
from dataclasses import dataclass

from pipeline import quantize
from pipeline.kvcache import kv_bytes_per_token
from pipeline.loader import WEIGHTS_FILE, read_safetensors_header
from web.core.cache import memoized

# safetensors dtype -> bytes per number
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "F8_E4M3": 1,
                     "F8_E5M2": 1}


@dataclass(frozen=True)
class StoredType:
    """The tensors of the file stored as one type."""
    name: str             # "Q4_1", "F32" (GGUF's type names; safetensors' dtypes)
    n_tensors: int
    n_weights: int
    n_bytes: int

    @property
    def bits(self) -> float:
        """Bits per weight, block scales and minimums included (Q4_1: 20 bytes per 32)."""
        return 8 * self.n_bytes / self.n_weights


@dataclass(frozen=True)
class Storage:
    file_name: str
    file_format: str      # "gguf" or "safetensors"
    types: tuple          # StoredType, most weights first
    n_params: int
    kv_float32: int       # bytes one token adds to the engine's float32 KV cache
    kv_fp16: int          # ... to a 16-bit one

    @property
    def file_bytes(self) -> int:
        return sum(t.n_bytes for t in self.types)

    @property
    def file_bits(self) -> float:
        """Bits per parameter over the whole file."""
        return 8 * self.file_bytes / sum(t.n_weights for t in self.types)

    @property
    def float32_bytes(self) -> int:
        """The engine's copy: every parameter as a 4-byte float32."""
        return 4 * self.n_params

    @property
    def all_float32(self) -> bool:
        return all(t.name == "F32" for t in self.types)


def _by_type(rows) -> tuple:
    """[(type name, weights, bytes)] per tensor -> StoredType per type, most weights first."""
    acc = {}
    for name, n, b in rows:
        t = acc.setdefault(name, [0, 0, 0])
        t[0], t[1], t[2] = t[0] + 1, t[1] + n, t[2] + b
    return tuple(sorted((StoredType(k, *v) for k, v in acc.items()),
                        key=lambda t: (-t.n_weights, t.name)))


def _stored_types(model) -> tuple:
    if model.file_format == "gguf" and model.stored:
        return _by_type((st.type_name, st.n_elements, st.n_bytes)
                        for st in quantize.stored_tensors(model).values())
    path = os.path.join(model.path or "", WEIGHTS_FILE)
    if not os.path.isfile(path):
        return ()
    header, _ = read_safetensors_header(path)
    rows = []
    for info in header.values():
        begin, end = info["data_offsets"]
        n = 1
        for s in info["shape"]:
            n *= int(s)
        rows.append((info["dtype"], n, end - begin))
    return _by_type(rows)


@memoized(4)
def storage(model) -> Storage:
    """The model's storage, read once per model."""
    path = model.path or ""
    return Storage(file_name=os.path.basename(path if model.file_format == "gguf"
                                              else os.path.join(path, WEIGHTS_FILE)),
                   file_format=model.file_format or "safetensors",
                   types=_stored_types(model), n_params=model.n_params(),
                   kv_float32=kv_bytes_per_token(model.config, 4),
                   kv_fp16=kv_bytes_per_token(model.config, 2))


def storage_of(lm) -> Storage:
    """The loaded model's storage (a Jinja global, web/core/views.py: the templates that tell or
    cite
    it)."""
    return storage(lm.model)
