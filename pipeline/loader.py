"""Load a checkpoint in the Hugging Face layout into a `Model` (a .gguf file: pipeline.gguf_file).

    <dir>/config.json                    architecture (model_type "gpt2" or "llama")
    <dir>/model.safetensors              weights, or model.safetensors.index.json + shards
    <dir>/tokenizer files                see pipeline.tokenizer.load_tokenizer

Weights in float32, float16 or bfloat16 all become float32. Safetensors files are parsed here
(an 8-byte header length, a JSON header, then raw little-endian bytes), because the
safetensors NumPy reader has no bfloat16, and so that a bad file yields one `ModelLoadError`
naming the file and the tensor. Every weight is read once and shaped for `x @ w`.
"""
import json
import os

import numpy as np

from . import gguf_file
from .errors import ModelLoadError
from .model import Model, ModelConfig
from .tokenizer import TokenizerLoadError, load_tokenizer
from .tokenizer import pretokenizer_pattern as _directory_pattern

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL_DIR = os.path.join(ROOT, "models", "austen")
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX = "model.safetensors.index.json"


def load_model(path: str = None) -> Model:
    """Load the model in directory `path` (default: the project's own model, models/austen),
    or a llama.cpp .gguf file (pipeline.gguf_file)."""
    directory = path or DEFAULT_MODEL_DIR
    if is_gguf_file(directory):
        return gguf_file.load_gguf(directory)
    if not os.path.isdir(directory):
        raise ModelLoadError(f"{directory}: no such model directory")
    config = read_config(directory)
    weights = Weights(directory)
    params = (gpt2_params if config.model_type == "gpt2" else llama_params)(weights, config)
    model = Model(config, params, read_tokenizer(directory), path=directory)
    model.file_format = "safetensors"
    return model


def gguf_architectures() -> tuple:
    """The general.architecture values of the .gguf files load_model runs (pipeline.gguf_file):
    what pipeline.discovery offers, and the reason it gives for the others."""
    return tuple(gguf_file.ARCHITECTURES)


def is_gguf_file(path) -> bool:
    """A path load_model reads as llama.cpp's single file (by its name: .gguf, not a folder)."""
    return bool(path) and str(path).lower().endswith(".gguf") and not os.path.isdir(path)


def pretokenizer_pattern(path) -> str:
    """The regex that splits text into words before BPE, for whatever load_model reads: a .gguf
    file's tokenizer.ggml.pre (remembered when the file was loaded, else read from its header),
    or a model directory's tokenizer files (pipeline.tokenizer.pretokenizer_pattern)."""
    if is_gguf_file(path) and os.path.isfile(path):
        return gguf_file.pattern_of(path)
    return _directory_pattern(path)


# --- config.json -> ModelConfig ---------------------------------------------------------------

def read_config(directory: str) -> ModelConfig:
    path = os.path.join(directory, CONFIG_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            hf = json.load(f)
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: missing (every model directory needs a config.json)") \
            from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelLoadError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(hf, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    readers = {"gpt2": gpt2_config, "llama": llama_config}
    model_type = hf.get("model_type")
    if model_type not in readers:
        raise ModelLoadError(f"{path}: model_type {model_type!r} is not supported "
                             f"(supported: {', '.join(readers)})")
    try:
        return readers[model_type](hf, path)
    except KeyError as e:
        raise ModelLoadError(f"{path}: missing field {e}") from None
    except (TypeError, ValueError) as e:
        raise ModelLoadError(f"{path}: bad value ({e})") from None


def _token_id(value):
    if isinstance(value, list):  # some configs list several end tokens; the first is the main one
        value = value[0] if value else None
    return None if value is None else int(value)


def gpt2_config(hf: dict, path: str) -> ModelConfig:
    act = hf.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        raise ModelLoadError(f"{path}: activation_function {act!r} is not supported "
                             "(GPT-2's tanh GELU only)")
    if hf.get("scale_attn_by_inverse_layer_idx") or hf.get("scale_attn_weights") is False:
        raise ModelLoadError(f"{path}: non-standard attention scaling is not supported")
    d, n_heads = int(hf["n_embd"]), int(hf["n_head"])
    return ModelConfig(
        model_type="gpt2", vocab_size=int(hf["vocab_size"]), d_model=d,
        n_layers=int(hf["n_layer"]), n_heads=n_heads, n_kv_heads=n_heads,
        head_dim=d // n_heads, d_ff=int(hf.get("n_inner") or 4 * d),
        n_ctx=int(hf.get("n_positions", hf.get("n_ctx", 1024))),
        norm="layer_norm", norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)), mlp="gelu",
        positions="learned", rope_theta=0.0,
        tied_embeddings=bool(hf.get("tie_word_embeddings", True)),
        bos_token_id=_token_id(hf.get("bos_token_id")),
        eos_token_id=_token_id(hf.get("eos_token_id")))


def llama_config(hf: dict, path: str) -> ModelConfig:
    if hf.get("hidden_act", "silu") != "silu":
        raise ModelLoadError(f"{path}: hidden_act {hf['hidden_act']!r} is not supported (silu)")
    if hf.get("attention_bias") or hf.get("mlp_bias"):
        raise ModelLoadError(f"{path}: attention_bias / mlp_bias are not supported")
    # transformers 5 writes rope_parameters {rope_theta, rope_type}; older configs have a
    # top-level rope_theta and rope_scaling.
    rope = hf.get("rope_parameters") or hf.get("rope_scaling") or {}
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    if rope_type not in ("default", "llama3"):
        raise ModelLoadError(f"{path}: rope_type {rope_type!r} is not supported "
                             "(default, llama3)")
    if rope.get("partial_rotary_factor", hf.get("partial_rotary_factor", 1.0)) != 1.0:
        raise ModelLoadError(f"{path}: partial_rotary_factor is not supported")
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    llama3 = () if rope_type == "default" else (
        float(rope["factor"]), float(rope["low_freq_factor"]), float(rope["high_freq_factor"]),
        float(rope["original_max_position_embeddings"]))
    d, n_heads = int(hf["hidden_size"]), int(hf["num_attention_heads"])
    n_kv_heads = int(hf.get("num_key_value_heads") or n_heads)
    if n_heads % n_kv_heads:
        raise ModelLoadError(f"{path}: num_attention_heads {n_heads} is not a multiple of "
                             f"num_key_value_heads {n_kv_heads}")
    return ModelConfig(
        model_type="llama", vocab_size=int(hf["vocab_size"]), d_model=d,
        n_layers=int(hf["num_hidden_layers"]), n_heads=n_heads, n_kv_heads=n_kv_heads,
        head_dim=int(hf.get("head_dim") or d // n_heads), d_ff=int(hf["intermediate_size"]),
        n_ctx=int(hf.get("max_position_embeddings", 2048)),
        norm="rms_norm", norm_eps=float(hf.get("rms_norm_eps", 1e-6)), mlp="swiglu",
        positions="rope", rope_theta=float(theta), rope_llama3=llama3,
        tied_embeddings=bool(hf.get("tie_word_embeddings", False)),
        bos_token_id=_token_id(hf.get("bos_token_id")),
        eos_token_id=_token_id(hf.get("eos_token_id")))


# --- safetensors ------------------------------------------------------------------------------

DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}


def read_safetensors_header(path: str) -> tuple:
    """(header: name -> {dtype, shape, data_offsets}, byte offset of the data)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n <= 0 or 8 + n > size:
                raise ModelLoadError(f"{path}: not a safetensors file (bad header length)")
            header = json.loads(f.read(n))
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: missing (the weights)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelLoadError(f"{path}: corrupt safetensors header ({e})") from None
    if not isinstance(header, dict):
        raise ModelLoadError(f"{path}: corrupt safetensors header")
    header.pop("__metadata__", None)
    data_start, data_size = 8 + n, size - 8 - n
    for name, info in header.items():
        try:
            begin, end = info["data_offsets"]
            shape, dtype = tuple(int(s) for s in info["shape"]), info["dtype"]
        except (KeyError, TypeError, ValueError):
            raise ModelLoadError(f"{path}: corrupt header entry for tensor {name!r}") from None
        if not 0 <= begin <= end <= data_size:
            raise ModelLoadError(f"{path}: tensor {name!r} lies outside the file "
                                 "(truncated or corrupt)")
        if dtype in DTYPES and \
                end - begin != int(np.prod(shape)) * np.dtype(DTYPES[dtype]).itemsize:
            raise ModelLoadError(f"{path}: tensor {name!r} has {end - begin} bytes, "
                                 f"not what {dtype} {list(shape)} needs")
        info["shape"] = shape
    return header, data_start


def to_float32(raw: bytes, dtype: str) -> np.ndarray:
    if dtype == "BF16":  # bfloat16 is the top half of a float32: shift it back into place
        return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    return np.frombuffer(raw, DTYPES[dtype]).astype(np.float32)


class Weights:
    """The tensors of a model directory, read by name on request (one file or shards)."""

    def __init__(self, directory: str):
        index = os.path.join(directory, WEIGHTS_INDEX)
        single = os.path.join(directory, WEIGHTS_FILE)
        self.where = {}    # tensor name -> file
        self.headers = {}  # file -> (header, data_start)
        if os.path.exists(single) or not os.path.exists(index):
            files = [single]
        else:
            try:
                with open(index, encoding="utf-8") as f:
                    weight_map = json.load(f)["weight_map"]
                files = sorted({os.path.join(directory, v) for v in weight_map.values()})
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError,
                    AttributeError) as e:
                raise ModelLoadError(f"{index}: not a valid shard index ({e})") from None
        for path in files:
            self.headers[path] = read_safetensors_header(path)
            for name in self.headers[path][0]:
                self.where[name] = path
        self.files = files

    def __contains__(self, name):
        return name in self.where

    def get(self, name: str, shape: tuple) -> np.ndarray:
        """Tensor `name` as float32, checked to have `shape`."""
        if name not in self.where:
            raise ModelLoadError(f"{' / '.join(self.files)}: missing tensor {name!r}")
        path = self.where[name]
        header, data_start = self.headers[path]
        info = header[name]
        if info["shape"] != tuple(shape):
            raise ModelLoadError(f"{path}: tensor {name!r} has shape {list(info['shape'])}, "
                                 f"expected {list(shape)}")
        if info["dtype"] not in DTYPES:
            raise ModelLoadError(f"{path}: tensor {name!r} has dtype {info['dtype']}; "
                                 f"supported: {', '.join(DTYPES)}")
        begin, end = info["data_offsets"]
        try:
            with open(path, "rb") as f:
                f.seek(data_start + begin)
                raw = f.read(end - begin)
        except OSError as e:
            raise ModelLoadError(f"{path}: cannot read tensor {name!r} ({e})") from None
        if len(raw) != end - begin:
            raise ModelLoadError(f"{path}: tensor {name!r} is truncated")
        x = to_float32(raw, info["dtype"]).reshape(shape)
        if not np.isfinite(x).all():
            raise ModelLoadError(f"{path}: tensor {name!r} holds NaN or infinite values")
        return x


# --- tensors -> the nested params dict (keys = the model functions' argument names) -------------

def gpt2_params(w: Weights, c: ModelConfig) -> dict:
    """GPT-2's Conv1D weights are stored (in, out): already the `x @ w` layout."""
    p = "transformer." if "transformer.wte.weight" in w else ""
    d, d_ff = c.d_model, c.d_ff

    def norm(name):
        return {"g": w.get(f"{p}{name}.weight", (d,)), "b": w.get(f"{p}{name}.bias", (d,))}

    def block(i):
        h = f"{p}h.{i}."
        qkv_w = w.get(h + "attn.c_attn.weight", (d, 3 * d))            # [d, 3d]: q | k | v
        qkv_b = w.get(h + "attn.c_attn.bias", (3 * d,))
        attn = {}
        for j, name in enumerate("qkv"):
            attn[f"w_{name}"] = np.ascontiguousarray(qkv_w[:, j * d:(j + 1) * d])
            attn[f"b_{name}"] = qkv_b[j * d:(j + 1) * d].copy()
        attn["w_o"] = w.get(h + "attn.c_proj.weight", (d, d))
        attn["b_o"] = w.get(h + "attn.c_proj.bias", (d,))
        mlp = {"w_fc": w.get(h + "mlp.c_fc.weight", (d, d_ff)),
               "b_fc": w.get(h + "mlp.c_fc.bias", (d_ff,)),
               "w_proj": w.get(h + "mlp.c_proj.weight", (d_ff, d)),
               "b_proj": w.get(h + "mlp.c_proj.bias", (d,))}
        return {"ln_1": norm(f"h.{i}.ln_1"), "attn": attn, "ln_2": norm(f"h.{i}.ln_2"), "mlp": mlp}

    wte = w.get(p + "wte.weight", (c.vocab_size, d))
    unembed = wte.T if c.tied_embeddings else w.get("lm_head.weight", (c.vocab_size, d)).T.copy()
    return {"wte": wte, "wpe": w.get(p + "wpe.weight", (c.n_ctx, d)),
            "blocks": [block(i) for i in range(c.n_layers)], "ln_f": norm("ln_f"),
            "unembed": unembed}


def llama_params(w: Weights, c: ModelConfig) -> dict:
    """Llama's nn.Linear weights are stored (out, in): transposed once here for `x @ w`."""
    d, hd = c.d_model, c.head_dim

    def linear(name, d_out, d_in):
        return np.ascontiguousarray(w.get(name, (d_out, d_in)).T)           # -> [in, out]

    def block(i):
        b = f"model.layers.{i}."
        attn = {"w_q": linear(b + "self_attn.q_proj.weight", c.n_heads * hd, d),
                "w_k": linear(b + "self_attn.k_proj.weight", c.n_kv_heads * hd, d),
                "w_v": linear(b + "self_attn.v_proj.weight", c.n_kv_heads * hd, d),
                "w_o": linear(b + "self_attn.o_proj.weight", d, c.n_heads * hd)}
        mlp = {"w_gate": linear(b + "mlp.gate_proj.weight", c.d_ff, d),
               "w_up": linear(b + "mlp.up_proj.weight", c.d_ff, d),
               "w_down": linear(b + "mlp.down_proj.weight", d, c.d_ff)}
        return {"ln_1": {"g": w.get(b + "input_layernorm.weight", (d,))}, "attn": attn,
                "ln_2": {"g": w.get(b + "post_attention_layernorm.weight", (d,))}, "mlp": mlp}

    wte = w.get("model.embed_tokens.weight", (c.vocab_size, d))
    unembed = wte.T if c.tied_embeddings else linear("lm_head.weight", c.vocab_size, d)
    return {"wte": wte, "blocks": [block(i) for i in range(c.n_layers)],
            "ln_f": {"g": w.get("model.norm.weight", (d,))}, "unembed": unembed}


# --- tokenizer ----------------------------------------------------------------------------------

def read_tokenizer(directory: str):
    try:
        return load_tokenizer(directory)
    except (TokenizerLoadError, OSError) as e:  # its messages name the file
        detail = str(e) if directory in str(e) else f"{directory}: {type(e).__name__}: {e}"
        raise ModelLoadError(f"cannot load the tokenizer: {detail}") from None
