"""The generation loop: step through it, watch it stream, and see why prefill and decode differ.

Every number is measured on the running model now: the steps come from
pipeline.generation.generation_steps (Model.prefill / Model.decode), the times from
time.perf_counter around those calls, the byte and FLOP counts from the loaded arrays.
"""
import threading
import urllib.parse

import numpy as np

from pipeline.generation import generation_steps, time_decode, time_prefill
from pipeline.roofline import decode_work, model_costs, prefill_work, roofline
from web.figures import generation as figures
from web.forward import prompt_ids
from web.params import Param
from web.sampler_settings import CHOOSERS, chooser, sampler_for, settings_from
from web.sections.roofline import machine
from web.tokens import pieces

MAX_NEW_TOKENS = 200       # the most a request may generate (a classroom shares 2 cores)
N_TOP = 5                  # candidates shown per step
SWEEP_LENGTHS = (8, 16, 32, 64, 128, 192, 248)   # prompt lengths timed (ctx 256 leaves room)
DECODE_STEPS = 5           # decode steps timed after each prefill (their median is shown)
REPEATS = 3                # prefills timed per length (their median is shown)

PARAMS = (
    Param("gen_step", "Generation step", kind="int", default=0, min=0,
          max=MAX_NEW_TOKENS - 1, resets_with_prompt=True),
    Param("gen_max", "New-token limit", kind="int", default=20, min=1, max=MAX_NEW_TOKENS),
    Param("gen_pace", "Pause between streamed tokens (ms)", kind="int", default=50, min=0,
          max=500),
    Param("gen_choose", "Choose the next token with", default="greedy", max_chars=20),
)


def sampler_description(state) -> str:
    if chooser(state) == "greedy":
        return "greedily: the most probable token at every step"
    st = settings_from(state, reject=False)
    parts = [f"repetition penalty {st.repetition_penalty:g}", f"temperature {st.temperature:g}",
             f"top-k {st.top_k or 'off'}", f"top-p {st.top_p:g}", f"min-p {st.min_p:g}"]
    return (f"by the sampler of the Sampling section ({', '.join(parts)}; seed "
            f"{state['s_seed']})")


def sampler_key(state) -> tuple:
    if chooser(state) == "greedy":
        return ("greedy",)
    return ("sampler", settings_from(state, reject=False), state["s_seed"])


BORROWED = ("s_rep", "s_temp", "s_topk", "s_topp", "s_minp", "s_seed")   # the Sampling section's
STREAM_PARAMS = ("prompt", "gen_max", "gen_pace", "gen_choose", *BORROWED)


def stream_query(state) -> str:
    """The query of /generate/stream for this state: only what the stream reads."""
    return urllib.parse.urlencode([(name, str(state[name])) for name in STREAM_PARAMS],
                                  quote_via=urllib.parse.quote)


# --- the stepped run: computed once per (model, prompt, limit, sampler) -----------------------

_runs, _runs_lock = {}, threading.Lock()
KEEP_RUNS = 16


def stepped_run(lm, ids: tuple, max_new_tokens: int, sample, sample_key: tuple) -> tuple:
    """The loop's steps; `sample_key` names the chooser (a seeded one always draws alike)."""
    key = (id(lm.model), ids, max_new_tokens, sample_key)
    with _runs_lock:
        if key in _runs:
            return _runs[key]
    steps = tuple(generation_steps(lm.model, ids, max_new_tokens, sample=sample, n_top=N_TOP))
    with _runs_lock:
        _runs[key] = steps
        while len(_runs) > KEEP_RUNS:
            _runs.pop(next(iter(_runs)))
    return steps


class Chip:
    """What macros.chip draws: a token's id and its text as pieces."""

    def __init__(self, tokenizer, token_id: int):
        self.id = token_id
        self.pieces = pieces(tokenizer.decode_single_token_bytes(token_id))


_timings = {}


def prompt_timing(lm, ids: tuple, steps: tuple) -> tuple:
    """(prefill s, decode s per token) for this prompt, measured once per prompt (so a redraw
    shows the same numbers): the median of REPEATS prefills (the stepped run's and REPEATS - 1
    more), and the median of the run's decode steps (or of DECODE_STEPS timed now, if the run
    had none)."""
    key = (id(lm.model), ids)
    with _runs_lock:
        if key in _timings:
            return _timings[key]
    decode_times = [s.forward_seconds for s in steps if s.phase == "decode"]
    prefill_s = float(np.median([steps[0].forward_seconds] + [
        time_prefill(lm.model, ids, 1) for _ in range(REPEATS - 1)]))
    decode_s = float(np.median(decode_times)) if decode_times else \
        time_decode(lm.model, ids, DECODE_STEPS) if len(ids) + DECODE_STEPS <= lm.n_ctx else None
    with _runs_lock:
        _timings[key] = (prefill_s, decode_s)
        while len(_timings) > KEEP_RUNS:
            _timings.pop(next(iter(_timings)))
    return prefill_s, decode_s


# --- prefill vs decode across prompt lengths: measured once per model per process ------------

_sweeps, _sweep_lock = {}, threading.Lock()


def length_sweep(lm) -> list:
    """[{"n", "prefill_s", "decode_s"}] for SWEEP_LENGTHS (those that fit the context)."""
    key = id(lm.model)
    with _sweep_lock:                       # one measurement at a time: they would slow each other
        if key not in _sweeps:
            model, n_ctx = lm.model, lm.n_ctx
            base = list(prompt_ids(lm, SWEEP_TEXT))
            rows = []
            for n in SWEEP_LENGTHS:
                if n + DECODE_STEPS > n_ctx:
                    continue
                ids = (base * (n // len(base) + 1))[:n]
                rows.append({"n": n, "prefill_s": time_prefill(model, ids, REPEATS),
                             "decode_s": time_decode(model, ids, DECODE_STEPS)})
            _sweeps[key] = rows
        return _sweeps[key]


# Which tokens are timed does not matter (every token costs the same arithmetic); this text is
# repeated to the length needed.
SWEEP_TEXT = ("It is a truth universally acknowledged, that a single man in possession of a "
              "good fortune, must be in want of a wife.")


def costs(lm, n_prompt: int, prefill_s: float, decode_s: float) -> dict:
    """What a prefill of the prompt and the decode step after it read and compute (the
    roofline section's formulas, float32: 4 bytes per weight and per cached value), the
    speeds the measured times give, and this server's measured roof."""
    model = lm.model
    mc = model_costs(model.config, model.n_params(), 4, 4)
    pre, dec = prefill_work(mc, n_prompt), decode_work(mc, n_prompt)
    roof = machine()
    return dict(
        n_params=model.n_params(), matmul_params=mc.matmul_params,
        weight_bytes=mc.weight_bytes, kv_bytes=(n_prompt + 1) * mc.kv_bytes_per_token,
        attention_flops_decode=mc.attn_flops_per_pair * (n_prompt + 1),
        prefill=pre, decode=dec,
        prefill_gflops=pre.flops / prefill_s / 1e9, decode_gflops=dec.flops / decode_s / 1e9,
        decode_gbps=dec.bytes / decode_s / 1e9,
        peak_gflops=roof.peak_flops / 1e9, bandwidth_gbps=roof.bandwidth / 1e9,
        ridge=roof.peak_flops / roof.bandwidth,
        prefill_bound=roofline(pre, roof.peak_flops, roof.bandwidth).bound,
        decode_bound=roofline(dec, roof.peak_flops, roof.bandwidth).bound,
        per_token_ratio=decode_s / (prefill_s / n_prompt),
    )


# --- the section -----------------------------------------------------------------------------

def build(lm, state) -> dict:
    """Template context for the generation-loop section."""
    tok = lm.tokenizer
    ids = prompt_ids(lm, state["prompt"])
    sample = sampler_for(state)                     # first: it refuses a bad sampler setting
    steps = stepped_run(lm, ids, state["gen_max"], sample, sampler_key(state))
    step = state.index_within("gen_step", len(steps), "step",
                              "with this prompt and limit the loop makes")
    current = steps[step]
    chosen_in_top = any(i == current.token for i, _ in current.top)
    candidates = [dict(chip=Chip(tok, i), prob=p, chosen=i == current.token)
                  for i, p in current.top]
    if not chosen_in_top:
        candidates.append(dict(chip=Chip(tok, current.token), prob=current.prob, chosen=True))

    prefill_s, decode_s = prompt_timing(lm, ids, steps)
    n_decode_timed = sum(s.phase == "decode" for s in steps)
    sweep = length_sweep(lm)
    return dict(
        n_prompt=len(ids), prompt_chips=[Chip(tok, i) for i in ids],
        generated_chips=[Chip(tok, s.token) for s in steps[:step + 1]],
        steps=steps, step=step, current=current, last_step=len(steps) - 1,
        candidates=candidates, eos_id=lm.model.config.eos_token_id,
        sampler=sampler_description(state), choose=chooser(state), choosers=CHOOSERS,
        sampler_params=BORROWED,
        max_new_tokens=MAX_NEW_TOKENS,
        n_ctx=lm.n_ctx, model_name=lm.name,
        stream_query=stream_query(state),
        stream_blocked=any(name in state.errors for name in STREAM_PARAMS),
        prefill_ms=prefill_s * 1000,
        decode_ms=None if decode_s is None else decode_s * 1000,
        n_decode_timed=n_decode_timed,
        costs=None if decode_s is None else costs(lm, len(ids), prefill_s, decode_s),
        sweep=sweep,
        sweep_figure=figures.prefill_decode_figure(
            sweep, len(ids), prefill_s, decode_s),
        repeats=REPEATS, decode_steps=DECODE_STEPS,
    )
