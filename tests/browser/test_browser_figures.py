"""Every figure of the page draws in real Chromium with the plotly.js the page loads (npm's
cartesian bundle): each section scrolled into view, each of its `.plot[data-figure]` gets
Plotly's SVG, every trace type it asks for is one the bundle has, and no error is logged."""
import json

from playwright.sync_api import expect

from web.core.registry import SECTIONS


def test_every_figure_draws(page, page_errors, dialogs):
    goto = getattr(page, "goto_first_screen", page.goto)     # the page as it first arrives
    response = goto("/")
    assert response.status == 200
    assert response.url.endswith("/")
    scripts = [s.get_attribute("src") for s in page.locator("head script").all()]
    assert any(s.startswith("/assets/") and s.endswith("/plotly.min.js") for s in scripts)
    page.wait_for_function("() => typeof Plotly !== 'undefined'")
    bundle = set(page.evaluate("() => Object.keys(Plotly.PlotSchema.get().traces)"))
    assert "scatter" in bundle and "scattergl" not in bundle     # the cartesian bundle

    drawn = 0
    for s in SECTIONS:
        section = page.locator(f"section#{s.id}")
        for _ in range(3):
            try:
                section.scroll_into_view_if_needed(timeout=10_000)
                break
            except Exception:         # the placeholder was swapped for its section meanwhile
                continue
        expect(page.locator(f"section#{s.id}[data-lazy]")).to_have_count(0)
        plots = section.locator(".plot[data-figure]")
        for i in range(plots.count()):
            plot = plots.nth(i)
            if plot.evaluate("el => !!el.closest('details:not([open])')"):
                # a figure in a closed disclosure is drawn when a reader opens it, not before
                expect(plot.locator(".main-svg")).to_have_count(0)
                while plot.evaluate("el => !!el.closest('details:not([open])')"):
                    plot.locator("xpath=ancestor::details[not(@open)][last()]/summary").click()
            expect(plot.locator(".main-svg").first).to_be_attached()
            asked = {t.get("type", "scatter")
                     for t in json.loads(plot.get_attribute("data-figure"))["data"]}
            assert asked <= bundle, (s.id, asked - bundle)
            drawn += 1
    assert drawn >= 10
    assert page_errors == [] and dialogs == []
