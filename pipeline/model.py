"""A decoder-only transformer in NumPy, float32 end to end: GPT-2 style and Llama style.

    GPT-2:  token + learned position embeddings; LayerNorm; attention with biases; GELU MLP
    Llama:  token embeddings; RMSNorm; attention with RoPE-rotated q and k and grouped-query
            key/value heads; SwiGLU feed-forward. The Llama-style families differ in details
            the config names: biases on q, k, v (Qwen2, `qkv_bias`), an RMSNorm of each head's
            query and key before RoPE (Qwen3, `qk_norm`), a head width that is not d / H
            (`head_dim`), and RoPE scaling: Llama 3.1's slower low-frequency pairs (`rope_llama3`
            from a config.json, `rope_freq_factors` from a GGUF's rope_freqs tensor), Gemma 3's
            linear scaling of its global layers (`rope_linear_factor`), Phi-3's LongRoPE (a
            divisor per pair, long or short, and an attention factor on cos and sin), and
            partial RoPE: only each head's first `rope_dim` dimensions turned (Phi-4-mini)

Both end in a final norm and the unembedding (`x @ unembed`), tied to the token embeddings or
not. One sequence at a time: the rows of `x` are its tokens, `x` is [T, d].

Activation cache
----------------
`logits, cache = model.run_with_cache(tokens)` records every intermediate. The math calls named
identity hooks inline (`resid_mid = hook("hook_resid_mid", resid_pre + attn_out)`); a plain
`model.forward(tokens)` passes hooks that return the value and store nothing. Names follow
TransformerLens. T tokens, d model width, H query heads, KVH key/value heads, hd head width,
d_ff feed-forward width, V vocabulary; block names are prefixed `blocks.{i}.`.

    name                            shape        what
    hook_embed                      [T, d]       token embeddings (rows of wte; Gemma: x sqrt(d))
    hook_pos_embed                  [T, d]       learned position embeddings (GPT-2 only)
    blocks.{i}.hook_resid_pre       [T, d]       residual stream entering block i
    blocks.{i}.ln1.hook_normalized  [T, d]       norm before attention (LayerNorm / RMSNorm)
    blocks.{i}.attn.hook_q          [T, H, hd]   queries
    blocks.{i}.attn.hook_k          [T, KVH, hd] keys
    blocks.{i}.attn.hook_v          [T, KVH, hd] values
    blocks.{i}.attn.q_norm.hook_normalized [T, H, hd]   queries after the per-head RMSNorm (Qwen3)
    blocks.{i}.attn.k_norm.hook_normalized [T, KVH, hd] keys after the per-head RMSNorm (Qwen3)
    blocks.{i}.attn.hook_rot_q      [T, H, hd]   queries after RoPE (RoPE models with positions)
    blocks.{i}.attn.hook_rot_k      [T, KVH, hd] keys after RoPE (idem)
    blocks.{i}.attn.hook_attn_scores [H, T, T]   q.k / sqrt(hd) (config.score_scale(); Gemma 2:
                                                 soft-capped), -inf above the diagonal
    blocks.{i}.attn.hook_pattern    [H, T, T]    softmax of the scores: rows sum to 1
    blocks.{i}.attn.hook_z          [T, H, hd]   pattern-weighted sum of values, per head
    blocks.{i}.attn.hook_result     [T, H, d]    each head's output after the output projection
                                                 (summed over heads: hook_attn_out minus bias,
                                                 before Gemma 2's ln1_post)
    blocks.{i}.ln1_post.hook_normalized [T, d]   attention output normed again (Gemma 2)
    blocks.{i}.hook_attn_out        [T, d]       attention output (after ln1_post, if any)
    blocks.{i}.hook_resid_mid       [T, d]       resid_pre + attn_out
    blocks.{i}.ln2.hook_normalized  [T, d]       norm before the feed-forward
    blocks.{i}.mlp.hook_pre         [T, d_ff]    GELU input (fc output) / SwiGLU gate pre-activation
    blocks.{i}.mlp.hook_pre_linear  [T, d_ff]    SwiGLU / GeGLU up-projection (Llama, Gemma)
    blocks.{i}.mlp.hook_post        [T, d_ff]    gelu(pre) / silu(gate) * up / gelu(gate) * up
    blocks.{i}.ln2_post.hook_normalized [T, d]   feed-forward output normed again (Gemma 2)
    blocks.{i}.hook_mlp_out         [T, d]       feed-forward output (after ln2_post, if any)
    blocks.{i}.hook_resid_post      [T, d]       resid_mid + mlp_out: entering block i + 1
    ln_final.hook_normalized        [T, d]       final norm
    logits                          [T, V]       scores for the next token at every position
                                                 (Gemma 2: soft-capped)

Float32: NumPy 2 upcasts `float32_array / np.sqrt(d)` to float64, so scales are Python floats
(`x * d ** -0.5`), and cubes are `x * x * x` (float32 `x ** 3` is ~25x slower).
"""
import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from pipeline.activations import NO_HOOKS, ActivationCache, CompactHooks, RecordingHooks
from pipeline.kvcache import BatchKV, KVCache, LayerKV, NoCache


@dataclass(frozen=True)
class ModelConfig:
    model_type: str            # "gpt2" or "llama": the family of the checkpoint
    vocab_size: int            # V: rows of the token embedding, columns of the logits
    d_model: int               # d: width of the residual stream
    n_layers: int              # N: transformer blocks
    n_heads: int               # H: query heads per attention layer
    n_kv_heads: int            # KVH: key/value heads (H: multi-head, 1: multi-query, else grouped)
    head_dim: int              # hd: width of one head's query, key and value
    d_ff: int                  # width of the feed-forward hidden layer
    n_ctx: int                 # context window: the most positions the model was trained on
    norm: str                  # "layer_norm" (GPT-2) or "rms_norm" (Llama)
    norm_eps: float            # added to the variance (mean square) before the square root
    mlp: str                   # "gelu" (GPT-2: fc, GELU, proj) or "swiglu" (Llama: gate, up, down)
    positions: str             # "learned" (GPT-2: a table added to embeddings) or "rope" (Llama)
    rope_theta: float = 10000.0     # RoPE base: pair j turns by position * theta ** (-2j / hd)
    rope_llama3: tuple = ()         # Llama 3.1+ RoPE scaling, if used: (factor, low_freq_factor,
                                    #   high_freq_factor, original_max_position_embeddings)
    rope_freq_factors: tuple = ()   # llama.cpp's rope_freqs tensor, if any: pair j turns
                                    #   factor_j times slower (Llama 3.1+ scaling, GGUF's way)
    qkv_bias: bool = False          # q, k, v projections carry biases, the output one not (Qwen2)
    qk_norm: bool = False           # RMSNorm of every head's query and key before RoPE (Qwen3)
    embed_scale: float = 1.0        # the embeddings enter the residual stream times this (Gemma:
                                    #   sqrt(d))
    post_norms: bool = False        # Gemma 2: attention's and the feed-forward's outputs normed
                                    #   again (ln_1_post, ln_2_post) before they are added
    attn_scale: float = 0.0         # the scores' scale; 0: 1 / sqrt(head_dim)
    attn_softcap: float = 0.0       # Gemma 2: scores -> c tanh(scores / c) before the mask
    final_softcap: float = 0.0      # Gemma 2: logits -> c tanh(logits / c)
    rope_theta_local: float = 0.0   # Gemma 3: the RoPE base of the sliding-window layers, which
    global_every: int = 0           #   are all but every global_every-th (Gemma 3: 6)
    rope_linear_factor: float = 0.0  # linear RoPE scaling (Gemma 3 4B+: 8): every pair turns this
                                     #   many times slower, in the global layers only
    rope_long_factors: tuple = ()   # Phi-3's LongRoPE: a divisor per pair for a context longer
    rope_short_factors: tuple = ()  #   than rope_original_ctx, and one for a context within it
    rope_original_ctx: int = 0      #   (llama.cpp: by the context's size; see longrope_factors)
    rope_attn_factor: float = 1.0   # RoPE's cos and sin times this (LongRoPE's attention factor)
    rope_dim: int = 0               # n_rot: RoPE turns each head's first rope_dim dimensions and
                                    #   passes the rest through (Phi-4-mini: 96 of 128); 0: all

    def rotary_dim(self) -> int:
        """How many of each head's dimensions RoPE turns (the first ones): rope_dim, else all."""
        return self.rope_dim or self.head_dim

    def local_layer(self, i) -> bool:
        """Gemma 3: block i is a sliding-window layer, with RoPE base rope_theta_local."""
        return bool(self.rope_theta_local and self.global_every and (i + 1) % self.global_every)

    def score_scale(self) -> float:
        """What q.k is multiplied by to make an attention score: attn_scale, else 1 / sqrt(hd)."""
        return self.attn_scale or self.head_dim ** -0.5

    def longrope_long(self) -> bool:
        """LongRoPE's choice as llama.cpp makes it (llama_model::get_rope_factors): the long
        factors when the context (here the engine's n_ctx) exceeds the original context."""
        return self.n_ctx > self.rope_original_ctx

    def longrope_factors(self) -> tuple:
        """The LongRoPE divisors this model runs with (long or short, see longrope_long)."""
        return self.rope_long_factors if self.longrope_long() else self.rope_short_factors

    def rope_scaling(self) -> str:
        """The RoPE scaling this config applies: "llama3", "linear", "longrope" or ""."""
        if self.rope_llama3 or self.rope_freq_factors:
            return "llama3"
        if self.rope_long_factors:
            return "longrope"
        return "linear" if self.rope_linear_factor and self.rope_linear_factor != 1.0 else ""
    tied_embeddings: bool = True    # unembedding is the transposed token embedding
    bos_token_id: int = None        # token a document starts with (None: not set)
    eos_token_id: int = None        # token that ends a document: generation stops there


# --- the math: small functions named after what they compute --------------------------------

def layer_norm(x, g, b, eps):  # [T, d] -> [T, d]
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return g * ((x - mean) / np.sqrt(var + eps)) + b


def rms_norm(x, g, eps):  # [T, d] -> [T, d]
    return g * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def gelu(x):  # GPT-2's tanh approximation
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))))


def sigmoid(x):  # 1 / (1 + e^-x), written with tanh so large |x| cannot overflow
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def silu(x):
    return x * sigmoid(x)


def softmax(x):  # over the last axis
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def log_softmax(logits):  # [..., V] -> [..., V]: log of the softmax, without underflow to -inf
    logits = np.asarray(logits, dtype=np.float32)
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def token_nll(logits, targets):  # [T, V], [T] -> [T]: -log softmax(logits)[target], float64
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[:, 0]
    return log_z - logits[np.arange(len(targets)), targets]


def matmul(x, w):  # [T, d_in] @ [d_in, d_out] -> [T, d_out]
    """x @ w; a few rows (1 < T < 2 ROWS) are padded with zero rows to a multiple of ROWS. The
    result is the same product (each row of x times w; the zero rows are dropped), only faster:
    OpenBLAS's matrix product of a few rows costs more for 3 rows than for 4, and a decode step
    of 3 beams or 3 seeded samples is what decoding asks for by default (test_model_rows.py
    checks the rows)."""
    n = x.shape[0] if x.ndim == 2 else 1
    pad = -n % ROWS if 1 < n < 2 * ROWS else 0       # a batch of decode steps, a short prompt
    if not pad:
        return x @ w
    # a copy of the rows kept, so that a recording of them does not hold the padded product
    return (np.concatenate([x, np.zeros((pad, x.shape[1]), dtype=x.dtype)]) @ w)[:n].copy()


ROWS = 4


def linear(x, w, b=None):  # [T, d_in] @ [d_in, d_out] -> [T, d_out]
    return matmul(x, w) if b is None else matmul(x, w) + b


def rope_frequencies(rot_dim, theta):  # -> [rot/2]: radians per position for each pair
    """rot_dim: the dimensions RoPE turns (the head width, or fewer: config.rotary_dim())."""
    return 1.0 / (theta ** (np.arange(0, rot_dim, 2, dtype=np.float32) / rot_dim))


def llama3_scaled_frequencies(inv_freq, factor, low_freq_factor, high_freq_factor, old_ctx):
    """Llama 3.1's longer context: pairs turning slower than the original context can show are
    slowed by `factor`, fast ones are kept, those in between are interpolated."""
    wavelen = 2 * math.pi / inv_freq                                    # positions per turn
    low_freq_wavelen, high_freq_wavelen = old_ctx / low_freq_factor, old_ctx / high_freq_factor
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return np.where(medium, smoothed, scaled).astype(np.float32)


def rope_cos_sin(positions, inv_freq):  # [T] -> ([T, rot], [T, rot]); rot = 2 len(inv_freq)
    angles = positions[:, None].astype(np.float32) * inv_freq[None, :]  # [T, rot/2]
    angles = np.concatenate([angles, angles], axis=-1)                  # [T, rot]
    return np.cos(angles), np.sin(angles)


def rope(x, cos, sin):  # [T, heads, hd] -> [T, heads, hd]
    # Hugging Face's layout: dimension j is paired with j + rot/2 (rotate_half), not with j + 1.
    # Partial RoPE (rot = cos's width < hd: Phi-4-mini): the first rot dimensions are turned,
    # the others pass through, as transformers' Phi3 apply_rotary_pos_emb and llama.cpp's
    # ggml_rope_ext with n_dims = n_rot do.
    rot = cos.shape[-1]
    if rot < x.shape[-1]:
        return np.concatenate([rope(x[..., :rot], cos, sin), x[..., rot:]], axis=-1)
    half = rot // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def causal_mask(n_queries, n_keys):  # -> [Tq, S]: the queries are the last Tq of the S positions
    return np.triu(np.full((n_queries, n_keys), -np.inf, dtype=np.float32),
                   k=n_keys - n_queries + 1)


def softcap(x, cap):  # Gemma 2: squashed smoothly into (-cap, cap); 0: unchanged
    return x if not cap else np.tanh(x * (1.0 / cap)) * cap


def attention(q, k, v, hook, scale=0.0, cap=0.0):  # q [T, H, hd], k v [S, KVH, hd] -> [T, H, hd]
    n_heads, head_dim = q.shape[1], q.shape[2]
    k = np.repeat(k, n_heads // k.shape[1], axis=1)  # [S, KVH, hd] -> [S, H, hd]: heads share kv
    v = np.repeat(v, n_heads // v.shape[1], axis=1)  # [S, KVH, hd] -> [S, H, hd]
    scale = scale or head_dim ** -0.5
    scores = softcap(q.transpose(1, 0, 2) @ k.transpose(1, 2, 0) * scale, cap)  # -> [H, T, S]
    scores = hook("hook_attn_scores", scores + causal_mask(q.shape[0], k.shape[0]))
    pattern = hook("hook_pattern", softmax(scores))                          # [H, T, S]
    return (pattern @ v.transpose(1, 0, 2)).transpose(1, 0, 2)               # -> [T, H, hd]


def per_head_result(z, w_o):  # [T, H, hd] -> [T, H, d]: what each head adds to the residual
    n_heads, head_dim = z.shape[1], z.shape[2]
    return np.einsum("thk,hkd->thd", z, w_o.reshape(n_heads, head_dim, -1))


def attention_layer(x, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None,
                    q_norm=None, k_norm=None, *, n_heads, n_kv_heads, rope_cs, kv, hook,
                    eps=0.0, scale=0.0, cap=0.0):  # [T, d] -> [T, d]
    T = x.shape[0]
    q = hook("hook_q", linear(x, w_q, b_q).reshape(T, n_heads, -1))     # [T, d] -> [T, H, hd]
    k = hook("hook_k", linear(x, w_k, b_k).reshape(T, n_kv_heads, -1))  # [T, d] -> [T, KVH, hd]
    v = hook("hook_v", linear(x, w_v, b_v).reshape(T, n_kv_heads, -1))  # [T, d] -> [T, KVH, hd]
    if q_norm is not None:      # Qwen3: each head's query and key RMS-normalised over hd
        q = hook("q_norm.hook_normalized", rms_norm(q, q_norm, eps))
        k = hook("k_norm.hook_normalized", rms_norm(k, k_norm, eps))
    if rope_cs is not None:
        q = hook("hook_rot_q", rope(q, *rope_cs))
        k = hook("hook_rot_k", rope(k, *rope_cs))
    z = hook("hook_z", kv.attend(attention, q, k, v, hook, scale, cap))  # [T, H, hd]
    hook.lazy("hook_result", per_head_result, z, w_o)
    return linear(z.reshape(T, -1), w_o, b_o)                           # [T, H*hd] -> [T, d]


def gelu_mlp(x, w_fc, b_fc, w_proj, b_proj, *, hook):  # [T, d] -> [T, d]
    pre = hook("hook_pre", linear(x, w_fc, b_fc))          # [T, d] -> [T, d_ff]
    post = hook("hook_post", gelu(pre))
    return linear(post, w_proj, b_proj)                    # [T, d_ff] -> [T, d]


def swiglu_ffn(x, w_gate, w_up, w_down, *, hook):  # [T, d] -> [T, d]
    gate = hook("hook_pre", matmul(x, w_gate))              # [T, d] -> [T, d_ff]
    up = hook("hook_pre_linear", matmul(x, w_up))           # [T, d] -> [T, d_ff]
    post = hook("hook_post", silu(gate) * up)
    return matmul(post, w_down)                            # [T, d_ff] -> [T, d]


def geglu_ffn(x, w_gate, w_up, w_down, *, hook):  # [T, d] -> [T, d]: Gemma's, GELU for SiLU
    gate = hook("hook_pre", matmul(x, w_gate))              # [T, d] -> [T, d_ff]
    up = hook("hook_pre_linear", matmul(x, w_up))           # [T, d] -> [T, d_ff]
    post = hook("hook_post", gelu(gate) * up)
    return matmul(post, w_down)                            # [T, d_ff] -> [T, d]


NORMS = {"layer_norm": layer_norm, "rms_norm": rms_norm}
MLPS = {"gelu": gelu_mlp, "swiglu": swiglu_ffn, "geglu": geglu_ffn}


def attention_half(resid_pre, ln_1, attn, ln_1_post=None, *, cfg, rope_cs, kv,
                   hook):  # [T, d] -> [T, d]
    """A block's first half: norm, attention (and Gemma 2's norm after it); returns attn_out."""
    normed = hook("ln1.hook_normalized", NORMS[cfg.norm](resid_pre, **ln_1, eps=cfg.norm_eps))
    out = attention_layer(
        normed, **attn, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads, rope_cs=rope_cs, kv=kv,
        hook=hook.scope("attn."), eps=cfg.norm_eps, scale=cfg.attn_scale, cap=cfg.attn_softcap)
    if ln_1_post is not None:
        out = hook("ln1_post.hook_normalized",
                   NORMS[cfg.norm](out, **ln_1_post, eps=cfg.norm_eps))
    return hook("hook_attn_out", out)


def ffn_half(resid_mid, ln_2, mlp, ln_2_post=None, *, cfg, hook):  # [T, d] -> [T, d]
    """A block's second half: norm, feed-forward (and Gemma 2's norm after it); returns
    mlp_out."""
    normed = hook("ln2.hook_normalized", NORMS[cfg.norm](resid_mid, **ln_2, eps=cfg.norm_eps))
    out = MLPS[cfg.mlp](normed, **mlp, hook=hook.scope("mlp."))
    if ln_2_post is not None:
        out = hook("ln2_post.hook_normalized",
                   NORMS[cfg.norm](out, **ln_2_post, eps=cfg.norm_eps))
    return hook("hook_mlp_out", out)


def transformer_block(x, ln_1, attn, ln_2, mlp, ln_1_post=None, ln_2_post=None, *, cfg, rope_cs,
                      kv, hook):  # [T, d] -> [T, d]
    resid_pre = hook("hook_resid_pre", x)
    attn_out = attention_half(resid_pre, ln_1, attn, ln_1_post, cfg=cfg, rope_cs=rope_cs, kv=kv,
                              hook=hook)
    resid_mid = hook("hook_resid_mid", resid_pre + attn_out)
    mlp_out = ffn_half(resid_mid, ln_2, mlp, ln_2_post, cfg=cfg, hook=hook)
    return hook("hook_resid_post", resid_mid + mlp_out)


def unembed_logits(normed, unembed, cap=0.0):  # [T, d] -> [T, V] (Gemma 2: soft-capped)
    return softcap(matmul(normed, unembed), cap)


def layer_rope_cs(positions, n_layers, cfg, inv_freq, inv_freq_local=None):  # -> [(cos, sin)]
    """Each block's RoPE cos and sin ([T, rot] each): one pair shared by every block, or Gemma 3's
    two (sliding-window blocks, global blocks)."""
    cs = rope_cos_sin(positions, inv_freq)                            # 2 x [T, rot]
    local = rope_cos_sin(positions, inv_freq_local) if inv_freq_local is not None else cs
    if cfg.rope_attn_factor != 1.0:     # LongRoPE: q and k come out of RoPE this much longer
        a = np.float32(cfg.rope_attn_factor)
        cs, local = (cs[0] * a, cs[1] * a), (local[0] * a, local[1] * a)
    return [local if cfg.local_layer(i) else cs for i in range(n_layers)]


def transformer(tokens, positions, wte, blocks, ln_f, unembed, wpe=None, *,
                cfg, inv_freq, kv, hook, inv_freq_local=None):  # [T] -> [T, V]
    """positions None: run without positional information (no position table, no RoPE).
    inv_freq_local: Gemma 3's sliding-window layers' frequencies (cfg.local_layer)."""
    x = wte[tokens]                                                   # [T] -> [T, d]
    if cfg.embed_scale != 1.0:                                        # Gemma: times sqrt(d)
        x = x * np.float32(cfg.embed_scale)
    x = hook("hook_embed", x)
    if positions is not None and cfg.positions == "learned":
        x = x + hook("hook_pos_embed", wpe[positions])                # [T, d]
    layer_cs = [None] * len(blocks)
    if positions is not None and cfg.positions == "rope":
        layer_cs = layer_rope_cs(positions, len(blocks), cfg, inv_freq, inv_freq_local)
    # blocks: the first n_layers only when the model is cut short; kv: one per layer
    for i, (block, kv_layer) in enumerate(zip(blocks, kv, strict=False)):
        x = transformer_block(x, **block, cfg=cfg, rope_cs=layer_cs[i], kv=kv_layer,
                              hook=hook.scope(f"blocks.{i}."))
    x = hook("ln_final.hook_normalized", NORMS[cfg.norm](x, **ln_f, eps=cfg.norm_eps))
    return hook("logits", unembed_logits(x, unembed, cfg.final_softcap))   # [T, d] -> [T, V]


# --- the model: config + weights + tokenizer -------------------------------------------------

class Model:
    """A loaded transformer. `params` is a nested dict whose keys mirror the functions above:
    {"wte", "wpe" (GPT-2), "blocks": [{"ln_1", "attn", "ln_2", "mlp"}, ...], "ln_f", "unembed"},
    every weight already shaped for `x @ w`."""

    def __init__(self, config: ModelConfig, params: dict, tokenizer=None, path: str = None):
        self.config, self.params, self.tokenizer, self.path = config, params, tokenizer, path
        # Where the weights came from (set by the loaders): "safetensors" or "gguf"; for a GGUF
        # file, how each weight was stored ({param path: gguf_file.StoredTensor}), its
        # general.* metadata and its tokenizer's pre-tokenizer regex.
        self.file_format, self.stored, self.metadata, self.pat_str = None, {}, {}, None
        self.inv_freq = self.inv_freq_local = None
        self._n_params = None            # (the params dict counted, its count)
        if config.positions == "rope":
            self.inv_freq = rope_frequencies(config.rotary_dim(), config.rope_theta)
            if config.rope_llama3:
                self.inv_freq = llama3_scaled_frequencies(self.inv_freq, *config.rope_llama3)
            if config.rope_freq_factors:     # as llama.cpp's ggml_rope_ext divides by them
                factors = np.asarray(config.rope_freq_factors, np.float32)
                self.inv_freq = (self.inv_freq / factors).astype(np.float32)
            if config.rope_long_factors:     # LongRoPE: the same division, by one of two sets
                factors = np.asarray(config.longrope_factors(), np.float32)
                self.inv_freq = (self.inv_freq / factors).astype(np.float32)
            if config.rope_linear_factor:    # llama.cpp's freq_scale = 1 / factor
                self.inv_freq = (self.inv_freq / np.float32(config.rope_linear_factor)).astype(
                    np.float32)
            if config.rope_theta_local:
                self.inv_freq_local = rope_frequencies(config.rotary_dim(),
                                                       config.rope_theta_local)

    def __repr__(self):
        return f"Model({self.path!r}, {self.config})"

    def layer_inv_freq(self, i):
        """The RoPE frequencies block i turns by: Gemma 3's sliding-window ones, or inv_freq."""
        if self.inv_freq_local is not None and self.config.local_layer(i):
            return self.inv_freq_local
        return self.inv_freq

    def n_params(self):
        """Parameters of the model as trained (a tied unembedding is not counted twice); counted
        once per params dict (the page asks on every request whether a model is big)."""
        if self._n_params is not None and self._n_params[0] is self.params:
            return self._n_params[1]

        def count(node):
            if isinstance(node, dict):
                return sum(count(v) for v in node.values())
            if isinstance(node, list):
                return sum(count(v) for v in node)
            return node.size
        tied = self.config.tied_embeddings
        n = count({k: v for k, v in self.params.items() if not (tied and k == "unembed")})
        self._n_params = (self.params, n)
        return n

    def _check(self, tokens, start=0):
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if tokens.size == 0:
            raise ValueError("no tokens")
        if tokens.min() < 0 or tokens.max() >= self.config.vocab_size:
            raise ValueError(f"token ids must be in [0, {self.config.vocab_size})")
        if start + tokens.size > self.config.n_ctx:
            raise ValueError(f"{start + tokens.size} tokens exceed the context window of "
                             f"{self.config.n_ctx}")
        return tokens

    def _run(self, tokens, positions, kv, hook, n_layers=None):
        blocks = self.params["blocks"][:n_layers]
        return transformer(tokens, positions, **{**self.params, "blocks": blocks},
                           cfg=self.config, inv_freq=self.inv_freq, kv=kv, hook=hook,
                           inv_freq_local=self.inv_freq_local)

    def forward(self, tokens, *, use_positions=True, n_layers=None):
        """Logits [T, V] for a sequence of token ids.

        use_positions=False removes positional information (no position table, no RoPE);
        n_layers=k runs the first k blocks, then the final norm and unembedding (logit lens).
        """
        return self._forward(tokens, use_positions, n_layers, NO_HOOKS)

    def run_with_cache(self, tokens, *, use_positions=True, n_layers=None, compact=False):
        """(logits [T, V], cache): every intermediate by name (see the module docstring).
        compact: record each block's input and compute its other names when read (see
        ActivationCache); the logits returned are then the last position's only, [1, V]."""
        cache = ActivationCache()
        if not compact:
            logits = self._forward(tokens, use_positions, n_layers, RecordingHooks(cache))
            return logits, cache
        tokens = self._check(tokens)
        positions = np.arange(len(tokens)) if use_positions else None
        layer_cs = [None] * self.config.n_layers
        if positions is not None and self.config.positions == "rope":
            layer_cs = layer_rope_cs(positions, self.config.n_layers, self.config, self.inv_freq,
                                     self.inv_freq_local)

        def rerun(i, half):
            own, block = ActivationCache(), self.params["blocks"][i]
            hook = RecordingHooks(own, f"blocks.{i}.")
            if half == "attn":
                attention_half(cache[f"blocks.{i}.hook_resid_pre"], block["ln_1"], block["attn"],
                               block.get("ln_1_post"),
                               cfg=self.config, rope_cs=layer_cs[i], kv=NoCache(), hook=hook)
            else:
                ffn_half(cache[f"blocks.{i}.hook_resid_mid"], block["ln_2"], block["mlp"],
                         block.get("ln_2_post"),
                         cfg=self.config, hook=hook)
            return own
        cache.rerun = rerun
        logits = self._forward(tokens, use_positions, n_layers,
                               CompactHooks(cache, partial(unembed_logits,
                                                           unembed=self.params["unembed"],
                                                           cap=self.config.final_softcap)))
        return logits[-1:].copy(), cache

    def _forward(self, tokens, use_positions, n_layers, hook):
        tokens = self._check(tokens)
        if n_layers is not None and not 0 <= n_layers <= self.config.n_layers:
            raise ValueError(f"n_layers must be in [0, {self.config.n_layers}]")
        positions = np.arange(len(tokens)) if use_positions else None
        kv = [NoCache()] * self.config.n_layers
        return self._run(tokens, positions, kv, hook, n_layers)

    # --- generation with a KV cache ---

    def new_kv_cache(self, capacity=64) -> KVCache:
        c = self.config
        return KVCache(c.n_layers, c.n_kv_heads, c.head_dim, c.n_ctx, capacity)

    def prefill(self, tokens, kv: KVCache, cache: dict = None):
        """Run the prompt (or any new tokens) through, storing their keys/values: [T, V].
        cache: a dict to record this pass's intermediates in (names as run_with_cache's; the
        scores and pattern are [H, T, S] over the S cached positions)."""
        tokens = self._check(tokens, start=len(kv))
        kv.reserve(len(kv) + len(tokens))
        positions = np.arange(len(kv), len(kv) + len(tokens))
        logits = self._run(tokens, positions, [LayerKV(kv, i) for i in range(self.config.n_layers)],
                           NO_HOOKS if cache is None else RecordingHooks(cache))
        kv.n_tokens += len(tokens)
        return logits

    def kv_from_recording(self, cache, n_tokens: int, capacity: int = 64) -> KVCache:
        """The KV cache a prefill of the recorded tokens leaves (a recording of a pass over
        `n_tokens` from position 0, full or compact): each layer's keys (after RoPE) and
        values, the very numbers `prefill` stores. A decode loop can start from it without
        running the prompt again."""
        kv = self.new_kv_cache(capacity)
        kv.reserve(n_tokens)                     # as prefill grows it: the same capacity
        key = "hook_rot_k" if self.config.positions == "rope" else "hook_k"
        for i in range(self.config.n_layers):
            kv.k[i, :n_tokens] = cache[f"blocks.{i}.attn.{key}"]
            kv.v[i, :n_tokens] = cache[f"blocks.{i}.attn.hook_v"]
        kv.n_tokens = n_tokens
        return kv

    def decode(self, token: int, kv: KVCache, cache: dict = None):
        """One step: the next token's logits [V], attending over everything in the cache
        (cache: records the step's own intermediates, each with one row, as in prefill)."""
        return self.prefill([token], kv, cache)[0]

    def decode_batch(self, tokens, kvs):
        """One step for B sequences at once, each with its own cache (lengths may differ): [B, V].

        The projections and feed-forward run as one [B, d] matmul; attention runs per sequence.
        """
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        if len(tokens) != len(kvs):
            raise ValueError(f"{len(tokens)} tokens for {len(kvs)} caches")
        if len({id(kv) for kv in kvs}) != len(kvs):
            raise ValueError("each sequence needs its own cache")
        for t, kv in zip(tokens, kvs, strict=True):
            self._check([t], start=len(kv))
            kv.reserve(len(kv) + 1)
        positions = np.array([len(kv) for kv in kvs])
        layers = [BatchKV([LayerKV(kv, i) for kv in kvs]) for i in range(self.config.n_layers)]
        logits = self._run(tokens, positions, layers, NO_HOOKS)
        for kv in kvs:
            kv.n_tokens += 1
        return logits
