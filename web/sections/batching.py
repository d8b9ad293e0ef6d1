"""Batching: static vs continuous batching of a queue of real requests, and paged KV memory.

Request lengths are real generations of the running model (seeded sampling from the prompts
below until a paragraph ends, end-of-text, or MAX_NEW tokens); the cost of a decode step for
1..MAX_SLOTS rows is measured on the model's own `decode_batch`. Both are measured once per
process (web.measured) and do not depend on the page's prompt. The schedules, latencies and
memory are `pipeline.batching` replaying that queue with those costs.
"""

from pipeline.batching import (generate_requests, make_queue, measure_step_costs,
                               page_snapshots, simulate)
from pipeline.kvcache import kv_bytes_per_token
from web.figures import batching as figures
from web.figures.kvcache import human_bytes
from web.cache import memo
from web.explainer import is_big
from web.measured import measured, model_key, prefill_decode_timings, stamp
from web.params import Param
from web.sections import Section
from web.tokens import token_string

MAX_REQUESTS = 8
MAX_SLOTS = 8
MAX_NEW = 64            # most tokens a request may generate (and what a contiguous cache reserves)
SEED = 0                # request i is sampled with seed SEED + i
TEMPERATURE = 0.8
PROMPTS = (             # one per request, in queue order
    "Mr. Darcy",
    "Elizabeth looked at her sister and said",
    "It was a fine morning in",
    "\"My dear Mr. Bennet,\" said his lady to him one day,",
    "Emma Woodhouse, handsome, clever, and rich,",
    "The evening passed",
    "Captain Wentworth",
    "Mrs. Jennings was",
)
assert len(PROMPTS) == MAX_REQUESTS

# What a server without pages reserves per request: the whole context window (it cannot know
# how long an answer will be: the usual case, and vLLM's comparison), or prompt + the request's
# token limit (it knows each request's limit).
RESERVE = {"context": "the context window", "limit": "prompt + the token limit"}

PARAMS = (
    Param("bat_n", "Requests in the queue", kind="int", default=6, min=1, max=MAX_REQUESTS),
    Param("bat_slots", "Slots in a batch", kind="int", default=4, min=1, max=MAX_SLOTS),
    Param("bat_gap", "Time between arrivals (ms)", kind="int", default=0, min=0, max=500),
    Param("bat_block", "Block size (tokens)", kind="int", default=16, min=1, max=MAX_NEW),
    Param("bat_step", "Step of the continuous schedule", kind="int", min=0, max=9999),
    Param("bat_reserve", "What a contiguous cache reserves", default="context",
          choices=RESERVE),
)


_generations = memo("batching generations", 4)
_figures = memo("batching figures", 64)


def generations(model) -> tuple:
    """The real generations behind the requests (computed once per model)."""
    return _generations.get((model_key(model), PROMPTS, MAX_NEW, SEED, TEMPERATURE),
                            lambda: generate_requests(model, PROMPTS, MAX_NEW,
                                                      [SEED + i for i in range(len(PROMPTS))],
                                                      TEMPERATURE))


def step_costs(model):
    """decode_batch timed for 1..MAX_SLOTS rows, with the requests' prompts in the caches."""
    gens = generations(model)
    return measured(("batching-costs", model_key(model), MAX_SLOTS),
                    lambda: measure_step_costs(model, [g.prompt_ids for g in gens], MAX_SLOTS,
                                               rounds_for(model)))


def rounds_for(model) -> int:
    """Rounds of step timings: 7, or 3 for a big model (a batch of 8 of SmolLM2 takes ~0.2 s)."""
    return 3 if is_big(model) else 7


def warm(lm):
    step_costs(lm.model)


def schedules(model, n: int, slots: int, gap: int):
    costs = step_costs(model)
    queue = make_queue(generations(model), n, gap)
    return queue, costs, {p: simulate(queue, slots, costs.step_ms, p)
                          for p in ("static", "continuous")}


def peak_step(snapshots) -> int:
    """The step whose running requests hold the most tokens (the first such step)."""
    return max(range(len(snapshots)), key=lambda k: (snapshots[k].used_tokens(), -k))


def loop_step(lm, n_context: int) -> dict:
    """The model's decode step as the page measures it once (web.measured: the step the
    generation loop, the KV cache and the roofline cite), at the length nearest the first
    request's cache: a batch of one here is timed another way (decode_batch)."""
    timings = prefill_decode_timings(lm)
    point = timings.at(n_context)
    return dict(loop_step_ms=1000.0 * point.decode_s, loop_step_n=point.n)


def build(lm, state) -> dict:
    model, tok = lm.model, lm.tokenizer
    n, slots, gap, block = (state[p] for p in ("bat_n", "bat_slots", "bat_gap", "bat_block"))
    gens = generations(model)
    queue, costs, runs = schedules(model, n, slots, gap)
    cont = runs["continuous"]
    reserve = reserve_tokens(model, state["bat_reserve"])
    snaps = page_snapshots(cont, block, MAX_NEW, reserve)
    step = state.index_within("bat_step", len(snaps), "step", "the continuous schedule has",
                              default=peak_step(snaps))
    per_token = kv_bytes_per_token(model.config, 4)
    snap = snaps[step]
    return dict(
        model_name=lm.name, n=n, slots=slots, gap=gap, block=block, max_new=MAX_NEW,
        temperature=TEMPERATURE, max_slots=MAX_SLOTS, max_requests=MAX_REQUESTS,
        requests=[dict(id=i, prompt=g.prompt, prompt_tokens=len(g.prompt_ids),
                       length=len(g.output_ids), stop=g.stop, text=token_string(tok, list(g.output_ids)),
                       queued=i < n, arrival_ms=i * gap)
                  for i, g in enumerate(gens)],
        costs=[dict(rows=b, ms=ms, per_token_ms=ms / b, tokens_per_s=1000.0 * b / ms)
               for b, ms in enumerate(costs.step_ms, start=1)],
        cost_context=costs.context_tokens, cost_rounds=len(costs.samples[0]),
        **loop_step(lm, costs.context_tokens[0]),
        costs_measured_at=stamp(costs.measured_at),
        policies=[policy_row(runs[p]) for p in ("static", "continuous")],
        per_request=[dict(id=r.id, arrival_ms=r.arrival_ms, length=r.length,
                          static=request_row(runs["static"], r),
                          continuous=request_row(cont, r)) for r in queue],
        speedup=runs["continuous"].throughput / runs["static"].throughput,
        step=step, n_steps=len(snaps),
        pages=page_rows(snap, block, per_token),
        per_token=per_token, human_bytes=human_bytes,
        memory=memory_row(snap, block, per_token),
        peak=memory_peaks(snaps, block, per_token),
        reserve=state["bat_reserve"], reserve_options=list(RESERVE.items()),
        n_ctx=model.config.n_ctx,
        **queue_figures(model, n, slots, gap),
        memory_figure=memory_figure(model, n, slots, gap, block, reserve),
    )


def reserve_tokens(model, mode: str):
    """Tokens a contiguous cache reserves per request: the context window, or None (prompt +
    the request's token limit: page_snapshots' default)."""
    return model.config.n_ctx if mode == "context" else None


def queue_figures(model, n: int, slots: int, gap: int) -> dict:
    """Figures of one queue, built once (Plotly takes longer than the simulation)."""
    _, costs, runs = schedules(model, n, slots, gap)
    return _figures.get(("queue", model_key(model), costs.measured_at, n, slots, gap),
                        lambda: dict(
                            costs_figure=figures.step_costs_figure(costs.step_ms, costs.samples),
                            static_figure=figures.timeline_figure(runs["static"],
                                                                  "Static", end_ms(runs)),
                            continuous_figure=figures.timeline_figure(runs["continuous"],
                                                                      "Continuous", end_ms(runs))))


def end_ms(runs) -> float:
    """The end of the longer schedule: both timelines are drawn to it, on one time scale."""
    return max(r.makespan_ms for r in runs.values())


def memory_figure(model, n: int, slots: int, gap: int, block: int, reserve) -> str:
    _, costs, runs = schedules(model, n, slots, gap)
    per_token = kv_bytes_per_token(model.config, 4)
    return _figures.get(("memory", model_key(model), costs.measured_at, n, slots, gap, block,
                         reserve),
                        lambda: figures.memory_figure(
                            [memory_row(s, block, per_token)
                             for s in page_snapshots(runs["continuous"], block, MAX_NEW,
                                                     reserve)],
                            block))


def policy_row(s) -> dict:
    return dict(policy=s.policy, steps=len(s.steps), makespan_ms=s.makespan_ms,
                tokens=s.tokens, throughput=s.throughput, mean_ms=s.mean_latency_ms,
                p95_ms=s.p95_latency_ms, max_ms=s.max_latency_ms, utilisation=s.utilisation)


def request_row(s, r) -> dict:
    slot = next(i for i, rid in enumerate(s.steps[s.first_step[r.id]].slots) if rid == r.id)
    return dict(slot=slot, first=s.first_step[r.id], last=s.last_step[r.id],
                done_ms=s.done_ms[r.id], latency_ms=s.done_ms[r.id] - r.arrival_ms)


def page_rows(snap, block: int, per_token: int) -> list:
    rows = []
    for rid, blocks in snap.block_table.items():
        tokens = snap.tokens[rid]
        rows.append(dict(id=rid, tokens=tokens, blocks=blocks,
                         last_fill=tokens - (len(blocks) - 1) * block,
                         reserved=snap.reserved[rid]))
    return sorted(rows, key=lambda r: r["id"])


def memory_row(snap, block: int, per_token: int) -> dict:
    used = snap.used_tokens() * per_token
    paged = snap.paged_tokens(block) * per_token
    contiguous = snap.reserved_tokens() * per_token
    return dict(step=snap.step, used=used, paged=paged, contiguous=contiguous,
                paged_waste=paged - used, contiguous_waste=contiguous - used,
                n_blocks=sum(len(b) for b in snap.block_table.values()))


def memory_peaks(snaps, block: int, per_token: int) -> dict:
    rows = [memory_row(s, block, per_token) for s in snaps]
    return {k: max(r[k] for r in rows) for k in ("used", "paged", "contiguous")}


SECTION = Section("batching", "Batching", PARAMS, build, warm=warm,
                  tour=("A server answers many people at once. Several sequences can share one "
                        "decode step: the weights are read once for all of them, so on hardware "
                        "that waits on memory a batch can cost little more than one sequence. The "
                        "section measures what a batch costs on this server, and how requests "
                        "sharing the slots decides the throughput and the waiting times."))
