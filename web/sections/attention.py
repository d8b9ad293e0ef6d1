"""Attention: every layer and head of the prompt's forward pass, one head large (scores before
softmax and weights after), what a clicked token attends to, and measured head behaviour.

Every number is read from the activation cache of the one forward pass of the prompt
(web.model_state.forward.prompt_run): blocks.{i}.attn.hook_attn_scores (q.k times the config's
score scale, soft-capped where the model caps them, -inf where masked: the sentence says which,
pipeline.attention_analysis.score_rule) and blocks.{i}.attn.hook_pattern (their softmax). The
measures are pipeline.attention_analysis's.
"""
import re
import urllib.parse

import numpy as np

from pipeline.attention_analysis import (
    attention_row,
    block_mean,
    head_measures,
    kv_groups,
    masked_as_nan,
    score_rule,
    softmax_of_scores,
    stack_layers,
    strongest_heads,
)
from web.core.cache import memo, model_key
from web.core.params import Param
from web.figures import attention as figures
from web.model_state.forward import prompt_run
from web.presentation.tokens import token_pieces, token_plain
from web.sections import Section

GRID_MAX = 48          # the grid's panels show at most this many rows and columns (else blocks)
N_STRONGEST = 3        # heads named for each kind of behaviour
N_TOP = 3              # tokens named as the clicked token's strongest (the chips show them all)
MEAN = "mean"

LAYER, HEAD = "att_layer", "att_head"      # read by the overview too (its attention picture)

PARAMS = (
    Param(LAYER, "Attention layer", kind="int", min=0, max=999),      # default: the last
    Param(HEAD, "Attention head", default="0", max_chars=12),          # a number or "mean"
    Param("att_token", "Attending token", kind="int", min=0, max=9999, resets_with_prompt=True),
)


def build(lm, state) -> dict:
    """Template context for the attention section."""
    cfg = lm.model.config
    run = prompt_run(lm, state["prompt"])
    T = len(run.ids)
    layer, head, t = chosen_layer(state, cfg), chosen_head(state, cfg), chosen_token(state, T)
    tok = lm.tokenizer
    tokens = [dict(id=i, pieces=token_pieces(tok, i),
                   label=token_plain(tok, i)) for i in run.ids]
    labels = [x["label"] for x in tokens]

    patterns = stack_layers(run.cache, "attn.hook_pattern", cfg.n_layers)       # [L, H, T, T]
    visible = masked_as_nan(patterns)
    bin_size = max(1, -(-T // GRID_MAX))
    measures = head_measures(patterns, run.ids)
    weights = attention_row(patterns[layer], head, t)                           # [t + 1]
    chosen = "mean of all heads" if head is None else f"head {head}"
    ctx = dict(
        n_tokens=T, layer=layer, head=head, head_value=MEAN if head is None else str(head),
        token=t, tokens=tokens, chosen=chosen,
        n_layers=cfg.n_layers, n_heads=cfg.n_heads, n_kv_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim, score=score_rule(cfg), model_name=lm.name,
        groups=kv_groups(cfg.n_heads, cfg.n_kv_heads),
        row=[dict(index=s, weight=float(w), percent=100 * float(w)) for s, w in enumerate(weights)],
        top=sorted(range(t + 1), key=lambda s: (-weights[s], s))[:N_TOP],
        bin_size=bin_size,
        thumbnails=thumbnails(lm.model, run.ids, visible, bin_size),
        grid_deep=figures.layers_across(cfg.n_layers),
        pattern_figure=figures.token_matrix_figure(
            visible[layer].mean(0) if head is None else visible[layer, head], labels,
            f"Layer {layer}, {chosen}: weights after softmax", t, kind="pattern"),
    )
    if head is not None:
        ctx.update(score_check(run.cache, layer, head, t, labels))
    ctx.update(head_behaviour(lm, measures, T, state, cfg))
    return ctx


# The thumbnails of every head depend on the prompt only: drawn once per prompt (SmolLM2's 270
# images take ~50 ms to encode), not again for every layer, head or token chosen.
_thumbnails = memo("attention thumbnails", 16)


def thumbnails(model, ids: tuple, visible, bin_size: int) -> list:
    """figures.head_thumbnails of the prompt's patterns (visible: [L, H, T, T], masked as NaN),
    once per (model, prompt)."""
    return _thumbnails.get((model_key(model), tuple(ids), bin_size),
                           lambda: figures.head_thumbnails(block_mean(visible, bin_size)))


def chosen_layer(state, cfg) -> int:
    return state.index_within(LAYER, cfg.n_layers, "layer", "this model has",
                              default=cfg.n_layers - 1)


def chosen_head(state, cfg):
    """A head number, or None for the mean of the layer's heads."""
    raw = state[HEAD].strip()
    if raw == MEAN:
        return None
    if re.fullmatch(r"[0-9]{1,4}", raw) and int(raw) < cfg.n_heads:
        return int(raw)
    state.reject(HEAD, f"Attention head must be a head number from 0 to "
                 f"{cfg.n_heads - 1}, or \"mean\"; got {raw[:12]!r}.",
                 422 if raw.isdigit() else 400)
    return int(state[HEAD])


def chosen_token(state, T) -> int:
    return state.index_within("att_token", T, "token", default=T - 1)


def score_check(cache, layer, head, t, labels) -> dict:
    """The chosen head's scores next to its pattern, and the clicked row recomputed:
    softmax(scores row) against the pattern row the engine stored."""
    scores = cache[f"blocks.{layer}.attn.hook_attn_scores"]                      # [H, T, T]
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
    recomputed = softmax_of_scores(scores, head, t)                              # [T]
    row = scores[head, t, :t + 1]
    exps = np.exp(row - row.max())
    return dict(
        scores_figure=figures.token_matrix_figure(
            np.where(np.isinf(scores[head]), np.nan, scores[head]), labels,
            f"Layer {layer}, head {head}: scores before softmax", t, kind="scores"),
        check_rows=[dict(index=s, score=float(row[s]), exp=float(exps[s]),
                         softmax=float(recomputed[s]), pattern=float(pattern[head, t, s]))
                    for s in range(t + 1)],
        exp_sum=float(exps.sum()),
        check_max_diff=float(np.abs(recomputed - pattern[head, t]).max()),
        n_masked=len(labels) - t - 1,
    )


def head_behaviour(lm, measures, T, state, cfg) -> dict:
    """The heads' measured behaviour (previous-, first-, same-token and induction scores of
    pipeline.attention_analysis) as a table, the strongest heads and a figure."""
    if T < 2:
        return dict(measures=None)
    kinds = [k for k in ("previous", "first", "same", "induction") if measures[k] is not None]
    table = [dict(layer=i, head=h, **{k: float(measures[k][i, h]) for k in kinds})
             for i in range(cfg.n_layers) for h in range(cfg.n_heads)]
    return dict(
        measures=True, kinds=kinds,
        strongest={k: strongest_heads(measures[k], N_STRONGEST) for k in kinds},
        measure_rows=table,
        measures_figure=figures.head_measures_figure(measures),
        repeated_url=repeated_prompt_url(lm, state),
    )


def repeated_prompt_url(lm, state):
    """The page with the prompt written twice (a second copy lets induction heads show), or
    None when twice the prompt would not fit the prompt box or the context window."""
    prompt = state["prompt"]
    twice = prompt.rstrip() + " " + prompt.strip()
    if (len(twice) > state.params["prompt"].max_chars
            or len(lm.tokenizer.encode_ordinary(twice)) > lm.n_ctx):
        return None
    pairs = [("prompt", twice)] + [(n, str(state.values[n])) for n in (LAYER, HEAD)
                                   if n in state.raw and n not in state.errors]
    return "/?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)


SECTION = Section("attention", "Attention", PARAMS, build,
                  tour=("Attention is where tokens look at each other. Each token asks a question "
                        "(query), every earlier token offers a label (key), and the match decides "
                        "how much of each earlier token's content (value) is copied. Click a token "
                        "to see whom it attends to, in every head of every layer."))
