"""Batching: static vs continuous batching of a queue of real requests, and paged KV memory.

Request lengths are real generations of the running model (seeded sampling from the prompts
below until a paragraph ends, end-of-text, or MAX_NEW tokens, computed once per model); the
cost of a decode step of 1..MAX_SLOTS sequences is the model's cost table
(web.model_state.measured.cost_table:
`decode_batch` timed for each batch size, a batch of one being the table's decode step), the
same table every timing section quotes. Neither depends on the page's prompt. The schedules,
latencies and memory are `pipeline.batching` replaying that queue with those costs.
"""

from pipeline.batching import StepCosts, generate_requests, make_queue, page_snapshots, simulate
from pipeline.costs import fmt_ms
from pipeline.kvcache import kv_bytes_per_token
from web.core.cache import memo
from web.core.params import Param
from web.figures import batching as figures
from web.figures.kvcache import human_bytes
from web.model_state.measured import cost_table, model_key, stamp
from web.presentation.tokens import token_string
from web.sections import Section

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


def step_costs(lm) -> StepCosts:
    """The cost table's batched steps of 1..MAX_SLOTS sequences (ms), every cache holding the
    table's pass_context tokens."""
    table = cost_table(lm)
    sizes = range(1, MAX_SLOTS + 1)
    return StepCosts(tuple(1000.0 * table.batch[b].median for b in sizes),
                     tuple(tuple(1000.0 * t for t in table.batch[b].samples) for b in sizes),
                     (table.pass_context,) * MAX_SLOTS, table.measured_at)


def warm(lm):
    generations(lm.model)
    cost_table(lm)


def schedules(lm, n: int, slots: int, gap: int):
    costs = step_costs(lm)
    queue = make_queue(generations(lm.model), n, gap)
    return queue, costs, {p: simulate(queue, slots, costs.step_ms, p)
                          for p in ("static", "continuous")}


def flat_runs(lm, n: int, slots: int, gap: int) -> dict:
    """Both policies with every step costing one decode step (a batch of 1), whatever its size:
    the comparison in steps, as on hardware where a batch costs what one sequence does."""
    costs = step_costs(lm)
    queue = make_queue(generations(lm.model), n, gap)
    flat = (costs.step_ms[0],) * MAX_SLOTS
    return {p: simulate(queue, slots, flat, p) for p in ("static", "continuous")}


def peak_step(snapshots) -> int:
    """The step whose running requests hold the most tokens (the first such step)."""
    return max(range(len(snapshots)), key=lambda k: (snapshots[k].used_tokens(), -k))


def build(lm, state) -> dict:
    model, tok = lm.model, lm.tokenizer
    n, slots, gap, block = (state[p] for p in ("bat_n", "bat_slots", "bat_gap", "bat_block"))
    gens = generations(model)
    table = cost_table(lm)
    queue, costs, runs = schedules(lm, n, slots, gap)
    flat = flat_runs(lm, n, slots, gap)
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
                       length=len(g.output_ids), stop=g.stop,
                       text=token_string(tok, list(g.output_ids)),
                       queued=i < n, arrival_ms=i * gap)
                  for i, g in enumerate(gens)],
        costs=[dict(rows=b, ms=ms, per_token_ms=ms / b, tokens_per_s=1000.0 * b / ms,
                    shown=fmt_ms(ms), per_token_shown=fmt_ms(ms / b))
               for b, ms in enumerate(costs.step_ms, start=1)],
        cost_context=table.pass_context, cost_rounds=table.repeats,
        one_step=table.decode_at(table.pass_context),
        step_costs=[dict(rows=b, steps=table.batch_steps(b),
                         per_row_steps=table.batch_steps(b) / b,
                         lo_ms=1000 * table.batch[b].lo, hi_ms=1000 * table.batch[b].hi)
                    for b in range(1, MAX_SLOTS + 1)],
        context_range=(min(len(g.prompt_ids) for g in gens[:n]),
                       max(len(g.prompt_ids) + len(g.output_ids) for g in gens[:n])),
        decode_ends=(table.decode_at(min(table.decode)), table.decode_at(max(table.decode))),
        costs_measured_at=stamp(costs.measured_at),
        flat_steps={p: len(flat[p].steps) for p in flat},
        flat_speedup=flat["continuous"].throughput / flat["static"].throughput,
        flat_makespan_steps={p: flat[p].makespan_ms / costs.step_ms[0] for p in flat},
        makespan_steps={p: runs[p].makespan_ms / costs.step_ms[0] for p in runs},
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
        **queue_figures(lm, n, slots, gap),
        memory_figure=memory_figure(lm, n, slots, gap, block, reserve),
    )


def reserve_tokens(model, mode: str):
    """Tokens a contiguous cache reserves per request: the context window, or None (prompt +
    the request's token limit: page_snapshots' default)."""
    return model.config.n_ctx if mode == "context" else None


def queue_figures(lm, n: int, slots: int, gap: int) -> dict:
    """Figures of one queue, built once (Plotly takes longer than the simulation)."""
    model = lm.model
    _, costs, runs = schedules(lm, n, slots, gap)
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


def memory_figure(lm, n: int, slots: int, gap: int, block: int, reserve) -> str:
    model = lm.model
    _, costs, runs = schedules(lm, n, slots, gap)
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
                  gives_away=("next-token", "kv-bytes"),
                  tour=("A server answers many people at once. Several sequences can share one "
                        "decode step: the weights are read once for all of them, so on hardware "
                        "that waits on memory a batch can cost little more than one sequence. The "
                        "section measures what a batch costs on this server, and how requests "
                        "sharing the slots decides the throughput and the waiting times."))
