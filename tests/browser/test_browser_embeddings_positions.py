"""The embeddings and positions sections in real Chromium: the numbers on screen are the
pipeline's, every control round-trips through the URL, bad input is shown at its field."""
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from pipeline.embedding_space import analogy, cosine_neighbours, unit_rows
from pipeline.positions import word_order_differences

PROMPT = "Elizabeth smiled at Mr. Darcy."


@pytest.fixture(autouse=True)
def patient_expect():
    """The whole page draws ~20 Plotly figures; on a loaded 2-core machine the browser can be
    busy for several seconds after a swap, so wait longer than Playwright's default 5 s."""
    expect.set_options(timeout=20_000)
    yield
    expect.set_options(timeout=5_000)


def test_neighbours_and_map_show_the_models_values(page, model, page_errors):
    page.goto("/?prompt=" + PROMPT + "&emb_k=4")
    section = page.locator("#embeddings")
    rows = section.get_by_role("table", name="Nearest neighbours").locator("tbody tr")
    ids = model.tokenizer.encode(PROMPT)
    expect(rows).to_have_count(len(set(ids)))
    unit = unit_rows(model.params["wte"])
    darcy = model.tokenizer.encode(" Darcy")[0]
    nids, sims = cosine_neighbours(unit, unit[darcy], 4, exclude=(darcy,))
    row = rows.filter(has=page.get_by_role("cell", name=str(darcy), exact=True))
    expect(row).to_contain_text(f"{nids[0]} {sims[0]:.3f}")
    expect(row).to_contain_text(f"{nids[3]} {sims[3]:.3f}")
    expect(section.locator(".plot .main-svg").nth(1)).to_be_attached()   # the vocabulary map
    slider = page.get_by_role("slider", name="Neighbours per token")
    slider.fill("2")
    expect(page).to_have_url(re.compile(r"emb_k=2"))
    expect(row.locator(".nb")).to_have_count(2)
    page.reload()
    expect(page.get_by_role("slider", name="Neighbours per token")).to_have_value("2")
    assert page_errors == []


def test_analogy_typed_words_and_examples(page, model):
    page.goto("/")
    tok = model.tokenizer
    page.get_by_label("Word a", exact=True).fill("sister")
    page.get_by_label("minus word b", exact=True).fill("she")
    page.get_by_label("plus word c", exact=True).fill("he")
    page.get_by_label("Word you expect (optional)", exact=True).fill("brother")
    page.get_by_role("button", name="Compute").click()
    expect(page).to_have_url(re.compile(r"emb_a=sister.*emb_b=she.*emb_c=he.*emb_expect=brother"))
    a, b, c = (tok.encode(" " + w)[0] for w in ("sister", "she", "he"))
    ids, sims = analogy(unit_rows(model.params["wte"]), a, b, c, 8)
    rows = page.get_by_role("table", name="Analogy results").locator("tbody tr")
    expect(rows).to_have_text([re.compile(rf"^{n}\s*.*\s*{i}\s*{s:.3f}$")
                               for n, (i, s) in enumerate(zip(ids, sims), 1)])
    expect(page.locator("#analogy-verdict")).to_contain_text(
        "This one works" if tok.decode([int(ids[0])]) == " brother" else "A poor result")
    page.reload()
    expect(page.get_by_label("Word a", exact=True)).to_have_value("sister")
    expect(rows.first).to_contain_text(f"{sims[0]:.3f}")
    page.get_by_role("button", name="father − man + woman").click()
    expect(page.get_by_label("Word a", exact=True)).to_have_value("father")
    expect(page.locator("#analogy-verdict")).to_contain_text("A poor result")
    expect(page).to_have_url(re.compile(r"emb_a=father"))


def test_a_word_that_is_not_one_token_is_refused_at_its_field(page):
    page.goto("/")
    field = page.get_by_label("plus word c", exact=True)
    field.fill("queen")
    page.get_by_role("button", name="Compute").click()
    expect(page.locator("#error-emb_c")).to_contain_text("“queen” is not a single token")
    expect(page.get_by_label("plus word c", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_role("table", name="Analogy results")).to_have_count(0)


def test_sinusoid_base_slider_and_presets_round_trip(page, page_errors):
    page.goto("/")
    slider = page.get_by_role("slider", name="Sinusoid base")
    expect(slider).to_have_value("10000")
    slider.fill("2500")
    expect(page).to_have_url(re.compile(r"pos_base=2500"))
    expect(page.locator("#positions .gtitle", has_text="base 2,500")).to_be_attached()
    page.reload()
    expect(page.get_by_role("slider", name="Sinusoid base")).to_have_value("2500")
    page.locator("#positions").get_by_role("button", name="100", exact=True).click()
    expect(page).to_have_url(re.compile(r"pos_base=100(&|$)"))
    expect(page.locator("#positions .gtitle", has_text="base 100")).to_be_attached()
    assert page_errors == []


def test_rope_choices_show_the_engines_score(page, model):
    page.goto("/?prompt=" + PROMPT)
    # one choice at a time, each waiting for its answer, as a person would
    for name, value, param in (("RoPE layer", "3", "pos_layer"), ("RoPE head", "6", "pos_head"),
                               ("RoPE query token", "5", "pos_q"),
                               ("RoPE key token", "1", "pos_k")):
        page.get_by_label(name).select_option(value)
        expect(page).to_have_url(re.compile(rf"{param}={value}"))
    expect(page).to_have_url(re.compile(r"pos_layer=3.*pos_head=6.*pos_q=5.*pos_k=1"))
    _, cache = model.run_with_cache(model.tokenizer.encode(PROMPT))
    score = cache["blocks.3.attn.hook_attn_scores"][6, 5, 1]
    expect(page.locator("#rope-model-score")).to_have_text(f"{score:.6f}")
    same = page.get_by_role("table", name="Same distance").locator("tbody tr")
    expect(same.first).to_contain_text(f"{score:.6f}"[:-1])
    page.reload()
    expect(page.get_by_label("RoPE head")).to_have_value("6")
    expect(page.locator("#rope-model-score")).to_have_text(f"{score:.6f}")
    page.get_by_label("RoPE key token").select_option("6")   # after the query: refused
    expect(page.locator("#error-pos_k")).to_contain_text("comes after the query token")


def test_word_order_numbers_are_the_engines(page, model):
    page.goto("/")
    a, b = "the man loved the woman.", "the woman loved the man."
    page.get_by_label("First sentence").fill(a)
    page.get_by_label("Second sentence").fill(b)
    page.get_by_role("button", name="Compare").click()
    expect(page).to_have_url(re.compile(r"pos_a=the%20man.*pos_b=the%20woman"))
    ta, tb = model.tokenizer.encode(a), model.tokenizer.encode(b)
    _, with_pos, _, _ = word_order_differences(model, ta, tb, True)
    _, without, _, _ = word_order_differences(model, ta, tb, False)
    rows = page.get_by_role("table", name="Word order differences").locator("tbody tr")
    expect(rows).to_have_count(model.config.n_layers + 1)
    expect(rows.nth(1)).to_contain_text(f"{with_pos[1][1]:.2e}")
    expect(rows.nth(1)).to_contain_text(f"{without[1][1]:.2e}")
    assert without[1][1] < 1e-5 < with_pos[1][1]
    page.get_by_label("Second sentence").fill("the woman loved a man.")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#error-pos_b")).to_contain_text("must be made of the same tokens")
    np.testing.assert_array_less(0, with_pos[-1][1])
