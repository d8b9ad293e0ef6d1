"""The tokenization section in real Chromium: typing, stepping, learning, URL state, safety."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.bpe import learn_bpe
from web.presentation.tokens import plain

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("tokenization")


def token_ids(page, label="Tokens of the prompt"):
    return page.get_by_role("list", name=label).locator(".tid")


def test_typed_prompt_becomes_the_tokenizers_ids(page, model, page_errors):
    page.goto("/")
    prompt = "Elizabeth smiled at Mr. Darcy.\nThen she  laughed."
    page.get_by_label("Prompt", exact=True).fill(prompt)
    expect(token_ids(page)).to_have_text([str(i) for i in model.tokenizer.encode(prompt)])
    expect(page).to_have_url(re.compile(r"\?prompt=Elizabeth%20smiled"))
    expect(page.get_by_text(f"{len(model.tokenizer.encode(prompt))} tokens from")).to_be_visible()
    page.locator("#deeper-tok-learn > summary").click()    # the figures are in a disclosure
    expect(page.locator("#tokenization .plot .main-svg").first).to_be_attached()
    assert page_errors == []


def test_step_through_a_bpe_replay(page, model):
    page.goto("/?open=tok-replay&prompt=" + "Miss Bennet was unaccountably cheerful")
    page.get_by_label("Word to replay").select_option(label="3: ·unaccountably")
    expect(page.locator("#replay-caption")).to_contain_text("Step 0 of")
    pieces = token_ids(page, "Pieces of the word at this step")
    expect(pieces).to_have_count(len(" unaccountably".encode()))
    next_button = page.get_by_role("button", name="Next merge")
    caption = page.locator("#replay-caption")
    steps = 0
    while next_button.is_enabled():
        next_button.click()
        steps += 1
        expect(caption).to_contain_text(f"Step {steps} of")
        expect(caption).to_contain_text(re.compile(r"Merged .* into token \d+", re.S))
    expect(pieces).to_have_text([str(i) for i in model.tokenizer.encode(" unaccountably")])
    expect(page.get_by_text("Same ids as the tokenizer gives for this word")).to_be_visible()
    page.get_by_role("button", name="Previous merge").click()
    expect(caption).to_contain_text(f"Step {steps - 1} of")
    expect(page).to_have_url(re.compile(rf"step={steps - 1}(&|$)"))  # word 3 is the default


def test_learn_three_merges(page):
    text = "low lower lowest, newer newest"
    page.goto("/?open=tok-learn")
    # the typed text is sent once typing pauses: wait for its answer before moving the slider,
    # as a reader does (the default text also learns 5 merges, so the rows are no signal)
    with page.expect_response(
            lambda r: "/section/tokenization" in r.url and "bpe_text=low" in r.url):
        page.get_by_label("Text to learn from").fill(text)
    rows = page.get_by_role("table", name="Merges learned").locator("tbody tr")
    expect(rows).to_have_count(5)                   # learned from the typed text, 5 merges
    # filling fires input and change: the text's second answer (without merges=) must not land
    # after the slider's and take the address back
    expect(page.locator(".htmx-request")).to_have_count(0)
    page.get_by_role("slider", name="Number of merges").fill("3")
    expected = learn_bpe(text, 3)
    expect(rows).to_have_count(3)
    expect(rows).to_have_text([re.compile(rf"{m.rank}\s*{re.escape(plain(m.left))}\s*\+\s*"
                                          rf"{re.escape(plain(m.right))}.*{m.count}")
                               for m in expected])
    expect(page.get_by_text("the vocabulary has 259 tokens")).to_be_visible()
    expect(page).to_have_url(re.compile(r"merges=3"))
    expect(page.locator("#learn-result .plot .main-svg").first).to_be_attached()


def test_reload_shows_the_same_state(page, model):
    page.goto("/?open=tok-replay,tok-learn")
    page.get_by_label("Prompt", exact=True).fill("Pride and prejudice")
    expect(token_ids(page)).to_have_text(
        [str(i) for i in model.tokenizer.encode("Pride and prejudice")])
    expect(page).to_have_url(re.compile(r"prompt=Pride"))
    page.get_by_role("button", name="Next merge").click()
    expect(page.locator("#replay-caption")).to_contain_text("Step 1 of")
    expect(page).to_have_url(re.compile(r"step=1"))
    page.get_by_role("slider", name="Number of merges").fill("6")
    expect(page).to_have_url(re.compile(r"merges=6"))
    page.reload()
    expect(page.get_by_label("Prompt", exact=True)).to_have_value("Pride and prejudice")
    expect(page.locator("#replay-caption")).to_contain_text("Step 1 of")
    expect(page.get_by_role("slider", name="Number of merges")).to_have_value("6")
    expect(page.get_by_role("table", name="Merges learned").locator("tbody tr")).to_have_count(6)
    expect(token_ids(page)).to_have_text(
        [str(i) for i in model.tokenizer.encode("Pride and prejudice")])


def test_back_and_forward(page, model):
    page.goto("/?prompt=First")
    page.get_by_label("Prompt", exact=True).fill("Second prompt")
    expect(page).to_have_url(re.compile(r"prompt=Second"))
    expect(token_ids(page)).to_have_text([str(i) for i in model.tokenizer.encode("Second prompt")])
    page.go_back()
    expect(page).to_have_url(re.compile(r"prompt=First$"))
    expect(page.get_by_label("Prompt", exact=True)).to_have_value("First")
    expect(token_ids(page)).to_have_text([str(i) for i in model.tokenizer.encode("First")])
    page.go_forward()
    expect(page.get_by_label("Prompt", exact=True)).to_have_value("Second prompt")
    expect(token_ids(page)).to_have_text([str(i) for i in model.tokenizer.encode("Second prompt")])


def test_html_in_the_prompt_is_only_text(page, model, dialogs):
    evil = "<img src=x onerror=alert(1)> and <script>alert(1)</script>"
    page.goto("/?open=tok-learn")
    page.get_by_label("Prompt", exact=True).fill(evil)
    page.get_by_label("Text to learn from").fill(evil + " " + evil)
    expect(page).to_have_url(re.compile(r"bpe_text="))
    tokens = page.get_by_role("list", name="Tokens of the prompt").locator(".tok")
    shown = [plain(model.tokenizer.decode_single_token_bytes(i))
             for i in model.tokenizer.encode(evil)]
    assert "".join(shown).replace("·", " ") == evil
    expect(tokens).to_have_text(shown)
    page.reload()                                   # and rendered by the server from the URL
    expect(tokens).to_have_text(shown)
    # none of it became an element (the page's own images, attention's head thumbnails, are
    # data: PNGs the server made)
    assert page.locator("main img[src='x'], main [onerror], main script, #learn-result img") \
        .count() == 0
    assert page.locator("main img:not([src^='data:image/png;base64,'])").count() == 0
    assert page.locator("img[src='x']").count() == 0
    assert dialogs == []


def test_a_bad_value_shows_its_message(page):
    page.goto("/?prompt=Hello")
    page.get_by_label("Prompt", exact=True).fill("   ")
    # the message sits under the prompt box (the overview says it again in its own box)
    expect(page.locator("#prompt").get_by_text("The prompt is empty")).to_be_visible()
    expect(page.get_by_label("Prompt", exact=True)).to_have_attribute("aria-invalid", "true")
    page.goto("/?merges=banana&open=tok-learn")
    expect(page.get_by_text("Number of merges must be a whole number")).to_be_visible()


def test_works_offline_and_fits_a_phone(page, live_server):
    outside = []
    page.route(re.compile(r"^(?!" + re.escape(live_server) + ").*"),
               lambda route: (outside.append(route.request.url), route.abort()))
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/")
    expect(page.locator(".plot .main-svg").first).to_be_attached()
    assert outside == []
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    expect(page.get_by_role("navigation")).to_contain_text("Tokenization")


def test_fast_changes_end_in_the_last_state(page, model):
    page.goto("/?open=tok-learn")
    slider = page.get_by_role("slider", name="Number of merges")
    for n in range(1, 12):                           # stale requests are dropped
        slider.fill(str(n))
    page.get_by_label("Prompt", exact=True).fill("Sense and sensibility")
    expect(token_ids(page)).to_have_text(
        [str(i) for i in model.tokenizer.encode("Sense and sensibility")])
    rows = page.get_by_role("table", name="Merges learned").locator("tbody tr")
    expect(rows).to_have_count(11)
    expect(page).to_have_url(re.compile(r"prompt=Sense.*merges=11|merges=11.*prompt=Sense"))
