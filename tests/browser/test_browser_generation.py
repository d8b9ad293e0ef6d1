"""The generation-loop section in real Chromium: stepping with the state in the URL, the stream
arriving token by token, and the stop button stopping the server's work."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.generation import TextStream, decode_loop

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("generation")

DEFAULT_PROMPT = ("It is a truth universally acknowledged, that a single man in possession of a "
                  "good fortune, must be in want of a")


def greedy_text(model, prompt, n):
    stream = TextStream(model.tokenizer)
    tokens = [p.token for p in decode_loop(model, model.tokenizer.encode_ordinary(prompt), n)]
    return "".join(stream.push(t) for t in tokens) + stream.flush()


def test_step_through_the_loop_with_the_state_in_the_url(page, model, page_errors):
    page.goto("/?gen_max=6#generation")
    caption = page.locator("#gen-caption")
    expect(caption).to_contain_text("Step 0 of 5.")
    expect(caption).to_contain_text("Prefill:")
    page.get_by_role("button", name="Add one token").click()
    expect(caption).to_contain_text("Step 1 of 5.")
    page.get_by_role("button", name="Add one token").click()
    expect(caption).to_contain_text("Step 2 of 5.")
    expect(caption).to_contain_text("only the token chosen at step 1")
    expect(page).to_have_url(re.compile(r"[?&]gen_step=2(&|#|$)"))
    expect(page).to_have_url(re.compile(r"[?&]gen_max=6(&|#|$)"))
    ids = model.tokenizer.encode_ordinary(DEFAULT_PROMPT)
    tokens = [p.token for p in decode_loop(model, ids, 6)]
    sequence = page.get_by_role("list", name="Sequence at this step").locator(".tid")
    n_prompt = len(model.tokenizer.encode_ordinary(DEFAULT_PROMPT))
    expect(sequence).to_have_count(n_prompt + 3)
    expect(sequence.nth(n_prompt + 2)).to_have_text(str(tokens[2]))
    page.reload()              # the state is in the URL; the section loads when scrolled to
    page.evaluate("document.getElementById('generation').scrollIntoView()")
    expect(caption).to_contain_text("Step 2 of 5.")
    limit = page.get_by_label("New-token limit")
    limit.fill("9")
    limit.press("Tab")                               # a change event
    expect(caption).to_contain_text("Step 2 of 8.")
    expect(page).to_have_url(re.compile(r"[?&]gen_max=9(&|#|$)"))
    page.get_by_role("button", name="To the last token").click()
    expect(caption).to_contain_text("Step 8 of 8.")
    expect(page.locator("#gen-finish")).to_contain_text("9 new tokens is the limit")
    page.go_back()
    expect(caption).to_contain_text("Step 2 of 8.")
    assert page_errors == []


def test_the_stream_shows_tokens_one_by_one(page, model, page_errors):
    # 3 s to watch it grow
    page.goto("/?gen_max=30&gen_pace=100&open=gen-stream#generation")
    items = page.get_by_role("list", name="Streamed tokens with their times").locator("li")
    status = page.locator(".stream-status")
    page.locator("#generation").get_by_role("button", name="Generate").click()
    # part of the answer is on screen while the rest is still being generated
    expect(status).to_contain_text(re.compile(r"^\d+ tokens? so far$"))
    shown = items.count()
    assert 1 <= shown < 30
    expect(items).not_to_have_count(shown)            # the count grows
    expect(items).to_have_count(30)
    expect(status).to_contain_text("Done: 30 tokens; stopped because the new-token limit")
    expect(page.locator(".stream-out")).to_have_text(greedy_text(model, DEFAULT_PROMPT, 30))
    expect(items.first).to_contain_text(re.compile(r"\d+\.\d\d ms \(prefill"))
    expect(items.nth(1)).to_contain_text(re.compile(r"\d+\.\d\d ms$"))
    expect(page.locator("#generation").get_by_role("button", name="Generate")).to_be_enabled()
    assert page_errors == []


def test_stop_or_closing_the_page_ends_the_servers_work(page, stream_slots):
    page.goto("/?gen_max=200&gen_pace=100&open=gen-stream#generation")
    items = page.get_by_role("list", name="Streamed tokens with their times").locator("li")
    before = len(stream_slots.finished)
    page.locator("#generation").get_by_role("button", name="Generate").click()
    expect(items.nth(2)).to_be_attached()                      # 3 tokens (or more) are shown
    [running] = stream_slots.running
    done_before_stop = running["steps"]
    page.locator("#generation").get_by_role("button", name="Stop").click()
    status = page.locator(".stream-status")
    expect(status).to_contain_text(re.compile(r"Stopped after \d+ tokens"))
    n = int(re.search(r"Stopped after (\d+)", status.text_content()).group(1))
    with stream_slots.changed:
        assert stream_slots.changed.wait_for(
            lambda: len(stream_slots.finished) > before, timeout=10)
        record = stream_slots.finished[before]
    # the server stopped: the browser shows what it received; the server did at most the step
    # running when Stop was pressed and one more (a browser on a busy machine may lag behind)
    assert record["reason"] == "disconnected" and n <= record["steps"]
    assert record["steps"] <= max(n, done_before_stop) + 2, (record, n, done_before_stop)
    expect(items).to_have_count(n)
    expect(page.locator("#generation").get_by_role("button", name="Stop")).to_be_disabled()
    # closing the page stops the server's work as well
    page.locator("#generation").get_by_role("button", name="Generate").click()
    expect(items.nth(1)).to_be_attached()
    [running] = stream_slots.running
    done_before_close = running["steps"]
    page.close()
    with stream_slots.changed:
        assert stream_slots.changed.wait_for(
            lambda: len(stream_slots.finished) > before + 1, timeout=10)
        record = stream_slots.finished[before + 1]
    # steps done after the close: at most the one running then and one more
    assert record["reason"] == "disconnected"
    assert record["steps"] <= done_before_close + 2, (record, done_before_close)


def test_model_text_is_inserted_as_text(page, model):
    """A prompt full of markup streams back as characters; nothing it holds is run."""
    evil = "<img src=x onerror=alert(1)> said Mr. Collins"
    page.goto("/?gen_max=5&gen_pace=0&open=gen-stream&prompt=" + evil.replace(" ", "%20"))
    page.locator("#generation").get_by_role("button", name="Generate").click()
    expect(page.locator(".stream-status")).to_contain_text("Done: 5 tokens")
    expect(page.locator(".stream-prompt")).to_have_text(evil)
    expect(page.locator(".stream-out")).to_have_text(greedy_text(model, evil, 5))
    assert page.locator("#generation img").count() == 0
