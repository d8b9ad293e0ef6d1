"""A 390x844 phone reads the page without zooming, on both models (the Austen model and
SmolLM2): every character it draws, the page's HTML text and the figures' SVG text, is 14 px
or more, and the page never scrolls sideways (what is wider scrolls in its own box and says so:
static/cuts.js). Checked for a student alone with the whole page and every "Go deeper" open,
and for a student following a class, on every slide of the tour with a poll open on top and
none of the teacher's controls. A glossary term keeps the punctuation written after it on its
line, whatever the width (templates/macros.html `term`, style.css .term)."""
import re
import threading

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect
from waitress.server import create_server

from web.core import limits
from web.core.registry import SECTIONS
from web.presentation.tour import tour_steps
from web_support import every_disclosure

# The model of a test: on pytest-xdist, SmolLM2's on the one worker that serves SmolLM2, the
# Austen model's in this module's own group (tests/browser/conftest.py)
MODELS = ["austen", pytest.param("smollm2", marks=pytest.mark.xdist_group("smollm2"))]

STEPS = tour_steps(SECTIONS)
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
FLOOR_PX = 14
TEACHERS_ONLY = re.compile(r"^(Start a class session|Presentation mode|Open the poll|End the "
                           r"session|Reveal the answers|Fold the join code|Show the join code|"
                           r"Class menu)")

# Every character drawn, by the size it is drawn at (its computed font size times any CSS zoom
# on the way): HTML text nodes and the figures' SVG text alike. Counted: what is rendered inside
# `within` (selectors; null: the whole page), and what is in the window when `screen`. The
# characters under the floor are grouped by section and element, with a sample of their text.
# Also: how far the page scrolls sideways, and the SVG characters counted (the figures drawn).
TEXT_SIZES = """async ({within, screen, floor}) => {
  // two frames, or 250 ms: a headless page that draws no frames (a second context's page
  // can stop drawing) must not hang the test
  await new Promise(r => {
    requestAnimationFrame(() => requestAnimationFrame(r)); setTimeout(r, 250); });
  const W = window.innerWidth, H = window.innerHeight;
  const px = el => parseFloat(getComputedStyle(el).fontSize) * (el.currentCSSZoom ?? 1);
  const rendered = el => {
    if (!el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) return false;
    const r = el.getBoundingClientRect();
    return r.width > 1 && r.height > 1;
  };
  const inWindow = el => { const r = el.getBoundingClientRect();
    return r.bottom > 0 && r.top < H && r.right > 0 && r.left < W; };
  const roots = within ? Array.from(document.querySelectorAll(within)) : [document.body];
  const out = { total: 0, svg: 0, small: 0, under: {} };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const chars = n.data.replace(/\\s+/g, '').length, el = n.parentElement;
    if (!chars || !el || el.closest('script, style, title') || !rendered(el)) continue;
    if (!roots.some(r => r.contains(el)) && !(screen && inWindow(el))) continue;
    out.total += chars;
    if (el.closest('svg')) out.svg += chars;
    const size = px(el);
    if (size >= floor - 0.05) continue;
    out.small += chars;
    const part = el.closest('section[id], header, footer, .class-panel');
    const where = (part ? (part.id || part.className.split(' ')[0] || part.tagName) : 'page') +
      ': ' + (el.closest('svg') ? 'svg ' : '') + el.tagName.toLowerCase() +
      (el.classList.length ? '.' + Array.from(el.classList).join('.') : '') +
      ' at ' + size.toFixed(1) + ' px';
    if (!out.under[where]) out.under[where] = { chars: 0, text: n.data.trim().slice(0, 40) };
    out.under[where].chars += chars;
  }
  out.across = document.documentElement.scrollWidth - W;
  return out;
}"""

# Each glossary term followed by punctuation (", " "):" ...), the two copied into a box as wide
# as the term's button plus one pixel, after a word, inside the term's own paragraph (its CSS):
# a line that may break between the button (an atomic inline box) and the punctuation puts the
# punctuation alone at the start of the next line. Returns the terms where it did.
PUNCTUATION_ALONE = """() => {
  const PUNCT = /^[,.;:!?)\\]”’'"]/;
  const bad = [];
  let checked = 0;
  // the first text drawn after the button (a definition is not drawn in the sentence)
  const after = (btn) => {
    const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    w.currentNode = btn.lastChild || btn;
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      if (n.parentElement.closest('.term-def, .sr-only')) continue;
      if (n.data.length) return n;
    }
    return null;
  };
  for (const term of document.querySelectorAll('.term')) {
    const btn = term.querySelector('.term-btn');
    if (!btn || !btn.getClientRects().length) continue;
    const text = after(btn);
    if (!text || !PUNCT.test(text.data)) continue;
    checked++;
    const range = document.createRange();
    range.setStart(text, 0);
    range.setEnd(text, 1);
    let home = range.commonAncestorContainer;
    for (; home && !home.contains(term); home = home.parentNode) {}
    if (home === term) home = term.parentNode;        // the punctuation inside the term's span
    let top = term;
    while (top.parentNode !== home) top = top.parentNode;
    range.setStartBefore(top);
    const box = document.createElement('div');
    box.style.cssText = 'position: absolute; left: 0; top: 0; visibility: hidden; ' +
      'width: ' + (btn.getBoundingClientRect().width + 1) + 'px';
    box.append('word ', range.cloneContents());
    home.appendChild(box);
    const copy = box.querySelector('.term-btn');
    const w = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    let last = null;
    for (let n = w.nextNode(); n; n = w.nextNode()) if (n.data.length) last = n;
    const r = document.createRange();
    r.setStart(last, last.data.length - 1);
    r.setEnd(last, last.data.length);
    const b = copy.getClientRects(), p = r.getClientRects();
    if (p.length && b.length && p[0].top > b[b.length - 1].bottom - 2) {
      bad.push((term.closest('section[id]') || {}).id + ': “' + btn.textContent + '” / “' +
               text.data.slice(0, 12) + '”');
    }
    box.remove();
  }
  return { checked, bad };
}"""


# Each list of chips cut by its own box (ol.grows: the tokenizer's, the chat's, the generation's
# tokens; a fixed height that a phone's narrow rows overflow): how many rows of chips it has, and
# the note just above it (static/cuts.js).
CUT_LISTS = """() => Array.from(document.querySelectorAll('ol.grows, ul.grows'))
  .filter(b => b.checkVisibility() && b.scrollHeight > b.clientHeight + 1).map(b => {
    const note = b.previousElementSibling;
    return { label: b.getAttribute('aria-label') || b.className,
             rows: new Set(Array.from(b.children).map(li => li.offsetTop)).size,
             note: note && note.classList.contains('cut-note') ? note.textContent : '' };
  })"""


def smallest(under: dict, n=12) -> str:
    rows = sorted(under.items(), key=lambda kv: -kv[1]["chars"])[:n]
    return "\n".join(f"  {v['chars']:5d} chars  {k}  ({v['text']!r})" for k, v in rows)


@pytest.fixture(scope="module")
def smol_server(smol_app, tmp_path_factory):
    """The app offering the Austen model and SmolLM2 (tests/conftest.py smol_app), served by
    waitress as app.py serves it, its classes in a store of this module's own."""
    from web.classroom.store.sqlite import SQLiteStore
    from web.serving import streaming
    c = smol_app.extensions["classroom"]
    before = c._store
    c.store = SQLiteStore(str(tmp_path_factory.mktemp("classes")), c.limits["idle_seconds"])
    server = create_server(smol_app, host="127.0.0.1", port=0, threads=limits.SERVER_THREADS,
                           **streaming.SERVER_OPTIONS)
    threading.Thread(target=server.run, daemon=True).start()
    yield f"http://127.0.0.1:{server.effective_port}"
    server.close()
    c.store = before


def served(request, name):
    """The page's address on model `name` (the Austen model's classes in a store of the test's
    own: tests/browser/conftest.py class_store)."""
    if name == "austen":
        request.getfixturevalue("class_store")
        return request.getfixturevalue("live_server"), ""
    return request.getfixturevalue("smol_server"), "model=smollm2"


def settle(page):
    """No request under way, every figure on the page drawn."""
    page.wait_for_load_state("networkidle")
    expect(page.locator(".htmx-request")).to_have_count(0)
    expect(page.locator(".plot[data-figure]:visible:not(:has(.main-svg))")).to_have_count(0)


@pytest.fixture(scope="module")
def browser_context_args(browser_context_args):
    """This module's `page` is a phone's."""
    return {**browser_context_args, **PHONE}


_alone = {}


@pytest.fixture(params=MODELS)
def alone(request):
    """A student alone on a phone: the whole page (every section loaded), every "Go deeper"
    open (the URL's `open`: every disclosure the templates write), read once per model (one
    page load): the text's sizes and the glossary's punctuation."""
    name = request.param
    if name not in _alone:
        base, query = served(request, name)
        page = request.getfixturevalue("page")
        opened = "open=" + every_disclosure()
        page.goto_first_screen(base + "/?" + (query + "&" + opened if query else opened))
        for attempt in range(5):    # SmolLM2's sections on a busy machine: refused, asked again
            try:
                page.load_every_section()
                break
            except AssertionError:
                if attempt == 4:
                    raise
        expect(page.locator("details.deeper")).not_to_have_count(0)
        expect(page.locator("details.deeper:not([open])")).to_have_count(0)
        settle(page)
        retry = page.get_by_role("button", name="Try again")
        for _ in range(5):             # a part the busy server refused, asked again
            if retry.count() == 0:
                break
            retry.first.click()
            settle(page)
        expect(retry).to_have_count(0)
        sizes = page.evaluate(TEXT_SIZES, {"within": None, "screen": False,
                                           "floor": FLOOR_PX})
        _alone[name] = {"sizes": sizes, "terms": page.evaluate(PUNCTUATION_ALONE),
                        "lists": page.evaluate(CUT_LISTS)}
    return name, _alone[name]


def test_a_phone_alone_draws_every_character_at_14_px_or_more(alone):
    name, seen = alone
    sizes = seen["sizes"]
    # the page and its figures were read (else this checks nothing)
    assert sizes["total"] > 10_000 and sizes["svg"] > 1_000, (name, sizes["total"], sizes["svg"])
    assert sizes["small"] == 0, (
        f"{name}: {sizes['small']} of {sizes['total']} characters under {FLOOR_PX} px, by "
        f"section and element:\n{smallest(sizes['under'])}")


def test_a_phone_alone_never_scrolls_sideways(alone):
    name, seen = alone
    assert seen["sizes"]["across"] <= 0, \
        f"{name}: the page scrolls {seen['sizes']['across']} px sideways at 390 px"


def test_a_phone_says_which_rows_of_a_cut_chip_list_are_in_view(alone):
    """The token chips' boxes keep a fixed height: on a phone their rows are cut, and the note
    above says which rows are in view, of how many (the chat's cut its last row unsaid)."""
    name, seen = alone
    lists = seen["lists"]
    assert lists, f"{name}: no list of chips is cut on a phone: this checks nothing"
    for box in lists:
        m = re.search(r"^Cut to fit: rows (\d+)–(\d+) of (\d+) in view — scroll (up|down|up "
                      r"or down) for the rest\.$", box["note"])
        assert m, (name, box)
        first, last, rows = map(int, m.groups()[:3])
        assert 1 <= first <= last <= rows == box["rows"] and (first, last) != (1, rows), \
            (name, box)
        way = "up" if last == rows else "down" if first == 1 else "up or down"
        assert m.group(4) == way, (name, box)


def test_no_line_starts_with_the_punctuation_after_a_term(alone):
    name, seen = alone
    terms = seen["terms"]
    assert terms["checked"] >= 10, f"{name}: only {terms['checked']} terms before punctuation"
    assert terms["bad"] == [], f"{name}: punctuation alone at a line's start after " \
                               f"{len(terms['bad'])} terms: {terms['bad']}"


# A following student's phone has the current slide laid out: computed, its figures drawn (not
# those of a closed disclosure, which are drawn when it opens), no request under way: "ready";
# or the busy server refused the slide's section and the phone offers to try again: "refused".
FOLLOWED = """(step) => {
  const s = document.querySelector('.section.current');
  if (!s || document.getElementById('tour-now').textContent.trim() !== String(step)) return false;
  if (Array.from(s.querySelectorAll('button'))
      .some(b => b.textContent.trim() === 'Try again' && b.checkVisibility())) return 'refused';
  return !s.hasAttribute('data-lazy') && !document.querySelector('.htmx-request') &&
    Array.from(s.querySelectorAll('.plot[data-figure]')).filter(p => p.checkVisibility())
      .every(p => p.querySelector('.main-svg')) && 'ready';
}"""

# what the phone has when it has not: the step it shows, its current section and what it waits for
WHERE = """() => {
  const s = document.querySelector('.section.current');
  return {now: (document.getElementById('tour-now') || {}).textContent, current: s && s.id,
          lazy: !!s && s.hasAttribute('data-lazy'),
          requests: Array.from(document.querySelectorAll('.htmx-request')).map(e => e.id),
          undrawn: s ? Array.from(s.querySelectorAll('.plot[data-figure]'))
            .filter(p => p.checkVisibility() && !p.querySelector('.main-svg')).length : null};
}"""

_followed = {}
# a busy server refuses a section after 2 s in its queue; a student presses Try again until
# it answers (SmolLM2's sections queue behind each other while the class's slides load)
ATTEMPTS = 20


@pytest.fixture(params=MODELS)
def followed(request, browser):
    """A class on model `name`: the teacher's projector (1024x768, presentation mode) opens a
    poll on the first slide, then goes through every slide with the arrow key; a student's
    phone follows. Per slide: what the phone draws (the slide's section and the class panel
    whole, and whatever else is in its window), whether the poll is on top, and the teacher's
    controls it shows."""
    name = request.param
    if name not in _followed:
        base, query = served(request, name)
        teacher_ctx = browser.new_context(viewport={"width": 1024, "height": 768})
        phone_ctx = browser.new_context(**PHONE)
        teacher, phone = teacher_ctx.new_page(), phone_ctx.new_page()
        for p in (teacher, phone):
            p.set_default_navigation_timeout(180_000)
        try:
            teacher.goto(base + "/?present=1&tour=1" + ("&" + query if query else ""))
            teacher.get_by_role("button", name="Start a class session").click()
            code_box = teacher.locator(".class-code")
            expect(code_box).to_have_text(re.compile(r"^[A-Z2-9]{4} [A-Z2-9]{3}$"))
            code = code_box.inner_text().replace(" ", "")
            phone.goto(base + "/class")
            phone.get_by_label("Class code").fill(code)
            phone.get_by_role("button", name="Join").click()
            expect(phone.get_by_text("Following the teacher")).to_be_visible()
            teacher.get_by_label("Class poll").select_option(label="The next token")
            with phone.expect_event("load"):       # loaded again, the poll's answer withheld
                teacher.get_by_role("button", name="Open the poll").click()
            poll = phone.get_by_text("Class poll: The next token")
            seen = []
            for step in STEPS:
                if step.number > 1:
                    teacher.keyboard.press("ArrowRight")
                for _ in range(ATTEMPTS):
                    try:
                        state = phone.wait_for_function(FOLLOWED, arg=step.number,
                                                        timeout=120_000).json_value()
                    except PlaywrightTimeout:
                        raise AssertionError(
                            f"{name}: the phone did not lay out slide {step.number} "
                            f"({step.target}): {phone.evaluate(WHERE)}") from None
                    if state == "ready":
                        break
                    # as a student would: the section's Try again button
                    phone.locator(".section.current").get_by_role(
                        "button", name="Try again").first.click()
                assert state == "ready", f"{name}: slide {step.number} refused {ATTEMPTS} times"
                phone.wait_for_load_state("networkidle")
                sizes = phone.evaluate(TEXT_SIZES, {"within": "#class-panel, .section.current",
                                                    "screen": True, "floor": FLOOR_PX})
                box = poll.bounding_box()
                teachers = [b.inner_text() for b in
                            phone.get_by_role("button", name=TEACHERS_ONLY).all()
                            if b.is_visible()]
                seen.append(dict(step=step.number, target=step.target, sizes=sizes,
                                 poll_top=box and box["y"], teachers=teachers))
            _followed[name] = seen
        finally:
            teacher_ctx.close()
            phone_ctx.close()
    return name, _followed[name]


def test_a_following_phone_draws_every_slide_at_14_px_or_more(followed):
    name, slides = followed
    assert len(slides) == len(STEPS)
    bad = [f"slide {s['step']} ({s['target']}): {s['sizes']['small']} of "
           f"{s['sizes']['total']} characters under {FLOOR_PX} px:\n{smallest(s['sizes']['under'])}"
           for s in slides if s["sizes"]["small"]]
    assert all(s["sizes"]["total"] > 100 for s in slides), name
    assert not bad, f"{name}:\n" + "\n".join(bad)


def test_a_following_phone_never_scrolls_sideways(followed):
    name, slides = followed
    bad = [f"slide {s['step']} ({s['target']}): {s['sizes']['across']} px"
           for s in slides if s["sizes"]["across"] > 0]
    assert not bad, f"{name}: the phone's page scrolls sideways on " + ", ".join(bad)


def test_a_following_phone_has_the_open_poll_on_top_and_no_teachers_control(followed):
    name, slides = followed
    # the poll's title at the top of the phone's window, on every slide
    off = [(s["step"], s["poll_top"]) for s in slides
           if s["poll_top"] is None or not 0 <= s["poll_top"] <= 120]
    assert not off, f"{name}: the poll is not on top on slides {off}"
    shown = [(s["step"], s["teachers"]) for s in slides if s["teachers"]]
    assert not shown, f"{name}: a teacher's control on the phone: {shown}"
