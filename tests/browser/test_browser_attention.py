"""The attention section in real Chromium: clicking a token, choosing a layer and a head, the
URL keeping every choice; the weights on screen are the model's."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.attention_analysis import attention_row

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("attention")

PROMPT = "Mr. Darcy bowed to Elizabeth, and Elizabeth smiled at Mr. Darcy."


def pattern(model, layer):
    _, cache = model.run_with_cache(model.tokenizer.encode_ordinary(PROMPT))
    return cache[f"blocks.{layer}.attn.hook_pattern"]


def percents(weights):
    return ["%.1f%%" % (100 * float(w)) for w in weights]


def test_click_a_token_then_change_head_and_layer(page, model, page_errors):
    page.goto("/?open=att-softmax&prompt=" + PROMPT)         # scores and weights shown
    row = page.get_by_role("list", name="Attention from the clicked token")
    chips = row.get_by_role("button")
    n = len(model.tokenizer.encode_ordinary(PROMPT))
    expect(chips).to_have_count(n)
    chips.nth(6).click()                                         # ' Elizabeth', the first one
    expect(page).to_have_url(re.compile(r"att_token=6"))
    expect(chips.nth(6)).to_have_attribute("aria-pressed", "true")
    pct = row.locator(".pct")
    masked = ["masked"] * (n - 7)
    expect(pct).to_have_text(percents(attention_row(pattern(model, 3), 0, 6)) + masked)

    page.get_by_label("Attention head").select_option("mean")
    expect(page).to_have_url(re.compile(r"att_head=mean"))
    expect(pct.first).to_have_text(percents(attention_row(pattern(model, 3), None, 6))[0])
    expect(page.get_by_text("Choose one head to see its scores")).to_be_visible()

    page.get_by_label("Attention layer").select_option("1")
    expect(page).to_have_url(re.compile(r"att_layer=1"))
    expect(pct).to_have_text(percents(attention_row(pattern(model, 1), None, 6)) + masked)
    expect(page.locator("#attention .plot .main-svg").first).to_be_attached()
    assert page_errors == []


def test_choices_round_trip_through_the_url(page, model):
    page.goto(f"/?prompt={PROMPT}&att_layer=2&att_head=5&att_token=11&open=att-softmax")
    expect(page.get_by_label("Attention layer")).to_have_value("2")
    expect(page.get_by_label("Attention head")).to_have_value("5")
    table = page.get_by_role("table", name="Softmax of the clicked token's scores")
    expect(table.locator("tbody tr")).to_have_count(12)
    p = pattern(model, 2)[5, 11]
    expect(table.locator("tbody tr").nth(3).locator("td").last).to_have_text("%.4f" % p[3])
    row = page.get_by_role("list", name="Attention from the clicked token")
    row.get_by_role("button").nth(4).click()
    expect(page).to_have_url(re.compile(r"att_layer=2&att_head=5&att_token=4"))
    expect(table.locator("tbody tr")).to_have_count(5)
    page.reload()
    expect(page.get_by_label("Attention head")).to_have_value("5")
    expect(table.locator("tbody tr")).to_have_count(5)
    # the page keeps no history cache (htmx refreshOnHistoryMiss): a Back loads the page again,
    # after go_back has returned; its sections are computed when reached (or at once, the
    # address's fragment naming one: a scroll could find the placeholder as it is swapped out)
    with page.expect_event("load"):
        page.go_back()
    page.load_sections("attention")
    expect(table.locator("tbody tr")).to_have_count(12)


def test_a_new_prompt_forgets_the_clicked_token(page, model):
    page.goto(f"/?prompt={PROMPT}&att_token=3")
    page.get_by_label("Prompt", exact=True).fill("Emma smiled")
    page.locator("#attention").scroll_into_view_if_needed()    # recomputed when reached
    n = len(model.tokenizer.encode_ordinary("Emma smiled"))
    chips = page.get_by_role("list", name="Attention from the clicked token").get_by_role("button")
    expect(chips).to_have_count(n)
    expect(chips.last).to_have_attribute("aria-pressed", "true")
    expect(page).not_to_have_url(re.compile(r"att_token"))


def test_clicking_a_picture_of_the_grid_shows_that_head(page, model):
    page.goto("/?prompt=" + PROMPT)
    grid = page.get_by_role("group", name=re.compile("Attention patterns of all"))
    L, H = model.config.n_layers, model.config.n_heads
    pictures = grid.get_by_role("button")
    expect(pictures).to_have_count(L * H)
    chosen = grid.locator('[aria-pressed="true"]')
    expect(chosen).to_have_count(1)                 # the default: the last layer, head 0
    expect(chosen).to_have_accessible_name(f"layer {L - 1}, head 0")
    grid.get_by_role("button", name="layer 1, head 5", exact=True).click()
    expect(page).to_have_url(re.compile(r"att_layer=1&att_head=5"))
    expect(page.get_by_label("Attention layer")).to_have_value("1")
    expect(page.get_by_label("Attention head")).to_have_value("5")
    n = len(model.tokenizer.encode_ordinary(PROMPT))
    expect(page.get_by_role("list", name="Attention from the clicked token").locator(".pct")) \
        .to_have_text(percents(attention_row(pattern(model, 1), 5, n - 1)))
    # the chosen picture is marked: outlined in the accent colour and labelled, and only it
    picked = grid.get_by_role("button", name="layer 1, head 5", exact=True)
    expect(picked).to_have_attribute("aria-pressed", "true")
    expect(picked).to_contain_text("chosen")
    expect(chosen).to_have_count(1)
    assert picked.evaluate("el => getComputedStyle(el).outlineWidth") == "3px"
    assert grid.get_by_role("button", name="layer 1, head 4", exact=True).evaluate(
        "el => getComputedStyle(el).outlineStyle") == "none"
    # choosing a head with its select moves the mark too
    page.get_by_label("Attention head").select_option("2")
    expect(page).to_have_url(re.compile(r"att_head=2"))
    expect(chosen).to_have_accessible_name("layer 1, head 2")


# (viewport width, most pictures in a row, fewest px a picture) at a laptop and on a phone
SIZES = [(1280, 8, 90), (390, 4, 70)]


def test_the_pictures_of_every_head_are_readable_on_a_laptop_and_a_phone(browser, base_url,
                                                                          model):
    """Each picture was about 30 px wide; now at least 70 px on a phone (four a row) and 90 px
    on a laptop (a layer's heads in one row), and the section stays inside the window."""
    for width, per_row, least in SIZES:
        context = browser.new_context(base_url=base_url, viewport={"width": width, "height": 900})
        try:
            page = context.new_page()
            page.goto("/?prompt=" + PROMPT)
            section = page.locator("#attention")
            section.evaluate("el => el.scrollIntoView()")
            layer = section.get_by_role("group", name="layer 0", exact=True)
            pictures = layer.get_by_role("button")
            expect(pictures).to_have_count(model.config.n_heads)
            boxes = [pictures.nth(h).locator("img").bounding_box()
                     for h in range(model.config.n_heads)]
            rows = sorted({round(b["y"]) for b in boxes})
            assert all(b["width"] >= least and abs(b["width"] - b["height"]) < 1 for b in boxes), \
                (width, boxes)
            assert max(sum(1 for b in boxes if round(b["y"]) == y) for y in rows) == per_row
            # the section fits the window: nothing in it sticks out or scrolls sideways
            assert section.evaluate("el => el.getBoundingClientRect().right") <= width
            assert section.evaluate("el => el.scrollWidth <= el.clientWidth")
        finally:
            context.close()
