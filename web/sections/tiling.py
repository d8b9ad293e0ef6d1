"""Attention tiling: FlashAttention's online softmax run on the real q, k, v of the prompt.

The tiled computation (pipeline/tiling.py) is compared with the engine's own per-head output
(`blocks.{i}.attn.hook_z`), and the traffic it counts with the plain algorithm's. At sizes the
server cannot run, the same traffic formulas are applied to a published configuration.
"""
import math

import numpy as np

from pipeline.published import PUBLISHED, published
from pipeline.tiling import (
    fast_memory_elements,
    plain_traffic,
    tiled_attention,
    tiled_traffic,
    tiles_computed,
)
from web.core.cache import memoized
from web.core.params import Param
from web.figures import tiling as figures
from web.model_state.forward import prompt_run
from web.presentation.tokens import token_plain
from web.sections import Section

MAX_TILE_PAIRS = 2500          # tiles the NumPy run may visit (keeps a request fast)
# H100: shared memory per SM, configurable up to 228 KB (NVIDIA's Hopper Tuning Guide, where a
# KB is 1,024 bytes: 228 KiB)
SRAM_BYTES = 228 * 1024
SCALE_BYTES = 2                # fp16 / bf16 elements at real scale
DEFAULT_CONFIG = "Llama 3 8B"

PARAMS = (
    Param("til_layer", "Layer", kind="int", default=0, min=0, max=999),
    Param("til_head", "Query head", kind="int", default=0, min=0, max=999),
    # 16 x 16 by default: on the models' own prompts (26 tokens, head width 32, for the Austen
    # model's first) tiles of 8 query rows read K and V so many times that tiling moves more
    # than plain attention; 16 rows move less (see smaller_tiles, said on the page)
    Param("til_bq", "Query tile", kind="int", default=16, min=1, max=256),
    Param("til_bk", "Key tile", kind="int", default=16, min=1, max=256),
    Param("til_row", "Query row to follow", kind="int", min=0, max=9999,
          resets_with_prompt=True),
    Param("til_model", "Published model", default=DEFAULT_CONFIG, max_chars=60,
          choices=[p.name for p in PUBLISHED]),
    Param("til_len", "Sequence length", kind="int", default=8192, min=256, max=131072),
)


def build(lm, state) -> dict:
    run = prompt_run(lm, state["prompt"])
    cfg = lm.model.config
    T = len(run.ids)
    layer = state.index_within("til_layer", cfg.n_layers, "layer", "this model has")
    head = state.index_within("til_head", cfg.n_heads, "query head", "this model has")
    bq, bk = state["til_bq"], state["til_bk"]
    pairs = math.ceil(T / bq) * math.ceil(T / bk)
    if pairs > MAX_TILE_PAIRS:
        state.reject("til_bq", f"Tiles of {bq} x {bk} cut this {T}-token prompt into {pairs:,} "
                     f"tiles; the limit here is {MAX_TILE_PAIRS:,}: choose larger tiles.")
        bq = bk = max(8, math.ceil(T / math.isqrt(MAX_TILE_PAIRS)))
    scores = run.cache[f"blocks.{layer}.attn.hook_attn_scores"][head]     # [T, T]
    suggested = rescaling_row(scores, bk)
    row = state.index_within("til_row", T, "row", "the prompt has", "tokens",
                             default=T - 1 if suggested is None else suggested)
    kv_head = head // (cfg.n_heads // cfg.n_kv_heads)
    rotated = "blocks.0.attn.hook_rot_q" in run.cache
    q = run.cache[f"blocks.{layer}.attn.hook_{'rot_q' if rotated else 'q'}"][:, head]
    k = run.cache[f"blocks.{layer}.attn.hook_{'rot_k' if rotated else 'k'}"][:, kv_head]
    v = run.cache[f"blocks.{layer}.attn.hook_v"][:, kv_head]
    engine_out = run.cache[f"blocks.{layer}.attn.hook_z"][:, head]
    out, moved, steps = tiled_attention(q, k, v, bq, bk, watch_row=row)
    pattern = run.cache[f"blocks.{layer}.attn.hook_pattern"][head]
    row_scores = scores[row, :row + 1].astype(np.float64)
    hd = q.shape[1]
    plain_moved = plain_traffic(T, hd)
    sizes = tile_sweep(T)
    swept = [tiled_traffic(T, hd, b, b).total * 4 for b in sizes]
    tokens = [token_plain(lm.tokenizer, i) for i in run.ids]
    tiles_total, tiles_done = math.ceil(T / bq) * math.ceil(T / bk), tiles_computed(T, bq, bk)
    ctx = dict(
        T=T, hd=hd, layer=layer, head=head, suggested_row=suggested,
        rescaled=any(s.rescale < 1 for s in steps[1:]), kv_head=kv_head, n_layers=cfg.n_layers,
        n_heads=cfg.n_heads, rotated=rotated, bq=bq, bk=bk, row=row, tokens=tokens,
        max_diff=float(np.abs(out - engine_out).max()),
        tiled=traffic_row(moved, 4), plain=traffic_row(plain_moved, 4),
        tiles_total=tiles_total, tiles_done=tiles_done,
        fast_bytes=fast_memory_elements(bq, bk, hd) * 4,
        steps=steps, final_m=float(row_scores.max()),
        final_l=float(np.exp(row_scores - row_scores.max()).sum()),
        pattern_figure=figures.tiles_figure(pattern, tokens, bq, bk, row, tiles_done,
                                              tiles_total),
        sizes_figure=figures.traffic_by_tile_figure(
            T, sizes, swept, plain_moved.total * 4, bq if bq == bk else None),
        **crossover(sizes, swept, plain_moved.total * 4),
    )
    ctx.update(at_scale(state))
    return ctx




def rescaling_row(scores, bk):
    """The last query row whose largest score lies after its first key tile, so that its
    running maximum rises in a later tile and the online softmax rescales what it summed:
    None when every row's maximum is in tile 0. scores: the engine's [T, T] scores (a row's
    keys up to the diagonal are the ones it reads)."""
    for row in range(scores.shape[0] - 1, -1, -1):
        if int(np.argmax(scores[row, :row + 1])) >= bk:
            return row
    return None


def crossover(sizes, swept, plain_bytes) -> dict:
    """Where tiling stops saving on this prompt: the largest swept square tile that moves more
    than plain attention (`more_tile`, its bytes `more_bytes`; None when none does) and the
    smallest that moves less (`less_tile`, `less_bytes`)."""
    more = [(b, n) for b, n in zip(sizes, swept, strict=True) if n > plain_bytes]
    less = [(b, n) for b, n in zip(sizes, swept, strict=True) if n < plain_bytes]
    return dict(more_tile=more[-1][0] if more else None, more_bytes=more[-1][1] if more else None,
                less_tile=less[0][0] if less else None, less_bytes=less[0][1] if less else None)


def traffic_row(t, bytes_per_element) -> dict:
    return dict(read=t.read, written=t.written, total=t.total,
                bytes=t.total * bytes_per_element)


def tile_sweep(T) -> list:
    """Square tile sizes to compare: powers of two up to the prompt, and the whole prompt."""
    return [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b < T] + [T]


def largest_tile(hd, budget=SRAM_BYTES, bytes_per_element=SCALE_BYTES) -> int:
    """The largest power-of-two square tile whose working set fits the fast-memory budget."""
    b = 1
    while fast_memory_elements(2 * b, 2 * b, hd) * bytes_per_element <= budget:
        b *= 2
    return b


@memoized(64)
def scale_curves(name: str, hd: int, tile: int) -> tuple:
    lengths = [2 ** e for e in range(8, 18)]           # 256 ... 131072
    plain = [plain_traffic(n, hd).total * SCALE_BYTES for n in lengths]
    tiled = [tiled_traffic(n, hd, tile, tile).total * SCALE_BYTES for n in lengths]
    return lengths, plain, tiled


def at_scale(state) -> dict:
    name = state["til_model"]                 # one of its Param's choices
    p = published(name)
    c = p.config
    n = state["til_len"]
    tile = largest_tile(c.head_dim)
    lengths, plain_curve, tiled_curve = scale_curves(name, c.head_dim, tile)
    plain_n = plain_traffic(n, c.head_dim).total * SCALE_BYTES
    tiled_n = tiled_traffic(n, c.head_dim, tile, tile).total * SCALE_BYTES
    return dict(
        model=name, repo=p.repo, scale_hd=c.head_dim,
        scale_heads=c.n_heads, scale_layers=c.n_layers, scale_len=n, scale_tile=tile,
        sram_kb=SRAM_BYTES // 1024,
        tile_bytes=fast_memory_elements(tile, tile, c.head_dim) * SCALE_BYTES,
        plain_bytes=plain_n, tiled_bytes=tiled_n, saving=plain_n / tiled_n,
        score_bytes=n * n * SCALE_BYTES,
        model_plain=plain_n * c.n_heads * c.n_layers,
        model_tiled=tiled_n * c.n_heads * c.n_layers,
        scale_figure=figures.traffic_by_length_figure(lengths, plain_curve, tiled_curve, n,
                                                      name, tile),
    )


SECTION = Section("tiling", "Attention tiling", PARAMS, build,
                  short="Tiling",
                  tour=("On a GPU, moving data costs more than computing with it. FlashAttention "
                        "computes attention in tiles with a running softmax, so the full table of "
                        "scores is never written to slow memory. Same result, much less traffic."))
