"""The KV-cache section in real Chromium: the numbers on screen are the pipeline's, and the
settings live in the URL."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.kvcache import kv_cache_bytes
from web.model_state.measured import cost_table, stamp
from web.sections import kvcache

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("kvcache")

PROMPT = "Mr. Collins was not a sensible man"


def test_numbers_on_screen_are_the_measured_run(page, model, live_app, page_errors):
    # every disclosure open: all four figures drawn
    page.goto(f"/?prompt={PROMPT}&kv_new=6&open=kv-how,kv-real")
    section = page.locator("#kvcache")
    expect(section.get_by_text("prompt tokens, then 6 generated")).to_be_visible()
    # the server checked this run and measured the step times once; the same process
    # remembers both (keyed by model directory)
    run = kvcache.cache_check(model, tuple(model.tokenizer.encode_ordinary(PROMPT)), 6)
    last = run.steps[-1]
    assert last.nbytes == kv_cache_bytes(model.config, last.n_tokens, 4)
    expect(section.get_by_text(f"nbytes is {last.nbytes:,} bytes ✓ the same")).to_be_visible()
    expect(section.locator("#kv-diff")).to_contain_text(f"{run.max_abs_diff:.2e}")
    table = cost_table(live_app.extensions["explainer"].default_model)   # the served one
    longest = max(table.prefill)
    expect(section.locator("#kv-summary")).to_contain_text(
        f"{table.prefill[longest].shown} ms at {longest} tokens")
    n = len(model.tokenizer.encode_ordinary(PROMPT))
    expect(section.locator("#kv-summary")).to_contain_text(
        f"one decode step at {n} tokens, from the cost table: {table.decode_at(n).shown} ms")
    expect(section).to_contain_text(f"once at {stamp(table.measured_at)}")
    expect(section.locator(".plot:has(.main-svg)")).to_have_count(4)
    assert page_errors == []


def test_controls_round_trip_through_the_url(page, model):
    # the real models' and the run's disclosures open
    page.goto(f"/?prompt={PROMPT}&open=kv-real,kv-how")
    section = page.locator("#kvcache")
    section.get_by_role("slider", name="Tokens to generate").fill("9")
    expect(section.get_by_text("prompt tokens, then 9 generated")).to_be_visible()
    expect(page).to_have_url(re.compile(r"kv_new=9"))
    section.get_by_label("Context length (tokens)").select_option("131072")
    expect(page).to_have_url(re.compile(r"kv_ctx=131072"))
    row = section.get_by_role("table", name="KV cache of published models").get_by_role(
        "row").filter(has_text="Llama 3 70B (window")
    expect(row).to_contain_text("40 GiB")
    page.reload()
    expect(section.get_by_role("slider", name="Tokens to generate")).to_have_value("9")
    expect(section.get_by_label("Context length (tokens)")).to_have_value("131072")
    expect(row).to_contain_text("20 GiB")
    n = len(model.tokenizer.encode_ordinary(PROMPT)) + 9
    expect(section.get_by_text(f"nbytes is {n * 2048:,} bytes")).to_be_visible()


def test_a_bad_value_shows_its_message(page):
    page.goto("/?kv_new=500")
    expect(page.get_by_text("Tokens to generate must be between 1 and 48; got 500.")) \
        .to_be_visible()
    expect(page.get_by_role("slider", name="Tokens to generate")).to_have_attribute(
        "aria-invalid", "true")


def test_tokens_to_generate_changes_the_cache_size_beside_it(page, model, page_errors):
    """The slider's effect shows in the section's core: the cache's bytes after the prompt and
    that many generated tokens, as pipeline.kvcache's formula gives them."""
    page.goto(f"/?prompt={PROMPT}")
    section = page.locator("#kvcache")
    n_prompt = len(model.tokenizer.encode_ordinary(PROMPT))
    after = section.locator("p").filter(has_text=f"After {n_prompt} prompt tokens and")
    expect(after).to_contain_text(f"{kv_cache_bytes(model.config, n_prompt + 16, 4):,} bytes")
    section.get_by_role("slider", name="Tokens to generate").fill("30")
    expect(after).to_contain_text(f"After {n_prompt} prompt tokens and 30 generated greedily")
    expect(after).to_contain_text(f"{kv_cache_bytes(model.config, n_prompt + 30, 4):,} bytes")
    expect(after).to_be_visible()
    assert page_errors == []


def test_opening_go_deeper_brings_the_check(page, model, page_errors):
    """Closed, the disclosure holds no check (its forward pass is not run); opened, the page
    asks for it and shows every step checked against recomputing."""
    prompt = "Lady Catherine spoke of her daughter"
    page.goto(f"/?prompt={prompt}&kv_new=5")
    section = page.locator("#kvcache")
    expect(section.get_by_text("prompt tokens, then 5 generated")).to_be_attached()
    assert section.get_by_role("table", name="Checked steps").count() == 0
    section.get_by_text("Go deeper: the cache's bytes, every step checked").click()
    table = section.get_by_role("table", name="Checked steps")
    expect(table).to_be_visible()
    run = kvcache.cache_check(model, tuple(model.tokenizer.encode_ordinary(prompt)), 5)
    expect(table.get_by_role("row")).to_have_count(len(run.steps) + 1)      # and the header
    expect(section.locator("#kv-diff")).to_contain_text(f"{run.max_abs_diff:.2e}")
    assert page_errors == []
