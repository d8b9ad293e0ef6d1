"""The transformer-block and logits sections in real Chromium: clicking parts, the selects and
the temperature slider, all in the URL; numbers on screen equal the pipeline's."""
import re
import urllib.parse

import numpy as np
import pytest
from playwright.sync_api import expect

from pipeline.model import softmax
from pipeline.sampling import entropy_bits, softmax_with_temperature
from pipeline.sizes import parameter_counts
from web.core.sampler_settings import DEFAULT_TEMPERATURE

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("block", "logits")

PROMPT = "Elizabeth could not help smiling at Mr. Darcy, and"


def goto(page, **params):
    page.goto("/?" + urllib.parse.urlencode({"prompt": PROMPT, **params},
                                            quote_via=urllib.parse.quote))


def test_clicking_block_parts_shows_their_tensors(page, model, page_errors):
    ids = model.tokenizer.encode_ordinary(PROMPT)
    T = len(ids)
    goto(page)
    block = page.locator("#block")
    caption = block.locator("#blk-tensor-caption")
    expect(caption).to_contain_text(f"blocks.0.attn.hook_q, shape [{T}, 8, 32]")
    block.get_by_role("button", name=re.compile(r"^attention pattern")).click()
    expect(caption).to_contain_text(f"blocks.0.attn.hook_pattern, shape [8, {T}, {T}]")
    expect(page).to_have_url(re.compile(r"blk_part=pattern"))
    expect(block.get_by_role("button", name=re.compile(r"^attention pattern"))).to_have_attribute(
        "aria-pressed", "true")
    block.get_by_label("Block", exact=True).select_option("2")
    expect(caption).to_contain_text("blocks.2.attn.hook_pattern")
    block.get_by_role("button", name=re.compile(r"^k \(keys\)")).click()
    expect(caption).to_contain_text("blocks.2.attn.hook_k")
    block.get_by_label("Head", exact=True).select_option("5")
    expect(caption).to_contain_text(f"blocks.2.attn.hook_k, shape [{T}, 2, 32]")
    expect(caption).to_contain_text("key/value head 1 (used by query head 5)")
    _, cache = model.run_with_cache(ids)
    k = cache["blocks.2.attn.hook_k"][:, 1]
    expect(block.locator("#blk-max")).to_have_text(f"{k.max():.4f}")
    expect(page).to_have_url(re.compile(r"blk_layer=2.*blk_part=k.*blk_head=5"))
    # the tensor's heatmap, as a reader opens it
    block.locator("#deeper-blk-tensor > summary").click()
    expect(block.locator("#deeper-blk-tensor .plot .main-svg").first).to_be_attached()
    page.reload()
    expect(caption).to_contain_text("blocks.2.attn.hook_k")
    expect(block.get_by_label("Head", exact=True)).to_have_value("5")
    assert page_errors == []


def test_parameter_count_and_logit_lens_match_the_pipeline(page, model):
    ids = model.tokenizer.encode_ordinary(PROMPT)
    goto(page, open="blk-params,blk-lens")                # both disclosures open
    block = page.locator("#block")
    total = parameter_counts(model.config).total
    expect(block.locator(".blk-total")).to_have_text(f"{total:,}")
    block.get_by_label("Token position for the logit lens").select_option("3")
    expect(page).to_have_url(re.compile(r"blk_pos=3"))
    rows = block.get_by_role("table", name="Logit lens: top guesses after each block").locator(
        "tbody tr")
    expect(rows).to_have_count(model.config.n_layers + 1)
    for k in (0, model.config.n_layers):
        p = softmax(model.forward(ids, n_layers=k)[3])
        top = int(np.argmax(p))
        expect(rows.nth(k).locator("td").first).to_contain_text(
            f"#{top} {100 * p[top]:.1f}%")


def test_temperature_slider_reshapes_the_real_distribution(page, model, page_errors):
    logits = model.forward(model.tokenizer.encode_ordinary(PROMPT))[-1]
    goto(page, open="lg-table")                          # the table's disclosure open
    section = page.locator("#logits")
    rows = section.get_by_role("table", name="Highest-scoring next tokens").locator("tbody tr")
    expect(rows.first.locator("td").nth(2)).to_have_text(str(int(np.argmax(logits))))
    default = softmax_with_temperature(logits, DEFAULT_TEMPERATURE)   # the section's default
    expect(section.locator("#lg-top-p")).to_have_text(f"{100 * default.max():.2f}%")
    section.get_by_role("slider", name="Temperature").fill("0.5")
    p = softmax_with_temperature(logits, 0.5)
    expect(section.locator("#lg-top-p")).to_have_text(f"{100 * p.max():.2f}%")
    expect(section.locator("#lg-entropy")).to_have_text(f"{entropy_bits(p):.2f}")
    expect(page).to_have_url(re.compile(r"lg_temp=0.5"))
    section.get_by_role("slider", name="Temperature").fill("0")
    expect(section.locator("#lg-top-p")).to_have_text("100.00%")
    page.reload()
    expect(section.get_by_role("slider", name="Temperature")).to_have_value("0")
    expect(section.locator("#lg-entropy")).to_have_text("0.00")
    assert page_errors == []


def test_confident_example_is_one_click_away(page, model):
    goto(page, open="lg-confident")                      # the examples' disclosure open
    page.get_by_role("link", name=re.compile("Try the most confident one")).click()
    expect(page).to_have_url(re.compile(r"prompt=the(%20|\+)advice"))
    logits = model.forward(model.tokenizer.encode_ordinary("the advice of Lady Catherine de"))
    p = softmax(logits[-1])                              # the link sets T = 1
    expect(page.locator("#lg-top-p")).to_have_text(f"{100 * p.max():.2f}%")
    expect(page.get_by_label("Prompt", exact=True)).to_have_value(
        "the advice of Lady Catherine de")
