"""What attention heads do, measured on the attention patterns of a forward pass.

A layer's pattern is [H, T, T]: row t is how query token t spreads its attention over the keys
0..t (the causal mask gives later keys exactly 0), and every row sums to 1. Stacked over the
layers the patterns are [L, H, T, T]. Each measure of a head averages one number per query row
over the rows t >= 1 (row 0 can only attend to itself, so it would add a 1 to every measure):

    previous token  mean over t = 1..T-1 of pattern[t, t-1]
    first token     mean over t = 1..T-1 of pattern[t, 0]
    same token      mean over t = 1..T-1 of pattern[t, t]           (the diagonal)
    induction       mean over the rows t whose token occurred before, at some j <= t-2, of
                    the sum over those j of pattern[t, j+1]: attention to the token that came
                    after the earlier copy, what a head that continues repeated text looks at

A head that only ever looked at the previous token would score 1, 1/(T-1), 0 on the first three.
With fewer than two tokens there is no row t >= 1 and every measure is undefined (NaN).
"""
import numpy as np

from pipeline.model import softmax
from pipeline.ranking import top_k


def stack_layers(cache, name, n_layers):  # n_layers x [H, T, T] -> [L, H, T, T]
    """One attention tensor of every layer, e.g. name "attn.hook_pattern"."""
    return np.stack([cache[f"blocks.{i}.{name}"] for i in range(n_layers)])


def previous_token_score(patterns):  # [..., T, T] -> [...]
    return _mean_or_nan(np.diagonal(patterns, offset=-1, axis1=-2, axis2=-1))


def first_token_score(patterns):  # [..., T, T] -> [...]
    return _mean_or_nan(patterns[..., 1:, 0])


def same_token_score(patterns):  # [..., T, T] -> [...]
    return _mean_or_nan(np.diagonal(patterns, axis1=-2, axis2=-1)[..., 1:])


def _mean_or_nan(rows):  # [..., n] -> [...]: the mean of n values, NaN when n = 0
    if rows.shape[-1] == 0:
        return np.full(rows.shape[:-1], np.nan, dtype=np.float32)
    return rows.mean(-1)


def induction_targets(ids):  # [T] -> [T, T] bool
    """targets[t, s]: key s follows an earlier copy of query t's token (ids[s-1] == ids[t],
    1 <= s <= t-1)."""
    ids = np.asarray(ids).reshape(-1)
    T = len(ids)
    same = ids[:, None] == ids[None, :]                        # [T, T]: same[t, j]
    targets = np.zeros((T, T), dtype=bool)
    targets[:, 1:] = same[:, :-1]                              # key s = j + 1
    return targets & np.tri(T, T, k=-1, dtype=bool)            # only s < t


def induction_score(patterns, ids):  # [..., T, T], [T] -> [...], or None without repeats
    targets = induction_targets(ids)
    rows = targets.any(-1)                                     # [T]: queries with an earlier copy
    if not rows.any():
        return None
    per_row = (patterns * targets).sum(-1)                     # [..., T]
    return per_row[..., rows].mean(-1)


def head_measures(patterns, ids) -> dict:
    """{"previous", "first", "same": [L, H], "induction": [L, H] or None} for [L, H, T, T]."""
    return {"previous": previous_token_score(patterns),
            "first": first_token_score(patterns),
            "same": same_token_score(patterns),
            "induction": induction_score(patterns, ids)}


def strongest_heads(scores, k=3) -> list:
    """[(layer, head, score)] of the k highest scores of an [L, H] array (ties: lower layer,
    then lower head, first)."""
    flat = np.asarray(scores).reshape(-1)
    order = top_k(flat, k)
    n_heads = scores.shape[1]
    return [(int(i // n_heads), int(i % n_heads), float(flat[i])) for i in order]


def score_rule(cfg) -> dict:
    """How the running model turns a query and a key into a score, from its config (what
    pipeline.model.attention does): q.k times `scale` = 1 / sqrt(`under_root`), the head width or
    Gemma's query_pre_attn_scalar (`gemma`: a Gemma model, whose configs name that number; the
    27B's is width / heads, `pre_attn_is_head_width` False); then `softcap` c > 0 squashes a
    score into (-c, c) as c tanh(score / c) (Gemma 2); and RoPE's cos and sin carry LongRoPE's
    attention factor `rope_attn_factor` a, so q and k come out a times longer and every score
    a^2 times larger (`score_factor`); with partial RoPE (`rotary_dim` < `head_dim`: Phi-4-mini's
    96 of 128) only each head's first rotary_dim dimensions are turned and lengthened, so only
    their part of a score is a^2 times larger."""
    scale = cfg.score_scale()
    under_root = cfg.head_dim if not cfg.attn_scale else scale ** -2
    if abs(under_root - round(under_root)) < 1e-3 * under_root:
        under_root = int(round(under_root))
    return dict(scale=scale, under_root=under_root, gemma=cfg.mlp == "geglu",
                pre_attn_is_head_width=under_root == cfg.head_dim, softcap=cfg.attn_softcap,
                rope_attn_factor=cfg.rope_attn_factor,
                score_factor=cfg.rope_attn_factor ** 2,
                rope=cfg.positions == "rope", rotary_dim=cfg.rotary_dim(), head_dim=cfg.head_dim,
                rotary_share=cfg.rotary_dim() / cfg.head_dim)


def kv_groups(n_heads, n_kv_heads) -> list:
    """[(kv head, [query heads that use it])], as pipeline.model.attention repeats the keys and
    values: query head h reads key/value head h // (n_heads // n_kv_heads)."""
    per_group = n_heads // n_kv_heads
    return [(g, list(range(g * per_group, (g + 1) * per_group))) for g in range(n_kv_heads)]


def attention_row(pattern, head, t):  # [H, T, T] -> [t + 1]
    """What query token t attends to in one layer: one head's row, or (head None) the mean of
    all heads' rows, over the keys 0..t it can see."""
    rows = pattern[:, t, :t + 1]                               # [H, t + 1]
    return rows.mean(0) if head is None else rows[head]


def softmax_of_scores(scores, head, t):  # [H, T, T] -> [T]
    """softmax of query t's row of scaled, masked scores: the masked keys (-inf) get exactly 0.
    It should equal the same row of the pattern (the engine computed it the same way)."""
    return softmax(scores[head, t])


def masked_as_nan(patterns):  # [..., T, T] -> [..., T, T] float32
    """The pattern with the cells a query cannot see (keys after it) set to NaN, not 0."""
    T = patterns.shape[-1]
    return np.where(np.tri(T, T, dtype=bool), patterns, np.float32(np.nan)).astype(np.float32)


def block_mean(matrix, size: int):  # [..., T, T] -> [..., ceil(T/size), ceil(T/size)]
    """Mean of each size x size block, ignoring NaN cells (NaN if the whole block is NaN):
    a long prompt's patterns shrunk for small pictures."""
    T = matrix.shape[-1]
    n = -(-T // size)
    pad = [(0, 0)] * (matrix.ndim - 2) + [(0, n * size - T)] * 2
    x = np.pad(matrix, pad, constant_values=np.nan)
    x = x.reshape(matrix.shape[:-2] + (n, size, n, size))
    valid = ~np.isnan(x)
    sums = np.where(valid, x, 0).sum((-3, -1))
    counts = valid.sum((-3, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan).astype(np.float32)
