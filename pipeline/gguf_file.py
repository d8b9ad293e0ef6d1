"""Load a GGUF checkpoint (llama.cpp's single-file format) into a `Model`.

The file is read with llama.cpp's own Python reader (the `gguf` package: `GGUFReader`, and
`gguf.quants.dequantize` for the block formats); nothing here parses GGUF bytes itself.

    metadata   general.architecture ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3" or
               "gpt2"),
               {arch}.block_count,
               embedding_length, feed_forward_length, attention.head_count(_kv),
               attention.key_length (the head width, when it is not width / heads: Mistral
               Nemo, Qwen3), rope.freq_base, the norm's epsilon, context_length;
               tokenizer.ggml.* (a byte-level BPE, model "gpt2": tokens, token_type, merges,
               pre, bos/eos ids; or SentencePiece's, model "llama": tokens, scores, token_type,
               add_space_prefix, read by pipeline.spm)
    tensors    token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm,
               ffn_gate, ffn_up, ffn_down}, output_norm, output (Llama), and
                 rope_freqs (Llama 3.1+: the divisor of each RoPE pair's frequency, which
                   llama.cpp's converter computes from rope_scaling {rope_type "llama3"})
                 blk.N.attn_{q,k,v}.bias (Qwen2)
                 blk.N.attn_{q,k}_norm (Qwen3: a [head width] RMSNorm gain for every head)
                 blk.N.attn_qkv and ffn_up = [gate | up] instead (Phi-3's fused projections)
                 rope_factors_long, rope_factors_short (Phi-3's LongRoPE: see below)
                 blk.N.post_attention_norm, post_ffw_norm (Gemma 2, 3; ffn_norm: the one before)
               token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm,
               ffn_up, ffn_down} (.weight and .bias), output_norm, output (GPT-2).
               No output.weight: the unembedding is tied to token_embd.

Layouts. GGUF lists a tensor's shape innermost first (attn_q of SmolLM2 is [576, 576], ffn_up
[576, 1536]); the reader's NumPy array is in the usual outer-first order, [out, in] like a PyTorch
nn.Linear weight (GPT-2's Conv1D weights were transposed to [out, in] by llama.cpp's converter).
Every weight is dequantized to float32 and transposed once to [in, out] for `x @ w`.

llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) reorders the rows of attn_q and
attn_k inside each head, because ggml's RoPE rotates adjacent pairs (0, 1), (2, 3)... while
Hugging Face's rotates the two halves of a head (j with j + hd/2):

    w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2).reshape(rows, cols)

`unpermute_rope_rows` undoes it (transformers' GGUF loader does the same), so pipeline.model's
rotate-half RoPE is right. Only "llama" files are permuted: Qwen2 and Qwen3 are converted by
Qwen2Model, which writes the rows as they are, and llama.cpp runs them with NeoX-style RoPE (the
rotate-half pairing itself).

Llama 3.1's RoPE scaling: transformers' GGUF loader (5.23) reads no rope_freqs tensor and runs
such a file with unscaled RoPE; llama.cpp divides each pair's frequency by its factor
(ggml_rope_ext's freq_factors), as this engine does, which is what the original model's
rope_scaling computes (tests/test_gguf.py checks it against transformers given that rope_scaling).

Gemma 3 4B+ (rope.scaling.type "linear", rope.scaling.factor 8): llama.cpp turns the global
blocks' pairs `factor` times slower (freq_scale = 1 / factor) and keeps the sliding-window blocks'
base 10000 unscaled (rope_freq_scale_train_swa = 1), as transformers' Gemma3 applies
rope_parameters["full_attention"] only. Phi-3's LongRoPE (Phi-3-mini-128k, Phi-3.5-mini):
llama.cpp divides each pair's frequency by rope_factors_long when the context it was given
exceeds rope.scaling.original_context_length, by rope_factors_short otherwise (get_rope_factors;
the engine's context is its n_ctx), and multiplies cos and sin by rope.scaling.attn_factor.
transformers' GGUF
loader (5.23) reads none of these keys or tensors (only gpt-oss's rope.scaling): the fixtures'
reference is transformers given the rope_scaling they were written from
(tests/fixtures/make_gguf_fixtures.py).

What each tensor was stored as stays on the model: `model.stored[param path]` is a
`StoredTensor` (GGUF name, type, GGUF shape, bytes, file offset), and `read_stored_bytes` reads
raw bytes of it back from the file (one Q4_1 block: 20 bytes).
"""
import math
import os
from dataclasses import dataclass

import numpy as np

from .bpe import GPT2_PAT
from .errors import ModelLoadError
from .model import Model, ModelConfig
from .spm import SentencePieceBPE
from .tokenizer import TokenizerLoadError, _byte_level_encoding

SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                   "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")
ARCHITECTURES = ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "gpt2")

# Pre-tokenizer regexes by tokenizer.ggml.pre (llama.cpp's names, llama-vocab.cpp).
#
# "smollm": llama.cpp splits off every digit first (regex \p{N}), then applies GPT-2's regex to
# each piece; Hugging Face's SmolLM tokenizer.json does the same (Digits(individual_digits) then
# ByteLevel). As one regex for tiktoken: a digit is always a piece of its own (GPT-2's " ?\p{N}+"
# is gone), and a run of whitespace right before a digit is whole, since in the two-pass split it
# ended a piece (there "\s+(?!\S)" takes all of it, not all but the last space). Checked against
# the two-pass split on random strings in tests/test_gguf.py.
SMOLLM_PAT = (r"""\p{N}|'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?[^\s\p{L}\p{N}]+"""
              r"""|\s+(?=\p{N})|\s+(?!\S)|\s+""")
# "qwen2" (Qwen2, Qwen2.5, Qwen3): Llama 3's regex with one digit a piece (\p{N}, not \p{N}{1,3});
# Qwen2's tokenizer.json and transformers' GGUF tokenizer (Qwen2 PRETOKENIZE_REGEX) use it.
QWEN2_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
             r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
LLAMA3_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
              r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# "gpt-4o" (Phi-4-mini and other o200k vocabularies): o200k_base's regex, which their
# tokenizer.json splits with (Split "isolated", then ByteLevel without its own regex, as
# transformers' TikTokenConverter builds it). llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT4O quotes it as
# the "original regex from tokenizer.json" and runs a rewrite of it for its own regex engine;
# tiktoken runs this one as it is.
O200K_PAT = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
             r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
             r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
             r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
             r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# "tekken" (Mistral Nemo): o200k's regex without the contractions and with one digit a piece, as
# Mistral Nemo's tokenizer.json has it (llama.cpp's LLAMA_VOCAB_PRE_TYPE_TEKKEN quotes it)
TEKKEN_PAT = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
              r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
              r"""|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
# "starcoder", "refact": llama.cpp splits them as "smollm" (every digit, then GPT-2's regex), and
# StarCoder's tokenizer.json is SmolLM's Digits(individual_digits) + ByteLevel; "phi-2": GPT-2's.
# Not reproduced: llama.cpp's several-regex splits ("deepseek-llm", "deepseek-coder", "falcon",
# "default" as llama.cpp reads it), and names whose tokenizer.json normalizes or was not checked
# here ("command-r", "olmo", "mpt", "dbrx", "chatglm-bpe", "llama4", ...).
PRE_PATTERNS = {"default": GPT2_PAT, "gpt-2": GPT2_PAT, "gpt2": GPT2_PAT, "phi-2": GPT2_PAT,
                "smollm": SMOLLM_PAT, "starcoder": SMOLLM_PAT, "refact": SMOLLM_PAT,
                "llama-bpe": LLAMA3_PAT, "llama3": LLAMA3_PAT, "llama-v3": LLAMA3_PAT,
                "qwen2": QWEN2_PAT, "deepseek-r1-qwen": QWEN2_PAT,
                "gpt-4o": O200K_PAT, "tekken": TEKKEN_PAT}

# SentencePiece splits nothing before merging (pipeline.spm): the whole text is one piece.
SPM_PAT = r"[\s\S]+"

_PATTERNS = {}  # realpath of a loaded .gguf -> its pre-tokenizer regex (pretokenizer_pattern)


@dataclass(frozen=True)
class StoredTensor:
    """How one weight is stored in the GGUF file (before it became float32)."""
    name: str           # GGUF tensor name, "blk.0.attn_q.weight"
    type_name: str      # ggml type, "Q4_1", "F32", ...
    shape: tuple        # GGUF order: innermost (contiguous) dimension first
    n_bytes: int        # bytes of the stored data
    offset: int         # absolute file offset of the data
    block_size: int     # values per block (1 for F32/F16/BF16)
    block_bytes: int    # bytes per block (Q4_1: 32 values in 20 bytes)

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape))


def read_stored_bytes(path: str, stored: StoredTensor, start: int = 0, length: int = None) -> bytes:
    """Raw bytes [start, start + length) of a stored tensor's data, as they are in the file.
    One Q4_1 block: read_stored_bytes(path, st, k * st.block_bytes, st.block_bytes)."""
    if length is None:
        length = stored.n_bytes - start
    if not (0 <= start and 0 <= length and start + length <= stored.n_bytes):
        raise ValueError(f"bytes [{start}, {start + length}) are outside {stored.name}'s "
                         f"{stored.n_bytes} bytes")
    with open(path, "rb") as f:
        f.seek(stored.offset + start)
        raw = f.read(length)
    if len(raw) != length:
        raise ModelLoadError(f"{path}: tensor {stored.name!r} is truncated")
    return raw


def available_memory_bytes():
    """MemAvailable from /proc/meminfo, or None where there is none (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _one_line(e: Exception) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}"[:200]


def _open(path: str):
    import gguf
    try:
        return gguf.GGUFReader(path)
    except FileNotFoundError:
        raise ModelLoadError(f"{path}: no such file") from None
    except MemoryError:
        raise
    except Exception as e:  # the reader raises ValueError, IndexError, KeyError... on bad bytes
        raise ModelLoadError(f"{path}: not a readable GGUF file, truncated or corrupt "
                             f"({_one_line(e)})") from None


class _Fields:
    """Metadata values by key; a missing or malformed key is a ModelLoadError naming it."""

    def __init__(self, reader, path):
        self.reader, self.path = reader, path

    def __contains__(self, key):
        return key in self.reader.fields

    def get(self, key, default=None, kind=None):
        field = self.reader.fields.get(key)
        if field is None:
            return default
        try:
            value = field.contents()
            return value if kind is None else kind(value)
        except Exception as e:
            raise ModelLoadError(f"{self.path}: metadata key {key!r} has a bad value "
                                 f"({_one_line(e)})") from None

    def need(self, key, kind=None):
        if key not in self:
            raise ModelLoadError(f"{self.path}: missing metadata key {key!r}")
        return self.get(key, kind=kind)


# --- header -> config --------------------------------------------------------------------------

def read_config(fields: _Fields, tensors: dict, path: str) -> ModelConfig:
    arch = fields.need("general.architecture", str)
    if arch not in ARCHITECTURES:
        raise ModelLoadError(f"{path}: general.architecture {arch!r} is not supported "
                             f"(supported: {', '.join(ARCHITECTURES)})")
    if "token_embd.weight" not in tensors:
        raise ModelLoadError(f"{path}: missing tensor 'token_embd.weight'")
    vocab_size = int(tensors["token_embd.weight"].shape[1])      # GGUF shape [d, V]
    d = fields.need(f"{arch}.embedding_length", int)
    n_heads = fields.need(f"{arch}.attention.head_count", int)
    n_kv_heads = fields.get(f"{arch}.attention.head_count_kv", n_heads, int)
    head_dim = fields.get(f"{arch}.attention.key_length", None, int)
    if (n_heads <= 0 or n_kv_heads <= 0 or n_heads % n_kv_heads
            or (head_dim is None and d % n_heads) or (head_dim is not None and head_dim <= 0)):
        raise ModelLoadError(f"{path}: {arch}.attention.head_count {n_heads} / head_count_kv "
                             f"{n_kv_heads} do not divide the width {d}")
    n_ctx = fields.need(f"{arch}.context_length", int)
    window = fields.get(f"{arch}.attention.sliding_window", None, int)
    if arch in ("phi3", "gemma2", "gemma3") and window:
        # Phi-3 (and Gemma 2's every other layer, Gemma 3's five in six) attends over the last
        # `window` tokens only;
        # this engine attends over all of them, the same for prompts no longer than the window:
        # the context it offers
        n_ctx = min(n_ctx, window)
    common = dict(
        vocab_size=vocab_size, d_model=d, n_layers=fields.need(f"{arch}.block_count", int),
        n_heads=n_heads, d_ff=fields.need(f"{arch}.feed_forward_length", int),
        n_ctx=n_ctx,
        tied_embeddings="output.weight" not in tensors,
        bos_token_id=fields.get("tokenizer.ggml.bos_token_id", None, int),
        eos_token_id=fields.get("tokenizer.ggml.eos_token_id", None, int))
    if arch == "gpt2":
        return ModelConfig(model_type="gpt2", n_kv_heads=n_heads, head_dim=d // n_heads,
                           norm="layer_norm", mlp="gelu", positions="learned", rope_theta=0.0,
                           norm_eps=fields.need("gpt2.attention.layer_norm_epsilon", float),
                           **common)
    # the Llama-style families: llama (Llama 1-3, Mistral, SmolLM...), qwen2, qwen3
    head_dim = head_dim or d // n_heads
    if fields.get(f"{arch}.attention.value_length", head_dim, int) != head_dim:
        raise ModelLoadError(f"{path}: {arch}.attention.value_length differs from key_length")
    # Partial RoPE (llama.cpp's n_rot; Phi-4-mini: 96 of 128, its partial_rotary_factor 0.75):
    # each head's first `rot` dimensions are turned, the rest pass through. llama.cpp defaults
    # it to the head width, and its pairs' frequencies are theta ** (-2j / rot)
    rot = fields.get(f"{arch}.rope.dimension_count", head_dim, int)
    if not 0 < rot <= head_dim or rot % 2:
        raise ModelLoadError(f"{path}: {arch}.rope.dimension_count {rot} is not an even number "
                             f"of dimensions within the head width {head_dim}")
    half = rot // 2                     # RoPE's pairs: one frequency (and factor) each
    # llama.cpp reads rope.scaling.type as "linear" when it is absent, with rope.scaling.factor
    # (or the old rope.scale_linear) as the divisor: 1 (no scaling) when that is absent too
    linear = fields.get(f"{arch}.rope.scaling.factor", None, float)
    if linear is None:
        linear = fields.get(f"{arch}.rope.scale_linear", None, float)
    scaling = fields.get(f"{arch}.rope.scaling.type", "none" if linear is None else "linear", str)
    linear = 0.0 if scaling == "none" or linear in (None, 0.0, 1.0) else linear
    if scaling not in ("none", "linear") or (linear and arch != "gemma3"):
        raise ModelLoadError(f"{path}: {arch}.rope.scaling.type {scaling!r}"
                             + (f", factor {linear:g}" if linear else "")
                             + ": the RoPE scalings supported are Llama 3.1's (a "
                             "rope_freqs.weight tensor), Gemma 3's linear one and Phi-3's "
                             "LongRoPE (rope_factors_long / rope_factors_short tensors)")
    if linear < 0:
        raise ModelLoadError(f"{path}: {arch}.rope.scaling.factor {linear:g} is not positive")
    factors = ()
    if "rope_freqs.weight" in tensors and arch == "llama":
        # llama.cpp's converter writes Llama 3.1+'s rope_scaling (rope_type "llama3") as this
        # tensor: one divisor per pair of RoPE dimensions, 1 (fast pairs) ... factor (slow ones)
        t = tensors["rope_freqs.weight"]
        if tuple(int(s) for s in t.shape) != (half,):
            raise ModelLoadError(f"{path}: tensor 'rope_freqs.weight' has shape {list(t.shape)}, "
                                 f"expected [{half}] (one per RoPE pair)")
        factors = tuple(float(f) for f in _dequantize(t, (half,), path))
        if min(factors) <= 0:
            raise ModelLoadError(f"{path}: tensor 'rope_freqs.weight' holds a factor <= 0")
    longrope = {}
    if arch == "phi3" and ("rope_factors_long.weight" in tensors
                           or "rope_factors_short.weight" in tensors):
        # Phi-3-mini-128k, Phi-3.5-mini (LongRoPE), as llama.cpp's converter writes them
        # (Phi3MiniModel): a divisor per RoPE pair for a long context and one for a short one,
        # the context they were trained at first (rope.scaling.original_context_length;
        # llama.cpp: the context length if absent), the attention factor (below)
        sets = {}
        for which in ("long", "short"):
            name = f"rope_factors_{which}.weight"
            if name not in tensors:
                raise ModelLoadError(f"{path}: tensor {name!r} is missing (LongRoPE needs both "
                                     "rope_factors_long and rope_factors_short)")
            t = tensors[name]
            if tuple(int(x) for x in t.shape) != (half,):
                raise ModelLoadError(f"{path}: tensor {name!r} has shape {list(t.shape)}, "
                                     f"expected [{half}] (one per RoPE pair)")
            sets[which] = tuple(float(f) for f in _dequantize(t, (half,), path))
            if min(sets[which]) <= 0:
                raise ModelLoadError(f"{path}: tensor {name!r} holds a factor <= 0")
        original = fields.get(f"{arch}.rope.scaling.original_context_length",
                              fields.need(f"{arch}.context_length", int), int)
        if original <= 0:
            raise ModelLoadError(f"{path}: {arch}.rope.scaling.original_context_length "
                                 f"{original} is not positive")
        longrope = dict(rope_long_factors=sets["long"], rope_short_factors=sets["short"],
                        rope_original_ctx=original)
    # llama.cpp multiplies RoPE's cos and sin by rope.scaling.attn_factor (default 1), whatever
    # the scaling (Phi3MiniModel writes it with the LongRoPE factors: sqrt(1 + ln(s) / ln(L)),
    # s = context / original context L)
    attn_factor = fields.get(f"{arch}.rope.scaling.attn_factor", 1.0, float)
    if not attn_factor > 0:
        raise ModelLoadError(f"{path}: {arch}.rope.scaling.attn_factor {attn_factor:g} is not "
                             "positive")
    gemma = {}
    if arch == "gemma3":
        # Gemma 3 as llama.cpp runs it (llm_build_gemma3_iswa): Gemma 2's block without the
        # soft-caps, with a per-head RMSNorm of queries and keys (Qwen3's), and two RoPE bases:
        # the file's for every sixth block (global attention), 10000 for the others (sliding
        # window), as llama.cpp fixes them; 1 / sqrt(d / H) scales the 27B's (62 blocks) queries.
        # A linear RoPE scaling (4B+) slows the global blocks' pairs only (inv_freq, not
        # inv_freq_local: pipeline.model)
        gemma = dict(embed_scale=math.sqrt(d), post_norms=True, qk_norm=True,
                     attn_scale=(d / n_heads) ** -0.5 if common["n_layers"] == 62 else 0.0,
                     rope_theta_local=10000.0, global_every=6)
    if arch == "gemma2":
        # Gemma 2 as llama.cpp runs it (llm_build_gemma2): embeddings x sqrt(d), a norm after
        # attention and after the feed-forward, GELU gating, soft-capped scores and logits; the
        # query scale is 1 / sqrt(head_dim), but 1 / sqrt(d / H) for the 27B (46 blocks), as
        # its query_pre_attn_scalar says. The norm gains are stored as 1 + w (the converter adds
        # the 1 Gemma's RMSNorm adds), so they are used as they are.
        n_layers = common["n_layers"]
        gemma = dict(embed_scale=math.sqrt(d), post_norms=True,
                     attn_scale=(d / n_heads) ** -0.5 if n_layers == 46 else 0.0,
                     attn_softcap=fields.get("gemma2.attn_logit_softcapping", 0.0, float),
                     final_softcap=fields.get("gemma2.final_logit_softcapping", 0.0, float))
    return ModelConfig(model_type="llama", n_kv_heads=n_kv_heads, head_dim=head_dim,
                       norm="rms_norm", mlp="geglu" if arch.startswith("gemma") else "swiglu",
                       positions="rope", **gemma, **longrope, rope_attn_factor=attn_factor,
                       rope_linear_factor=linear,
                       rope_theta=fields.get(f"{arch}.rope.freq_base", 10000.0, float),
                       rope_freq_factors=factors, qkv_bias=arch == "qwen2",
                       rope_dim=0 if rot == head_dim else rot,
                       **({"qk_norm": True} if arch == "qwen3" else {}),
                       norm_eps=fields.need(f"{arch}.attention.layer_norm_rms_epsilon", float),
                       **common)


def expected_tensors(c: ModelConfig, arch: str = None) -> dict:
    """GGUF tensor name -> (param path, numpy shape [outer, ..., inner]) for this config.
    arch "phi3": q|k|v in one attn_qkv, gate|up in one ffn_up (read_params splits them)."""
    d, hd, V = c.d_model, c.head_dim, c.vocab_size
    out = {"token_embd.weight": (("wte",), (V, d)),
           "output_norm.weight": (("ln_f", "g"), (d,))}
    if not c.tied_embeddings:
        out["output.weight"] = (("unembed",), (V, d))
    for i in range(c.n_layers):
        b = f"blk.{i}."
        if c.model_type == "llama":
            out.update({
                b + "attn_norm.weight": (("blocks", i, "ln_1", "g"), (d,)),
                b + "attn_q.weight": (("blocks", i, "attn", "w_q"), (c.n_heads * hd, d)),
                b + "attn_k.weight": (("blocks", i, "attn", "w_k"), (c.n_kv_heads * hd, d)),
                b + "attn_v.weight": (("blocks", i, "attn", "w_v"), (c.n_kv_heads * hd, d)),
                b + "attn_output.weight": (("blocks", i, "attn", "w_o"), (d, c.n_heads * hd)),
                b + "ffn_norm.weight": (("blocks", i, "ln_2", "g"), (d,)),
                b + "ffn_gate.weight": (("blocks", i, "mlp", "w_gate"), (c.d_ff, d)),
                b + "ffn_up.weight": (("blocks", i, "mlp", "w_up"), (c.d_ff, d)),
                b + "ffn_down.weight": (("blocks", i, "mlp", "w_down"), (d, c.d_ff))})
            if c.post_norms:             # Gemma2Model: norms after attention and feed-forward
                out.update({
                    b + "post_attention_norm.weight": (("blocks", i, "ln_1_post", "g"), (d,)),
                    b + "post_ffw_norm.weight": (("blocks", i, "ln_2_post", "g"), (d,))})
            if arch == "phi3":           # Phi3MiniModel writes Phi-3's fused projections
                for n in ("attn_q", "attn_k", "attn_v", "ffn_gate"):
                    del out[b + n + ".weight"]
                out.update({
                    b + "attn_qkv.weight": (("blocks", i, "attn", "qkv_w"),
                                            ((c.n_heads + 2 * c.n_kv_heads) * hd, d)),
                    b + "ffn_up.weight": (("blocks", i, "mlp", "gate_up_w"), (2 * c.d_ff, d))})
            if c.qkv_bias:
                out.update({
                    b + "attn_q.bias": (("blocks", i, "attn", "b_q"), (c.n_heads * hd,)),
                    b + "attn_k.bias": (("blocks", i, "attn", "b_k"), (c.n_kv_heads * hd,)),
                    b + "attn_v.bias": (("blocks", i, "attn", "b_v"), (c.n_kv_heads * hd,))})
            if c.qk_norm:
                out.update({
                    b + "attn_q_norm.weight": (("blocks", i, "attn", "q_norm"), (hd,)),
                    b + "attn_k_norm.weight": (("blocks", i, "attn", "k_norm"), (hd,))})
        else:
            out.update({
                b + "attn_norm.weight": (("blocks", i, "ln_1", "g"), (d,)),
                b + "attn_norm.bias": (("blocks", i, "ln_1", "b"), (d,)),
                b + "attn_qkv.weight": (("blocks", i, "attn", "qkv_w"), (3 * d, d)),
                b + "attn_qkv.bias": (("blocks", i, "attn", "qkv_b"), (3 * d,)),
                b + "attn_output.weight": (("blocks", i, "attn", "w_o"), (d, d)),
                b + "attn_output.bias": (("blocks", i, "attn", "b_o"), (d,)),
                b + "ffn_norm.weight": (("blocks", i, "ln_2", "g"), (d,)),
                b + "ffn_norm.bias": (("blocks", i, "ln_2", "b"), (d,)),
                b + "ffn_up.weight": (("blocks", i, "mlp", "w_fc"), (c.d_ff, d)),
                b + "ffn_up.bias": (("blocks", i, "mlp", "b_fc"), (c.d_ff,)),
                b + "ffn_down.weight": (("blocks", i, "mlp", "w_proj"), (d, c.d_ff)),
                b + "ffn_down.bias": (("blocks", i, "mlp", "b_proj"), (d,))})
    if c.model_type == "gpt2":
        out["position_embd.weight"] = (("wpe",), (c.n_ctx, d))
        out["output_norm.bias"] = (("ln_f", "b"), (d,))
    return out


# --- tensors -> params --------------------------------------------------------------------------

def unpermute_rope_rows(w: np.ndarray, n_head: int, rot: int = 0) -> np.ndarray:
    """Undo llama.cpp's q/k row order (see the module docstring): [rows, cols] -> [rows, cols].
    rot: the dimensions RoPE turns (partial RoPE: fewer than the head width). ggml's pairs
    (2i, 2i + 1) are then the first rot rows of each head; they become (i, i + rot/2), the
    rotate-half pairing pipeline.model's rope uses over those rows, and the rest stay."""
    rows, cols = w.shape
    hd = rows // n_head
    rot = rot or hd
    heads = w.reshape(n_head, hd, cols)
    turned = heads[:, :rot].reshape(n_head, rot // 2, 2, cols).swapaxes(1, 2)
    turned = turned.reshape(n_head, rot, cols)
    return np.concatenate([turned, heads[:, rot:]], axis=1).reshape(rows, cols)


def _stored(t) -> StoredTensor:
    import gguf
    block_size, block_bytes = gguf.GGML_QUANT_SIZES[t.tensor_type]
    return StoredTensor(name=t.name, type_name=t.tensor_type.name,
                        shape=tuple(int(s) for s in t.shape), n_bytes=int(t.n_bytes),
                        offset=int(t.data_offset), block_size=int(block_size),
                        block_bytes=int(block_bytes))


def _dequantize(t, shape, path) -> np.ndarray:
    import gguf
    try:
        x = gguf.quants.dequantize(t.data, t.tensor_type)
        if t.tensor_type.name == "F32":                     # a view of the file map: copy it
            x = np.array(x, dtype=np.float32)
        x = np.ascontiguousarray(x, dtype=np.float32).reshape(shape)
    except MemoryError:
        raise
    except Exception as e:
        raise ModelLoadError(f"{path}: tensor {t.name!r} ({t.tensor_type.name}) cannot be "
                             f"dequantized ({_one_line(e)})") from None
    if not np.isfinite(x).all():
        raise ModelLoadError(f"{path}: tensor {t.name!r} holds NaN or infinite values")
    return x


def _put(tree: dict, path: tuple, value) -> None:
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def read_params(tensors: dict, c: ModelConfig, path: str, arch: str = "llama",
                progress=None) -> tuple:
    """(params dict as loader.llama_params / gpt2_params build it, {param path: StoredTensor}).
    arch: general.architecture; only "llama" has its q / k rows permuted (see the docstring).
    progress(i, n, name), when given, is told each tensor (1 to n) before it is dequantized."""
    expected = expected_tensors(c, arch)
    read_into_config = ({"rope_freqs.weight"} if c.rope_freq_factors else set()) | (
        {"rope_factors_long.weight", "rope_factors_short.weight"} if c.rope_long_factors
        else set())
    for name in tensors:
        if name not in expected and name not in read_into_config:
            raise ModelLoadError(f"{path}: unexpected tensor {name!r} (not part of a "
                                 f"{c.model_type} model this engine runs)")
    for name, (_, shape) in expected.items():
        if name not in tensors:
            raise ModelLoadError(f"{path}: missing tensor {name!r}")
        t = tensors[name]
        if t.tensor_type.name not in SUPPORTED_TYPES:
            raise ModelLoadError(f"{path}: tensor {name!r} has type {t.tensor_type.name}; "
                                 f"supported: {', '.join(SUPPORTED_TYPES)}")
        gguf_shape = tuple(int(s) for s in reversed(t.shape))
        if gguf_shape != shape:
            raise ModelLoadError(f"{path}: tensor {name!r} has shape {list(t.shape)} (GGUF "
                                 f"order), expected {list(reversed(shape))}")

    params = {"blocks": [{"ln_1": {}, "attn": {}, "ln_2": {}, "mlp": {}}
                         | ({"ln_1_post": {}, "ln_2_post": {}} if c.post_norms else {})
                         for _ in range(c.n_layers)], "ln_f": {}}
    stored = {}
    for i, (name, (where, shape)) in enumerate(expected.items()):   # one tensor at a time
        if progress is not None:
            progress(i + 1, len(expected), name)
        t = tensors[name]
        x = _dequantize(t, shape, path)
        if arch == "llama" and name.endswith(("attn_q.weight", "attn_k.weight")):
            x = unpermute_rope_rows(x, c.n_heads if "attn_q" in name else c.n_kv_heads,
                                    c.rotary_dim())
        if x.ndim == 2 and where not in (("wte",), ("wpe",)):
            x = np.ascontiguousarray(x.T)                   # [out, in] -> [in, out]
        _put(params, where, x)
        stored[where] = _stored(t)
    if c.tied_embeddings:
        params["unembed"] = params["wte"].T
        stored[("unembed",)] = stored[("wte",)]
    if c.model_type == "gpt2":                              # fused q|k|v columns -> w_q, w_k, w_v
        d = c.d_model
        for i, block in enumerate(params["blocks"]):
            attn = block["attn"]
            qkv_w, qkv_b = attn.pop("qkv_w"), attn.pop("qkv_b")            # [d, 3d], [3d]
            st_w, st_b = stored.pop(("blocks", i, "attn", "qkv_w")), \
                stored.pop(("blocks", i, "attn", "qkv_b"))
            for j, n in enumerate("qkv"):
                attn[f"w_{n}"] = np.ascontiguousarray(qkv_w[:, j * d:(j + 1) * d])
                attn[f"b_{n}"] = qkv_b[j * d:(j + 1) * d].copy()
                stored[("blocks", i, "attn", f"w_{n}")] = st_w   # a third of the fused tensor
                stored[("blocks", i, "attn", f"b_{n}")] = st_b
    if arch == "phi3":               # [q | k | v] and [gate | up] columns, as Phi-3 splits them
        q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
        for i, block in enumerate(params["blocks"]):
            attn, mlp = block["attn"], block["mlp"]
            qkv_w, gate_up = attn.pop("qkv_w"), mlp.pop("gate_up_w")    # [d, q+2kv], [d, 2 d_ff]
            st_qkv = stored.pop(("blocks", i, "attn", "qkv_w"))
            st_gate_up = stored.pop(("blocks", i, "mlp", "gate_up_w"))
            for n, (a, b) in zip("qkv", ((0, q), (q, q + kv), (q + kv, q + 2 * kv)), strict=True):
                attn[f"w_{n}"] = np.ascontiguousarray(qkv_w[:, a:b])
                stored[("blocks", i, "attn", f"w_{n}")] = st_qkv       # part of the fused one
            mlp["w_gate"] = np.ascontiguousarray(gate_up[:, :c.d_ff])
            mlp["w_up"] = np.ascontiguousarray(gate_up[:, c.d_ff:])
            stored[("blocks", i, "mlp", "w_gate")] = stored[("blocks", i, "mlp", "w_up")] = \
                st_gate_up
    return params, stored


# --- tokenizer ----------------------------------------------------------------------------------

def read_tokenizer(fields: _Fields, path: str, vocab_rows: int = 0):
    """(tiktoken Encoding, pre-tokenizer regex) from tokenizer.ggml.*; for a SentencePiece
    vocabulary (model "llama") a pipeline.spm.SentencePieceBPE, which has the same interface.

    Some vocabularies lack a few single bytes (SmolLM2 has no token for 0x04, 0xc0, 0xff...:
    bytes that are not in valid UTF-8 or are control characters). tiktoken needs every byte, so
    those get ids past the model's rows (`vocab_rows`): such text encodes, and the engine
    refuses the id, where llama.cpp and transformers drop the byte silently."""
    from gguf import TokenType  # here: importing gguf takes ~0.1 s, only GGUF users pay
    model = fields.need("tokenizer.ggml.model", str)
    if model == "llama":
        return read_sentencepiece(fields, path), SPM_PAT
    if model != "gpt2":
        raise ModelLoadError(f"{path}: tokenizer.ggml.model {model!r} is not supported "
                             "(a byte-level BPE, \"gpt2\", or SentencePiece's, \"llama\")")
    pre = fields.get("tokenizer.ggml.pre", "default", str)
    if pre not in PRE_PATTERNS:
        raise ModelLoadError(f"{path}: tokenizer.ggml.pre {pre!r} is not a pre-tokenizer this "
                             f"loader can reproduce (known: {', '.join(sorted(PRE_PATTERNS))})")
    tokens = fields.need("tokenizer.ggml.tokens", list)
    types = fields.get("tokenizer.ggml.token_type", [TokenType.NORMAL] * len(tokens), list)
    merges_raw = fields.need("tokenizer.ggml.merges", list)
    if len(types) != len(tokens):
        raise ModelLoadError(f"{path}: tokenizer.ggml.token_type has {len(types)} entries for "
                             f"{len(tokens)} tokens")
    vocab = {}
    for i, token in enumerate(tokens):
        if token in vocab:
            raise ModelLoadError(f"{path}: tokenizer.ggml.tokens lists {token!r} twice (ids "
                                 f"{vocab[token]} and {i})")
        vocab[token] = i
    merges = []
    for n, m in enumerate(merges_raw):
        parts = m.split(" ")
        if len(parts) != 2 or not all(parts):
            raise ModelLoadError(f"{path}: tokenizer.ggml.merges[{n}] is not a pair: {m[:60]!r}")
        merges.append((parts[0], parts[1], f"{path}: tokenizer.ggml.merges[{n}]"))
    # Control and user-defined tokens are matched whole (tiktoken's special tokens), as
    # llama.cpp and transformers do; _byte_level_encoding also makes special every token that
    # neither a byte nor a merge produces.
    added = {t: i for i, (t, k) in enumerate(zip(tokens, types, strict=False))
             if k in (TokenType.CONTROL, TokenType.USER_DEFINED)}
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        enc = _byte_level_encoding(path, name, vocab, merges, PRE_PATTERNS[pre], added,
                                   source=f"{path}: tokenizer.ggml.tokens",
                                   missing_bytes_from=max(len(tokens), vocab_rows))
    except TokenizerLoadError as e:
        raise ModelLoadError(f"cannot load the tokenizer: {' '.join(str(e).split())}") from None
    return enc, PRE_PATTERNS[pre]


def read_sentencepiece(fields: _Fields, path: str) -> SentencePieceBPE:
    """tokenizer.ggml.model "llama": tokens, scores, token types (pipeline.spm). Phi-3's "▁"
    goes before every piece of text, as transformers' GGUF tokenizer (phi3_tokenizer) puts it."""
    tokens = fields.need("tokenizer.ggml.tokens", list)
    scores = fields.need("tokenizer.ggml.scores", list)
    types = fields.get("tokenizer.ggml.token_type", [1] * len(tokens), list)
    if not (len(tokens) == len(scores) == len(types)):
        raise ModelLoadError(f"{path}: tokenizer.ggml.tokens / scores / token_type have "
                             f"{len(tokens)} / {len(scores)} / {len(types)} entries")
    name = os.path.splitext(os.path.basename(path))[0]
    return SentencePieceBPE(name, tokens, scores, types,
                            add_space_prefix=fields.get("tokenizer.ggml.add_space_prefix", True,
                                                        bool),
                            unk_id=fields.get("tokenizer.ggml.unknown_token_id", None, int),
                            prefix_every_segment=fields.get("general.architecture") == "phi3")


def read_metadata(fields: _Fields) -> dict:
    import gguf
    meta = {}
    for key, out in (("general.name", "name"), ("general.license", "license"),
                     ("general.quantized_by", "quantized_by"),
                     ("general.organization", "organization"),
                     ("general.size_label", "size_label"), ("general.architecture",
                                                            "architecture"),
                     ("tokenizer.chat_template", "chat_template")):   # pipeline/chat.py
        value = fields.get(key)
        if isinstance(value, str) and value:
            meta[out] = value
    for key, out in (("tokenizer.ggml.unknown_token_id", "unk_token_id"),
                     ("tokenizer.ggml.padding_token_id", "pad_token_id")):
        value = fields.get(key)
        if isinstance(value, int):
            meta[out] = value
    file_type = fields.get("general.file_type")
    if isinstance(file_type, int):
        try:
            meta["file_type"] = gguf.LlamaFileType(file_type).name.replace("MOSTLY_", "")
        except ValueError:
            meta["file_type"] = str(file_type)
    return meta


def pattern_of(path: str) -> str:
    """The pre-tokenizer regex of a .gguf file: remembered from its load, else read."""
    key = os.path.realpath(path)
    if key not in _PATTERNS:
        fields = _Fields(_open(path), path)
        if fields.get("tokenizer.ggml.model", "gpt2", str) == "llama":
            return SPM_PAT
        return PRE_PATTERNS.get(fields.get("tokenizer.ggml.pre", "default", str), GPT2_PAT)
    return _PATTERNS[key]


# --- the whole file -----------------------------------------------------------------------------

def load_gguf(path: str, progress=None) -> Model:
    """A Model from a .gguf file; ModelLoadError (one line naming the file and the key or
    tensor) for anything it cannot run exactly. progress: see read_params."""
    reader = _open(path)
    fields = _Fields(reader, path)
    tensors = {t.name: t for t in reader.tensors}
    config = read_config(fields, tensors, path)
    need = sum(int(t.n_elements) for t in tensors.values()) * 4
    have = available_memory_bytes()
    if have is not None and need > have:
        raise ModelLoadError(f"{path}: its weights need {need / 1e9:.2f} GB as float32, but only "
                             f"{have / 1e9:.2f} GB of memory is available")
    tokenizer, pat_str = read_tokenizer(fields, path, config.vocab_size)
    params, stored = read_params(tensors, config, path, fields.need("general.architecture", str),
                                 progress)
    metadata = read_metadata(fields)
    del tensors, reader, fields                               # close the file map
    model = Model(config, params, tokenizer, path=path)
    model.file_format = "gguf"
    model.stored = stored
    model.metadata = metadata
    model.pat_str = pat_str
    _PATTERNS[os.path.realpath(path)] = pat_str
    return model
