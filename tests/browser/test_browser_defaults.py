"""The defaults show each section's lesson, and the case that inverts it is one click away: in
Chromium, tiling's "try 8 × 8" and quantization's "try 4 bits" change the
state, the address and the numbers, and the page says why."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.tiling import plain_traffic, tiled_traffic
from web.model_state.explainer import AUSTEN_PROMPTS


def region(page, title):
    return page.get_by_role("region", name=re.compile(r"^\d+ " + re.escape(title)))


@pytest.mark.sections("tiling")
def test_tiling_default_saves_and_smaller_tiles_are_one_click_away(page, model, page_errors):
    page.goto("/?open=til-traffic")
    section = region(page, "Attention tiling")
    T = len(model.tokenizer.encode_ordinary(AUSTEN_PROMPTS[0]))
    hd = model.config.d_model // model.config.n_heads
    plain = plain_traffic(T, hd).total * 4
    expect(section.get_by_role("slider", name="Query tile")).to_have_value("16")
    traffic = section.get_by_role("table", name="Traffic to slow memory")
    expect(traffic).to_contain_text(f"{tiled_traffic(T, hd, 16, 16).total * 4:,}")
    assert tiled_traffic(T, hd, 16, 16).total * 4 < plain
    section.get_by_role("button", name="try 8 × 8").click()
    expect(page).to_have_url(re.compile(r"til_bq=8&til_bk=8|til_bk=8&til_bq=8"))
    expect(section.get_by_role("slider", name="Query tile")).to_have_value("8")
    expect(section.locator("#tiling-more")).to_contain_text(
        f"Here tiling moves more: {tiled_traffic(T, hd, 8, 8).total * 4:,} bytes against "
        f"{plain:,}.")
    section.get_by_role("button", name="try 16 × 16").click()
    expect(section.get_by_role("slider", name="Key tile")).to_have_value("16")
    assert page_errors == []


@pytest.mark.sections("quantization")
def test_quantization_opens_at_3_bits_and_4_bits_are_one_click_away(page, page_errors):
    page.goto("/")
    section = region(page, "Quantization")
    bits = section.get_by_label("Bits (grouped scheme)")
    expect(bits).to_have_value("3")
    headline = section.locator("#q-headline")
    expect(headline).to_contain_text("(int3-g32)")
    section.get_by_role("button", name="try 4 bits").click()
    expect(bits).to_have_value("4")
    expect(headline).to_contain_text("(int4-g32)")
    expect(page).to_have_url(re.compile(r"q_bits=4[^#]*#quantization$"))
    expect(section.get_by_role("button", name="try 3 bits")).to_be_visible()
    expect(section.get_by_text("At 4 bits this model hardly changes")).to_be_visible()
    assert page_errors == []
