"""A control's answer redraws what changed and nothing else: a figure whose JSON is the one
already drawn is left alone, a figure far below the screen is redrawn only when it nears it, and
a "Go deeper" disclosure the swap puts back open changes no page state (static/figures.js init,
static/deeper.js toggle)."""
import re

import pytest
from playwright.sync_api import expect

from web.sections import batching

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("batching")

COUNT_DRAWS = """() => {
  window.__draws = {};
  const react = Plotly.react;
  Plotly.react = function (el) {
    const name = (el.getAttribute('aria-label') || '').split(' of ')[0];
    window.__draws[name] = (window.__draws[name] || 0) + 1;
    el.setAttribute('data-test-draws', window.__draws[name]);
    return react.apply(this, arguments);
  };
  window.__openWrites = 0;
  new MutationObserver(records => { window.__openWrites += records.length; })
    .observe(document.querySelector('#state input[name="open"]'), {attributes: true});
}"""


def test_a_slider_redraws_only_the_figures_that_changed(page, model, live_app):
    page.goto("/?bat_slots=3&open=bat-requests,bat-paged#batching")
    section = page.locator("#batching")
    expect(section.locator(".plot:has(.main-svg)")).to_have_count(4)
    page.wait_for_load_state("networkidle")
    page.evaluate(COUNT_DRAWS)
    section.get_by_role("slider", name="Slots in a batch").fill("2")
    _, _, runs = batching.schedules(live_app.extensions["explainer"].default_model, 6, 2, 0)
    expect(section.locator("#bat-verdict")).to_contain_text(
        f"{runs['continuous'].throughput:.1f} tokens/s")
    expect(page).to_have_url(re.compile(r"bat_slots=2"))
    page.wait_for_load_state("networkidle")
    draws = page.evaluate("() => window.__draws")
    # both timelines changed (a slot fewer) and are drawn once each; the measured step costs do
    # not depend on the queue: the same figure, not drawn again (it was: forEach(draw) passed
    # each figure's index as `force`, so every figure after the first was redrawn)
    assert draws.get("Timeline") == 2, draws
    assert "Chart: measured milliseconds" not in draws, draws
    # the KV chart changed too, but lies far below the window (static/figures.js NEAR_PX): it
    # keeps its drawing until it nears the screen, then is drawn once
    kv = section.locator('[aria-label^="Chart: KV bytes"]')
    below = kv.evaluate("el => el.getBoundingClientRect().top - window.innerHeight")
    assert below > 300, below
    assert "Chart: KV bytes" not in draws, draws
    kv.scroll_into_view_if_needed()
    expect(kv).to_have_attribute("data-test-draws", "1")
    page.wait_for_load_state("networkidle")
    assert page.evaluate("() => window.__draws")["Chart: KV bytes"] == 1
    # the chart kept as it was is still whole: its title and axis titles lie over its own box
    # (they fell below it, over the table that follows, when the kept element lost Plotly's class)
    chart = section.locator('[aria-label^="Chart: measured milliseconds"]')
    expect(chart).to_have_class(re.compile(r"\bjs-plotly-plot\b"))
    box = chart.bounding_box()
    for text in ("Time of one decode step", "time (ms)", "sequences in the batch (rows)"):
        label = chart.locator("text", has_text=text).first.bounding_box()
        assert box["y"] <= label["y"] \
            and label["y"] + label["height"] <= box["y"] + box["height"], (text, label, box)
    # the two disclosures inside the part came back open: the page's `open` was not rewritten
    assert page.evaluate("() => window.__openWrites") == 0
    expect(page.locator('#state input[name="open"]')).to_have_value("bat-requests,bat-paged")
