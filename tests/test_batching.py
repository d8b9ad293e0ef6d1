"""pipeline/batching.py: schedules worked out by hand, invariants on random queues, the paged
allocator's arithmetic, and the real generations and step timings behind the section."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_support import get_model
from pipeline.batching import (
    Request,
    blocks_for,
    generate_request,
    generate_requests,
    make_queue,
    page_snapshots,
    simulate,
)
from pipeline.generation import decode_loop
from pipeline.sampling import SamplerSettings, sampler

COSTS = (1.0, 2.0, 2.5, 3.0)       # hand-made ms per step for 1..4 rows


def test_hand_checked_example():
    # 2 slots; requests of 3, 1 and 2 tokens, all waiting at time 0; a step costs 1 ms with one
    # row and 2 ms with two.
    q = [Request(0, 0.0, 3), Request(1, 0.0, 1), Request(2, 0.0, 2)]
    static = simulate(q, 2, COSTS, "static")
    # batch {0, 1} runs 3 steps of 2 rows (1 is padding after its one token), then {2} alone
    assert [(s.start_ms, s.end_ms, s.slots, s.padding) for s in static.steps] == [
        (0.0, 2.0, (0, 1), (False, False)),
        (2.0, 4.0, (0, 1), (False, True)),
        (4.0, 6.0, (0, 1), (False, True)),
        (6.0, 7.0, (2, None), (False, False)),
        (7.0, 8.0, (2, None), (False, False))]
    assert static.done_ms == {0: 6.0, 1: 6.0, 2: 8.0}
    cont = simulate(q, 2, COSTS, "continuous")
    # request 1 leaves after one step and request 2 takes its slot at once
    assert [(s.start_ms, s.end_ms, s.slots) for s in cont.steps] == [
        (0.0, 2.0, (0, 1)), (2.0, 4.0, (0, 2)), (4.0, 6.0, (0, 2))]
    assert cont.done_ms == {0: 6.0, 1: 2.0, 2: 6.0}
    assert static.throughput == 6 / 0.008 and cont.throughput == 6 / 0.006
    assert static.latencies_ms() == [6.0, 6.0, 8.0] and cont.latencies_ms() == [6.0, 2.0, 6.0]
    assert static.utilisation == 6 / 10 and cont.utilisation == 6 / 6
    assert cont.mean_latency_ms == pytest.approx(14 / 3) and cont.max_latency_ms == 6.0
    # numpy's linear percentile: rank 0.95 * 2 = 1.9 between 6.0 and 6.0 / 6.0 and 8.0
    assert cont.p95_latency_ms == 6.0 and static.p95_latency_ms == pytest.approx(6.0 + 0.9 * 2)


def test_arrivals_are_waited_for():
    # one slot; request 1 arrives at 10 ms, after request 0 (2 tokens, 1 ms each) is done
    q = [Request(0, 0.0, 2), Request(1, 10.0, 1)]
    for policy in ("static", "continuous"):
        s = simulate(q, 1, COSTS, policy)
        assert [(x.start_ms, x.slots) for x in s.steps] == [(0.0, (0,)), (1.0, (0,)),
                                                            (10.0, (1,))]
        assert s.latencies_ms() == [2.0, 1.0]


def test_static_takes_only_what_has_arrived():
    q = [Request(0, 0.0, 2), Request(1, 0.5, 2)]
    static = simulate(q, 2, COSTS, "static")
    assert [x.slots for x in static.steps] == [(0, None), (0, None), (1, None), (1, None)]
    cont = simulate(q, 2, COSTS, "continuous")
    assert [x.slots for x in cont.steps] == [(0, None), (0, 1), (None, 1)]


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="at least one slot"):
        simulate([Request(0, 0, 1)], 0, COSTS, "static")
    with pytest.raises(ValueError, match="step costs for 1..4"):
        simulate([Request(0, 0, 1)], 4, (1.0,), "static")
    with pytest.raises(ValueError, match="at least one token"):
        simulate([Request(0, 0, 0)], 1, COSTS, "continuous")
    with pytest.raises(KeyError):
        simulate([Request(0, 0, 1)], 1, COSTS, "fastest")


queues = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 12), st.integers(0, 20)),
                  min_size=1, max_size=9)


def concave_costs(first_and_increments):
    """A step cost that grows with the rows, each extra row adding no more than the one before
    (and than the first row's cost): what batching on real hardware looks like (the weights are
    read once per step, whatever the rows). Super-linear costs would make batching pointless."""
    first, increments = first_and_increments
    xs = [first]
    for d in sorted(increments, reverse=True):
        xs.append(xs[-1] + min(d, first))
    return tuple(xs)


costs = st.tuples(st.floats(0.5, 5.0), st.lists(st.floats(0.0, 5.0), min_size=5,
                                                 max_size=5)).map(concave_costs)


def check_invariants(s, q):
    served = {r.id: 0 for r in q}
    for step in s.steps:
        assert len(step.slots) == s.n_slots                       # never over capacity
        ids = [rid for rid in step.slots if rid is not None]
        assert len(ids) == len(set(ids)) == step.rows             # one slot per request
        assert step.end_ms > step.start_ms
        for rid, pad in zip(step.slots, step.padding, strict=True):
            if rid is not None and not pad:
                served[rid] += 1
                assert step.start_ms >= q[rid].arrival_ms         # never before it arrives
    assert served == {r.id: r.length for r in q}                  # exactly its length
    for a, b in zip(s.steps, s.steps[1:], strict=False):
        assert b.start_ms >= a.end_ms                             # steps do not overlap
    for r in q:
        assert s.done_ms[r.id] >= s.steps[s.last_step[r.id]].end_ms
        slots = {st_.slots.index(r.id) for st_ in s.steps if r.id in st_.slots}
        assert len(slots) == 1                                    # a request never moves


@settings(max_examples=300, deadline=None)
@given(queues, st.integers(1, 6), costs)
def test_schedule_invariants(raw, n_slots, step_ms):
    q = [Request(i, float(a), n, p) for i, (a, n, p) in enumerate(raw)]
    static = simulate(q, n_slots, step_ms, "static")
    cont = simulate(q, n_slots, step_ms, "continuous")
    check_invariants(static, q)
    check_invariants(cont, q)
    if all(r.arrival_ms == 0 for r in q):
        # Everyone waiting from the start: continuous is never slower. With arrivals spread out
        # it can be (test_when_requests_arrive_apart_continuous_can_be_slower): a static batch
        # may happen to gather late requests into one full batch while continuous runs them as
        # they come, more steps with fewer rows.
        assert cont.utilisation >= static.utilisation * (1 - 1e-12)
        assert len(cont.steps) <= len(static.steps)
        assert cont.throughput >= static.throughput * (1 - 1e-12)


def test_when_requests_arrive_apart_continuous_can_be_slower():
    """Found by Hypothesis. One row costs half of two or three; continuous lets request 1 join
    request 0 early (two rows at the full price) and requests 2 and 3 then wait for a slot,
    while static runs request 0 alone cheaply and the other three together."""
    q = [Request(0, 0.0, 11), Request(1, 2.0, 5), Request(2, 18.0, 5), Request(3, 18.0, 5)]
    step_ms = (1.75, 3.5, 3.5)
    static = simulate(q, 3, step_ms, "static")
    cont = simulate(q, 3, step_ms, "continuous")
    assert max(static.done_ms.values()) == pytest.approx(11 * 1.75 + 5 * 3.5)      # 36.75
    assert max(cont.done_ms.values()) == pytest.approx(2 * 1.75 + 10 * 3.5)         # 38.5
    assert cont.throughput < static.throughput


# --- paged memory ---------------------------------------------------------------------------

def test_block_table_by_hand():
    # 2 slots, blocks of 4 tokens; prompts of 3 and 1 tokens; request 1 finishes after 2 steps
    # and request 2 (prompt 2) takes its slot, reusing its freed block first
    q = [Request(0, 0.0, 6, 3), Request(1, 0.0, 2, 1), Request(2, 0.0, 3, 2)]
    cont = simulate(q, 2, COSTS, "continuous")
    snaps = page_snapshots(cont, 4, max_new=8)
    assert [s.tokens for s in snaps] == [{0: 4, 1: 2}, {0: 5, 1: 3}, {0: 6, 2: 3},
                                         {0: 7, 2: 4}, {0: 8, 2: 5}, {0: 9}]
    assert [s.block_table for s in snaps] == [
        {0: [0], 1: [1]},
        {0: [0, 2], 1: [1]},             # request 0's 5th token needs a second block
        {0: [0, 2], 2: [1]},             # request 2 gets block 1, freed by request 1
        {0: [0, 2], 2: [1]},
        {0: [0, 2], 2: [1, 3]},
        {0: [0, 2, 1]}]                  # block 1 again, freed by request 2
    s = snaps[4]
    assert s.used_tokens() == 13 and s.paged_tokens(4) == 16
    assert s.reserved == {0: 3 + 8, 2: 2 + 8} and s.reserved_tokens() == 21


@settings(max_examples=80, deadline=None)
@given(queues, st.integers(1, 6), st.integers(1, 20))
def test_paged_memory_arithmetic(raw, n_slots, block):
    q = [Request(i, float(a), n, p) for i, (a, n, p) in enumerate(raw)]
    cont = simulate(q, n_slots, COSTS + (4.0, 5.0), "continuous")
    max_new = max(r.length for r in q)
    snaps = page_snapshots(cont, block, max_new)
    for snap in snaps:
        physical = [b for blocks in snap.block_table.values() for b in blocks]
        assert len(physical) == len(set(physical))               # no block shared
        for rid, blocks in snap.block_table.items():
            assert len(blocks) == blocks_for(snap.tokens[rid], block)
            assert 0 < snap.tokens[rid] - (len(blocks) - 1) * block <= block  # last block
        waste = snap.paged_tokens(block) - snap.used_tokens()
        assert 0 <= waste < len(snap.tokens) * block            # only last blocks part-empty
        assert snap.reserved_tokens() >= snap.used_tokens()
    # a new physical block is made only when none is free: the ids used are exactly as many
    # as the most blocks ever in use at once
    in_use = [sum(len(b) for b in s.block_table.values()) for s in snaps]
    assert max(b for s in snaps for bs in s.block_table.values() for b in bs) + 1 == max(in_use)


def test_paged_memory_is_for_continuous_schedules():
    static = simulate([Request(0, 0.0, 2)], 1, COSTS, "static")
    with pytest.raises(ValueError, match="continuous"):
        page_snapshots(static, 4, 8)


# --- the real inputs: generations and measured step costs -------------------------------------

def test_a_generation_is_the_models_own_and_stops_where_it_says():
    model = get_model("default")
    g = generate_request(model, "Mr. Darcy", 64, seed=0)
    expected = [p.token for p in decode_loop(model, list(g.prompt_ids), len(g.output_ids),
                                   sample=sampler(SamplerSettings(temperature=0.8), 0))]
    assert list(g.output_ids) == expected
    newline = [b"\n" in model.tokenizer.decode_single_token_bytes(t) for t in g.output_ids]
    if g.stop == "end of paragraph":
        assert newline[-1] and not any(newline[:-1])
    else:
        assert g.stop == "limit" and len(g.output_ids) == 64 and not any(newline)
    short = generate_request(model, "Mr. Darcy", 3, seed=0)
    assert short.output_ids == g.output_ids[:3] or short.stop != "limit"


@pytest.mark.parametrize("name", ["default", "gpt2", "gguf_llama_q4_1"])
def test_requests_generated_in_one_batch_are_each_requests_own_generation(name):
    """generate_requests runs every request's steps in one decode_batch: the same tokens and
    stops as each request generated alone (8 prompts of different lengths, some stopping early,
    some at the limit)."""
    model = get_model(name)
    prompts = ["Mr. Darcy", "It was a fine morning in", "A", "The evening passed",
               "Elizabeth looked at her sister and said", "B", "Emma", "Mrs. Jennings was"]
    n = min(40, model.config.n_ctx - 12)
    batched = generate_requests(model, prompts, n, list(range(8)))
    alone = tuple(generate_request(model, p, n, seed=i) for i, p in enumerate(prompts))
    assert batched == alone
    if name == "default":                  # the trained model ends paragraphs: rows stop early
        assert len({len(g.output_ids) for g in batched}) > 1


def test_queue_from_generations():
    model = get_model("default")
    gens = [generate_request(model, p, 5, seed=i) for i, p in enumerate(["A", "B", "C"])]
    q = make_queue(gens, 2, 40)
    assert q == [Request(0, 0, len(gens[0].output_ids), len(gens[0].prompt_ids)),
                 Request(1, 40, len(gens[1].output_ids), len(gens[1].prompt_ids))]


