"""The attention section in real Chromium: clicking a token, choosing a layer and a head, the
URL keeping every choice; the weights on screen are the model's."""
import re

from playwright.sync_api import expect

from pipeline.attention_analysis import attention_row

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
    page.go_back()
    page.locator("#attention").scroll_into_view_if_needed()    # reloaded: computed when reached
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
    grid = page.get_by_role("img", name=re.compile("Attention patterns of all"))
    expect(grid.locator(".main-svg").first).to_be_attached()
    layer, head = 1, 5
    # the pixel of a visible (unmasked) cell of that head's picture, from Plotly's own axes
    n = len(model.tokenizer.encode_ordinary(PROMPT))        # short: one cell per token
    x, y = grid.evaluate("""(el, [layer, head, n]) => {
        const H = el._fullLayout.xaxis.tickvals.length, t = el.data[layer * H + head];
        const xa = el._fullLayout.xaxis, ya = el._fullLayout.yaxis;
        return [xa._offset + xa.l2p(t.x0 + 1), ya._offset + ya.l2p(t.y0 + n - 2)];
    }""", [layer, head, n])
    grid.click(position={"x": x, "y": y})
    expect(page).to_have_url(re.compile(r"att_layer=1&att_head=5"))
    expect(page.get_by_label("Attention layer")).to_have_value("1")
    expect(page.get_by_label("Attention head")).to_have_value("5")
    expect(page.get_by_role("list", name="Attention from the clicked token").locator(".pct")) \
        .to_have_text(percents(attention_row(pattern(model, 1), 5, n - 1)))
