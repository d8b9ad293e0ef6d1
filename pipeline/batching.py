"""Serving many requests at once: static vs continuous batching, and paged KV-cache memory.

A server runs decode steps for a batch of sequences at once (`Model.decode_batch`): one step
gives every sequence in the batch its next token. A batch has `n_slots` places.

- Static batching takes up to n_slots waiting requests, runs them until the LONGEST is done,
  then takes the next group. A finished sequence keeps its row (padding) until then, and the
  answers are returned together when the batch ends (as `generate` on a padded batch does).
- Continuous batching decides again before every step: a finished sequence leaves at once and
  a waiting request takes its slot at the next step.

`simulate` replays a queue under either policy with a cost per step that depends on how many
rows the step computes (`step_ms[b - 1]` for b rows; the section reads these from the running
model's measured cost table: web/sections/batching.py step_costs). Prefill is left out: each
output token costs one decode step.

Paged memory (`page_snapshots`): instead of reserving each request's maximum length in one
contiguous piece, the cache is cut into blocks of `block_size` tokens, handed out as a sequence
grows; a block table maps a sequence's logical blocks to physical ones. Only the last block of a
sequence can be partly empty.
"""
import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from pipeline.generation import decode_loop, finish_reason
from pipeline.sampling import SamplerSettings, sampler
from pipeline.tokenizer import id_bytes

# --- the requests ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    id: int
    arrival_ms: float       # when it joins the queue
    length: int             # output tokens: decode steps it needs
    prompt_tokens: int = 0  # tokens already in its KV cache before the first step (memory only)


@dataclass(frozen=True)
class Generation:
    """A real generation of the model: the request lengths of the batching demo come from these."""
    prompt: str
    prompt_ids: tuple
    output_ids: tuple
    stop: str               # "end of text", "end of paragraph" or "limit"


def stop_of(tok, token: int, eos) -> str:
    """Why a request stops after `token`: "end of text", "end of paragraph" (a token holding a
    newline: the default model was trained on one paragraph per line), or "" (it goes on)."""
    if token == eos:
        return "end of text"
    if b"\n" in id_bytes(tok, token):
        return "end of paragraph"
    return ""


def generate_request(model, prompt: str, max_new: int, seed: int,
                     temperature: float = 0.8) -> Generation:
    """Seeded sampling from `prompt` until end-of-text, the end of a paragraph or max_new
    tokens, one request alone (the generation loop)."""
    tok = model.tokenizer
    ids = tuple(tok.encode_ordinary(prompt))
    out = []
    stop = "limit"
    sample = sampler(SamplerSettings(temperature=temperature), seed)
    for step in decode_loop(model, list(ids), max_new, sample):
        out.append(step.token)
        why = stop_of(tok, step.token, model.config.eos_token_id)
        if why:
            stop = why
            break
    return Generation(prompt, ids, tuple(out), stop)


def generate_requests(model, prompts, max_new: int, seeds, temperature: float = 0.8) -> tuple:
    """generate_request for every prompt at once, as a server batches them: each prompt is
    prefilled into its own KV cache, then every request still running takes its next step in
    one `decode_batch`, sampled with its own seeded sampler, until it stops. The same tokens as
    one request at a time (up to float rounding of the batched matmul: tests compare them), in a
    fraction of the time for a big model (its weights are read once per step, not once per
    request)."""
    tok, eos = model.tokenizer, model.config.eos_token_id
    ids = [tuple(tok.encode_ordinary(p)) for p in prompts]
    assert all(len(i) < model.config.n_ctx for i in ids), "a prompt fills the context"
    samples = [sampler(SamplerSettings(temperature=temperature), s) for s in seeds]
    history = [list(i) for i in ids]
    out = [[] for _ in prompts]
    stop = ["limit"] * len(prompts)
    kvs = [model.new_kv_cache() for _ in prompts]
    logits = [model.prefill(list(i), kv)[-1] for i, kv in zip(ids, kvs, strict=True)]
    running = list(range(len(prompts)))
    while running:
        still = []
        for r, row in zip(running, logits, strict=True):
            token = int(samples[r](row, history[r]))
            history[r].append(token)
            out[r].append(token)
            why = stop_of(tok, token, eos)
            if why or finish_reason(token, len(history[r]), len(out[r]), max_new,
                                    model.config.n_ctx, eos):
                stop[r] = why or "limit"      # as generate_request names a loop's own stop
            else:
                still.append(r)
        running = still
        if running:
            logits = model.decode_batch([out[r][-1] for r in running], [kvs[r] for r in running])
    return tuple(Generation(p, i, tuple(o), s)
                 for p, i, o, s in zip(prompts, ids, out, stop, strict=True))


def make_queue(generations, n_requests: int, gap_ms: float) -> list:
    """Requests 0..n-1 from the first n generations, arriving every gap_ms (0: all at once)."""
    return [Request(i, i * gap_ms, len(g.output_ids), len(g.prompt_ids))
            for i, g in enumerate(generations[:n_requests])]


# --- the measured cost of one decode step -----------------------------------------------------

@dataclass(frozen=True)
class StepCosts:
    step_ms: tuple          # step_ms[b - 1]: median ms of one decode_batch step with b rows
    samples: tuple          # every timing behind each median
    context_tokens: tuple   # tokens in each row's cache when timed
    measured_at: float


# --- the scheduler ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    start_ms: float
    end_ms: float
    slots: tuple            # per slot: the request id in it, or None (empty)
    padding: tuple          # per slot: True if its request is finished but still computed
    rows: int               # rows the step computes (what it costs)


@dataclass(frozen=True)
class Schedule:
    policy: str
    n_slots: int
    requests: tuple
    steps: tuple
    first_step: dict = field(default_factory=dict)   # request id -> index of its first step
    last_step: dict = field(default_factory=dict)    # request id -> index of its last token
    done_ms: dict = field(default_factory=dict)      # request id -> when its answer is complete

    @property
    def tokens(self) -> int:
        return sum(r.length for r in self.requests)

    @property
    def makespan_ms(self) -> float:
        return max(self.done_ms.values(), default=0.0)

    @property
    def throughput(self) -> float:
        """Output tokens per second, from time 0 to the last answer."""
        return self.tokens / (self.makespan_ms / 1000.0) if self.makespan_ms else 0.0

    def latencies_ms(self) -> list:
        """Arrival to complete answer, per request (in id order)."""
        return [self.done_ms[r.id] - r.arrival_ms for r in self.requests]

    @property
    def mean_latency_ms(self) -> float:
        return float(np.mean(self.latencies_ms()))

    @property
    def p95_latency_ms(self) -> float:
        """95th percentile, interpolating linearly between ranks (numpy's default)."""
        return float(np.percentile(self.latencies_ms(), 95))

    @property
    def max_latency_ms(self) -> float:
        return max(self.latencies_ms())

    @property
    def utilisation(self) -> float:
        """Share of slot-steps that produced a real token (not empty, not padding)."""
        slot_steps = self.n_slots * len(self.steps)
        return self.tokens / slot_steps if slot_steps else 0.0


def _check(requests, n_slots, step_ms):
    if n_slots < 1:
        raise ValueError("at least one slot")
    if len(step_ms) < n_slots:
        raise ValueError(f"step costs for 1..{n_slots} rows needed, got {len(step_ms)}")
    if any(r.length < 1 for r in requests):
        raise ValueError("every request needs at least one token")
    if len({r.id for r in requests}) != len(requests):
        raise ValueError("request ids must be unique")


def _fifo(requests):
    return sorted(requests, key=lambda r: (r.arrival_ms, r.id))


def simulate(requests, n_slots: int, step_ms, policy: str) -> Schedule:
    """Replay the queue under "static" or "continuous" batching (first come, first served)."""
    _check(requests, n_slots, step_ms)
    run = {"static": _static, "continuous": _continuous}[policy]
    return run(tuple(requests), n_slots, tuple(step_ms))


def _continuous(requests, n_slots, step_ms) -> Schedule:
    s = Schedule("continuous", n_slots, requests, ())
    queue, slots, left, steps, t = _fifo(requests), [None] * n_slots, {}, [], 0.0
    while queue or any(r is not None for r in slots):
        for i in range(n_slots):                      # fill free slots with arrived requests
            if slots[i] is None and queue and queue[0].arrival_ms <= t:
                r = queue.pop(0)
                slots[i], left[r.id] = r.id, r.length
                s.first_step[r.id] = len(steps)
        rows = sum(r is not None for r in slots)
        if rows == 0:                                 # nothing to run: wait for the next one
            t = queue[0].arrival_ms
            continue
        dt = step_ms[rows - 1]
        steps.append(Step(t, t + dt, tuple(slots), (False,) * n_slots, rows))
        t += dt
        for i, rid in enumerate(slots):
            if rid is None:
                continue
            left[rid] -= 1
            if left[rid] == 0:                        # finished: answer out, slot free
                s.last_step[rid], s.done_ms[rid] = len(steps) - 1, t
                slots[i] = None
    return Schedule(s.policy, n_slots, requests, tuple(steps), s.first_step, s.last_step,
                    s.done_ms)


def _static(requests, n_slots, step_ms) -> Schedule:
    s = Schedule("static", n_slots, requests, ())
    queue, steps, t = _fifo(requests), [], 0.0
    while queue:
        t = max(t, queue[0].arrival_ms)
        batch = []
        while queue and len(batch) < n_slots and queue[0].arrival_ms <= t:
            batch.append(queue.pop(0))
        ids = tuple(r.id for r in batch) + (None,) * (n_slots - len(batch))
        dt = step_ms[len(batch) - 1]                  # padded rows are computed too
        for k in range(max(r.length for r in batch)):
            padding = tuple(i < len(batch) and k >= batch[i].length for i in range(n_slots))
            steps.append(Step(t, t + dt, ids, padding, len(batch)))
            t += dt
        for r in batch:
            s.first_step[r.id] = len(steps) - max(x.length for x in batch)
            s.last_step[r.id] = s.first_step[r.id] + r.length - 1
            s.done_ms[r.id] = t                       # the batch returns together
    return Schedule(s.policy, n_slots, requests, tuple(steps), s.first_step, s.last_step,
                    s.done_ms)


# --- paged KV memory -----------------------------------------------------------------------------

def blocks_for(n_tokens: int, block_size: int) -> int:
    return math.ceil(n_tokens / block_size)


@dataclass(frozen=True)
class PageSnapshot:
    """The KV memory of the running requests after one step of a continuous schedule."""
    step: int
    tokens: dict            # request id -> tokens in its cache (prompt + tokens generated)
    block_table: dict       # request id -> [physical block ids], logical block i -> entry i
    reserved: dict          # request id -> tokens reserved if its maximum is kept contiguous

    def used_tokens(self) -> int:
        return sum(self.tokens.values())

    def paged_tokens(self, block_size: int) -> int:
        return sum(len(b) for b in self.block_table.values()) * block_size

    def reserved_tokens(self) -> int:
        return sum(self.reserved.values())


def page_snapshots(schedule: Schedule, block_size: int, max_new: int,
                   reserve_tokens: int = None) -> list:
    """Replay a continuous schedule with a block allocator: after each step, every running
    request holds prompt + generated-so-far tokens in ceil(tokens / block_size) blocks. A new
    block is the lowest free physical id; a finished request's blocks are freed for reuse.
    `reserved` is what a contiguous cache would set aside for each request: `reserve_tokens`
    (e.g. the context window, when the server cannot know how long an answer will be), or by
    default prompt + max_new tokens (when it knows each request's limit)."""
    if block_size < 1:
        raise ValueError("block_size must be at least 1")
    if schedule.policy != "continuous":
        raise ValueError("paged memory is shown for continuous batching")
    by_id = {r.id: r for r in schedule.requests}
    free, next_new = [], 0                     # heap of freed ids; ids never used start here
    table, generated, out = {}, {}, []
    for k, step in enumerate(schedule.steps):
        running = [rid for rid in step.slots if rid is not None]
        for rid in running:
            generated[rid] = generated.get(rid, 0) + 1
            need = blocks_for(by_id[rid].prompt_tokens + generated[rid], block_size)
            blocks = table.setdefault(rid, [])
            while len(blocks) < need:
                if free:
                    blocks.append(heapq.heappop(free))
                else:
                    blocks.append(next_new)
                    next_new += 1
        out.append(PageSnapshot(
            k, {rid: by_id[rid].prompt_tokens + generated[rid] for rid in running},
            {rid: list(table[rid]) for rid in running},
            {rid: reserve_tokens or by_id[rid].prompt_tokens + max_new for rid in running}))
        for rid in running:
            if schedule.last_step[rid] == k:
                for b in table.pop(rid):
                    heapq.heappush(free, b)
    return out
