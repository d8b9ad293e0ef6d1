"""The shipped default model (models/austen) and its draft (models/austen-draft).

Checks what the model card claims: the files are a real Llama checkpoint that transformers
computes the same logits for, the model beats a unigram model on unseen text, it knows famous
lines of its corpus, and greedy decoding reproduces the stored golden text.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from pipeline import load_model
from pipeline.generation import decode_loop
from tests.golden import regenerate as golden

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODELS = {"austen": os.path.join(ROOT, "models/austen"),
          "austen-draft": os.path.join(ROOT, "models/austen-draft")}
HF_REFERENCE = os.path.join(ROOT, "tests/fixtures/austen_hf_reference.json")
HELDOUT = os.path.join(ROOT, "data", "heldout_pride_and_prejudice_ch10.txt")


@pytest.fixture(scope="module", params=list(MODELS))
def named_model(request):
    return request.param, load_model(MODELS[request.param])


@pytest.fixture(scope="module")
def model():
    return load_model()


def test_default_model_is_llama_style_and_small(model):
    c = model.config
    assert c.model_type == "llama" and c.norm == "rms_norm" and c.positions == "rope"
    assert c.mlp == "swiglu" and c.n_kv_heads < c.n_heads  # grouped-query attention
    assert c.n_ctx >= 256
    assert os.path.getsize(os.path.join(MODELS["austen"], "model.safetensors")) <= 20 * 2**20
    assert model.tokenizer.n_vocab == c.vocab_size == 4096
    assert model.tokenizer.eot_token == c.eos_token_id == 4095


def test_draft_shares_the_tokenizer_and_is_smaller(model):
    draft = load_model(MODELS["austen-draft"])
    assert draft.tokenizer._mergeable_ranks == model.tokenizer._mergeable_ranks
    assert draft.n_params() < model.n_params() / 3
    assert draft.config.n_layers <= 2


def test_engine_matches_stored_transformers_logits(named_model):
    name, m = named_model
    for ref in json.load(open(HF_REFERENCE))["models"][name]:
        assert m.tokenizer.encode(ref["prompt"]) == ref["input_ids"]
        logits = m.forward(ref["input_ids"])[-1]
        np.testing.assert_allclose(logits, ref["last_logits"], atol=1e-4)
        tokens = [p.token for p in decode_loop(m, ref["input_ids"], 20, stop_at_eos=False)]
        assert tokens == ref["greedy_ids"]


def test_engine_matches_transformers_live(named_model):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    name, m = named_model
    hf = transformers.LlamaForCausalLM.from_pretrained(MODELS[name], dtype=torch.float32).eval()
    ids = m.tokenizer.encode("Elizabeth could not help smiling at his")
    with torch.inference_mode():
        ref = hf(torch.tensor([ids])).logits[0].numpy()
    np.testing.assert_allclose(m.forward(ids), ref, atol=1e-4)


def nll(logits, targets):  # mean negative log-likelihood in nats, computed in float64
    logits = logits.astype(np.float64)
    top = logits.max(-1, keepdims=True)
    logz = np.log(np.exp(logits - top).sum(-1)) + top[:, 0]
    return float((logz - logits[np.arange(len(targets)), targets]).mean())


def test_beats_even_an_oracle_unigram_on_heldout_text(model):
    """On a held-out chapter, the model's perplexity is far below that of a unigram model fitted
    on that very chapter (a baseline that has seen the answers' frequencies)."""
    ids = np.array(model.tokenizer.encode_ordinary(open(HELDOUT, encoding="utf-8").read()))
    total, n = 0.0, 0
    for s in range(0, len(ids) - 1, 256):
        x, y = ids[s:s + 256], ids[s + 1:s + 257]
        total += nll(model.forward(list(x[:len(y)])), y) * len(y)
        n += len(y)
    model_ppl = math.exp(total / n)
    counts = np.bincount(ids[1:], minlength=model.config.vocab_size)
    p = counts[counts > 0] / counts.sum()
    oracle_unigram_ppl = math.exp(-(p * np.log(p)).sum())
    assert model_ppl < 0.5 * oracle_unigram_ppl, (model_ppl, oracle_unigram_ppl)


def test_knows_at_least_five_famous_lines():
    sys.path.insert(0, os.path.join(ROOT, "training"))
    from model_card import FAMOUS_LINES, famous_lines
    rows = famous_lines(load_model())
    hits = [r["prompt"][-30:] for r in rows if r["rank"] == 1]
    assert len(FAMOUS_LINES) == len(rows) and len(hits) >= 5, rows


def test_model_card_matches_measurements():
    card = open(os.path.join(MODELS["austen"], "MODEL_CARD.md"), encoding="utf-8").read()
    measured = json.load(open(os.path.join(MODELS["austen"], "measurements.json")))
    assert f"{measured['heldout_perplexity']:.1f}" in card
    assert f"{measured['unigram_perplexity']:.1f}" in card
    assert measured["heldout_perplexity"] < measured["unigram_perplexity"]


def test_golden_greedy_continuations(model):
    for case in json.load(open(golden.GOLDEN, encoding="utf-8")):
        prompt_ids = model.tokenizer.encode(case["prompt"])
        ids = [p.token for p in decode_loop(model, prompt_ids, golden.N_NEW)]
        assert ids == case["ids"], case["prompt"]
        assert model.tokenizer.decode(ids) == case["text"]


def test_cli_generates_with_no_model_flag():
    out = subprocess.run([sys.executable, "-m", "pipeline", "generate", "--max-new-tokens", "8",
                          "It is a truth universally acknowledged"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    expected = load_model().tokenizer.decode([p.token for p in decode_loop(load_model(),
        load_model().tokenizer.encode("It is a truth universally acknowledged"), 8)])
    assert expected.strip() and expected.strip() in out.stdout
