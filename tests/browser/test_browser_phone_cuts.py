"""On a phone (390x844): a table cut at the screen's edge says so in words just above it, even
where the table itself is what scrolls (style.css gives a phone's tables display: block, so the
box around one fits and the table is cut: static/cuts.js describeCut); and the KV cache's
"Measured time per step" legend stands above the plot area, not over its lines
(web/figures/kvcache.py)."""
import re

import pytest
from playwright.sync_api import expect

PHONE = {"width": 390, "height": 844}

# a box that scrolls a table, or its table that scrolls in it: the geometry and the line above
CUT = """(table) => {
  const box = table.closest('.table-scroll, .scroll, .att-scroll') || table;
  const note = box.previousElementSibling;
  const over = e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1;
  return {cut: over(box) || over(table), box: over(box), table: over(table),
          columns: table.rows[0].cells.length,
          screen: document.documentElement.clientWidth,
          right: box.getBoundingClientRect().right,
          note: note && note.classList.contains('cut-note') && note.getClientRects().length
                ? note.textContent : ''};
}"""


@pytest.mark.sections("roofline")
def test_a_phone_says_the_rooflines_chip_table_is_cut(page, base_url):
    page.set_viewport_size(PHONE)
    page.goto(base_url + "/?open=rf-chips#roofline")
    table = page.get_by_role("table", name="Roofline estimates")
    expect(table).to_be_visible()
    table.scroll_into_view_if_needed()
    seen = table.evaluate(CUT)
    # five columns of numbers do not fit 390 px: the table is cut (else this checks nothing)
    assert seen["cut"], seen
    # its box stays on the screen: the page itself does not scroll sideways
    assert seen["right"] <= seen["screen"] + 1, seen
    m = re.search(r"^Cut to fit: columns (\d+)–(\d+) of (\d+) in view — scroll sideways",
                  seen["note"])
    assert m, seen
    assert int(m.group(1)) == 1 and int(m.group(2)) < 5 and int(m.group(3)) == seen["columns"] == 5
    # scrolled to its end, the note follows: the last column is in view
    table.evaluate("t => { (t.scrollWidth > t.clientWidth + 1 ? t : t.parentElement)"
                   ".scrollLeft = 1e6; }")
    note = page.locator("#roofline .cut-note")
    expect(note).to_have_text(re.compile(r"columns \d+–5 of 5 in view"))


# the legend's and the plot area's boxes in the figure titled `title`
LEGEND = """(title) => {
  const p = Array.from(document.querySelectorAll('#kvcache .js-plotly-plot'))
    .find(p => ((p.querySelector('.gtitle') || {}).textContent || '').startsWith(title));
  const box = e => { const r = e.getBoundingClientRect();
                     return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  return {legend: box(p.querySelector('.legend')), plot: box(p.querySelector('.nsewdrag')),
          title: box(p.querySelector('.gtitle')), figure: box(p),
          names: Array.from(p.querySelectorAll('.legendtext')).map(e => e.textContent)};
}"""


@pytest.mark.sections("kvcache")
def test_a_phone_shows_the_kv_cache_time_legend_above_its_lines(page, base_url):
    page.set_viewport_size(PHONE)
    page.goto(base_url + "/#kvcache")
    title = page.locator("#kvcache .gtitle").filter(has_text=re.compile("^Measured time per step"))
    expect(title).to_be_attached()
    title.scroll_into_view_if_needed()
    seen = page.evaluate(LEGEND, "Measured time per step")
    assert seen["names"] == ["without cache", "with cache"], seen
    legend, plot, head, fig = seen["legend"], seen["plot"], seen["title"], seen["figure"]
    # above the plot area, under the title, inside the figure's width
    assert legend["bottom"] <= plot["top"] + 1, seen
    assert legend["top"] >= head["bottom"] - 1, seen
    assert fig["left"] - 1 <= legend["left"] and legend["right"] <= fig["right"] + 1, seen
