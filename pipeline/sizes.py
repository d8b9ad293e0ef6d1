"""How many parameters a model has, and where they sit: from its config, or from its arrays.

`parameter_counts(config)` is the formula: it reads only a `ModelConfig`, so it applies equally
to the running model and to published configurations it cannot run (`pipeline.published`).
`counted_from_arrays(model)` adds up the `.size` of every array the loaded model really holds,
sorted into the same components; tests check that the two agree on every model we can load and
that the formula gives each published checkpoint's reported count.

    component     GPT-2 (LayerNorm, GELU, biases)          Llama (RMSNorm, SwiGLU, no biases)
    embedding     V d                                      V d
    positions     n_ctx d (learned table)                  0 (RoPE has no parameters)
    attn q        d (H hd) + H hd                          d (H hd)
    attn k, v     d (KVH hd) + KVH hd, each                d (KVH hd), each
    attn o        (H hd) d + d                             (H hd) d
    feed-forward  d d_ff + d_ff + d_ff d + d               3 d d_ff (gate, up, down)
    norms         2 x 2d (gain and bias, twice)            2 x d (gain, twice)
    (Qwen2 adds q, k, v biases: H hd, KVH hd, KVH hd; Qwen3 adds q_norm and k_norm gains, 2 hd,
    counted with the norms; Gemma 2 norms attention's and the feed-forward's outputs too: 4 d)
    final norm    2d                                       d
    unembedding   0 if tied to the embedding, else V d

A tied unembedding is the embedding matrix read backwards: counted once, as checkpoints do.
"""
from dataclasses import dataclass

import numpy as np

from pipeline.model import ModelConfig

BLOCK_PARTS = ("attn_q", "attn_k", "attn_v", "attn_o", "ffn", "norms")


@dataclass(frozen=True)
class ParamCounts:
    embedding: int      # token embedding table [V, d]
    positions: int      # learned position table [n_ctx, d] (0 for RoPE)
    attn_q: int         # per block: query projection (+ bias)
    attn_k: int         # per block: key projection (+ bias)
    attn_v: int         # per block: value projection (+ bias)
    attn_o: int         # per block: output projection (+ bias)
    ffn: int            # per block: feed-forward weights (+ biases)
    norms: int          # per block: both norms' gains (+ biases)
    n_layers: int       # blocks
    final_norm: int     # the norm before the unembedding
    unembedding: int    # [d, V] if not tied to the embedding, else 0

    @property
    def attention(self) -> int:  # per block
        return self.attn_q + self.attn_k + self.attn_v + self.attn_o

    @property
    def per_block(self) -> int:
        return self.attention + self.ffn + self.norms

    @property
    def blocks(self) -> int:
        return self.n_layers * self.per_block

    @property
    def total(self) -> int:
        return (self.embedding + self.positions + self.blocks + self.final_norm
                + self.unembedding)


def parameter_counts(c: ModelConfig) -> ParamCounts:
    """The parameter breakdown implied by a config (see the table in the module docstring)."""
    d, q_width, kv_width = c.d_model, c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    biased = c.model_type == "gpt2"                      # GPT-2's linear layers carry biases
    qkv_biased = biased or c.qkv_bias                    # Qwen2: q, k, v only
    norm = 2 * d if c.norm == "layer_norm" else d        # LayerNorm: gain and bias; RMS: gain
    head_norms = 2 * c.head_dim if c.qk_norm else 0      # Qwen3: a gain for queries, one for keys
    if c.mlp == "gelu":
        ffn = d * c.d_ff + c.d_ff + c.d_ff * d + d       # fc [d, d_ff] + b, proj [d_ff, d] + b
    else:
        ffn = 3 * d * c.d_ff                             # gate, up [d, d_ff]; down [d_ff, d]
    return ParamCounts(
        embedding=c.vocab_size * d,
        positions=c.n_ctx * d if c.positions == "learned" else 0,
        attn_q=d * q_width + (q_width if qkv_biased else 0),
        attn_k=d * kv_width + (kv_width if qkv_biased else 0),
        attn_v=d * kv_width + (kv_width if qkv_biased else 0),
        attn_o=q_width * d + (d if biased else 0),
        ffn=ffn,
        norms=(4 if c.post_norms else 2) * norm + head_norms,
        n_layers=c.n_layers,
        final_norm=norm,
        unembedding=0 if c.tied_embeddings else c.vocab_size * d,
    )


def float32_memory_bytes(config: ModelConfig, n_params: int, n_tokens: int) -> int:
    """Bytes the engine holds to run a model: every parameter as float32 (4 bytes: it
    dequantizes a GGUF file's weights once) plus the KV cache of `n_tokens` positions in float32
    (pipeline.kvcache.kv_cache_bytes). Activations of one prompt come on top."""
    from pipeline.kvcache import kv_cache_bytes
    return 4 * n_params + kv_cache_bytes(config, n_tokens, 4)


def _size(node) -> int:  # arrays in a nested dict / list
    if isinstance(node, dict):
        return sum(_size(v) for v in node.values())
    if isinstance(node, list):
        return sum(_size(v) for v in node)
    return int(np.asarray(node).size)


def counted_from_arrays(model) -> ParamCounts:
    """The same breakdown, counted from the arrays of a loaded model (`model.params`).

    Per-block components must be the same in every block (they are, in every decoder we load);
    a block that differs raises instead of being averaged away.
    """
    p = model.params
    per_block = []
    for block in p["blocks"]:
        attn = block["attn"]
        per_block.append(dict(
            attn_q=_size([attn[k] for k in ("w_q", "b_q") if k in attn]),
            attn_k=_size([attn[k] for k in ("w_k", "b_k") if k in attn]),
            attn_v=_size([attn[k] for k in ("w_v", "b_v") if k in attn]),
            attn_o=_size([attn[k] for k in ("w_o", "b_o") if k in attn]),
            ffn=_size(block["mlp"]),
            norms=_size([block[k] for k in ("ln_1", "ln_2", "ln_1_post", "ln_2_post")
                         if k in block])
            + _size([attn[k] for k in ("q_norm", "k_norm") if k in attn])))
    if any(b != per_block[0] for b in per_block):
        raise ValueError("blocks of different sizes")
    tied = model.config.tied_embeddings
    return ParamCounts(
        embedding=_size(p["wte"]), positions=_size(p.get("wpe", [])),
        n_layers=len(per_block), final_norm=_size(p["ln_f"]),
        unembedding=0 if tied else _size(p["unembed"]),
        **(per_block[0] if per_block else dict.fromkeys(BLOCK_PARTS, 0)))
