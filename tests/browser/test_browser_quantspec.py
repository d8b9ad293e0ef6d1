"""The quantization and speculative-decoding sections in real Chromium: the numbers on screen
are the pipeline's (recomputed here), controls change them, state round-trips through the URL,
a bad value gets its message next to the control."""
import os
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from pipeline import load_model, quantize
from pipeline.speculative import speculative_generate
from web.sections.quantization import HELDOUT_PATH, HELDOUT_WINDOWS

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("quantization", "speculative")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT = "Elizabeth was very much surprised"


def quantization(page):
    return page.get_by_role("region", name=re.compile(r"^\d+ Quantization"))


def speculative(page):
    return page.get_by_role("region", name=re.compile(r"^\d+ Speculative decoding"))


def scheme_cells(page, scheme):
    row = quantization(page).get_by_role("table", name="Quantized models compared") \
        .get_by_role("row", name=re.compile("^" + re.escape(scheme) + " "))
    return row.locator("td")


def heldout_perplexity(model, scheme):
    text = open(HELDOUT_PATH, encoding="utf-8").read()
    windows = quantize.heldout_windows(model.tokenizer, text, HELDOUT_WINDOWS, 256)
    quantized = quantize.quantize_model(model, scheme).model
    return quantize.heldout_perplexity(quantized, windows).perplexity


def test_quantization_numbers_are_the_pipelines(page, model, page_errors):
    page.goto(f"/?prompt={PROMPT}&q_group=64&q_bits=4&open=q-measured#quantization")
    expect(quantization(page).locator("#deeper-q-measured")).to_have_attribute("open", "")
    s = quantize.int4(64)
    cells = scheme_cells(page, "int4-g64")
    expect(cells.nth(0)).to_have_text(f"{quantize.quantize_model(model, s).nbytes:,} B")
    expect(cells.nth(5)).to_have_text(f"{heldout_perplexity(model, s):.3f}")
    expect(quantization(page).locator(".plot .main-svg").first).to_be_attached()

    quantization(page).get_by_label("Group size").select_option("128")
    expect(page).to_have_url(re.compile(r"q_group=128"))
    s = quantize.int4(128)
    cells = scheme_cells(page, "int4-g128")
    expect(cells.nth(0)).to_have_text(f"{quantize.quantize_model(model, s).nbytes:,} B")
    expect(cells.nth(5)).to_have_text(f"{heldout_perplexity(model, s):.3f}")
    # the disclosure opened from the URL stays open when the group size redraws its part
    calc = quantization(page).get_by_role("table", name="Weight memory of published models")
    expect(calc.get_by_role("columnheader", name="INT4 (g = 128)")).to_be_visible()
    expect(page).to_have_url(re.compile(r"open=q-measured"))

    page.reload()                                     # the state comes back from the URL
    expect(quantization(page).get_by_label("Group size")).to_have_value("128")
    expect(scheme_cells(page, "int4-g128").nth(0)).to_have_text(
        f"{quantize.quantize_model(model, s).nbytes:,} B")
    assert page_errors == []


def test_opening_the_disclosure_runs_each_scheme_on_the_prompt(page, model, page_errors):
    """Closed, the schemes are not run on the prompt; opening the disclosure asks for them, and
    the table holds the quantized model's own numbers."""
    page.goto(f"/?prompt={PROMPT}#quantization")
    box = quantization(page)
    expect(box.get_by_label("Group size")).to_be_visible()
    expect(box.get_by_role("table", name="Quantized models compared")).to_have_count(0)
    box.get_by_text("the two schemes measured, greedy texts").click()
    ids = model.tokenizer.encode_ordinary(PROMPT)
    qm = quantize.quantize_model(model, quantize.INT8).model
    change = np.abs(qm.forward(ids) - model.forward(ids)).max()
    expect(scheme_cells(page, "int8").nth(2)).to_have_text(f"{change:.4f}")
    expect(box.get_by_label("Greedy text of int8")).to_be_visible()
    expect(page).to_have_url(re.compile(r"open=q-measured"))
    assert page_errors == []


def test_pick_a_matrix(page, model):
    page.goto("/#quantization")
    quantization(page).get_by_label("Matrix").select_option("blocks.2.attn.w_q")
    expect(page).to_have_url(re.compile(r"q_matrix=blocks\.2\.attn\.w_q"))
    w = model.params["blocks"][2]["attn"]["w_q"]
    column = int(np.abs(w).max(0).argmax())
    expect(quantization(page).get_by_text(f"channel {column} of a 256 × 256 matrix")) \
        .to_be_visible()


def spec_run(model, prompt, gamma, tokens, mode, seed):
    draft = load_model(os.path.join(ROOT, "models", "austen-draft"))
    ids = model.tokenizer.encode_ordinary(prompt)
    return speculative_generate(model, draft, ids, tokens, gamma,
                                1.0 if mode == "sample" else 0.0, np.random.default_rng(seed))


def test_speculative_numbers_are_the_pipelines(page, model, page_errors):
    page.goto(f"/?prompt={PROMPT}&sp_mode=greedy&sp_gamma=3&sp_tokens=12#speculative")
    run = spec_run(model, PROMPT, 3, 12, "greedy", 0)
    section = speculative(page)
    expect(section.locator("#sp-acceptance")).to_have_text(f"{run.acceptance_rate:.3f}")
    expect(section.locator("#sp-tokens-per-pass")).to_have_text(f"{run.tokens_per_pass:.2f}")
    expect(section.get_by_text("Token for token the target's own greedy text.")).to_be_visible()
    expect(section.get_by_role("list", name=re.compile(r"^Round \d+:"))).to_have_count(
        len(run.rounds))

    section.get_by_role("slider", name="Draft tokens per round (γ)").fill("5")
    expect(page).to_have_url(re.compile(r"sp_gamma=5"))
    run = spec_run(model, PROMPT, 5, 12, "greedy", 0)
    expect(section.locator("#sp-acceptance")).to_have_text(f"{run.acceptance_rate:.3f}")
    section.get_by_label("Decoding", exact=True).select_option("sample")
    expect(page).not_to_have_url(re.compile(r"sp_mode="))   # the default
    run = spec_run(model, PROMPT, 5, 12, "sample", 0)
    expect(section.locator("#sp-acceptance")).to_have_text(f"{run.acceptance_rate:.3f}")
    page.reload()
    expect(speculative(page).get_by_role("slider", name="Draft tokens per round (γ)")) \
        .to_have_value("5")
    assert page_errors == []


def test_speculative_bad_seed_gets_a_message(page):
    page.goto("/#speculative")
    seed = speculative(page).get_by_label("Seed")
    seed.fill("12345")
    seed.press("Tab")                                # a number box asks on change
    expect(speculative(page).get_by_text("Seed must be between 0 and 9999; got 12345.")) \
        .to_be_visible()
    expect(seed).to_have_attribute("aria-invalid", "true")
    seed.fill("42")
    seed.press("Tab")                                # a number box asks on change
    expect(page).to_have_url(re.compile(r"sp_seed=42"))
    expect(speculative(page).get_by_text("Seed must be between")).to_have_count(0)
