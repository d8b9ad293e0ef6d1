"""The overview: the whole pass of the prompt on one screen, every value the pipeline's.

    text -> token ids -> embedding rows (+ learned positions, or RoPE inside attention)
         -> N blocks (norm, attention, add, norm, feed-forward, add) with the KV cache they fill
         -> final norm -> unembedding -> logits -> the sampler -> the chosen token, appended

`build(lm, state)` returns the template context of templates/overview.html (no Flask here).
The sequence shown is the prompt plus `ov_steps` tokens that the page's one sampler chose with
the pipeline's generation loop (prefill, then one KV-cached decode step per token:
pipeline.generation.decode_loop). The sampler is the page's: the Sampling section's settings and
seed (s_rep, s_temp, s_topk, s_topp, s_minp, s_seed: web.core.sampler_settings), the same ones the
generation loop and decoding's samples use, so the same URL always shows the same tokens and a
control moved here moves the Sampling section's too. Temperature 0 is greedy: the sampler keeps
only the highest score.

The top-five bars are the distribution the sampler draws from (pipeline.sampling's own stages:
repetition penalty, temperature, top-k, top-p, min-p), labelled "after the sampler's settings",
beside the model's own softmax ("model p"), drawn faint; the chosen token's probability is the
sampler's, with the model's beside it.

The pictures and shapes are those of the pass that chose the next token: for the prompt alone,
the prefill (one pass over the prompt: the pass the sections share,
web.model_state.forward.prompt_run);
after a Next token, the generation loop's KV-cached decode step of the last token (its own
activation cache, recorded by decode_loop: one row, attending over every cached position; the
key norms read from its KV cache). The prediction (top five, the sampler's choice) is that
pass's logits for the next token.
"""
import json
import threading
from dataclasses import dataclass

import numpy as np

from pipeline.generation import decode_loop
from pipeline.kvcache import attention_kind, kv_cache_bytes
from pipeline.model import softmax
from pipeline.ranking import top_k
from pipeline.sampling import SamplerSettings, final_distribution, sampler
from web.core.cache import memo, model_key
from web.core.params import Param
from web.core.sampler_settings import settings_from
from web.figures import overview as figures
from web.model_state.forward import prefilled, prompt_ids, prompt_run
from web.presentation.shading import POSITIVE, blend
from web.presentation.tokens import token_pieces, token_plain
from web.sections import attention, sampling

OV_LIMIT = 20          # most tokens the overview generates (Play stops there)
TOP = 5                # candidates drawn as bars
CHIPS_HEAD, CHIPS_TAIL = 4, 9       # a long sequence shows its first and last chips
KV_COLUMNS = 40        # positions drawn in the KV cache picture (the latest ones)
EMBED_ROWS = 4         # token rows of the embeddings strip (the latest ones), each labelled
EMBED_VALUES = 3       # the last token's first values, written out beside the strip
ATTN_COLUMNS = 40      # key positions drawn in the attention thumbnail (the latest ones)

PARAMS = (
    Param("ov_steps", "Tokens generated", kind="int", default=0, min=0, max=OV_LIMIT,
          resets_with_prompt=True),
)
# The sampler's parameters are the Sampling section's (one set for the page): the overview's
# controls carry their names, and its answers report their messages.
SAMPLER_NAMES = sampling.SAMPLER
NAMES = tuple(p.name for p in PARAMS) + SAMPLER_NAMES
# the controls the overview shows (the others are set in the Sampling section)
SHOWN_SAMPLER = ("s_temp", "s_topk", "s_topp")

# Where each box of the diagram leads: the section that explains it.
DOORS = {"text": "prompt", "tokens": "tokenization", "embed": "embeddings",
         "positions": "positions", "blocks": "block", "norm": "block", "attention": "attention",
         "add": "block", "ffn": "feedforward", "kv": "kvcache", "final_norm": "block",
         "unembed": "logits", "logits": "logits", "top": "logits", "sampler": "sampling",
         "chosen": "generation"}


def stage_map(sections) -> list:
    """[(name, narrow name or None, section id)] of the slim map: the prompt, then every section
    in page order, by the names its Section declares (Section.map_names)."""
    return [("Prompt", None, "prompt")] + [(*s.map_names(), s.id) for s in sections]


@dataclass(frozen=True)
class Chip:
    id: int
    pieces: list           # web.presentation.tokens.pieces of the token's bytes
    index: int             # position in the sequence
    new: bool = False      # chosen by the overview's sampler (not part of the prompt)


@dataclass(frozen=True)
class Pass:
    """What the overview shows for one (model, prompt, sampler, steps): arrays read-only."""
    ids: tuple             # the sequence: prompt ids + generated ids
    n_prompt: int
    cache: dict            # activation cache of the pass that chose the next token: the
                           #   prefill over the prompt, or the decode step of the last token
    next_logits: np.ndarray   # [V] that pass's logits for the next token
    next_token: int        # the sampler's choice from them
    key_norms: np.ndarray  # [L, T] each cached key's norm per layer (as the KV cache holds it)
    phase: str = "prefill"    # "prefill" or "decode"


_passes = memo("overview passes", 16, 4)
_loops = memo("overview loops", 16, 2)      # a big model's: its KV cache and 21 steps' caches


class Loop:
    """One generation for (model, prompt, sampler): the generation loop's passes, pulled from
    it as they are asked for, so step N + 1 after step N costs one more decode step."""

    def __init__(self, model, ids, settings, seed):
        self.model = model
        # from the prompt's shared run (web.model_state.forward.prefilled): the overview shows no
        # times
        self.steps = decode_loop(model, ids, OV_LIMIT + 1, sampler(settings, seed),
                                 stop_at_eos=False, record=True, start=prefilled(model, ids))
        self.passes = []
        self.lock = threading.Lock()

    def first(self, n: int) -> list:
        with self.lock:
            while len(self.passes) < n:
                p = next(self.steps, None)
                if p is None:
                    break
                self.passes.append(p)
            return self.passes[:n]


def settings_of(state) -> SamplerSettings:
    """The page's sampler settings (web.core.sampler_settings.settings_from: their Params refuse a
    top-p or a repetition penalty of 0 with the query)."""
    return settings_from(state)


def run_pass(lm, prompt: str, settings: SamplerSettings, steps: int, seed: int = 0) -> Pass:
    """The prompt plus `steps` tokens chosen by the seeded sampler through the generation loop
    (prefill, then KV-cached decode steps), with one more loop pass for the next token."""
    return _passes.get((model_key(lm.model), prompt, settings, seed, steps),
                       lambda: make_pass(lm, prompt, settings, steps, seed))


def make_pass(lm, prompt: str, settings: SamplerSettings, steps: int, seed: int = 0) -> Pass:
    model = lm.model
    ids = prompt_ids(lm, prompt)
    if steps == 0:
        # the prompt alone: the pass the sections share gives the next token's logits, and the
        # sampler's first draw is the generation loop's first choice
        run = prompt_run(lm, prompt)
        logits = run.next_logits
        key = "attn.hook_rot_k" if model.config.positions == "rope" else "attn.hook_k"
        norms = np.stack([np.linalg.norm(run.cache[f"blocks.{i}.{key}"], axis=(1, 2))
                          for i in range(model.config.n_layers)])
        return Pass(ids, len(ids), run.cache, logits,
                    int(sampler(settings, seed)(logits, list(ids))), norms)
    loop = _loops.get((model_key(model), prompt, settings, seed),
                      lambda: Loop(model, ids, settings, seed))
    passes = loop.first(steps + 1)
    sequence = ids + tuple(p.token for p in passes[:steps])
    step = passes[steps]                 # the decode step of the last token: it chose the next
    assert step.phase == "decode" and step.n_context == len(sequence)
    norms = np.linalg.norm(step.kv.k[:, :step.n_context], axis=(2, 3))      # [L, T]
    return Pass(sequence, len(ids), step.cache, step.logits, step.token, norms, "decode")


def first_eos(model, prompt: str, settings, lm, steps: int, seed: int = 0):
    """Index of the first end-of-text token among the first `steps` generated, or None."""
    eos = model.config.eos_token_id
    if eos is None or steps == 0:
        return None
    run = run_pass(lm, prompt, settings, steps, seed)
    new = run.ids[run.n_prompt:]
    return next((i for i, t in enumerate(new) if t == eos), None)


def shown_chips(chips: list) -> tuple:
    """(first chips, number left out, last chips): a long sequence shows its two ends."""
    if len(chips) <= CHIPS_HEAD + CHIPS_TAIL + 1:
        return chips, 0, []
    return chips[:CHIPS_HEAD], len(chips) - CHIPS_HEAD - CHIPS_TAIL, chips[-CHIPS_TAIL:]


def shape(a) -> list:
    return [int(n) for n in np.shape(a)]


# Up to this many residual norms (in, after each block) are listed as labelled rows (the Austen
# model's 5); a deeper model's (SmolLM2's 31) are a strip of thin bars with a few labels.
RESID_ROWS_MAX = 13


def residual_bars(cache: dict, n_layers: int) -> list:
    """The last token's residual-stream norm entering block 0 and after every block:
    [{label, value, width %}]."""
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(n_layers)]
    # blocks counted for people: "after 30" is after the 30th of 30 (blocks.29.hook_resid_post)
    labels = ["in"] + [f"after {i + 1}" for i in range(n_layers)]
    values = [float(np.linalg.norm(cache[n][-1])) for n in names]
    top = max(values) or 1.0
    return [dict(label=label, name=n, value=v, width=round(100 * v / top, 1))
            for label, n, v in zip(labels, names, values, strict=True)]


def kv_picture(norms, cfg) -> dict:
    """The KV cache as the store attention reads: per layer, each cached position's key norm
    (norms [L, T]: keys after RoPE for a RoPE model, as the cache holds them), the latest
    KV_COLUMNS shown."""
    key_hook = "attn.hook_rot_k" if cfg.positions == "rope" else "attn.hook_k"
    T = norms.shape[1]
    start = max(0, T - KV_COLUMNS)
    shown = norms[:, start:]
    top = float(shown.max()) or 1.0
    rows = [[dict(pos=start + j, value=float(v),
                  colour="#%02x%02x%02x" % blend(POSITIVE, 0.15 + 0.85 * v / top))
             for j, v in enumerate(row)] for row in shown]
    return dict(rows=rows, start=start, n_positions=T, key_hook=key_hook)


def build(lm, state) -> dict:
    """The overview's context for templates/overview.html."""
    model, cfg = lm.model, lm.model.config
    prompt = state["prompt"]
    settings, seed = settings_of(state), state["s_seed"]
    n_prompt = len(prompt_ids(lm, prompt))
    most = max(0, min(OV_LIMIT, cfg.n_ctx - n_prompt))
    steps = state["ov_steps"]
    if steps > most:
        state.reject("ov_steps", f"{steps} new tokens do not fit: this prompt is {n_prompt} "
                     f"tokens and the context window {cfg.n_ctx}, so at most {most} can be "
                     "generated here.")
        steps = state["ov_steps"]
    eos_at = first_eos(model, prompt, settings, lm, steps, seed)
    if eos_at is not None and eos_at < steps - 1:
        state.reject("ov_steps", f"The model ends the text (its end-of-text token) after "
                     f"{eos_at + 1} new tokens; {steps} go past it.")
        steps = state["ov_steps"]
    run = run_pass(lm, prompt, settings, steps, seed)
    cache, ids = run.cache, run.ids
    T = len(ids)

    if steps and cfg.eos_token_id is not None and ids[-1] == cfg.eos_token_id:
        finish = "eos"
    elif steps >= OV_LIMIT:
        finish = "limit"
    elif steps >= most:
        finish = "context"
    else:
        finish = ""

    chips = [Chip(int(t), token_pieces(model.tokenizer, t), i, i >= run.n_prompt)
             for i, t in enumerate(ids)]
    head, hidden, tail = shown_chips(chips)

    probs = softmax(run.next_logits)                                   # [V], T = 1
    # [V] what the sampler draws from: pipeline.sampling's stages, the ones the draw used
    final = final_distribution(run.next_logits, list(ids), settings)
    top = [int(i) for i in top_k(probs, TOP)]
    # one scale for both bars of every row: the longest bar of either fills its track
    best = max(float(probs[top[0]]), max(float(final[i]) for i in top)) or 1.0
    candidates = [dict(id=i, pieces=token_pieces(model.tokenizer, i), prob=float(probs[i]),
                       final=float(final[i]), chosen=i == run.next_token,
                       width=round(100 * float(probs[i]) / best, 1),
                       final_width=round(100 * float(final[i]) / best, 1)) for i in top]
    chosen = dict(id=run.next_token, pieces=token_pieces(model.tokenizer, run.next_token),
                  prob=float(probs[run.next_token]), final=float(final[run.next_token]),
                  in_top=run.next_token in top,
                  eos=cfg.eos_token_id is not None and run.next_token == cfg.eos_token_id)

    b0 = "blocks.0."
    shapes = dict(
        ids=[T], wte=shape(model.params["wte"]), embed=shape(cache["hook_embed"]),
        rows=[T, cfg.d_model],
        resid=shape(cache[b0 + "hook_resid_pre"]), ln1=shape(cache[b0 + "ln1.hook_normalized"]),
        q=shape(cache[b0 + "attn.hook_q"]), k=shape(cache[b0 + "attn.hook_k"]),
        v=shape(cache[b0 + "attn.hook_v"]), pattern=shape(cache[b0 + "attn.hook_pattern"]),
        attn_out=shape(cache[b0 + "hook_attn_out"]), ln2=shape(cache[b0 + "ln2.hook_normalized"]),
        ffn=shape(cache[b0 + "mlp.hook_post"]), mlp_out=shape(cache[b0 + "hook_mlp_out"]),
        resid_post=shape(cache[f"blocks.{cfg.n_layers - 1}.hook_resid_post"]),
        final_norm=shape(cache["ln_final.hook_normalized"]),
        unembed=shape(model.params["unembed"]),
        # the shape of final norm @ unembedding, without computing all T rows (a big model's
        # compact run computes its logits only when read: SmolLM2's 21-token prompt, 4 MB)
        logits=shape(cache["ln_final.hook_normalized"])[:-1] + shape(model.params["unembed"])[1:],
        next_logits=shape(run.next_logits),
        kv=[cfg.n_layers, 2, T, cfg.n_kv_heads, cfg.head_dim])
    if cfg.positions == "learned":
        shapes.update(wpe=shape(model.params["wpe"]), pos_embed=shape(cache["hook_pos_embed"]))

    first_row = max(0, T - EMBED_ROWS)
    embed = model.params["wte"][list(ids[first_row:])]       # the table's rows of the sequence
    att_layer, att_head = attention_choice(state, cfg)
    embed_figure = figures.embeddings_thumbnail(embed, [c for c in chips[first_row:]], first_row)
    return dict(
        ov_steps=steps, ov_most=most, ov_limit=OV_LIMIT, ov_finish=finish, ov_seed=seed,
        sampler_names=SHOWN_SAMPLER,
        settings=settings, n_prompt=run.n_prompt, T=T, cfg=cfg,
        family="GPT-2-style" if cfg.model_type == "gpt2" else "Llama-style",
        norm_name="RMSNorm" if cfg.norm == "rms_norm" else "LayerNorm",
        ffn_name="SwiGLU" if cfg.mlp == "swiglu" else "GELU MLP",
        attn_kind=attention_kind(cfg), group=cfg.n_heads // cfg.n_kv_heads,
        text=prompt, generated_ids=[c.id for c in chips if c.new],
        generated_text=generated_text(model.tokenizer, ids, run.n_prompt),
        chips_head=head, chips_hidden=hidden, chips_tail=tail,
        shapes=shapes, kv_bytes=kv_cache_bytes(cfg, T), kv=kv_picture(run.key_norms, cfg),
        phase=run.phase, n_rows=shapes["resid"][0],
        residual=residual_bars(cache, cfg.n_layers), resid_rows_max=RESID_ROWS_MAX,
        embed_figure=embed_figure,
        embed_height=figure_height(embed_figure),
        embed_rows=(first_row, T), embed_values=[float(v) for v in embed[-1][:EMBED_VALUES]],
        last_chip=chips[-1],
        attention=attention_picture(cache, chips, att_layer, att_head, n_prompt=run.n_prompt,
                                    phase=run.phase),
        next_answer=answer_text(model.tokenizer, top[0]) if not steps else "",
        candidates=candidates, chosen=chosen,
        doors=DOORS)


def attention_choice(state, cfg) -> tuple:
    """The layer and head the Attention section shows (its LAYER and HEAD parameters, read
    leniently: that section reports a bad value), else its defaults: the last layer, head 0.
    head None: the mean of the layer's heads."""
    layer = state.values.get(attention.LAYER)
    if not isinstance(layer, int) or not 0 <= layer < cfg.n_layers:
        layer = cfg.n_layers - 1
    raw = str(state.values.get(attention.HEAD) or "0").strip()
    if raw == attention.MEAN:
        return layer, None
    head = int(raw) if raw.isdigit() and int(raw) < cfg.n_heads else 0
    return layer, head


def attention_picture(cache: dict, chips: list, layer: int, head, n_prompt: int,
                      phase: str) -> dict:
    """That head's pattern in the pass (hook_pattern: [H, rows, T]; one row in a decode step),
    the latest ATTN_COLUMNS key positions, as a small heatmap: figure and what it holds."""
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
    weights = pattern.mean(axis=0) if head is None else pattern[head]       # [rows, T]
    n_rows, T = weights.shape
    first = max(0, T - ATTN_COLUMNS)
    rows = list(range(T - n_rows, T))                 # the query positions of the pass
    shown = [i for i, q in enumerate(rows) if q >= first]
    last = weights[-1]
    top = int(np.argmax(last))
    figure = figures.attention_thumbnail(weights[shown][:, first:], [rows[i] for i in shown],
                                         chips[first:], first, layer, head)
    return dict(layer=layer, head=head, first=first, rows=len(shown), n_rows=n_rows, T=T,
                top=top, top_weight=float(last[top]), top_chip=chips[top],
                figure=figure, height=figure_height(figure))


def figure_height(figure: str) -> int:
    """The height a figure's JSON sets (its layout's): its box reserves it in the HTML, so the
    rows below do not move when Plotly draws it."""
    return int(json.loads(figure)["layout"]["height"])


def answer_text(tokenizer, token_id: int) -> str:
    """The top token as the Logits section's prediction compares it (its plain text, markers
    for spaces turned back into spaces, trimmed): the key that the overview's hidden answer
    shares with that prediction (static/predict.js)."""
    return token_plain(tokenizer, token_id).replace("·", " ").strip()


def generated_text(tokenizer, ids, n_prompt: int) -> str:
    """The text the generated tokens add after the prompt: the tokenizer's decoding of the whole
    sequence minus that of the prompt (a character split across two tokens is decoded whole),
    or the generated tokens decoded alone where the two do not line up."""
    if len(ids) == n_prompt:
        return ""
    prompt, whole = tokenizer.decode(list(ids[:n_prompt])), tokenizer.decode(list(ids))
    if whole.startswith(prompt):
        return whole[len(prompt):]
    return tokenizer.decode(list(ids[n_prompt:]))
