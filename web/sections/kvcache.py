"""KV cache: generation with and without the cache on the running model, and the cache's size.

The timings, logits differences and byte counts come from `pipeline.kvcache.cache_vs_recompute`
run on the live model (measured once per prompt and length in this process, see web.measured);
the sizes of other models come from `kv_cache_bytes` applied to their published configs
(`pipeline.published`).
"""
import functools
import time

from pipeline.kvcache import (BYTES_PER_VALUE, attention_kind, cache_vs_recompute,
                              context_lengths, kv_bytes_per_token, kv_cache_bytes)
from pipeline.published import KV_ONLY, PUBLISHED, attention_config
from web.figures import kvcache as figures
from web.forward import prompt_ids
from web.measured import measured, model_key
from web.params import Param

MAX_NEW = 48              # most generated tokens measured (each step also runs a full forward)
START_CAPACITY = 16       # tokens the section's cache reserves at first (then it doubles)
MAX_CTX = 131072          # 128k: the longest context of the published configs shown
CTX_CHOICES = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
# Multi-head vs grouped-query vs multi-query: three 7-8B models of one generation
KIND_MODELS = ("Llama 2 7B", "Llama 3 8B", "Falcon 7B")
CURVE_MODELS = ("GPT-2 small", "Llama 2 7B", "Llama 3 8B", "Falcon 7B", "Llama 3 70B",
                "Llama 3.1 405B")

PARAMS = (
    Param("kv_new", "Tokens to generate", kind="int", default=16, min=1, max=MAX_NEW),
    Param("kv_ctx", "Context length (tokens)", kind="int", default=8192, min=1, max=MAX_CTX),
)


def measure(model, ids: tuple, n_new: int):
    """The measured run for this prompt and length (measured once per process)."""
    return measured(("kvcache", model_key(model), ids, n_new, START_CAPACITY),
                    lambda: cache_vs_recompute(model, ids, n_new, capacity=START_CAPACITY))


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
    run = measure(lm.model, ids, n_new)
    steps = run.steps
    last = steps[-1]
    per_token = kv_bytes_per_token(cfg, 4)
    ctx = state["kv_ctx"]
    decode = steps[1:]
    published = published_rows(ctx)
    return dict(
        model_name=lm.name, cfg=cfg, human_bytes=figures.human_bytes, n_prompt=len(ids), n_new=n_new, max_new=MAX_NEW,
        steps=[step_row(i, s, lm.tokenizer) for i, s in enumerate(steps)],
        measured_at=time.strftime("%H:%M:%S UTC", time.gmtime(run.measured_at)),
        cached_total_ms=run.cached_total_ms, uncached_total_ms=run.uncached_total_ms,
        speedup=run.uncached_total_ms / run.cached_total_ms,
        first_decode=decode[0] if decode else None, last_decode=decode[-1] if decode else None,
        max_abs_diff=run.max_abs_diff, all_same=all(s.same_argmax for s in steps),
        generated_text=lm.tokenizer.decode(run.generated[:-1]) if n_new else "",
        start_capacity=START_CAPACITY, repeats=run.repeats,
        per_token=per_token, final_tokens=last.n_tokens, final_nbytes=last.nbytes,
        final_formula=kv_cache_bytes(cfg, last.n_tokens, 4),
        final_allocated=last.allocated_nbytes, final_capacity=last.capacity,
        ctx=ctx, ctx_choices=sorted(set(CTX_CHOICES) | {ctx}),
        published=published,
        kinds=[next(r for r in published if r["name"] == n) for n in KIND_MODELS],
        **run_figures(lm.model, ids, n_new),
        **context_figures(ctx),
    )


def run_figures(model, ids: tuple, n_new: int) -> dict:
    """The measured run's figures, built once per run (Plotly takes longer than the math)."""
    run = measure(model, ids, n_new)
    return measured(("kvcache-figures", model_key(model), ids, n_new, run.measured_at),
                    lambda: dict(time_figure=figures.step_time_figure(run.steps),
                                 bytes_figure=figures.cache_bytes_figure(run.steps)))


@functools.lru_cache(maxsize=16)
def context_figures(ctx: int) -> dict:
    rows = published_rows(ctx)
    return dict(context_figure=figures.context_figure(context_curves(), ctx),
                kinds_figure=figures.kinds_figure(
                    [next(r for r in rows if r["name"] == n) for n in KIND_MODELS], ctx))


def step_row(i, s, tokenizer) -> dict:
    return dict(index=i, n_tokens=s.n_tokens, cached_ms=s.cached_ms, uncached_ms=s.uncached_ms,
                max_abs_diff=s.max_abs_diff, same_argmax=s.same_argmax, nbytes=s.nbytes,
                allocated=s.allocated_nbytes, capacity=s.capacity,
                next_text=tokenizer.decode([s.next_token]))


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
