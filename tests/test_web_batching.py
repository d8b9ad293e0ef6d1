"""The batching section shows the pipeline's schedules of real requests with measured costs."""
import html
import json
import re

import pytest

from pipeline.batching import page_snapshots
from pipeline.kvcache import kv_cache_bytes
from web.sections import batching
from web_support import HX, every_section, error_message, table_rows, text_of, url


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


def test_step_costs_on_screen_are_the_measured_ones(client, model):
    _, page = fragment(client)
    costs = batching.step_costs(model)
    assert len(costs.step_ms) == batching.MAX_SLOTS
    assert table_rows(page, "Measured step costs") == [
        [str(b), f"{ms:.2f}", f"{ms / b:.2f}", f"{1000 * b / ms:.0f}"]
        for b, ms in enumerate(costs.step_ms, start=1)]


@pytest.mark.parametrize("n, slots, gap", [(6, 4, 0), (8, 3, 120), (2, 8, 0)])
def test_policy_table_is_the_simulation(client, model, n, slots, gap):
    _, page = fragment(client, bat_n=n, bat_slots=slots, bat_gap=gap)
    _, _, runs = batching.schedules(model, n, slots, gap)
    assert table_rows(page, "Both policies compared") == [
        [f"{len(s.steps)}", f"{s.makespan_ms:.1f} ms", f"{s.throughput:.1f} tokens/s",
         f"{s.mean_latency_ms:.1f} ms", f"{s.p95_latency_ms:.1f} ms",
         f"{s.max_latency_ms:.1f} ms", f"{100 * s.utilisation:.0f}%"]
        for s in (runs["static"], runs["continuous"])]
    cont, static = runs["continuous"], runs["static"]
    assert f"<strong>{cont.throughput:.1f} tokens/s</strong>" in page
    rows = table_rows(page, "Requests under both policies")
    assert [int(r[0]) for r in rows] == list(range(n))
    for row, req in zip(rows, cont.requests):
        assert row[6] == f"{cont.done_ms[req.id] - req.arrival_ms:.1f} ms"
        assert row[4] == f"{static.done_ms[req.id] - req.arrival_ms:.1f} ms"


def test_block_table_and_memory_at_the_default_step(client, model):
    _, page = fragment(client, bat_block=8)
    _, _, runs = batching.schedules(model, 6, 4, 0)
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
    _, _, runs = batching.schedules(model, 6, 4, 0)
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
    _, _, runs = batching.schedules(model, 6, 4, 0)
    end = max(r.makespan_ms for r in runs.values())
    ranges = [json.loads(html.unescape(f))["layout"]["xaxis"]["range"]
              for f in re.findall(r'data-figure="([^"]*Static:[^"]*|[^"]*Continuous:[^"]*)"',
                                  page)]
    assert len(ranges) == 2 and ranges[0] == ranges[1] == [0, end * 1.02]


def test_a_chosen_step_is_shown(client, model):
    _, page = fragment(client, bat_step=0, bat_block=4)
    _, _, runs = batching.schedules(model, 6, 4, 0)
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
        r = client.get(url(path, **query), headers={**headers, **every_section()} if headers else every_section())
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


def test_a_timeline_past_10_s_is_drawn_in_seconds(model):
    """A big model's schedules run for tens of seconds: the axis is in seconds then (not
    "30k" ms), with the same bars."""
    from web.figures import batching as batching_figures
    _, _, runs = batching.schedules(model, 6, 4, 0)
    run = runs["continuous"]
    in_ms = json.loads(batching_figures.timeline_figure(run, "Continuous"))
    in_s = json.loads(batching_figures.timeline_figure(run, "Continuous", end_ms=20_000))
    assert run.makespan_ms < 10_000 and "ms" in in_ms["layout"]["xaxis"]["title"]["text"]
    assert in_s["layout"]["xaxis"]["title"]["text"] == "time (s, measured step costs)"
    assert in_s["layout"]["xaxis"]["range"] == pytest.approx([0, 20.4])
    for a, b in zip(in_ms["data"], in_s["data"]):
        assert b["base"] == pytest.approx([x / 1000 for x in a["base"]])
        assert b["x"] == pytest.approx([x / 1000 for x in a["x"]])
    assert in_s["layout"]["title"]["text"].endswith(f"{run.makespan_ms / 1000:.1f} s")


def test_a_batch_of_one_is_set_beside_the_pages_one_decode_step(client, model, app):
    """The step costs time decode_batch; the page's one decode-step measurement (web.measured,
    the generation loop's Model.decode) is named beside them, at the first request's length."""
    from web.measured import prefill_decode_timings
    lm = app.extensions["explainer"].default_model
    _, page = fragment(client, open="bat-deeper")
    _, costs, _ = batching.schedules(model, 6, 4, 0)
    point = prefill_decode_timings(lm).at(costs.context_tokens[0])
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    assert (f"the generation loop's own step (Model.decode, one cache, nothing to gather), "
            f"measured once for the page at {point.n} tokens, took "
            f"{1000 * point.decode_s:.2f} ms.") in text
