"""The attention-tiling section in Chromium: the tile sliders change the counted traffic to the
formula's value, and the state survives a reload."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.tiling import tiled_traffic

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("tiling", "roofline")

PROMPT = "It is a truth universally acknowledged, that a single man"


def test_tile_sliders_update_the_traffic_and_round_trip(page, model, page_errors):
    T = len(model.tokenizer.encode(PROMPT))
    page.goto("/?prompt=" + PROMPT)
    section = page.locator("#tiling")
    section.get_by_role("slider", name="Query tile").fill("4")
    expect(page).to_have_url(re.compile(r"til_bq=4"))
    section.get_by_role("slider", name="Key tile").fill("6")
    expect(page).to_have_url(re.compile(r"til_bk=6"))
    # the traffic table is under Go deeper: opening it puts it in the URL
    section.get_by_text("Go deeper: bytes moved").click()
    expect(page).to_have_url(re.compile(r"open=til-traffic"))
    traffic = section.get_by_role("table", name="Traffic to slow memory")
    expect(traffic).to_contain_text(f"{tiled_traffic(T, 32, 4, 6).total * 4:,}")
    expect(section.locator("#tiling-check")).to_contain_text("the same result")
    section.get_by_label("Query head").select_option("3")
    expect(section.locator("#tiling-check")).to_contain_text("query head 3")
    page.reload()                                     # the disclosure comes back open
    expect(section.locator("#deeper-til-traffic")).to_have_attribute("open", "")
    expect(section.get_by_role("slider", name="Query tile")).to_have_value("4")
    expect(section.get_by_label("Query head")).to_have_value("3")
    expect(traffic).to_contain_text(f"{tiled_traffic(T, 32, 4, 6).total * 4:,}")
    expect(section.locator(".plot .main-svg").first).to_be_attached()
    assert page_errors == []


def test_roofline_model_and_batch_round_trip(page, page_errors):
    from pipeline.published import published
    page.goto("/")
    section = page.locator("#roofline")
    section.get_by_label("Model", exact=True).select_option("Llama 3.1 405B")
    costs = section.locator("#roofline-costs")
    expect(costs).to_contain_text(f"{published('Llama 3.1 405B').reported_params:,} parameters")
    section.get_by_role("slider", name="Batch size").fill("64")
    expect(costs).to_contain_text("a step of 64 sequences")
    expect(page).to_have_url(re.compile(r"rf_batch=64"))
    page.reload()
    expect(section.get_by_label("Model", exact=True)).to_have_value("Llama 3.1 405B")
    expect(costs).to_contain_text("a step of 64 sequences")
    expect(section.locator(".plot .main-svg").first).to_be_attached()
    assert page_errors == []
