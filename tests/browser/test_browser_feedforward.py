"""The feed-forward section in real Chromium: a neuron value on screen is the cache's; choosing
a layer, clicking a token and a neuron update the view and the URL."""
import re

import pytest
from playwright.sync_api import expect

from pipeline.feedforward import top_neurons

# the tests read only these sections: the page fixture loads them, not every section
pytestmark = pytest.mark.sections("feedforward")

PROMPT = "Mr. Darcy bowed to Elizabeth, and Elizabeth smiled at Mr. Darcy."


def post(model, layer):
    _, cache = model.run_with_cache(model.tokenizer.encode_ordinary(PROMPT))
    return cache[f"blocks.{layer}.mlp.hook_post"]                  # [T, d_ff]


def test_layer_token_and_neuron_choices(page, model, page_errors):
    page.goto("/?open=ffn-neurons&prompt=" + PROMPT)             # the neurons' disclosure
    page.get_by_label("Feed-forward layer").select_option("1")
    expect(page).to_have_url(re.compile(r"ffn_layer=1"))
    rows = page.get_by_role("table", name="Most active neurons").locator("tbody tr")
    values = post(model, 1)
    T = values.shape[0]
    top = top_neurons(values[T - 1], 10)
    expect(rows.first.locator("td").first).to_have_text(str(top[0]))
    expect(rows.first.locator("td").last).to_have_text("%.4f" % values[T - 1, top[0]])

    neuron_row = page.get_by_role("list", name=f"Neuron {top[0]} at each token")
    neuron_row.get_by_role("button").nth(3).click()                 # choose token 3
    expect(page).to_have_url(re.compile(r"ffn_token=3"))
    expect(page.get_by_label("Feed-forward token")).to_have_value("3")
    top3 = top_neurons(values[3], 10)
    expect(rows.first.locator("td").first).to_have_text(str(top3[0]))

    rows.nth(2).get_by_role("button").click()                       # the third most active
    expect(page).to_have_url(re.compile(rf"ffn_neuron={top3[2]}"))
    chips = page.get_by_role("list", name=f"Neuron {top3[2]} at each token").locator(".pct")
    expect(chips).to_have_text(["%.3f" % v for v in values[:, top3[2]]])
    expect(page.locator("#feedforward .plot .main-svg").first).to_be_attached()

    page.reload()
    expect(page.get_by_label("Feed-forward layer")).to_have_value("1")
    expect(page.get_by_label("Neuron", exact=True)).to_have_value(str(top3[2]))
    expect(chips).to_have_text(["%.3f" % v for v in values[:, top3[2]]])
    assert page_errors == []


def test_a_bad_neuron_shows_its_message(page):
    page.goto("/?open=ffn-neurons&prompt=" + PROMPT)
    box = page.get_by_label("Neuron", exact=True)
    box.fill("5000")
    box.dispatch_event("change")
    message = page.get_by_text("Neuron 5000 does not exist: this layer has 768 neurons")
    expect(message).to_be_visible()
    expect(page.get_by_label("Neuron", exact=True)).to_have_attribute("aria-invalid", "true")
