"""The batching section in real Chromium: throughput and bytes on screen are the pipeline's,
and the settings live in the URL."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.batching import page_snapshots
from pipeline.kvcache import kv_cache_bytes
from web.sections import batching

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("batching")


def test_numbers_on_screen_are_the_simulation(page, model, live_app, page_errors):
    page.goto("/?bat_n=5&bat_slots=3&bat_block=8&open=bat-requests,bat-paged")
    section = page.locator("#batching")
    table = section.get_by_role("table", name="Both policies compared")
    expect(table.get_by_role("row")).to_have_count(3)
    # the server measured the costs and generations; this process remembers them
    _, _, runs = batching.schedules(live_app.extensions["explainer"].default_model, 5, 3, 0)
    cont, static = runs["continuous"], runs["static"]
    expect(section.locator("#bat-verdict")).to_contain_text(
        f"{cont.throughput:.1f} tokens/s against {static.throughput:.1f} for static")
    expect(table.get_by_role("row", name="continuous")).to_contain_text(
        f"{cont.p95_latency_ms:.1f} ms")
    snaps = page_snapshots(cont, 8, batching.MAX_NEW)
    snap = snaps[batching.peak_step(snaps)]
    paged = kv_cache_bytes(model.config, snap.paged_tokens(8), 4)
    expect(section.locator("#bat-memory")).to_contain_text(f"= {paged:,} bytes")
    expect(section.locator(".plot:has(.main-svg)")).to_have_count(4)
    assert page_errors == []


def test_controls_round_trip_through_the_url(page, model, live_app):
    page.goto("/?open=bat-paged")                # the paged-memory disclosure open
    section = page.locator("#batching")
    section.get_by_role("slider", name="Slots in a batch").fill("2")
    expect(page).to_have_url(re.compile(r"bat_slots=2"))
    _, _, runs = batching.schedules(live_app.extensions["explainer"].default_model, 6, 2, 0)
    expect(section.locator("#bat-verdict")).to_contain_text(
        f"{runs['continuous'].throughput:.1f} tokens/s")
    section.get_by_role("slider", name="Step of the continuous schedule").fill("0")
    expect(section.get_by_text("Block table after step 0 ")).to_be_visible()
    expect(page).to_have_url(re.compile(r"bat_step=0"))
    section.get_by_role("slider", name="Block size (tokens)").fill("4")
    expect(page).to_have_url(re.compile(r"bat_block=4"))
    rows = section.get_by_role("table", name="Block table").locator("tbody tr")
    expect(rows).to_have_count(2)
    page.reload()
    expect(section.get_by_role("slider", name="Slots in a batch")).to_have_value("2")
    expect(section.get_by_text("Block table after step 0 ")).to_be_visible()
    expect(rows.first).to_contain_text("/ 4")
    # a new queue returns the inspected step to its default (the peak): it leaves the URL
    section.get_by_role("slider", name="Requests in the queue").fill("3")
    expect(page).to_have_url(re.compile(r"bat_n=3"))
    expect(page).not_to_have_url(re.compile(r"bat_step="))


def test_a_bad_value_shows_its_message(page):
    page.goto("/?bat_step=9000")
    expect(page.get_by_text("Step 9000 does not exist")).to_be_visible()
    expect(page.get_by_role("slider", name="Step of the continuous schedule")) \
        .to_have_attribute("aria-invalid", "true")
