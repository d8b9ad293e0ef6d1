"""The overview as Chromium shows it holds the pipeline's own numbers, for the default model
(RoPE, grouped-query attention) and for the GPT-2 fixture checkpoint (a learned position table,
no key/value grouping): every tensor's shape, the KV cache's bytes and the top five next tokens."""
import os
import re
import threading

import pytest
from playwright.sync_api import expect
from waitress.server import create_server

from pipeline import load_model
from pipeline.generation import generation_steps

GPT2_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "fixtures", "models", "gpt2")
PROMPT = "the cat sat on the mat"
# a shape on the overview (its data-shape key) and the activation cache's hook it must equal
HOOKS = {"embed": "hook_embed", "ln1": "blocks.0.ln1.hook_normalized",
         "q": "blocks.0.attn.hook_q", "k": "blocks.0.attn.hook_k",
         "pattern": "blocks.0.attn.hook_pattern", "ln2": "blocks.0.ln2.hook_normalized",
         "ffn": "blocks.0.mlp.hook_post", "resid": "blocks.0.hook_resid_pre",
         "final_norm": "ln_final.hook_normalized"}


@pytest.fixture(scope="module")
def gpt2_server():
    """The app on the GPT-2 fixture checkpoint, served by waitress as app.py serves it."""
    from app import create_app
    model = load_model(GPT2_DIR)
    app = create_app({"MODEL": model, "WARM_CACHES": False, "PROBE_ENCODINGS": False})
    server = create_server(app, host="127.0.0.1", port=0, threads=2)
    threading.Thread(target=server.run, daemon=True).start()
    yield f"http://127.0.0.1:{server.effective_port}", model
    server.close()


def shown_shapes(page) -> dict:
    """{data-shape key: [dims]} as the overview's shape labels read on screen."""
    out = {}
    labels = page.locator("#overview code.ov-shape")
    for i in range(labels.count()):
        label = labels.nth(i)
        dims = re.search(r"\[([\d, ]*)\]", label.inner_text()).group(1)
        out[label.get_attribute("data-shape")] = [int(n) for n in dims.split(",") if n.strip()]
    return out


def check_overview(page, base, model):
    page.goto_first_screen(f"{base}/?prompt={PROMPT}")          # the overview: the first screen
    expect(page.locator("#overview code.ov-shape").first).to_be_visible()
    cfg = model.config
    ids = list(model.tokenizer.encode_ordinary(PROMPT))
    _, cache = model.run_with_cache(ids)
    shapes = shown_shapes(page)
    assert shapes["ids"] == [len(ids)]
    for key, hook in HOOKS.items():
        assert shapes[key] == list(cache[hook].shape), key
    assert shapes["k"] == [len(ids), cfg.n_kv_heads, cfg.head_dim]
    assert shapes["kv"] == [cfg.n_layers, 2, len(ids), cfg.n_kv_heads, cfg.head_dim]
    assert shapes["logits"] == [len(ids), cfg.vocab_size]
    kv = model.new_kv_cache()
    model.prefill(ids, kv)
    expect(page.locator("#overview .ov-kvbytes")).to_have_text(f"{kv.nbytes:,}")
    step = list(generation_steps(model, ids, 1, n_top=5, stop_at_eos=False))[0]
    bars = page.locator("#overview li.ov-cand")
    expect(bars).to_have_count(5)
    assert [int(bars.nth(i).get_attribute("data-id")) for i in range(5)] == [i for i, _ in step.top]
    return shapes


def test_default_model_overview_numbers(page, base_url, model):
    shapes = check_overview(page, base_url, model)
    assert model.config.n_kv_heads < model.config.n_heads          # grouped-query
    assert "wpe" not in shapes                                       # RoPE: no position table
    expect(page.locator("#overview")).to_contain_text("RoPE")


def test_gpt2_fixture_overview_numbers(page, gpt2_server):
    base, model = gpt2_server
    shapes = check_overview(page, base, model)
    cfg = model.config
    assert cfg.n_kv_heads == cfg.n_heads                            # no key/value grouping
    n = len(model.tokenizer.encode_ordinary(PROMPT))
    assert shapes["wpe"] == [cfg.n_ctx, cfg.d_model] and shapes["pos_embed"] == [n, cfg.d_model]
    expect(page.locator("#overview")).not_to_contain_text("RoPE")
    expect(page.locator("#overview")).not_to_contain_text("grouped-query")
