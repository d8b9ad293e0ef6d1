"""The embeddings and positions sections in real Chromium: the numbers on screen are the
pipeline's, every control round-trips through the URL (a reload shows the same), bad input is
shown at its field. Few page loads: the whole page draws ~20 figures."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.embedding_space import analogy, cosine_neighbours, unit_rows
from pipeline.positions import word_order_differences

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("embeddings", "positions")

PROMPT = "Elizabeth smiled at Mr. Darcy."


def test_embeddings_neighbours_analogies_and_url(page, model, page_errors):
    tok = model.tokenizer
    page.goto("/?prompt=" + PROMPT + "&emb_k=4&open=emb-map,emb-analogy")   # both disclosures
    section = page.locator("#embeddings")
    # neighbours: the pipeline's ids and cosine similarities
    rows = section.get_by_role("table", name="Nearest neighbours").locator("tbody tr")
    expect(rows).to_have_count(len(set(tok.encode(PROMPT))))
    unit = unit_rows(model.params["wte"])
    darcy = tok.encode(" Darcy")[0]
    nids, sims = cosine_neighbours(unit, unit[darcy], 4, exclude=(darcy,))
    row = rows.filter(has=page.get_by_role("cell", name=str(darcy), exact=True))
    expect(row).to_contain_text(f"{nids[0]} {sims[0]:.3f}")
    expect(row).to_contain_text(f"{nids[3]} {sims[3]:.3f}")
    expect(section.locator(".plot .main-svg").nth(1)).to_be_attached()   # the vocabulary map
    page.get_by_role("slider", name="Neighbours per token").fill("2")
    expect(page).to_have_url(re.compile(r"emb_k=2"))
    expect(row.locator(".nb")).to_have_count(2)

    # an analogy typed in: the pipeline's results, in order, with their scores
    page.get_by_label("Word a", exact=True).fill("sister")
    page.get_by_label("minus word b", exact=True).fill("she")
    page.get_by_label("plus word c", exact=True).fill("he")
    page.get_by_label("Word you expect (optional)", exact=True).fill("brother")
    page.get_by_role("button", name="Compute").click()
    expect(page).to_have_url(re.compile(r"emb_a=sister.*emb_b=she.*emb_c=he.*emb_expect=brother"))
    # Each box asks as it is typed in: on the way (b changed, c not yet) two words are the same,
    # which the server refuses with a 422. Those are the only console errors so far.
    assert all("422" in e for e in page_errors)
    page_errors.clear()
    a, b, c = (tok.encode(" " + w)[0] for w in ("sister", "she", "he"))
    ids, scores = analogy(unit, a, b, c, 8)
    results = page.get_by_role("table", name="Analogy results").locator("tbody tr")
    expect(results).to_have_text([re.compile(rf"^{n}\s*.*\s*{i}\s*{s:.3f}$")
                                  for n, (i, s) in enumerate(zip(ids, scores, strict=True), 1)])
    expect(page.locator("#analogy-verdict")).to_contain_text(
        "This one works" if tok.decode([int(ids[0])]) == " brother" else "A poor result")

    # state survives a reload
    page.reload()
    expect(page.get_by_role("slider", name="Neighbours per token")).to_have_value("2")
    expect(page.get_by_label("Word a", exact=True)).to_have_value("sister")
    expect(results.first).to_contain_text(f"{scores[0]:.3f}")

    # an example, then a word that is not one token (its 422 is the only console error)
    page.get_by_role("button", name="father − man + woman").click()
    expect(page.get_by_label("Word a", exact=True)).to_have_value("father")
    expect(page.locator("#analogy-verdict")).to_contain_text("A poor result")
    expect(page).to_have_url(re.compile(r"emb_a=father"))
    assert page_errors == []
    page.get_by_label("plus word c", exact=True).fill("queen")
    page.get_by_role("button", name="Compute").click()
    expect(page.locator("#error-emb_c")).to_contain_text("“queen” is not a single token")
    expect(page.get_by_label("plus word c", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("table", name="Analogy results")).to_have_count(0)
    assert all("422" in e for e in page_errors)


def test_positions_controls_show_the_engines_numbers(page, model, page_errors):
    page.goto("/?prompt=" + PROMPT + "&open=pos-sinusoid,pos-rope,pos-order")
    # sinusoid base: slider and presets
    slider = page.get_by_role("slider", name="Sinusoid base")
    expect(slider).to_have_value("10000")
    slider.fill("2500")
    expect(page).to_have_url(re.compile(r"pos_base=2500"))
    expect(page.locator("#positions .gtitle", has_text="base 2,500")).to_be_attached()

    # RoPE: one choice at a time, each waiting for its answer, as a person would
    for name, value, param in (("RoPE layer", "3", "pos_layer"), ("RoPE head", "6", "pos_head"),
                               ("RoPE query token", "5", "pos_q"),
                               ("RoPE key token", "1", "pos_k")):
        page.get_by_label(name).select_option(value)
        expect(page).to_have_url(re.compile(rf"{param}={value}"))
    _, cache = model.run_with_cache(model.tokenizer.encode(PROMPT))
    score = cache["blocks.3.attn.hook_attn_scores"][6, 5, 1]
    expect(page.locator("#rope-model-score")).to_have_text(f"{score:.6f}")
    real = page.get_by_role("table", name="Same distance").locator("tbody tr.top")
    expect(real).to_have_text(re.compile(rf"^\s*5\s*1\s*{score:.6f}\s*$"))

    # word order: the engine's per-layer differences
    a, b = "the man loved the woman.", "the woman loved the man."
    page.get_by_label("First sentence").fill(a)
    page.get_by_label("Second sentence").fill(b)
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(re.compile(r"pos_a=the%20man.*pos_b=the%20woman"))
    # Each box asks as it is typed in: with the first sentence changed and the second not yet,
    # the two are not made of the same tokens, a 422. Those are the only console errors so far.
    assert all("422" in e for e in page_errors)
    page_errors.clear()
    ta, tb = model.tokenizer.encode(a), model.tokenizer.encode(b)
    _, with_pos, _, _ = word_order_differences(model, ta, tb, True)
    _, without, _, _ = word_order_differences(model, ta, tb, False)
    rows = page.get_by_role("table", name="Word order differences").locator("tbody tr")
    expect(rows).to_have_count(model.config.n_layers + 1)
    expect(rows.nth(1)).to_contain_text(f"{with_pos[1][1]:.2e}")
    expect(rows.nth(1)).to_contain_text(f"{without[1][1]:.2e}")

    # every choice survives a reload
    page.reload()
    expect(page.get_by_role("slider", name="Sinusoid base")).to_have_value("2500")
    for name, value in (("RoPE layer", "3"), ("RoPE head", "6"), ("RoPE query token", "5"),
                        ("RoPE key token", "1")):
        expect(page.get_by_label(name)).to_have_value(value)
    expect(page.get_by_label("Second sentence")).to_have_value(b)
    expect(page.locator("#rope-model-score")).to_have_text(f"{score:.6f}")

    assert page_errors == []
    # presets and refusals (a refusal is a 422: the browser logs it)
    page.locator("#positions").get_by_role("button", name="100", exact=True).click()
    expect(page).to_have_url(re.compile(r"pos_base=100(&|#|$)"))
    # a figure far off screen is redrawn when it nears the screen, as a reader scrolls to it
    page.get_by_role("img", name="Heatmap of sinusoidal positional encodings with base 100") \
        .scroll_into_view_if_needed()
    expect(page.locator("#positions .gtitle", has_text="base 100")).to_be_attached()
    # only the pairs attention makes are offered: keys up to the query token (5), queries from
    # the key token (1) on; a key after the query is refused by the server (test_web_positions)
    keys = page.get_by_label("RoPE key token").locator("option")
    expect(keys).to_have_text([re.compile(rf"^{i}: ") for i in range(6)])
    n = len(model.tokenizer.encode(PROMPT))
    queries = page.get_by_label("RoPE query token").locator("option")
    expect(queries).to_have_text([re.compile(rf"^{i}: ") for i in range(1, n)])
    page.get_by_label("Second sentence").fill("the woman loved a man.")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#error-pos_b")).to_contain_text("must be made of the same tokens")
    assert all("422" in e for e in page_errors)
