"""The transformer block: its parts with the real shapes of this prompt's tensors, any tensor
from the activation cache, the parameter count of every component (counted from the arrays and
by the formula, and the same formula on published models), the residual stream's size across
layers, and the logit lens.

Tensors come from the one cached forward pass of the prompt (`web.model_state.forward.prompt_run`);
the
parameter tables depend only on the model and are computed once per model.
"""
import os
from dataclasses import dataclass

import numpy as np

from pipeline.lens import logit_lens, residual_norms
from pipeline.model import softmax
from pipeline.published import PUBLISHED
from pipeline.ranking import top_k
from pipeline.sizes import counted_from_arrays, parameter_counts
from web.core.cache import memo, memoized, model_key
from web.core.params import Param
from web.figures import block as figures
from web.model_state.forward import prompt_run
from web.presentation.tokens import token_plain
from web.sections import Section

LENS_TOP = 5              # guesses per layer in the logit lens table
LOGIT_COLUMNS = 24        # vocabulary columns shown when the logits tensor is picked

PARAMS = (
    Param("blk_layer", "Block", kind="int", default=0, min=0, max=999),
    Param("blk_part", "Part of the block", default="q", max_chars=20),
    Param("blk_head", "Head", kind="int", default=0, min=0, max=999),
    Param("blk_pos", "Token position for the logit lens", kind="int", min=0, max=9999,
          resets_with_prompt=True),
)


@dataclass(frozen=True)
class Part:
    key: str          # value of blk_part
    hook: str         # activation name; "{i}" is the block
    label: str        # button text
    symbols: str      # the shape in letters
    what: str         # one line for the learner


def parts_of(cfg) -> list:
    """The clickable parts, in the order the data flows through the model."""
    norm = "RMSNorm" if cfg.norm == "rms_norm" else "LayerNorm"
    swiglu = cfg.mlp == "swiglu"
    parts = [Part("embed", "hook_embed", "token embeddings", "[T, d]",
                  "a row of the embedding table per token")]
    if cfg.positions == "learned":
        parts.append(Part("pos_embed", "hook_pos_embed", "position embeddings", "[T, d]",
                          "a row of the learned position table per position, added to the "
                          "token embeddings"))
    parts += [
        Part("resid_pre", "blocks.{i}.hook_resid_pre", "residual stream in", "[T, d]",
             "what enters the block: embeddings plus everything earlier blocks added"),
        Part("ln1", "blocks.{i}.ln1.hook_normalized", f"{norm} 1", "[T, d]",
             "each token's vector rescaled (and, for LayerNorm, centred) before attention"),
        Part("q", "blocks.{i}.attn.hook_q", "q (queries)", "[T, H, hd]",
             "what each token looks for, one vector per query head"),
        Part("k", "blocks.{i}.attn.hook_k", "k (keys)", "[T, KVH, hd]",
             "what each token offers to be found by"),
        Part("v", "blocks.{i}.attn.hook_v", "v (values)", "[T, KVH, hd]",
             "what each token passes on when attended to"),
        Part("pattern", "blocks.{i}.attn.hook_pattern", "attention pattern", "[H, T, T]",
             "softmax of the scaled, causally masked q·k scores: each row sums to 1"),
        Part("z", "blocks.{i}.attn.hook_z", "weighted values", "[T, H, hd]",
             "per head, the pattern-weighted sum of the values"),
        Part("attn_out", "blocks.{i}.hook_attn_out", "attention output", "[T, d]",
             "all heads concatenated and projected back to the residual width"),
        Part("resid_mid", "blocks.{i}.hook_resid_mid", "residual + attention", "[T, d]",
             "the residual add: stream in + attention output"),
        Part("ln2", "blocks.{i}.ln2.hook_normalized", f"{norm} 2", "[T, d]",
             "the stream normalized again before the feed-forward"),
        Part("ffn_pre", "blocks.{i}.mlp.hook_pre", "gate (before SiLU)" if swiglu
             else "fc (before GELU)", "[T, d_ff]",
             "the first projection up to the feed-forward width"),
    ]
    if swiglu:
        parts.append(Part("ffn_up", "blocks.{i}.mlp.hook_pre_linear", "up projection",
                          "[T, d_ff]", "the second projection, multiplied by SiLU(gate)"))
    parts += [
        Part("ffn_hidden", "blocks.{i}.mlp.hook_post", "feed-forward hidden", "[T, d_ff]",
             "SiLU(gate) × up" if swiglu else "GELU(fc)"),
        Part("mlp_out", "blocks.{i}.hook_mlp_out", "feed-forward output", "[T, d]",
             "projected back down to the residual width"),
        Part("resid_post", "blocks.{i}.hook_resid_post", "residual + feed-forward", "[T, d]",
             "the second residual add: what leaves the block"),
        Part("final_norm", "ln_final.hook_normalized", f"final {norm}", "[T, d]",
             "after the last block, one more norm"),
        Part("logits", "logits", "logits", "[T, V]",
             "the unembedding" + (" (the embedding table, transposed)" if cfg.tied_embeddings
                                  else "")
             + ": a score for every vocabulary token, at every position"),
    ]
    return parts


# --- prompt-independent: computed once per model --------------------------------------------

@memoized(4)
def model_tables(model) -> dict:
    """Parameter counts of the running model and of the published configs (once per model)."""
    counts = parameter_counts(model.config)
    arrays = counted_from_arrays(model)
    published = [published_row(p.name, p.repo, p.config, p.nominal, p.reported_params)
                 for p in PUBLISHED]
    name = os.path.basename(os.path.normpath(model.path)) if model.path else "this model"
    here = published_row(f"{name} (running here)", model.path or "", model.config, "", None)
    small = next(p for p in PUBLISHED if p.name == "GPT-2 small")
    gpt2 = parameter_counts(small.config)
    return dict(
        counts=counts, arrays=arrays, published=published, here=here,
        gpt2_story=dict(reported=small.reported_params, formula=gpt2.total,
                        no_positions=gpt2.total - gpt2.positions,
                        no_embeddings=gpt2.total - gpt2.positions - gpt2.embedding,
                        paper=small.nominal),
        shares_figure=figures.shares_figure([here] + published))


def published_row(name, repo, config, nominal, reported) -> dict:
    c = parameter_counts(config)
    return dict(name=name, repo=repo, nominal=nominal, reported=reported, total=c.total,
                d=config.d_model, layers=config.n_layers, heads=config.n_heads,
                kv_heads=config.n_kv_heads, d_ff=config.d_ff, vocab=config.vocab_size,
                tied=config.tied_embeddings,
                embedding=c.embedding + c.positions + c.unembedding,
                attention=c.n_layers * c.attention, ffn=c.n_layers * c.ffn,
                norms=c.n_layers * c.norms + c.final_norm)


# --- the section ------------------------------------------------------------------------------

def build(lm, state) -> dict:
    """Template context for the block section."""
    model, cfg = lm.model, lm.model.config
    run = prompt_run(lm, state["prompt"])
    tokens = [token_plain(lm.tokenizer, i) for i in run.ids]
    T = len(run.ids)

    layer = state.index_within("blk_layer", cfg.n_layers, "block", "this model has")
    head = state.index_within("blk_head", cfg.n_heads, "head", "this model has")
    parts = parts_of(cfg)
    by_key = {p.key: p for p in parts}
    part = by_key[state.one_of("blk_part", by_key)]        # this model's parts only
    pos = state.index_within("blk_pos", T, "position", things="tokens", default=T - 1)

    shapes = {p.key: list(run.cache[p.hook.format(i=layer)].shape) for p in parts
              if p.key != "logits"}
    # final norm @ unembedding, without computing all T rows unless the logits are picked (a big
    # model's compact run computes them when read: SmolLM2's 21-token prompt, 4 MB)
    shapes["logits"] = (list(run.cache["ln_final.hook_normalized"].shape[:-1])
                        + [model.params["unembed"].shape[1]])
    ctx = dict(
        cfg=cfg, T=T, tokens=tokens, layer=layer, head=head, pos=pos, parts=parts,
        part=part, by=by_key, shapes=shapes, group=cfg.n_heads // cfg.n_kv_heads,
        attention_kind=attention_kind(cfg),
        n_params=model.n_params(), **model_tables(model))
    ctx.update(tensor_view(cfg, run, part, layer, head, tokens, lm))
    ctx.update(kept_lens(model, run, tokens, pos))
    last = ctx if pos == T - 1 else kept_lens(model, run, tokens, T - 1)
    ctx["headline"] = dict(text=last["final_top"]["text"], first_top=last["first_top"],
                           first_top10=last["first_top10"])
    return ctx


def attention_kind(cfg) -> str:
    if cfg.n_kv_heads == cfg.n_heads:
        return "multi-head"
    return "multi-query" if cfg.n_kv_heads == 1 else "grouped-query"


def tensor_view(cfg, run, part, layer, head, tokens, lm) -> dict:
    """The chosen tensor as a [rows = tokens, columns] matrix, with what was sliced to get it."""
    name = part.hook.format(i=layer)
    full = run.cache[name]
    cols, sliced, short = None, "", ""
    if part.key in ("q", "z"):
        matrix, sliced = full[:, head], f"query head {head}"                  # [T, hd]
        short = sliced
    elif part.key in ("k", "v"):
        kv_head = head // (cfg.n_heads // cfg.n_kv_heads)     # query heads share a kv head
        matrix, sliced = full[:, kv_head], f"key/value head {kv_head} (used by query head {head})"
        short = f"key/value head {kv_head}"
    elif part.key == "pattern":
        matrix, sliced = full[head], f"head {head}: rows are queries, columns the keys"  # [T, T]
        short = f"head {head}"
        cols = tokens
    elif part.key == "logits":
        top = top_k(full[-1], LOGIT_COLUMNS)                                   # [24]
        matrix = full[:, top]
        short = f"top {LOGIT_COLUMNS} columns"
        sliced = (f"the {LOGIT_COLUMNS} vocabulary columns that score highest at the last "
                  f"position, of {full.shape[1]:,}")
        cols = [token_plain(lm.tokenizer, i) for i in top]
    else:
        matrix = full
    finite = matrix[np.isfinite(matrix)]
    return dict(
        tensor_name=name, tensor_shape=list(full.shape), shown_shape=list(matrix.shape),
        sliced=sliced,
        stats=dict(mean=float(finite.mean()), std=float(finite.std()),
                   min=float(finite.min()), max=float(finite.max())),
        # the figure's title names the slice short (a phone's width); the caption says it whole
        tensor_figure=figures.tensor_heatmap(matrix, tokens, cols, f"{name}"
                                             + (f" — {short}" if short else "")))


# The residual stream's norms and the logit lens depend on the prompt and the position only: kept
# per (model, prompt, position), so choosing another block, part or head does not unembed every
# read-out again (SmolLM2: 31 rows of 49,152 logits).
_lens = memo("block lens", 32, big_size=16)


def kept_lens(model, run, tokens, pos) -> dict:
    """stream_and_lens, once per (model, prompt, position)."""
    return _lens.get((model_key(model), tuple(run.ids), pos),
                     lambda: stream_and_lens(model, run, tokens, pos))


def stream_and_lens(model, run, tokens, pos) -> dict:
    cfg = model.config
    norms, names = residual_norms(run.cache, cfg.n_layers)                   # [2N + 1, T]
    stages = stage_labels(cfg.n_layers)
    lens = logit_lens(model, run.cache, positions=[pos])[:, 0]               # [N + 1, V]
    probs = softmax(lens)                                                    # [N + 1, V]
    final_top = int(np.argmax(lens[-1]))
    # The final guess's rank and probability at every read-out: the rank from the LOGITS (in
    # float32 a probability under ~1e-45 is 0, and every token at 0 would tie: SmolLM2's
    # "embeddings only" read-out put ·Paris at 1,497 instead of 4,316), the probability from a
    # float64 log-softmax (·Paris there: 4.8e-51, not 0)
    final_ranks, final_ps = lens_rank_and_p(lens, final_top)
    rows = []
    for k, p in enumerate(probs):
        top = top_k(p, LENS_TOP)
        rows.append(dict(
            stage=lens_stage(k, cfg.n_layers),
            guesses=[dict(id=int(i), text=token_plain(model.tokenizer, i),
                          p=float(p[i])) for i in top],
            final_p=float(final_ps[k]), final_p_text=percent_text(final_ps[k]),
            final_rank=int(final_ranks[k])))
    final_text = token_plain(model.tokenizer, final_top)
    # with tied embeddings the read-out of the embeddings alone scores each token by its own
    # row against the input's row: said when the top guess is indeed the input token itself
    first = rows[0]["guesses"][0]
    self_guess = first if cfg.tied_embeddings and first["id"] == int(run.ids[pos]) else None
    return dict(
        lens_rows=rows, self_guess=self_guess, final_top=dict(id=final_top, text=final_text),
        norms_figure=figures.norms_heatmap(norms.T, tokens, stages),
        lens_figure=figures.lens_figure([r["final_p"] for r in rows], final_text,
                                        [r["stage"] for r in rows],
                                        [r["final_rank"] for r in rows],
                                        [r["final_p_text"] for r in rows]),
        first_top=stays_within(rows, 1), first_top10=stays_within(rows, 10),
        vocab_size=cfg.vocab_size,
        norm_growth=float(norms[-1].mean() / norms[0].mean()))


def lens_rank_and_p(lens, token: int) -> tuple:
    """([N + 1] ranks, [N + 1] probabilities) of `token` at each read-out of lens [N + 1, V]:
    its rank is 1 + the number of tokens whose logit is strictly higher; its probability a
    float64 softmax (log-sum-exp), exact where float32 underflows to 0."""
    ranks = (lens > lens[:, token:token + 1]).sum(axis=1) + 1
    z = lens.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z[:, token] - np.log(np.exp(z).sum(axis=1))
    return ranks, np.exp(log_p)


def lens_stage(k: int, n_layers: int) -> str:
    """A read-out's name, counting the blocks the stream has been through (1-based, "of N":
    "after 30 of 30 blocks" is the last, never "block 29" read as the 29th)."""
    if k == 0:
        return "embeddings only (0 blocks)"
    return (f"after {k} of {n_layers} block{'s' if n_layers != 1 else ''}"
            + (" = the model's output" if k == n_layers else ""))


def percent_text(p: float) -> str:
    """A probability as a percentage with two significant digits; a tiny one in scientific
    notation ("4.8e-49%"), as computed in float64; 0 only when it is 0."""
    if p == 0:
        return "0%"
    pct = 100 * p
    return f"{pct:.2g}%" if pct >= 1e-3 else f"{pct:.1e}%"


def stays_within(rows, rank) -> int:
    """The first read-out (0: the embeddings) from which the final guess keeps `rank` or better
    to the end (the last read-out is the output, where it is first)."""
    k = len(rows)
    while k > 0 and rows[k - 1]["final_rank"] <= rank:
        k -= 1
    return k


def stage_labels(n_layers) -> list:
    """Columns of the residual-norm heatmap, matching pipeline.lens.residual_norms."""
    labels = []
    for i in range(n_layers):
        labels += [f"into block {i}", f"block {i} mid"]
    return labels + [f"out of block {n_layers - 1}"]


SECTION = Section("block", "The transformer block", PARAMS, build,
                  short="Block",
                  gives_away=("next-token",),
                  tour=("The vectors now pass through a stack of identical blocks. Each block "
                        "reads the running sum of vectors (the residual stream), lets tokens "
                        "exchange information (attention), transforms each token on its own "
                        "(feed-forward), and adds the results back. The shapes and the parameter "
                        "counts are those of the model in memory."))
