"""The page as a live instrument, in real Chromium: sections below the first screen are computed
only when they come near it, a control fetches only the part of its section that depends on it,
figures stay the same elements (updated in place), an answer made for an older prompt is
dropped, and a section that fails to load says so in place with a button that tries again."""
import re
import time

import pytest
from playwright.sync_api import expect

PROMPT = "Elizabeth smiled at Mr. Darcy."
OPEN = "&open=emb-map,emb-analogy"       # the vocabulary map and the neighbours' disclosures


def mark_plots(page, section_id):
    """Give every figure element of the section a property that only the same DOM node keeps."""
    return page.evaluate("""(id) => {
        const plots = document.querySelectorAll('#' + id + ' [data-figure]');
        plots.forEach((el, i) => { el.__mark = 'plot' + i; });
        return plots.length; }""", section_id)


def marks_kept(page, section_id):
    return page.evaluate("""(id) => Array.from(
        document.querySelectorAll('#' + id + ' [data-figure]')).map(el => el.__mark || null)""",
                         section_id)


def test_sections_below_the_first_screen_load_when_reached(page):
    page.goto_first_screen(f"/?prompt={PROMPT}")
    expect(page.locator("#tokenization .chip").first).to_be_visible()
    kv = page.locator("#kvcache")
    expect(kv).to_have_attribute("data-lazy", "")
    expect(kv.get_by_text("Computed when you scroll here.")).to_be_visible()
    kv.scroll_into_view_if_needed()
    expect(page.locator("#kvcache[data-lazy]")).to_have_count(0)
    expect(page.locator("#kvcache .plot .main-svg").first).to_be_visible()


@pytest.mark.sections("embeddings")
def test_a_slider_fetches_its_part_and_figures_stay_the_same_elements(page, page_errors):
    page.goto(f"/?prompt={PROMPT}{OPEN}")
    section = page.locator("#embeddings")
    n = mark_plots(page, "embeddings")
    assert n >= 2
    rows = section.locator("#embeddings-neighbours tbody tr")
    before = section.locator("#embeddings-neighbours").inner_text()
    page.evaluate("document.getElementById('embeddings-neighbours').__mark = 'part'")
    sent = []
    page.on("request", lambda r: sent.append(r) if "/section/embeddings" in r.url else None)
    slider = page.get_by_label(re.compile("Neighbours"))
    slider.focus()
    with page.expect_response(lambda r: "/section/embeddings" in r.url) as answer:
        page.keyboard.press("ArrowRight")
    response = answer.value
    assert response.status == 200
    assert response.request.headers.get("hx-target") == "embeddings-neighbours"
    body = response.text()
    # the part's content only: not the part (it stays: the section's live region), not the section
    assert 'aria-label="Nearest neighbours"' in body
    assert 'id="embeddings-neighbours"' not in body and "<section" not in body
    assert "Scatter plot of all" not in body          # the vocabulary map is not sent again
    expect(section.locator("#embeddings-neighbours")).not_to_have_text(before)
    assert page.evaluate("document.getElementById('embeddings-neighbours').__mark") == "part"
    assert rows.count() >= 1
    assert len(sent) == 1                              # one key step, one request
    assert marks_kept(page, "embeddings") == [f"plot{i}" for i in range(n)]
    assert page_errors == []


def wait_for_route(page, held, timeout_s=20):
    """Until the route handler has held the request back: Playwright reports the request as soon
    as the page sends it, and runs the handler when it next talks to the page, so talk to it."""
    deadline = time.monotonic() + timeout_s
    while not held and time.monotonic() < deadline:
        page.evaluate("() => new Promise(r => {"
                      " requestAnimationFrame(() => r()); setTimeout(r, 100); })")
    assert len(held) == 1


def scroll_to_section(page, sid):
    """Scroll section `sid` into view, as a reader does; the section may be swapped for its new
    answer (outerHTML) while Playwright scrolls it, which detaches the element it held: then
    the new one is scrolled to."""
    from playwright.sync_api import Error
    for _ in range(3):
        try:
            page.locator(f"#{sid}").scroll_into_view_if_needed()
            return
        except Error as e:
            if "not attached to the DOM" not in str(e):
                raise
    page.locator(f"#{sid}").scroll_into_view_if_needed()


@pytest.mark.sections("embeddings")
def test_an_answer_for_an_older_prompt_is_dropped(page):
    page.goto(f"/?prompt={PROMPT}{OPEN}")
    held = []
    page.route("**/section/embeddings?**",           # the first answer is held back
               lambda route: route.continue_() if held else held.append(route))
    slider = page.get_by_label(re.compile("Neighbours"))
    slider.focus()
    with page.expect_request(lambda r: "/section/embeddings" in r.url):
        page.keyboard.press("ArrowRight")
    wait_for_route(page, held)
    # a new prompt arrives while that answer is held back
    with page.expect_response(lambda r: r.url.split("?")[0].endswith("/") and
                              r.request.headers.get("hx-request") == "true"):
        page.get_by_label("Prompt", exact=True).fill("Emma Woodhouse walked to Highbury.")
    scroll_to_section(page, "embeddings")                     # recomputed when reached
    neighbours = page.locator("#embeddings-neighbours")
    expect(neighbours).to_contain_text("Highbury")
    # the old answer arrives now, and must not replace what the new prompt shows
    with page.expect_response(lambda r: "/section/embeddings" in r.url):
        held[0].continue_()
    expect(neighbours).to_contain_text("Highbury")
    expect(neighbours).not_to_contain_text("Darcy")


def test_a_section_that_fails_to_load_says_so_and_tries_again(page):
    page.route("**/section/kvcache?**", lambda route: route.fulfill(
        status=503, headers={"Retry-After": "600"}, content_type="text/plain",
        body="The server is busy: try again in a moment."))
    page.goto_first_screen(f"/?prompt={PROMPT}")
    kv = page.locator("#kvcache")
    kv.scroll_into_view_if_needed()
    expect(kv.get_by_text("The server is busy: try again in a moment.")).to_be_visible()
    page.unroute("**/section/kvcache?**")
    kv.get_by_role("button", name="Try again").click()
    expect(page.locator("#kvcache[data-lazy]")).to_have_count(0)
    expect(page.locator("#kvcache .plot .main-svg").first).to_be_visible()


@pytest.mark.sections("sampling")
def test_an_older_answer_for_the_same_part_is_dropped(page):
    """Two controls update the sampling section's distribution: the answer to the first, held back
    until the second has been shown, must not replace it."""
    page.goto(f"/?prompt={PROMPT}")
    held = []
    page.route("**/section/sampling?**",
               lambda route: route.continue_() if held else held.append(route))
    temperature = page.locator("#s_temp-range")
    temperature.focus()
    with page.expect_request(lambda r: "/section/sampling" in r.url):
        page.keyboard.press("ArrowLeft")
    wait_for_route(page, held)
    part = page.locator("#sampling-distribution")
    survivors = part.locator("#survivors")        # "N of 4,096 tokens can be drawn."
    before = survivors.inner_text()
    with page.expect_response(lambda r: "/section/sampling" in r.url):
        page.locator("#s_topk-input").fill("3")
        page.locator("#s_topk-input").press("Enter")
    expect(survivors).to_contain_text("3 of ")
    assert before != survivors.inner_text()
    with page.expect_response(lambda r: "/section/sampling" in r.url):
        held[0].continue_()
    expect(survivors).to_contain_text("3 of ")
    expect(page.locator("#s_topk-input")).to_have_value("3")


@pytest.mark.sections("embeddings")
def test_a_control_updates_the_url_without_copying_the_page(page):
    """The URL follows a control (a shared link reproduces the screen), but htmx takes no snapshot
    of the page for its history cache: copying and serialising every drawn figure on each step
    cost more than the figure's own redraw."""
    page.goto(f"/?prompt={PROMPT}{OPEN}")
    page.evaluate("""() => { window.__snapshots = 0;
        document.body.addEventListener('htmx:beforeHistorySave',
                                       () => { window.__snapshots++; }); }""")
    slider = page.get_by_label(re.compile("Neighbours"))
    before = slider.input_value()
    slider.focus()
    with page.expect_response(lambda r: "/section/embeddings" in r.url):
        page.keyboard.press("ArrowRight")
    # the whole value: the next parameter, the section's fragment (static/anchor.js) or the end
    expect(page).to_have_url(re.compile(r"[?&]emb_k=" + str(int(before) + 1) + r"(&|#|$)"))
    assert page.evaluate("() => window.__snapshots") == 0
