"""Positions: the model's own scheme, sinusoidal encodings, RoPE on real q and k, word order.

RoPE's frequencies are the engine's `model.inv_freq` (from `rope_frequencies` and the config's
rope_theta, scaled as the config says: Llama 3.1's, Gemma 3's linear, Phi-3's LongRoPE) and, for a
chosen layer, `model.layer_inv_freq` (Gemma 3's sliding-window layers turn with their own base);
rotations use the engine's `rope` / `rope_cos_sin` (with LongRoPE's attention factor); q and k come
from the prompt's activation cache; the word-order numbers come from the engine run with and
without positions.
"""

import numpy as np

from pipeline.attention_analysis import score_rule
from pipeline.embedding_space import unit_rows
from pipeline.model import rope_frequencies, softcap, softmax
from pipeline.positions import (
    reordered_positions,
    rope_angles,
    rope_relative_scores,
    same_multiset,
    sinusoidal_encoding,
    word_order_differences,
)
from pipeline.ranking import top_k
from web.core.cache import memoized
from web.core.params import PROMPT, Param, parse_state
from web.figures import positions as figures
from web.model_state.forward import prompt_run
from web.presentation.tokens import token_plain
from web.sections import Section

SINUSOID_POSITIONS = 64          # rows of the sinusoidal heatmap
BASE_STEP = 100                  # the base slider's step
BASE_PRESETS = (100, 1000, 10000, 100000)
MAX_TABLE_POSITIONS = 128        # rows of a learned position table drawn
MAX_ORDER_TOKENS = 48            # tokens of each word-order sentence
TOP_NEXT = 5                     # next-token predictions listed per order
SHIFTS = (0, 1, 7, 50, 150)      # q and k moved together by these many positions
CURVE_EVERY = 4096               # the score-by-distance curve: every distance below this...
CURVE_LOG_POINTS = 512           # ...then this many log-spaced ones up to the context's end

PARAMS = (
    Param("pos_base", "Sinusoid base", kind="int", default=10000, min=100, max=100000),
    Param("pos_layer", "RoPE layer", kind="int", default=0, min=0, max=999),
    Param("pos_head", "RoPE head", kind="int", default=0, min=0, max=999),
    Param("pos_q", "RoPE query token", kind="int", min=0, max=9999, resets_with_prompt=True),
    Param("pos_k", "RoPE key token", kind="int", default=0, min=0, max=9999,
          resets_with_prompt=True),
    Param("pos_a", "First sentence", default="the dog bites the man.", max_chars=300,
          required=True),
    Param("pos_b", "Second sentence", default="the man bites the dog.", max_chars=300,
          required=True),
)


def build(lm, state) -> dict:
    """Template context for the positions section."""
    cfg = lm.model.config
    ctx = dict(model_name=lm.name, scheme=cfg.positions, d_model=cfg.d_model, n_ctx=cfg.n_ctx,
               n_layers=cfg.n_layers, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads,
               head_dim=cfg.head_dim, base_presets=BASE_PRESETS, base_step=BASE_STEP)
    ctx.update(own_scheme(lm.model))
    ctx.update(sinusoids(state, cfg.d_model))
    if cfg.positions == "rope":
        ctx.update(rope_on_prompt(lm, state))
    ctx.update(word_order(lm, state))
    return ctx


def warm(lm):
    """The model's own scheme, the default base's sinusoids and the default word order: the
    prompt-independent parts, computed once per model."""
    build(lm, parse_state(b"", [PROMPT, *PARAMS]))


# --- the model's own scheme (prompt-independent: once per model) ----------------------------

@memoized(4)
def own_scheme(model) -> dict:
    cfg = model.config
    if cfg.positions == "rope":
        wavelengths = 2 * np.pi / model.inv_freq                       # positions per turn
        # what the scaling divides each pair's frequency by: the base's own over the model's
        divisors = (rope_frequencies(cfg.rotary_dim(), cfg.rope_theta).astype(np.float64)
                    / model.inv_freq.astype(np.float64))
        local = {}
        if model.inv_freq_local is not None:                           # Gemma 3: two bases
            local_wavelengths = 2 * np.pi / model.inv_freq_local
            local = dict(local_theta=cfg.rope_theta_local, global_every=cfg.global_every,
                         local_fastest=float(local_wavelengths[0]),
                         local_slowest=float(local_wavelengths[-1]))
        longrope = {}
        if cfg.rope_scaling() == "longrope":
            short = np.asarray(cfg.rope_short_factors)
            longrope = dict(longrope_long=cfg.longrope_long(), original_ctx=cfg.rope_original_ctx,
                            short_min=float(short.min()), short_max=float(short.max()))
        return dict(
            rope_theta=cfg.rope_theta, n_pairs=len(model.inv_freq),
            rotary_dim=cfg.rotary_dim(), rotary_share=cfg.rotary_dim() / cfg.head_dim,
            theta_source=("the file's rope.freq_base" if model.file_format == "gguf"
                          else "the model's config.json"),
            scaling=cfg.rope_scaling(), divisor_min=float(divisors.min()),
            divisor_max=float(divisors.max()), linear_factor=cfg.rope_linear_factor,
            attn_factor=cfg.rope_attn_factor, **local, **longrope,
            fastest=float(wavelengths[0]), slowest=float(wavelengths[-1]),
            wavelength_figure=figures.rope_wavelengths(model.inv_freq, cfg.n_ctx))
    table = model.params["wpe"][:MAX_TABLE_POSITIONS]                  # [P, d]
    unit = unit_rows(table)
    similarity = unit @ unit.T                                         # [P, P]
    return dict(
        n_table=len(table), table_rows=len(model.params["wpe"]),
        neighbour_sim=float(np.mean(np.diag(similarity, 1))),
        far_sim=float(np.mean(np.diag(similarity, min(32, len(table) - 1)))),
        far_gap=min(32, len(table) - 1),
        table_figure=figures.position_table(table),
        table_similarity_figure=figures.position_similarity(similarity))


# --- sinusoidal encodings -------------------------------------------------------------------

@memoized(32)
def _sinusoid_figure(base: int, d_model: int) -> str:
    return figures.sinusoid_heatmap(sinusoidal_encoding(SINUSOID_POSITIONS, d_model, base), base)


def sinusoids(state, d_model) -> dict:
    base = state["pos_base"]
    if base % BASE_STEP:
        state.reject("pos_base", f"{state.params['pos_base'].label} moves in steps of "
                     f"{BASE_STEP}; got {base}.")
        base = state["pos_base"]
    slowest = 2 * np.pi * base ** ((d_model - 2) / d_model)
    return dict(base=base, sinusoid_positions=SINUSOID_POSITIONS, slowest_sinusoid=slowest,
                sinusoid_figure=_sinusoid_figure(base, d_model))


# --- RoPE on the prompt's real q and k ------------------------------------------------------

def rope_on_prompt(lm, state) -> dict:
    model, cfg = lm.model, lm.model.config
    run = prompt_run(lm, state["prompt"])
    T = len(run.ids)
    layer = state.index_within("pos_layer", cfg.n_layers, "RoPE layer", "the model has",
                               "layers")
    head = state.index_within("pos_head", cfg.n_heads, "RoPE head", "each layer has", "heads")
    q_at = state.index_within("pos_q", T, "RoPE query token", "the prompt has", "tokens",
                              default=T - 1)
    k_at = state["pos_k"]
    if k_at > q_at:
        state.reject("pos_k", f"RoPE key token {k_at} comes after the query token {q_at}: a token "
                     "only attends to itself and the tokens before it.")
        k_at = state["pos_k"]
    kv_head = head // (cfg.n_heads // cfg.n_kv_heads)        # grouped-query: heads share k
    prefix = f"blocks.{layer}.attn."
    # what RoPE turns: q and k, or (Qwen3, Gemma 3) each head's q and k after its RMSNorm
    before = ("q_norm.hook_normalized", "k_norm.hook_normalized") if cfg.qk_norm else \
        ("hook_q", "hook_k")
    q = run.cache[prefix + before[0]][q_at, head]             # [hd], before rotation
    k = run.cache[prefix + before[1]][k_at, kv_head]
    q_rot = run.cache[prefix + "hook_rot_q"][q_at, head]      # [hd], after
    k_rot = run.cache[prefix + "hook_rot_k"][k_at, kv_head]
    inv_freq = model.layer_inv_freq(layer)                   # Gemma 3: this layer's own base
    half = len(inv_freq)               # pairs (j, j + half) over the first 2 half dimensions
    rot = 2 * half                     # partial RoPE: the dimensions after these pass through
    rule = dict(mscale=cfg.rope_attn_factor, scale=cfg.score_scale(), cap=cfg.attn_softcap)
    angles = rope_angles(np.arange(T), inv_freq)              # [T, hd/2]
    pair_rows = [dict(j=j, freq=float(inv_freq[j]), angle=float(angles[q_at, j]),
                      before=(float(q[j]), float(q[j + half])),
                      after=(float(q_rot[j]), float(q_rot[j + half])),
                      length=float(np.hypot(q[j], q[j + half])),
                      length_after=float(np.hypot(q_rot[j], q_rot[j + half])))
                 for j in range(half)]
    # The same q and k placed at other positions: same distance, then other distances.
    offset = q_at - k_at
    same = [(k_at + offset + s, k_at + s) for s in SHIFTS if k_at + offset + s < cfg.n_ctx]
    same = [(offset, 0)] * (k_at > 0) + same
    other = [(k_at + d, k_at) for d in (offset + 1, offset + 5, max(offset - 1, 0))
             if d != offset and k_at + d < cfg.n_ctx]
    scores = rope_relative_scores(q, k, inv_freq, same + other, **rule)
    offsets = curve_offsets(cfg.n_ctx, offset)
    curve = rope_relative_scores(q, k, inv_freq, [(int(d), 0) for d in offsets], **rule)
    labels = [token_plain(lm.tokenizer, i) for i in run.ids]
    same_scores = scores[:len(same)]
    return dict(
        layer=layer, head=head, kv_head=kv_head, q_at=q_at, k_at=k_at, offset=offset,
        q_token=labels[q_at], k_token=labels[k_at],
        # the pairs causal attention can make: a query at or after the key, a key at or before
        # the query (a sliding-window layer reads only the last window of those)
        token_count=T,
        query_options=[(i, f"{i}: {labels[i]}") for i in range(k_at, T)],
        key_options=[(i, f"{i}: {labels[i]}") for i in range(q_at + 1)],
        model_score=float(run.cache[prefix + "hook_attn_scores"][head, q_at, k_at]),
        rotated_dot=float(softcap(np.float32(q_rot @ k_rot) * rule["scale"], rule["cap"])),
        score_scale=rule["scale"], score_cap=rule["cap"], layer_local=cfg.local_layer(layer),
        normed=cfg.qk_norm,
        same_rows=[dict(m=m, n=n, score=float(s))
                   for (m, n), s in zip(same, same_scores, strict=True)],
        same_spread=float(same_scores.max() - same_scores.min()),
        other_rows=[dict(m=m, n=n, score=float(s))
                    for (m, n), s in zip(other, scores[len(same):], strict=True)],
        pair_rows=pair_rows,
        passed_through=cfg.head_dim - rot,
        passed_change=float(max(np.abs(q_rot[rot:] - q[rot:]).max(initial=0.0),
                                np.abs(k_rot[rot:] - k[rot:]).max(initial=0.0))),
        curve_every=min(cfg.n_ctx, CURVE_EVERY), curve_points=len(offsets),
        angle_figure=figures.rope_angles_heatmap(angles, labels, q_at),
        relative_figure=figures.score_by_distance(offsets, curve, offset, score_rule(cfg)),
    )


def curve_offsets(n_ctx: int, offset: int = 0) -> np.ndarray:
    """The distances the score-by-distance curve is computed at: every one below CURVE_EVERY
    (or the whole context, if shorter), then CURVE_LOG_POINTS log-spaced ones up to n_ctx - 1
    (Phi-3.5's 131,072 positions cost what 8,192 do), and the prompt's own distance."""
    dense = np.arange(min(n_ctx, CURVE_EVERY))
    far = np.array([], dtype=np.int64)
    if n_ctx > CURVE_EVERY:
        far = np.rint(np.geomspace(CURVE_EVERY, n_ctx - 1, CURVE_LOG_POINTS)).astype(np.int64)
    return np.unique(np.concatenate([dense, far, [offset]]).astype(np.int64))


# --- word order -----------------------------------------------------------------------------

def _order_ids(lm, state, name):
    ids = list(lm.tokenizer.encode_ordinary(state[name]))
    if len(ids) > MAX_ORDER_TOKENS:
        state.reject(name, f"{state.params[name].label} is {len(ids)} tokens long; keep it to "
                     f"{MAX_ORDER_TOKENS}.")
        ids = list(lm.tokenizer.encode_ordinary(state[name]))
    return ids


def _describe(tokenizer, ids) -> str:
    return ", ".join(f"“{token_plain(tokenizer, i)}”" for i in ids)


def word_order(lm, state) -> dict:
    tok = lm.tokenizer
    if "pos_a" in state.errors or "pos_b" in state.errors:
        return dict(order=None)
    a, b = _order_ids(lm, state, "pos_a"), _order_ids(lm, state, "pos_b")
    if "pos_a" in state.errors or "pos_b" in state.errors:
        return dict(order=None)
    if not same_multiset(a, b):
        only_a = [t for t in set(a) if a.count(t) > b.count(t)]
        only_b = [t for t in set(b) if b.count(t) > a.count(t)]
        state.reject("pos_b", "The two orders must be made of the same tokens. "
                     + (f"Only the first has {_describe(tok, sorted(only_a))}. " if only_a else "")
                     + (f"Only the second has {_describe(tok, sorted(only_b))}." if only_b
                        else ""))
        return dict(order=None)
    if a == b:
        state.reject("pos_b", "The two are in the same order: change the order of some words.")
        return dict(order=None)
    if not reordered_positions(a, b):
        state.reject("pos_b", "No token has the same place in both after the same words in "
                     "another order, so there is nothing to compare. End both the same way, "
                     "for example with “.”.")
        return dict(order=None)
    return dict(order=_word_order_result(lm.model, tuple(a), tuple(b)))


@memoized(32)
def _word_order_result(model, a, b) -> dict:
    """Four forward passes (two orders, with and without positions): prompt-independent."""
    tok = model.tokenizer
    with_pos = word_order_differences(model, a, b, use_positions=True)
    without = word_order_differences(model, a, b, use_positions=False)
    positions = with_pos[0]

    def top(logits):
        p = softmax(logits)
        best = top_k(p, TOP_NEXT)
        return [dict(id=int(i), text=token_plain(tok, i),
                     p=float(p[i])) for i in best]

    n = model.config.n_layers
    # the stream after k blocks, counted for people ("after 1 of 4 blocks", as the logit lens)
    rows = [dict(layer=stream_name(k, n), with_pos=d1, without=d0, scale=s1)
            for k, ((_, d1, s1), (_, d0, _))
            in enumerate(zip(with_pos[1], without[1], strict=True))]
    return dict(
        a=[token_plain(tok, i) for i in a],
        b=[token_plain(tok, i) for i in b],
        positions=positions, rows=rows,
        next_a=top(with_pos[2]), next_b=top(with_pos[3]),
        next_a_nopos=top(without[2]), next_b_nopos=top(without[3]),
        figure=figures.word_order_figure(rows),
        headline=order_headline(rows, n))


BLIND = 1e-4      # a difference below this (of values in the tens) is float32 rounding


def stream_name(k: int, n_layers: int) -> str:
    """The residual stream after k blocks (0: the embeddings), blocks counted from 1."""
    plural = "s" if n_layers != 1 else ""
    return "embeddings" if k == 0 else f"after {k} of {n_layers} block{plural}"


def order_headline(rows: list, n_layers: int) -> dict:
    """The core's sentence: the two orders' difference after the first block without and with
    positions, and after the second without; whether the first is blind to order (only float32
    rounding) and the second is not."""
    first = rows[1]
    second = rows[2] if n_layers > 1 else None
    return dict(n_layers=n_layers, without_1=first["without"], with_1=first["with_pos"],
                without_2=second["without"] if second else None,
                blind_first=first["without"] < BLIND,
                sees_second=bool(second) and second["without"] >= BLIND)


SECTION = Section("positions", "Positions", PARAMS, build, warm=warm,
                  gives_away=("next-token",),
                  tour=("A vector says which token, not where it is. Order enters through "
                        "positions: older models add a position vector, Llama-style models rotate "
                        "the queries and keys by an angle that grows with the position (RoPE), so "
                        "attention scores depend on how far apart two tokens are. See it, and see "
                        "what is lost when positions are removed."))
