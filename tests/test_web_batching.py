"""The batching section shows the pipeline's schedules of real requests with measured costs."""
import html
import json
import re

import pytest

from pipeline.batching import page_snapshots
from pipeline.costs import fmt_ms
from pipeline.kvcache import kv_cache_bytes
from web.model_state.measured import cost_table
from web.sections import batching
from web_support import HX, error_message, every_section, table_rows, text_of, url


def default_lm(client):
    return client.application.extensions["explainer"].default_model


def fragment(client, **q):
    r = client.get(url("/section/batching", **q), headers=HX)
    return r, text_of(r)


def test_requests_are_the_models_generations(client, model):
    r, page = fragment(client)
    assert r.status_code == 200
    gens = batching.generations(model)
    assert table_rows(page, "Requests") == [
        [str(i), f"{g.prompt}", str(len(g.prompt_ids)), g.stop, str(len(g.output_ids))]
        for i, g in enumerate(gens[:6])]
    for g in gens[:6]:
        assert len(g.output_ids) <= batching.MAX_NEW


def test_step_costs_on_screen_are_the_cost_tables(client, model):
    _, page = fragment(client)
    table = cost_table(default_lm(client))
    costs = batching.step_costs(default_lm(client))
    assert len(costs.step_ms) == batching.MAX_SLOTS
    # the schedules are priced with the table's batched steps; a batch of one is its decode step
    assert costs.step_ms == tuple(1000 * table.batch[b].median
                                  for b in range(1, batching.MAX_SLOTS + 1))
    assert table.batch[1] is table.decode[table.pass_context]
    assert table_rows(page, "Measured step costs") == [
        [str(b), fmt_ms(ms), fmt_ms(ms / b), f"{1000 * b / ms:.0f}"]
        for b, ms in enumerate(costs.step_ms, start=1)]


@pytest.mark.parametrize("n, slots, gap", [(6, 4, 0), (8, 3, 120), (2, 8, 0)])
def test_policy_table_is_the_simulation(client, model, n, slots, gap):
    _, page = fragment(client, bat_n=n, bat_slots=slots, bat_gap=gap)
    _, _, runs = batching.schedules(default_lm(client), n, slots, gap)
    assert table_rows(page, "Both policies compared") == [
        [f"{len(s.steps)}", f"{s.makespan_ms:.1f} ms", f"{s.throughput:.1f} tokens/s",
         f"{s.mean_latency_ms:.1f} ms", f"{s.p95_latency_ms:.1f} ms",
         f"{s.max_latency_ms:.1f} ms", f"{100 * s.utilisation:.0f}%"]
        for s in (runs["static"], runs["continuous"])]
    cont, static = runs["continuous"], runs["static"]
    assert f"<strong>{cont.throughput:.1f} tokens/s</strong>" in page
    rows = table_rows(page, "Requests under both policies")
    assert [int(r[0]) for r in rows] == list(range(n))
    for row, req in zip(rows, cont.requests, strict=True):
        assert row[6] == f"{cont.done_ms[req.id] - req.arrival_ms:.1f} ms"
        assert row[4] == f"{static.done_ms[req.id] - req.arrival_ms:.1f} ms"


def test_block_table_and_memory_at_the_default_step(client, model):
    _, page = fragment(client, bat_block=8)
    _, _, runs = batching.schedules(default_lm(client), 6, 4, 0)
    # by default a contiguous cache reserves the context window for each request
    snaps = page_snapshots(runs["continuous"], 8, batching.MAX_NEW, model.config.n_ctx)
    step = batching.peak_step(snaps)
    assert f'id="bat_step-range" type="range" name="bat_step" min="0" max="{len(snaps) - 1}"' \
        in page
    assert f"Block table after step {step} " in page
    snap = snaps[step]
    assert table_rows(page, "Block table") == [
        [str(rid), str(snap.tokens[rid]), ", ".join(map(str, snap.block_table[rid])),
         f"{snap.tokens[rid] - 8 * (len(snap.block_table[rid]) - 1)} / 8",
         f"{snap.reserved[rid]} tokens"] for rid in sorted(snap.block_table)]
    # bytes from the live model's per-token KV size (the KV-cache formula)
    used = kv_cache_bytes(model.config, snap.used_tokens(), 4)
    paged = kv_cache_bytes(model.config, snap.paged_tokens(8), 4)
    reserved = kv_cache_bytes(model.config, snap.reserved_tokens(), 4)
    text = re.sub(r"\s+", " ", page)
    assert (f"hold {used:,} bytes of keys and values. Pages of 8 tokens: "
            f"{sum(len(b) for b in snap.block_table.values())} blocks = "
            f"<strong>{paged:,} bytes</strong>, wasting <strong>{paged - used:,} bytes</strong>. "
            f"Contiguous reservation: <strong>{reserved:,} bytes</strong>, wasting "
            f"<strong>{reserved - used:,} bytes</strong>.") in text


def test_paging_wastes_less_by_default_and_the_inversion_is_explained(client, model):
    _, _, runs = batching.schedules(default_lm(client), 6, 4, 0)
    for block in (4, 16, 64):
        snaps = page_snapshots(runs["continuous"], block, batching.MAX_NEW, model.config.n_ctx)
        assert all(s.paged_tokens(block) < s.reserved_tokens() for s in snaps)
    # reserving only prompt + the limit, with requests near it: contiguous can waste less
    _, page = fragment(client, bat_reserve="limit", bat_block=16, bat_step=20)
    snap = page_snapshots(runs["continuous"], 16, batching.MAX_NEW)[20]
    inverted = snap.reserved_tokens() - snap.used_tokens() < \
        snap.paged_tokens(16) - snap.used_tokens()
    assert ("Here contiguous reservation wastes less" in page) == inverted
    r, page = fragment(client, bat_reserve="everything")
    assert r.status_code == 422 and error_message(page, "bat_reserve") == (
        "What a contiguous cache reserves must be one of context, limit; got 'everything'.")


def test_static_and_continuous_timelines_share_one_time_axis(client, model):
    _, page = fragment(client)
    _, _, runs = batching.schedules(default_lm(client), 6, 4, 0)
    end = max(r.makespan_ms for r in runs.values())
    ranges = [json.loads(html.unescape(f))["layout"]["xaxis"]["range"]
              for f in re.findall(r'data-figure="([^"]*Static:[^"]*|[^"]*Continuous:[^"]*)"',
                                  page)]
    assert len(ranges) == 2 and ranges[0] == ranges[1] == [0, end * 1.02]


def test_a_chosen_step_is_shown(client, model):
    _, page = fragment(client, bat_step=0, bat_block=4)
    _, _, runs = batching.schedules(default_lm(client), 6, 4, 0)
    snap = page_snapshots(runs["continuous"], 4, batching.MAX_NEW)[0]
    gens = batching.generations(model)
    # after the first step each of the 4 running requests holds its prompt + 1 token
    assert snap.tokens == {i: len(gens[i].prompt_ids) + 1 for i in range(4)}
    assert [r[1] for r in table_rows(page, "Block table")] == \
        [str(len(gens[i].prompt_ids) + 1) for i in range(4)]


@pytest.mark.parametrize("query, name, status, message", [
    ({"bat_n": "0"}, "bat_n", 422, "Requests in the queue must be between 1 and 8; got 0."),
    ({"bat_slots": "9"}, "bat_slots", 422, "Slots in a batch must be between 1 and 8; got 9."),
    ({"bat_gap": "-5"}, "bat_gap", 422, "Time between arrivals (ms) must be between 0 and 500"),
    ({"bat_block": "big"}, "bat_block", 400, "Block size (tokens) must be a whole number"),
    ({"bat_step": "5000"}, "bat_step", 422, "Step 5000 does not exist: the continuous schedule "
                                            "has"),
])
def test_bad_values_get_a_message_and_a_4xx(client, query, name, status, message):
    for path, headers in (("/", {}), ("/section/batching", HX)):
        r = client.get(url(path, **query),
                       headers={**headers, **every_section()} if headers else every_section())
        assert r.status_code == status
        assert message in error_message(text_of(r), name)


def test_queue_controls_leave_the_step_out(client):
    _, page = fragment(client)
    for name in ("bat_n", "bat_slots", "bat_gap"):
        assert re.search(rf'name="{name}"[^>]*hx-params="not bat_step"', page)


def test_state_round_trips_through_the_url(client):
    r, _ = fragment(client, bat_n=7, bat_slots=2, bat_gap=50, bat_block=4, bat_step=3)
    assert r.headers["HX-Push-Url"] == \
        "/?bat_n=7&bat_slots=2&bat_gap=50&bat_block=4&bat_step=3"
    page = text_of(client.get(r.headers["HX-Push-Url"], headers=every_section()))
    assert "Block table after step 3 " in page
    assert re.search(r'id="bat_slots-range"[^>]*value="2"', page)
    # the default step is computed: it is left out of the address
    r, _ = fragment(client, bat_n=7)
    assert r.headers["HX-Push-Url"] == "/?bat_n=7"


def test_a_timeline_past_10_s_is_drawn_in_seconds(client):
    """A big model's schedules run for tens of seconds: the axis is in seconds then (not
    "30k" ms), with the same bars."""
    from web.figures import batching as batching_figures
    _, _, runs = batching.schedules(default_lm(client), 6, 4, 0)
    run = runs["continuous"]
    in_ms = json.loads(batching_figures.timeline_figure(run, "Continuous"))
    in_s = json.loads(batching_figures.timeline_figure(run, "Continuous", end_ms=20_000))
    assert run.makespan_ms < 10_000 and "ms" in in_ms["layout"]["xaxis"]["title"]["text"]
    assert in_s["layout"]["xaxis"]["title"]["text"] == "time (s, measured step costs)"
    assert in_s["layout"]["xaxis"]["range"] == pytest.approx([0, 20.4])
    for a, b in zip(in_ms["data"], in_s["data"], strict=True):
        assert b["base"] == pytest.approx([x / 1000 for x in a["base"]])
        assert b["x"] == pytest.approx([x / 1000 for x in a["x"]])
    assert in_s["layout"]["title"]["text"].endswith(f"{run.makespan_ms / 1000:.1f} s")


def test_the_step_cost_curve_is_told_in_decode_steps(client, model, app):
    """A batch of one is quoted as the cost table's decode step; every batch size's cost is
    given in those steps, the table's own ratios."""
    lm = app.extensions["explainer"].default_model
    table = cost_table(lm)
    _, page = fragment(client, open="bat-requests")
    one = table.decode_at(table.pass_context)
    flat = " ".join(page.split())
    assert (f'<span id="bat-one-step"><span class="cost" data-what="one decode step" '
            f'data-at="{table.pass_context}" data-ms="{one.shown}">') in flat
    curve = " ".join(html.unescape(re.sub(r"<[^>]+>", "", re.search(
        r'id="bat-curve">(.*?)</p>', page, re.S).group(1))).split())
    listed = ", ".join(f"{b} sequence{'s' if b > 1 else ''} {table.batch_steps(b):.2f}"
                       for b in range(1, batching.MAX_SLOTS + 1))
    assert curve.startswith(f"In decode steps: {listed}.")
    last = table.batch_steps(batching.MAX_SLOTS) / batching.MAX_SLOTS
    assert f"a batch of {batching.MAX_SLOTS} costs {last:.2f} steps, against 1 alone" in curve


@pytest.mark.parametrize("n, slots, gap", [(6, 4, 0), (8, 3, 120)])
def test_the_verdict_compares_the_policies_in_steps_and_in_time(client, n, slots, gap):
    """The verdict's step counts are the schedules'; its flat-cost ratio is both policies
    replayed with every step costing a batch of one; its measured ratio prices each step by its
    batch size."""
    from pipeline.batching import make_queue, simulate
    lm = default_lm(client)
    _, page = fragment(client, bat_n=n, bat_slots=slots, bat_gap=gap)
    verdict = " ".join(html.unescape(re.sub(r"<[^>]+>", "", re.search(
        r'id="bat-verdict">(.*?)</p>', page, re.S).group(1))).split())
    queue, costs, runs = batching.schedules(lm, n, slots, gap)
    flat = {p: simulate(make_queue(batching.generations(lm.model), n, gap), slots,
                        (costs.step_ms[0],) * batching.MAX_SLOTS, p)
            for p in ("static", "continuous")}
    speedup = runs["continuous"].throughput / runs["static"].throughput
    flat_speedup = flat["continuous"].throughput / flat["static"].throughput
    assert (f"In steps: static needs {len(runs['static'].steps)}, continuous "
            f"{len(runs['continuous'].steps)}; if a step cost the same whatever the batch size, "
            f"that would be {flat_speedup:.2f}×. The {speedup:.2f}× prices each step") in verdict
    if gap == 0:           # nobody waits for an arrival: the flat ratio is the step ratio
        assert flat_speedup == pytest.approx(len(runs["static"].steps)
                                             / len(runs["continuous"].steps))
