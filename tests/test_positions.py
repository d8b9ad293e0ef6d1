"""pipeline/positions.py: the sinusoidal formula, RoPE's relative-position property on the real
model's q and k, and the word-order result computed by the engine (RoPE and GPT-2 models)."""
import math

import numpy as np
import pytest

from pipeline import load_model
from pipeline.positions import (
    reordered_positions,
    rope_angles,
    rope_at,
    rope_relative_scores,
    same_multiset,
    sinusoidal_encoding,
    word_order_differences,
)
from web_support import has_default_model

GPT2 = "tests/fixtures/models/gpt2"


@pytest.fixture(scope="module")
def austen():
    if not has_default_model():
        pytest.skip("models/austen/model.safetensors is missing")
    return load_model(None)


@pytest.fixture(scope="module")
def gpt2():
    return load_model(GPT2)


@pytest.mark.parametrize("d,base", [(8, 10000), (7, 100), (256, 500)])
def test_sinusoidal_encoding_is_the_papers_formula(d, base):
    pe = sinusoidal_encoding(50, d, base)
    assert pe.shape == (50, d) and pe.dtype == np.float32
    for pos in (0, 1, 17, 49):
        for i in range(d):
            angle = pos / base ** (2 * (i // 2) / d)
            expected = math.sin(angle) if i % 2 == 0 else math.cos(angle)
            assert abs(pe[pos, i] - expected) < 1e-4, (pos, i)


def test_a_larger_base_makes_slower_waves():
    # the last pair barely moves with a big base, turns visibly with a small one
    assert np.ptp(sinusoidal_encoding(64, 64, 10000)[:, -2]) < 0.05
    assert np.ptp(sinusoidal_encoding(64, 64, 100)[:, -2]) > 0.5


def test_rope_angles_are_position_times_frequency(austen):
    inv = austen.inv_freq
    angles = rope_angles(np.arange(40), inv)
    expected = np.arange(40)[:, None] * inv.astype(np.float64)[None, :]
    wrapped = (expected + np.pi) % (2 * np.pi) - np.pi
    diff = np.abs(angles - wrapped)
    assert np.all(np.minimum(diff, 2 * np.pi - diff) < 1e-4)


def prompt_cache(model, text="It is a truth universally acknowledged, that a single man"):
    ids = model.tokenizer.encode(text)
    return ids, model.run_with_cache(ids)[1]


def test_rope_at_is_what_the_engine_cached(austen):
    ids, cache = prompt_cache(austen)
    for layer in (0, 3):
        q, rot = cache[f"blocks.{layer}.attn.hook_q"], cache[f"blocks.{layer}.attn.hook_rot_q"]
        for t in (0, 5, len(ids) - 1):
            np.testing.assert_allclose(rope_at(q[t, 2], t, austen.inv_freq), rot[t, 2],
                                       atol=1e-5)


@pytest.mark.parametrize("layer,head", [(0, 0), (2, 5), (3, 7)])
def test_rope_score_depends_on_the_distance_only(austen, layer, head):
    ids, cache = prompt_cache(austen)
    cfg = austen.config
    kv_head = head // (cfg.n_heads // cfg.n_kv_heads)
    m, n = len(ids) - 1, 2
    q = cache[f"blocks.{layer}.attn.hook_q"][m, head]
    k = cache[f"blocks.{layer}.attn.hook_k"][n, kv_head]
    same = [(m, n), (m - n, 0), (m + 1, n + 1), (m + 100, n + 100), (m + 200, n + 200)]
    scores = rope_relative_scores(q, k, austen.inv_freq, same)
    # the real positions give the model's own score
    assert abs(scores[0] - cache[f"blocks.{layer}.attn.hook_attn_scores"][head, m, n]) < 1e-5
    scale = max(1.0, float(np.abs(scores).max()))
    assert np.ptp(scores) < 1e-5 * scale
    other = rope_relative_scores(q, k, austen.inv_freq, [(m + 1, n), (m + 3, n), (m, n + 1)])
    assert np.abs(other - scores[0]).min() > 1e-3


def test_reordered_positions_by_hand():
    assert reordered_positions([1, 2, 3, 4], [2, 1, 3, 4]) == [2, 3]
    assert reordered_positions([1, 2, 3], [3, 2, 1]) == []      # prefixes {1} vs {3} differ
    assert reordered_positions([5, 1, 2, 9], [5, 2, 1, 9]) == [3]  # 0 has the same prefix
    assert reordered_positions([1, 2], [1, 2]) == []
    assert same_multiset([1, 2, 2], [2, 1, 2]) and not same_multiset([1, 2], [1, 2, 2])


@pytest.mark.parametrize("which", ["austen", "gpt2"])
def test_word_order_block_0_is_blind_only_without_positions(which, request):
    """Without positions, block 0's output at a token after a reordered prefix is the same (up
    to float32 rounding); deeper blocks tell the orders apart through the causal mask. With
    positions they differ from block 0 on."""
    model = request.getfixturevalue(which)
    a = model.tokenizer.encode("the dog bites the man.")
    b = model.tokenizer.encode("the man bites the dog.")
    assert same_multiset(a, b) and a != b
    positions, without, la0, lb0 = word_order_differences(model, a, b, use_positions=False)
    _, with_pos, la1, lb1 = word_order_differences(model, a, b, use_positions=True)
    assert positions == [len(a) - 1]
    names = [r[0] for r in without]
    assert names == ["embeddings"] + [f"after block {i}" for i in range(model.config.n_layers)]
    assert without[0][1] == 0                       # same token, same row of the table
    assert without[1][1] < 1e-5 * without[1][2]     # block 0: identical up to rounding
    assert without[-1][1] > 1e-3 * without[-1][2]   # the last block: different
    assert with_pos[1][1] > 1e-3 * with_pos[1][2]   # with positions: different at block 0
    # independent check of block 0 without positions: the residual at the last position from
    # running only block 0 on each order (the engine's n_layers=1)
    _, ca = model.run_with_cache(a, use_positions=False, n_layers=1)
    _, cb = model.run_with_cache(b, use_positions=False, n_layers=1)
    rows = [-1]
    assert np.abs(ca["blocks.0.hook_resid_post"][rows] - cb["blocks.0.hook_resid_post"][rows]
                  ).max() == pytest.approx(without[1][1], abs=1e-6)
    np.testing.assert_allclose(la1, model.forward(a)[-1], atol=1e-5)
    np.testing.assert_allclose(lb0, model.forward(b, use_positions=False)[-1], atol=1e-5)


GGUF_NAMES = ("gemma2_f32", "gemma3_linear_f32", "phi3_longrope_f32", "llama3_f32",
              "phi4mini_f32")


@pytest.fixture(scope="module")
def gguf_models(tmp_path_factory):
    """Tiny GGUF checkpoints whose RoPE or scores differ from Llama's (tests/gguf_support.py)."""
    import json
    import os

    from gguf_support import TESTS_DIR, write_checkpoint
    with open(os.path.join(TESTS_DIR, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
        seeds = {n: r["seed"] for n, r in json.load(f)["tiny"].items()}
    directory = tmp_path_factory.mktemp("gguf")
    return {name: load_model(write_checkpoint(str(directory / f"{name}.gguf"), name, seeds[name]))
            for name in GGUF_NAMES}


@pytest.mark.parametrize("name", GGUF_NAMES)
def test_rope_scores_are_the_models_on_every_layer_of_scaled_and_capped_models(gguf_models,
                                                                               name):
    """With each block's own frequencies (Gemma 3: 10000 in the sliding-window blocks, the scaled
    1e6 in the global one), LongRoPE's attention factor, Gemma's score scale and soft-cap, the
    relative scores at the real positions are the model's hook_attn_scores, and rope_at is its
    hook_rot_q."""
    model = gguf_models[name]
    cfg = model.config
    ids, cache = prompt_cache(model)
    m, n = len(ids) - 1, 3
    for layer in range(cfg.n_layers):
        inv = model.layer_inv_freq(layer)
        q = cache[f"blocks.{layer}.attn.hook_q"][m, 1]
        k = cache[f"blocks.{layer}.attn.hook_k"][n, 0]
        if cfg.qk_norm:                      # Gemma 3 rotates the normed query and key
            q = cache[f"blocks.{layer}.attn.q_norm.hook_normalized"][m, 1]
            k = cache[f"blocks.{layer}.attn.k_norm.hook_normalized"][n, 0]
        np.testing.assert_allclose(rope_at(q, m, inv, cfg.rope_attn_factor),
                                   cache[f"blocks.{layer}.attn.hook_rot_q"][m, 1], atol=1e-5)
        score = rope_relative_scores(q, k, inv, [(m, n), (m + 5, n + 5)], cfg.rope_attn_factor,
                                     cfg.score_scale(), cfg.attn_softcap)
        model_score = cache[f"blocks.{layer}.attn.hook_attn_scores"][1, m, n]
        assert abs(score[0] - model_score) < 1e-4 * max(1.0, abs(model_score))
        assert abs(score[1] - score[0]) < 1e-4 * max(1.0, abs(model_score))
    if cfg.local_layer(0):
        assert model.layer_inv_freq(0) is model.inv_freq_local
        assert model.layer_inv_freq(cfg.global_every - 1) is model.inv_freq
