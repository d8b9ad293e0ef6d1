"""Hardening in real Chromium, across every section present: hostile prompts stay text (in chips,
in Plotly hovers, after a reload), no dialog ever opens; the busy server's 503 is said in the
status line; every control is reachable by keyboard with a visible focus; axe-core (the engine
from its npm package, injected by the test, not a CDN) finds no WCAG 2.1 A/AA violation."""
import json
import os
import re
import threading
import urllib.parse
import urllib.request

import pytest
from playwright.sync_api import expect
from waitress.server import create_server

from web.core import limits
from web.core.registry import SECTIONS
from web.figures import label
from web.presentation.tokens import plain

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AXE_JS = os.path.join(ROOT, "node_modules", "axe-core", "axe.min.js")
HOSTILE = ['<img src=x onerror=alert(1)>', '<script>alert(1)</script>',
           '"><svg onload=alert(1)>', 'javascript:alert(1)']
INJECTED = ("img[src='x'], svg[onload], [onerror], [onload], [onclick], a[href^='javascript'], "
            "script:not([src])")


@pytest.fixture(scope="module", autouse=True)
def warm(live_server):
    """The first page of a fresh server fills per-model caches (timings measured once):
    ask for it once before the browser, which waits at most 30 s for a page."""
    with urllib.request.urlopen(live_server + "/", timeout=600) as r:
        assert r.status == 200


def chip_texts(page):
    return page.get_by_role("list", name="Tokens of the prompt").locator(".tok")


def expect_all_sections(page):
    # a prompt change recomputes the sections near the screen; the rest load when reached
    page.load_every_section()
    for s in SECTIONS:
        expect(page.locator(f"section#{s.id}")).to_be_attached()
    # every figure on show has been drawn by Plotly (a page of ~30 figures: allow for a busy
    # CPU); one inside a closed disclosure is drawn when it opens, not before
    shown = ".plot[data-figure]:not(details:not([open]) .plot)"
    plots = page.locator(shown)
    expect(plots.last.locator(".main-svg").first).to_be_attached(timeout=30_000)
    expect(page.locator(shown + ":not(:has(.main-svg))")).to_have_count(0)
    expect(page.locator("details:not([open]) .plot[data-figure]:has(.main-svg)")).to_have_count(0)


def hover_spots(plot, tries):
    """Where to put the mouse: the centre of each bar or marker, else down the middle of a
    heatmap's plot area (one spot per row band)."""
    points = plot.locator("g.point")
    boxes = [points.nth(i).bounding_box() for i in range(min(points.count(), tries))]
    spots = [(b["x"] + b["width"] / 2, b["y"] + b["height"] / 2) for b in boxes
             if b and b["width"] * b["height"] > 0]
    if not spots and plot.locator("g.hm").count():
        b = plot.locator("rect.nsewdrag").first.bounding_box()
        spots = [(b["x"] + b["width"] / 2, b["y"] + b["height"] * (k + 0.5) / tries)
                 for k in range(tries)]
    return spots


def hover_texts(page, plot, want, tries=24):
    """Move the mouse over one figure until a hover label contains `want`; returns the hover
    texts read (real mouse moves; the text is read from Plotly's SVG hover layer)."""
    seen = []
    hover = plot.locator(".hoverlayer")
    for x, y in hover_spots(plot, tries):
        # leave the figure and wait for its label to go, so the next one read is the new spot's
        # (Plotly throttles hover events: read at once, the label can still be the last one)
        page.mouse.move(0, 0)
        try:
            expect(hover).to_have_text("", timeout=2000)
        except AssertionError:
            pass
        page.mouse.move(x, y)
        try:
            expect(hover).not_to_have_text("", timeout=2000)
        except AssertionError:
            continue
        seen.append(hover.text_content())
        if want in seen[-1]:
            break
    page.mouse.move(0, 0)
    return seen


@pytest.mark.parametrize("evil", HOSTILE)
def test_hostile_prompt_is_text_everywhere(page, model, dialogs, page_errors, evil):
    prompt = f"Then she typed {evil} and waited."
    page.goto("/?" + urllib.parse.urlencode({"prompt": prompt}, quote_via=urllib.parse.quote))
    expect_all_sections(page)
    shown = [plain(model.tokenizer.decode_single_token_bytes(i))
             for i in model.tokenizer.encode_ordinary(prompt)]
    expect(chip_texts(page)).to_have_text(shown)
    expect(page.get_by_label("Prompt", exact=True)).to_have_value(prompt)
    assert page.locator(INJECTED).count() == 0
    # a figure that labels the prompt's tokens shows them as text when hovered: its JSON holds
    # them HTML-escaped (web.figures.label), Plotly draws the escaped text as the characters
    want = {"<": "<", '"': '"', "j": "·j"}[evil[0]]    # " j" is a token of "javascript"
    plots = [p for p in page.locator(".plot[data-figure]").all()
             if label(want) in json.dumps(json.loads(p.get_attribute("data-figure")),
                                          ensure_ascii=False)]
    hovered = []
    for plot in plots:
        plot.scroll_into_view_if_needed()
        hovered += [t for t in hover_texts(page, plot, want) if want in t]
        assert plot.locator("a, img, foreignObject, script").count() == 0
        if hovered:
            break
    assert hovered, f"no figure of {len(plots)} showed the prompt's tokens in a hover label"
    assert page.locator(INJECTED).count() == 0
    assert dialogs == [] and page_errors == []


def test_typed_hostile_prompt_updates_every_section_as_text(page, model, dialogs, page_errors):
    page.goto("/")
    prompt = " ".join(HOSTILE)
    page.get_by_label("Prompt", exact=True).fill(prompt)
    shown = [plain(model.tokenizer.decode_single_token_bytes(i))
             for i in model.tokenizer.encode_ordinary(prompt)]
    expect(chip_texts(page)).to_have_text(shown)
    expect(page).to_have_url(re.compile(r"prompt=%3Cimg"))
    expect_all_sections(page)
    assert page.locator(INJECTED).count() == 0
    page.reload()
    expect(chip_texts(page)).to_have_text(shown)
    assert page.locator(INJECTED).count() == 0
    assert dialogs == [] and page_errors == []


@pytest.fixture(scope="module")
def tight_server(model):
    """The app with one computing slot and no waiting room, served by waitress. Not warmed
    (every section's timings, seconds of CPU): its one test reads the first screen and the
    tokenizer's merges, which measure nothing, and holds the slot itself to be refused."""
    from app import create_app
    app = create_app({"MODEL": model, "PROBE_ENCODINGS": False, "GATE_SLOTS": 1,
                      "GATE_WAITING": 0, "GATE_WAIT_SECONDS": 5.0, "WARM_CACHES": False})
    server = create_server(app, host="127.0.0.1", port=0, threads=4)
    threading.Thread(target=server.run, daemon=True).start()
    yield app, f"http://127.0.0.1:{server.effective_port}"
    server.close()


def test_a_busy_server_says_so_and_recovers(page, tight_server):
    app, base = tight_server
    page.goto_first_screen(base + "/?open=tok-learn")   # the merges slider: under "learn BPE"
    merges = page.get_by_role("slider", name="Number of merges")
    expect(merges).to_be_visible()
    gate = app.extensions["explainer_gate"]
    gate.acquire()                              # someone else is computing
    try:
        merges.fill("7")
        expect(page.locator("#server-status")).to_have_text(limits.BUSY_MESSAGE)
    finally:
        gate.release()
    merges.fill("8")
    expect(page.locator("#server-status")).to_have_text("")
    expect(page).to_have_url(re.compile(r"merges=8"))


def test_every_control_is_reachable_by_keyboard_with_visible_focus(page):
    page.goto("/")
    expect_all_sections(page)
    wanted = page.evaluate("""() => Array.from(document.querySelectorAll(
        'main a[href], main button, main input, main select, main textarea, main [tabindex]'))
        .filter(e => !e.disabled && e.type !== 'hidden' && e.tabIndex >= 0
                && e.getClientRects().length && getComputedStyle(e).visibility !== 'hidden'
                && !e.closest('details:not([open])'))      // a closed "Go deeper" hides them
        .map(e => e.id || e.name || e.textContent.trim().slice(0, 30))""")
    page.get_by_label("Prompt", exact=True).focus()
    reached, unfocused = [], []
    for _ in range(2 * len(wanted) + 60):     # summaries of disclosures take a Tab stop too
        if not set(wanted) - set(reached) and reached:
            break
        info = page.evaluate("""() => { const e = document.activeElement;
            const s = getComputedStyle(e);
            return {key: e.id || e.name || e.textContent.trim().slice(0, 30),
                    outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2,
                    inMain: !!e.closest('main')}; }""")
        if info["inMain"]:
            reached.append(info["key"])
            if not info["outline"]:
                unfocused.append(info["key"])
        page.keyboard.press("Tab")
    missing = [w for w in wanted if w not in reached]
    assert missing == [], f"not reachable with Tab: {missing[:10]}"
    assert unfocused == [], f"no visible focus ring: {unfocused[:10]}"


def run_axe(page) -> dict:
    """axe-core's WCAG 2.1 A and AA violations, grouped by the section they are in."""
    with open(AXE_JS, encoding="utf-8") as f:
        page.evaluate(f.read())           # devtools evaluation: not an inline <script> tag
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {runOnly: {type: 'tag',
            values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}, resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => ({target: n.target.join(' '),
                section: (document.querySelector(n.target[0]) || document.body)
                    .closest('section[id], header, footer')?.id || 'page'}))}));
    }""")
    by_section = {}
    for v in result:
        for n in v["nodes"]:
            by_section.setdefault(n["section"], []).append(f"{v['id']}: {v['help']} "
                                                           f"({n['target']})")
    return by_section


LONG_PROMPT = open(os.path.join(ROOT, "data", "heldout_pride_and_prejudice_ch10.txt"),
                   encoding="utf-8").read()[:700]          # ~170 tokens: the lists scroll


# three pages: the default one; a hostile prompt with a bad value (its message beside its
# control) on one page; a long prompt
@pytest.mark.parametrize("query", ["", "?prompt=" + urllib.parse.quote(HOSTILE[0] + " Emma")
                                   + "&merges=banana",
                                   "?prompt=" + urllib.parse.quote(LONG_PROMPT)],
                         ids=["default", "hostile-and-bad-value", "long"])
def test_axe_finds_no_wcag_violations_in_any_section(page, query):
    if not os.path.exists(AXE_JS):
        pytest.fail("node_modules/axe-core is missing: run `npm ci` (make test does)")
    page.goto("/" + query)
    expect_all_sections(page)
    if "merges=banana" in query:             # both on show: the message and the prompt
        expect(page.locator("#error-merges")).to_contain_text("not 'banana'")
        expect(page.get_by_label("Prompt", exact=True)).to_have_value(HOSTILE[0] + " Emma")
    violations = run_axe(page)
    assert violations == {}, "\n".join(f"{s}: {v}" for s, vs in violations.items() for v in vs)
