"""KV cache: generation with and without the cache on the running model, and the cache's size.

The step times come from the model's cost table (`web.model_state.measured.cost_table`, measured
once per
model over several sequence lengths, interpolated to the prompt's): a step without the cache is
a forward pass over the whole sequence, the prefill of that many tokens; with the cache it is
one decode step. Every timing section quotes the same table. The logits differences and byte counts
are
the prompt's own generation with the cache (its greedy run, web.model_state.greedy: computed once
per prompt and shared with the other sections that generate greedily), checked against
recomputing (`pipeline.cached_generation.cache_vs_recompute`, per prompt and length, untimed)
when its disclosure is open (CHECK_DISCLOSURE: the check is a forward pass over the whole sequence);
the sizes of other models come from `kv_cache_bytes` applied to their published configs
(`pipeline.published`).
"""
import functools
from dataclasses import dataclass

from pipeline.cached_generation import Check, cache_vs_recompute
from pipeline.kvcache import (
    BYTES_PER_VALUE,
    attention_kind,
    context_lengths,
    kv_bytes_per_token,
    kv_cache_bytes,
)
from pipeline.published import KV_ONLY, PUBLISHED, attention_config
from web.core.cache import memo
from web.core.params import Param
from web.figures import kvcache as figures
from web.model_state.explainer import is_big
from web.model_state.forward import prompt_ids
from web.model_state.greedy import CAPACITY, greedy_path
from web.model_state.measured import cost_table, model_key, stamp
from web.presentation.tokens import token_string
from web.presentation.tour import open_disclosures
from web.sections import Section

MAX_NEW = 48              # most generated tokens measured (each step also runs a full forward)
START_CAPACITY = CAPACITY  # tokens the section's cache reserves at first (then it doubles): the
                           # shared greedy run's (web.model_state.greedy)
CHECK_DISCLOSURE = "kv-how"  # the check against recomputing is computed while this is open
SHOWN_LENGTHS = (16, 64, 128, 248)   # measured lengths the sentence cites (up to the context)
HEADLINE_CTX = 8192       # the core's sentence on real models' caches: one 8k-token sequence
MAX_CTX = 131072          # 128k: the longest context of the published configs shown
CTX_CHOICES = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
# Multi-head vs grouped-query vs multi-query: three 7-8B models of one generation
KIND_MODELS = ("Llama 2 7B", "Llama 3 8B", "Falcon 7B")
CURVE_MODELS = ("GPT-2 small", "Llama 2 7B", "Llama 3 8B", "Falcon 7B", "Llama 3 70B",
                "Llama 3.1 405B")

BIG_MAX_NEW = 16          # a big model's most: each token is a decode step of it and a longer
                          # forward to check against, computed when asked (the page says so)

PARAMS = (
    Param("kv_new", "Tokens to generate", kind="int", default=16, min=1, max=MAX_NEW,
          big_default=6),
    Param("kv_ctx", "Context length (tokens)", kind="int", default=8192, min=1, max=MAX_CTX),
)


_checks = memo("kvcache checks", 32)


def cached_steps(model, ids: tuple, n_new: int) -> list:
    """The prompt's greedy run with the cache, n_new tokens (n_new + 1 steps, each a
    pipeline.cached_generation.CachedStep): the shared greedy run's (web.model_state.greedy),
    made longer when a longer one is asked for."""
    return greedy_path(model, ids).first(n_new)[2]


def cache_check(model, ids: tuple, n_new: int) -> Check:
    """The checked run for this prompt and length, computed once per (model, prompt, length):
    the shared greedy run's steps (web.model_state.greedy), each checked against the one
    forward pass over the whole sequence."""
    return _checks.get((model_key(model), ids, n_new, START_CAPACITY),
                       lambda: cache_vs_recompute(model, ids, n_new, START_CAPACITY,
                                                  steps=greedy_path(model, ids)))


def check_shown(state) -> bool:
    """The check sits in the CHECK_DISCLOSURE disclosure: computed while it is open (the page
    asks for it when it opens), so the slider does not wait for a forward pass it would not
    show."""
    return CHECK_DISCLOSURE in open_disclosures(state)


def check_view(lm, ids: tuple, n_new: int) -> dict:
    """The checked steps as the page shows them (called by the template, when shown)."""
    run = cache_check(lm.model, ids, n_new)
    return dict(steps=[step_row(i, s, lm.tokenizer) for i, s in enumerate(run.steps)],
                max_abs_diff=run.max_abs_diff, all_same=all(s.same_argmax for s in run.steps))


@dataclass(frozen=True)
class TimedStep:
    """A step's time at one measured length, both ways (what step_time_figure draws)."""
    n_tokens: int
    cached_ms: float           # one decode step with n_tokens in the cache
    uncached_ms: float         # a forward pass over all n_tokens: the prefill of n_tokens


def timed_steps(table) -> list:
    return [TimedStep(n, table.decode[n].median * 1000, table.prefill[n].median * 1000)
            for n in sorted(table.decode)]


def warm(lm):
    cost_table(lm)


def build(lm, state) -> dict:
    cfg = lm.model.config
    ids = prompt_ids(lm, state["prompt"])
    n_new = state["kv_new"]
    room = cfg.n_ctx - len(ids)
    if n_new > room:
        state.reject("kv_new", f"The prompt is {len(ids)} tokens long, so only {room} more "
                     f"fit in the context window of {cfg.n_ctx} tokens; choose at most {room}."
                     if room > 0 else f"The prompt fills the whole context window "
                     f"({cfg.n_ctx} tokens): no token can be generated.")
        n_new = max(0, min(room, state["kv_new"]))
    asked = n_new
    if is_big(lm.model):
        n_new = min(n_new, BIG_MAX_NEW)
    steps = cached_steps(lm.model, ids, n_new)
    last = steps[-1]
    per_token = kv_bytes_per_token(cfg, 4)
    ctx = state["kv_ctx"]
    published = published_rows(ctx)
    table = cost_table(lm)                     # measured once per model, not per prompt
    timed = timed_steps(table)
    shown = [t.n_tokens for t in timed if t.n_tokens in SHOWN_LENGTHS] or [t.n_tokens
                                                                             for t in timed]
    n = len(ids)
    return dict(
        model_name=lm.name, cfg=cfg, human_bytes=figures.human_bytes, n_prompt=len(ids),
        n_new=n_new, max_new=MAX_NEW, asked=asked, n_params=lm.model.n_params(),
        n_steps=len(steps),
        # the check against recomputing: asked for by the template only while it is shown
        check=functools.partial(check_view, lm, ids, n_new), check_shown=check_shown,
        measured_at=stamp(table.measured_at), timed=timed, repeats=table.repeats,
        shown=[dict(n=m, uncached=table.prefill_at(m), cached=table.decode_at(m))
               for m in shown],
        # the next step after the prompt: with the cache one token with n in the cache;
        # without it, a pass over all n + 1 tokens (a prefill of n + 1)
        cached=table.decode_at(n), uncached=table.prefill_at(n + 1),
        generated_text=token_string(lm.tokenizer, [s.next_token for s in steps[:-1]])
        if n_new else "",
        start_capacity=START_CAPACITY,
        per_token=per_token, final_tokens=last.n_tokens, final_nbytes=last.nbytes,
        final_formula=kv_cache_bytes(cfg, last.n_tokens, 4),
        final_allocated=last.allocated_nbytes, final_capacity=last.capacity,
        ctx=ctx, ctx_choices=sorted(set(CTX_CHOICES) | {ctx}),
        published=published,
        kinds=[next(r for r in published if r["name"] == n) for n in KIND_MODELS],
        # the core's sentence: the same three models at one stated length, whatever kv_ctx is
        headline_ctx=HEADLINE_CTX,
        headline_kinds=[next(r for r in published_rows(HEADLINE_CTX) if r["name"] == n)
                        for n in KIND_MODELS],
        **run_figures(lm, ids, steps, table),
        **context_figures(ctx),
    )


_figures = memo("kvcache figures", 32)


def run_figures(lm, ids: tuple, steps: list, table) -> dict:
    """The figures, built once per run and measurement (Plotly takes longer than the math)."""
    return _figures.get((model_key(lm.model), ids, len(steps), START_CAPACITY,
                         table.measured_at),
                        lambda: dict(time_figure=figures.step_time_figure(timed_steps(table)),
                                     bytes_figure=figures.cache_bytes_figure(steps)))


_context_figures = memo("kvcache context figures", 16)


def context_figures(ctx: int) -> dict:
    def build():
        rows = published_rows(ctx)
        return dict(context_figure=figures.context_figure(context_curves(), ctx),
                    kinds_figure=figures.kinds_figure(
                        [next(r for r in rows if r["name"] == n) for n in KIND_MODELS], ctx))
    return _context_figures.get(ctx, build)


def step_row(i, s, tokenizer) -> dict:
    return dict(index=i, n_tokens=s.n_tokens, max_abs_diff=s.max_abs_diff,
                same_argmax=s.same_argmax, nbytes=s.nbytes,
                allocated=s.allocated_nbytes, capacity=s.capacity,
                next_text=token_string(tokenizer, [s.next_token]))


def published_rows(ctx: int) -> list:
    """KV-cache bytes of every published config at `ctx` tokens, fp16 and int8."""
    rows = []
    for p in PUBLISHED + KV_ONLY:
        c = p.config
        rows.append(dict(
            name=p.name, repo=p.repo, kind=attention_kind(c), n_layers=c.n_layers,
            n_heads=c.n_heads, n_kv_heads=c.n_kv_heads, head_dim=c.head_dim, n_ctx=c.n_ctx,
            per_token_fp16=kv_bytes_per_token(c, BYTES_PER_VALUE["fp16"]),
            fp16=kv_cache_bytes(c, ctx, BYTES_PER_VALUE["fp16"]),
            int8=kv_cache_bytes(c, ctx, BYTES_PER_VALUE["int8"]),
            beyond_window=ctx > c.n_ctx))
    return rows


def context_curves() -> list:
    """[(name, [tokens], [fp16 bytes])] for the context-length figure (log axis, 1 to 128k)."""
    xs = context_lengths(MAX_CTX)
    return [(name, xs, [kv_cache_bytes(attention_config(name), n, BYTES_PER_VALUE["fp16"])
                        for n in xs]) for name in CURVE_MODELS]


SECTION = Section("kvcache", "KV cache", PARAMS, build,
                  shorter="KV", warm=warm,
                  gives_away=("next-token", "kv-bytes"),
                  tour=("Each decode step needs the keys and values of every earlier token. "
                        "Recomputing them every time would be wasteful, so they are kept: the KV "
                        "cache. It makes decoding fast and costs memory, which grows with every "
                        "token. See both, measured."))
