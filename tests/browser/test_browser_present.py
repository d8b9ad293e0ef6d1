"""Presentation mode as slides in Chromium: slide 1 is the overview, every other slide is one
section's core (its "Go deeper" disclosures hidden); the arrow keys move between slides; a slide
fits a projector at 150% zoom (1024x768, device scale factor 1.5) without scrolling; the
presenter's earlier guesses do not give a prediction's answer away, and R reveals it."""
import re
import warnings

from playwright.sync_api import expect

from web.core.registry import SECTIONS
from web.presentation.tour import tour_steps

STEPS = tour_steps(SECTIONS)
PROJECTOR = {"viewport": {"width": 1024, "height": 768}, "device_scale_factor": 1.5}

# The slide on screen and whether the page scrolls: [id, scrollHeight - innerHeight, zoom].
SLIDE = """() => {
  const shown = Array.from(document.querySelectorAll('main .section'))
    .filter(s => s.getClientRects().length);
  const s = shown.length === 1 ? shown[0] : null;
  return [shown.map(x => x.id).join(','), s && s.hasAttribute('data-lazy'),
          document.scrollingElement.scrollHeight - window.innerHeight, s ? s.style.zoom : ''];
}"""


def step_of(target: str) -> int:
    return next(s.number for s in STEPS if s.target == target)


def test_slide_one_is_the_overview_and_the_arrows_move_between_slides(page, page_errors):
    page.goto_first_screen("/")
    page.locator("body").press("p")
    expect(page.locator("body")).to_have_class(re.compile(r"\bpresent\b"))
    shown = page.locator("main .section:visible")
    expect(shown).to_have_count(1)
    expect(shown).to_have_id("overview")
    expect(page.locator("#overview")).to_have_class(re.compile(r"\bcurrent\b"))
    for step in STEPS[1:4]:                          # the first sections, one slide each
        page.keyboard.press("ArrowRight")
        expect(page).to_have_url(re.compile(rf"tour={step.number}(&|$)"))
        expect(shown).to_have_count(1)
        expect(shown).to_have_id(step.target)
        expect(page.locator(f"#{step.target} details.deeper:visible")).to_have_count(0)
    for step in reversed(STEPS[:3]):
        page.keyboard.press("ArrowLeft")
        expect(shown).to_have_id("overview" if step.target == "prompt" else step.target)
    expect(page).to_have_url(re.compile(r"tour=1(&|$)"))
    page.locator("body").press("p")                  # out of presentation mode: the tour's step
    expect(page.locator("body")).not_to_have_class(re.compile(r"\bpresent\b"))   # is the prompt,
    expect(page.locator("#overview")).to_have_class(re.compile(r"\bcurrent\b"))  # typed in the
    expect(page.locator("#overview #prompt")).to_be_visible()                   # overview's box
    assert page_errors == []


def slide_fits(page, timeout_ms=20_000):
    """Waits until the slide on screen is computed and fitted; its state then."""
    deadline = timeout_ms
    state = page.evaluate(SLIDE)
    while deadline > 0 and (state[1] or state[2] > 2 or not state[0]):
        page.wait_for_timeout(200)
        deadline -= 200
        state = page.evaluate(SLIDE)
    return state


def test_the_overview_and_a_section_fit_a_projector_without_scrolling(browser, base_url):
    context = browser.new_context(base_url=base_url, **PROJECTOR)
    try:
        page = context.new_page()
        page.goto("/?present=1&tour=1")
        shown, lazy, over, zoom = slide_fits(page)
        assert shown == "overview" and over <= 2, (shown, over, zoom)
        page.keyboard.press("ArrowRight")
        shown, lazy, over, zoom = slide_fits(page)
        assert shown == STEPS[1].target and not lazy and over <= 2, (shown, over, zoom)
        # scaled only as far as it must be, never below half size
        assert zoom == "" or 0.5 <= float(zoom) <= 1, zoom
    finally:
        context.close()


# Sections whose core is still taller than a projector slide even at half size: to shorten
# (the test names them as a warning while they are; delete an id once its slide fits).
KNOWN_TOO_TALL = set()


def test_every_slide_fits_a_projector_without_scrolling(browser, base_url):
    """Every slide, the overview and each section's core: the ones that need scrolling even at
    half size are listed."""
    context = browser.new_context(base_url=base_url, **PROJECTOR)
    too_tall = []
    try:
        page = context.new_page()
        page.goto("/?present=1&tour=1")
        for step in STEPS:
            shown, lazy, over, zoom = slide_fits(page)
            expected = "overview" if step.target == "prompt" else step.target
            assert shown == expected, (step.number, shown)
            if over > 2:
                too_tall.append(f"slide {step.number} ({expected}): {over} px too tall at zoom "
                                f"{zoom or 1}")
            page.keyboard.press("ArrowRight")
    finally:
        context.close()
    known = [t for t in too_tall if any(f"({sid})" in t for sid in KNOWN_TOO_TALL)]
    if known:
        warnings.warn("slides still too tall for a projector (known):\n" + "\n".join(known),
                      stacklevel=1)
    new = [t for t in too_tall if t not in known]
    assert not new, "slides that scroll at 1024x768:\n" + "\n".join(new)


def test_a_presenters_saved_guess_stays_hidden_and_r_reveals_the_answer(page):
    """The presenter tried the prediction before (the guess is kept in this browser): in
    presentation mode the answer stays hidden until R, and out of it the guess is shown again."""
    logits = step_of("logits")
    page.goto_first_screen(f"/?present=1&tour={logits}")
    box = page.locator("#logits .predict")
    expect(box).to_be_visible()
    page.evaluate("""() => { const b = document.querySelector('#logits .predict');
      localStorage.setItem('predict:' + b.dataset.predict + ':' + b.dataset.answer, 'of'); }""")
    page.goto_first_screen(f"/?present=1&tour={logits}")
    reveal = box.locator(".predict-reveal")
    expect(box).to_be_visible()
    expect(reveal).to_be_hidden()
    expect(page.locator("#lg-probs")).to_have_class(re.compile(r"\bgated\b"))
    page.locator("body").press("r")
    expect(reveal).to_be_visible()
    expect(box.locator(".predict-answer")).not_to_be_empty()
    expect(page.locator("#lg-probs")).not_to_have_class(re.compile(r"\bgated\b"))
    page.locator("body").press("p")                   # the reader's page: the saved guess
    expect(page.locator("body")).not_to_have_class(re.compile(r"\bpresent\b"))
    expect(box.locator(".predict-guess")).to_have_text("of")
    page.locator("body").press("p")                   # back: concealed again for the room
    expect(reveal).to_be_hidden()
    expect(page.locator("#lg-probs")).to_have_class(re.compile(r"\bgated\b"))


# How far the slide on screen makes the page wider than the window, and its figures drawn wider
# than their boxes: [id, scrollWidth - innerWidth, ["figure: drawn px in box px", ...]].
WIDE = """() => {
  const s = document.querySelector('main .section.current');
  const plots = s ? Array.from(s.querySelectorAll('.plot[data-figure]')) : [];
  const wide = plots.filter(p => p.getClientRects().length && p.querySelector('.main-svg'))
    .map(p => [p.getAttribute('aria-label') || p.id, p.getBoundingClientRect().width,
               p.querySelector('.main-svg').getBoundingClientRect().width])
    .filter(([, box, drawn]) => drawn > box + 2)
    .map(([name, box, drawn]) =>
      `${name.slice(0, 50)}: drawn ${Math.round(drawn)} px in ${Math.round(box)} px`);
  return [s ? s.id : '', document.scrollingElement.scrollWidth - window.innerWidth, wide];
}"""


def test_no_slide_is_wider_than_a_projector(browser, base_url):
    """Every slide at 1024x768 (150% zoom): the page never scrolls sideways, and every figure
    is drawn at its box's width (one drawn while its section was hidden, as another slide was
    on screen, is redrawn for the slide's width when its slide comes)."""
    context = browser.new_context(base_url=base_url, **PROJECTOR)
    wide = []
    try:
        page = context.new_page()
        page.goto("/?present=1&tour=1")
        for step in STEPS:
            slide_fits(page)
            state = page.evaluate(WIDE)
            for _ in range(15):                     # the figures are redrawn: at most 3 s
                if state[1] <= 1 and not state[2]:
                    break
                page.wait_for_timeout(200)
                state = page.evaluate(WIDE)
            shown, over, figures = state
            if over > 1 or figures:
                wide.append(f"slide {step.number} ({shown}): the page is {over} px wider than "
                            f"the window; " + "; ".join(figures))
            page.keyboard.press("ArrowRight")
    finally:
        context.close()
    assert not wide, "slides wider than a projector at 1024x768:\n" + "\n".join(wide)
