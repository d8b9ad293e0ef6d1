"""The logits section shows the model's real next-token scores and the probabilities softmax
with temperature makes of them; the confident example is found by running the model."""
import html
import re
import urllib.parse

import numpy as np
import pytest

from pipeline.model import softmax
from pipeline.sampling import entropy_bits, softmax_with_temperature, tokens_holding_mass
from web.core.sampler_settings import DEFAULT_TEMPERATURE
from web.sections.logits import CANDIDATES
from web_support import HX, error_message, every_section, table_rows, text_of, url

PROMPT = "Elizabeth could not help smiling at Mr. Darcy, and"


def logits_section(client, prompt=PROMPT, **params):
    r = client.get(url("/section/logits", prompt=prompt, **params), headers=HX)
    return r, text_of(r)


def strong(page, element_id) -> str:
    return re.search(r'<strong id="%s">([^<]*)</strong>' % element_id, page).group(1)


@pytest.mark.parametrize("temp", ["1", "0.5", "1.7"])
def test_table_is_the_models_scores_and_probabilities(client, model, temp):
    T = float(temp)
    logits = model.forward(model.tokenizer.encode_ordinary(PROMPT))[-1]
    p1, pt = softmax(logits), softmax_with_temperature(logits, T)
    r, page = logits_section(client, lg_temp=temp)
    assert r.status_code == 200
    rows = table_rows(page, "Highest-scoring next tokens")
    top = np.argsort(-logits)[:10]
    assert [int(row[2]) for row in rows] == [int(i) for i in top]
    for row, i in zip(rows, top, strict=True):
        assert row[3] == f"{logits[i]:.3f}"
        assert row[4] == f"{100 * p1[i]:.2f}%" and row[5] == f"{100 * pt[i]:.2f}%"
    assert strong(page, "lg-top-p") == f"{100 * pt.max():.2f}%"
    assert strong(page, "lg-entropy") == f"{entropy_bits(pt):.2f}"
    assert strong(page, "lg-mass50") == str(tokens_holding_mass(pt, 0.5))
    assert strong(page, "lg-mass90") == f"{tokens_holding_mass(pt, 0.9):,}"


def test_temperature_zero_is_greedy(client, model):
    _, page = logits_section(client, lg_temp="0")
    assert strong(page, "lg-top-p") == "100.00%" and strong(page, "lg-entropy") == "0.00"
    assert strong(page, "lg-mass50") == strong(page, "lg-mass90") == "1"
    said = " ".join(re.sub(r"<[^>]+>", "", page).split())
    # one token: the noun and the verb agree with the number
    assert "among about 1 token);" in said
    assert "1 token holds 50% of the probability and 1 holds 90%" in said
    assert "-0.00" not in said


def test_higher_temperature_shows_more_entropy(client):
    shown = [float(strong(logits_section(client, lg_temp=t)[1], "lg-entropy"))
             for t in ("0.25", "0.5", "1", "1.5", "2")]
    assert shown == sorted(shown) and shown[0] < shown[-1]


@pytest.mark.parametrize("raw,message,status", [
    ("2.5", "Temperature must be between 0 and 2; got 2.5.", 422),
    ("-0.1", "Temperature must be between 0 and 2; got -0.1.", 422),
    ("hot", "Temperature must be a decimal number such as 0.7, not 'hot'.", 400),
    ("nan", "Temperature must be a decimal number such as 0.7, not 'nan'.", 400),
    ("1e0", "Temperature must be a decimal number such as 0.7, not '1e0'.", 400),
    ("", "Temperature must be a decimal number such as 0.7, not ''.", 400),
])
def test_bad_temperature_gets_a_message_and_a_4xx(client, raw, message, status):
    r, page = logits_section(client, lg_temp=raw)
    assert r.status_code == status
    assert error_message(page, "lg_temp") == message
    assert 'id="lg-temp"' in page and 'aria-invalid="true"' in page


def test_temperature_round_trips_through_the_url(client):
    r, _ = logits_section(client, lg_temp="0.35")
    assert r.headers["HX-Push-Url"].endswith("lg_temp=0.35")
    page = text_of(client.get(r.headers["HX-Push-Url"], headers=every_section()))
    assert 'value="0.35"' in page and '<span id="lg-t">0.35</span>' in page
    r, _ = logits_section(client, lg_temp=f"{DEFAULT_TEMPERATURE:g}")   # the default: left out
    assert "lg_temp" not in r.headers["HX-Push-Url"]


def test_default_temperature_is_the_pages_one_default():
    """The logits section starts at the temperature the overview and the Sampling section use."""
    from web.sections.logits import PARAMS
    from web.sections.sampling import PARAMS as SAMPLING
    lg = next(p for p in PARAMS if p.name == "lg_temp")
    s = next(p for p in SAMPLING if p.name == "s_temp")
    assert lg.default == s.default == DEFAULT_TEMPERATURE


def test_confident_example_is_the_most_confident_candidate(client, model):
    def top_p(prompt):
        return float(softmax(model.forward(model.tokenizer.encode_ordinary(prompt))[-1]).max())
    best = max(CANDIDATES, key=lambda c: top_p(c[1]))[1]
    _, page = logits_section(client)
    link = re.search(r'<a class="button-link" id="lg-try" href="([^"]+)">', page).group(1)
    # at T = 1, so the page it opens shows the probability written here
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(html.unescape(link)).query) == {
        "prompt": [best], "lg_temp": ["1"]}
    assert top_p(best) > 0.9                    # the default model is sure of a name
    rows = table_rows(page, "Candidate prompts and the model's top guess")
    assert rows[0][3] == f"{100 * top_p(best):.2f}%"
    # following the link shows the same probability for the next token
    _, there = logits_section(client, prompt=best, lg_temp="1")
    assert strong(there, "lg-top-p") == f"{100 * top_p(best):.2f}%"
    assert "It was trained only on Jane Austen's six novels" in page
    france = next(r for r in rows if r[0] == "not in Austen's novels")
    assert france[3] == f"{100 * top_p('The capital of France is'):.2f}%"


def test_the_austen_check_is_the_loaded_models(app, tmp_path):
    """LoadedModel.trained_on_austen: the project's own model (training_log.json beside it)
    is; a checkpoint without the log, or without a directory, is not."""
    import dataclasses
    from types import SimpleNamespace
    lm = app.extensions["explainer"].default_model
    assert lm.trained_on_austen
    assert not dataclasses.replace(lm, model=SimpleNamespace(path=str(tmp_path))).trained_on_austen
    assert not dataclasses.replace(lm, model=SimpleNamespace(path=None)).trained_on_austen
    (tmp_path / "training_log.json").write_text("{}")
    assert dataclasses.replace(lm, model=SimpleNamespace(path=str(tmp_path))).trained_on_austen
