"""At 1280x800 with every "Go deeper" open, no table is cut by its box without saying so in
words: a table wider or taller than the box that scrolls it has, just above the box, which of
its columns (rows) are in view and of how many (static/cuts.js, describeCut). The sampling
stages' table, once cut to three of its seven columns in a half-width column, has the
section's whole width."""
import re

from playwright.sync_api import expect

from web_support import every_disclosure

# Every box that scrolls a table and cuts it: what it holds, what the line above it says.
CUT = """() => Array.from(document.querySelectorAll('.table-scroll, .scroll, .att-scroll'))
  .filter(b => b.querySelector('table') && b.getClientRects().length
               && (b.scrollWidth > b.clientWidth + 1 || b.scrollHeight > b.clientHeight + 1))
  .map(b => {
    const t = b.querySelector('table'), note = b.previousElementSibling;
    return {label: t.getAttribute('aria-label') || (t.caption ? t.caption.textContent : '?'),
            wide: b.scrollWidth > b.clientWidth + 1, tall: b.scrollHeight > b.clientHeight + 1,
            columns: t.rows.length ? t.rows[0].cells.length : 0,
            rows: t.tBodies.length ? t.tBodies[0].rows.length : 0,
            note: note && note.classList.contains('cut-note') && note.getClientRects().length
                  ? note.textContent : ''};
  })"""


def test_every_cut_table_says_what_is_in_view(page, base_url):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(base_url + "/?open=" + every_disclosure())     # every "Go deeper" open
    expect(page.locator("details.deeper")).not_to_have_count(0)
    expect(page.locator("details.deeper:not([open])")).to_have_count(0)
    # the softmax-by-hand table of 26 keys, in a box 28rem tall, is one that is cut
    page.wait_for_function("() => document.querySelectorAll('.cut-note').length > 0")
    cut = page.evaluate(CUT)
    assert cut, "no table is cut at 1280 px: this test checks nothing"
    for box in cut:
        note = box["note"]
        assert note, f"{box['label']} is cut without a word"
        if box["wide"]:
            m = re.search(r"columns (\d+)–(\d+) of (\d+) in view — scroll sideways", note)
            assert m and int(m.group(3)) == box["columns"], (box["label"], note)
        if box["tall"]:
            m = re.search(r"rows (\d+)–(\d+) of (\d+) in view — scroll down", note)
            assert m and int(m.group(3)) == box["rows"], (box["label"], note)
    # the stages of the sampler: every one of its columns in view, the drawn-from one included
    stages = page.get_by_role("table", name="Distribution after each stage")
    head = stages.locator("thead th")
    assert head.count() == 7
    box = page.evaluate("""() => {
      const t = document.querySelector('table.stages'), s = t.closest('.table-scroll');
      return {table: t.scrollWidth, box: s.clientWidth};
    }""")
    assert box["table"] <= box["box"] + 1, box
