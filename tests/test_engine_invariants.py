"""Properties the engine must have on every model (the default model and each fixture):
the activation cache adds up, the switches do what they say, the KV cache changes nothing."""
import dataclasses
import random
import re
import threading

import numpy as np
import pytest

import pipeline.model
from engine_support import all_models, get_model
from pipeline import Model
from pipeline.generation import decode_loop

MODELS = all_models()
PROMPT = [11, 40, 7, 200, 33, 40, 150, 2, 99, 64, 11, 5, 120, 40, 3, 70]


def tokens_for(model, n=None):
    return [t % model.config.vocab_size for t in PROMPT][:n]


@pytest.fixture(params=MODELS)
def model(request):
    return get_model(request.param)


@pytest.fixture
def run(model):
    tokens = tokens_for(model)
    logits, cache = model.run_with_cache(tokens)
    return model, tokens, logits, cache


def test_residual_stream_adds_up(run):
    model, _, _, cache = run
    for i in range(model.config.n_layers):
        b = f"blocks.{i}."
        np.testing.assert_array_equal(cache[b + "hook_resid_mid"],
                                      cache[b + "hook_resid_pre"] + cache[b + "hook_attn_out"])
        np.testing.assert_array_equal(cache[b + "hook_resid_post"],
                                      cache[b + "hook_resid_mid"] + cache[b + "hook_mlp_out"])
        if i + 1 < model.config.n_layers:
            assert cache[f"blocks.{i + 1}.hook_resid_pre"] is cache[b + "hook_resid_post"]


def test_attention_pattern_is_causal_and_normalised(run):
    model, tokens, _, cache = run
    T, H = len(tokens), model.config.n_heads
    upper = np.triu(np.ones((T, T), dtype=bool), k=1)
    for i in range(model.config.n_layers):
        pattern = cache[f"blocks.{i}.attn.hook_pattern"]
        scores = cache[f"blocks.{i}.attn.hook_attn_scores"]
        assert pattern.shape == scores.shape == (H, T, T)
        np.testing.assert_allclose(pattern.sum(-1), 1.0, atol=1e-5)
        assert (pattern[:, upper] == 0).all()
        assert np.isneginf(scores[:, upper]).all() and np.isfinite(scores[:, ~upper]).all()


def test_run_with_cache_logits_equal_forward(run):
    model, tokens, logits, cache = run
    np.testing.assert_array_equal(logits, model.forward(tokens))
    assert cache["logits"] is logits


def test_cache_names_shapes_and_dtypes(run):
    """Every recorded name is in the table of the model module's docstring, with its shape."""
    model, tokens, _, cache = run
    c, T = model.config, len(tokens)
    sizes = {"T": T, "d": c.d_model, "H": c.n_heads, "KVH": c.n_kv_heads, "hd": c.head_dim,
             "d_ff": c.d_ff, "V": c.vocab_size}
    table = {}
    for name, shape in re.findall(r"^    ([\w.{}]+)\s+\[([\w, ]+)\]", pipeline.model.__doc__, re.M):
        table[name] = tuple(sizes[s.strip()] for s in shape.split(","))
    for key, value in cache.items():
        generic = re.sub(r"^blocks\.\d+\.", "blocks.{i}.", key)
        assert generic in table, f"{key} is not documented"
        assert value.shape == table[generic], key
        assert value.dtype == np.float32, key
    rope = c.positions == "rope"
    expected = {"hook_embed", "ln_final.hook_normalized", "logits"} | (
        set() if rope else {"hook_pos_embed"})
    for name in table:
        if name.startswith("blocks.{i}."):
            if (("rot_" in name and not rope) or ("pre_linear" in name and c.mlp != "swiglu")
                    or ("_norm.hook" in name and not c.qk_norm)
                    or ("_post.hook" in name and not c.post_norms)):
                continue
            expected |= {name.replace("{i}", str(i)) for i in range(c.n_layers)}
    assert set(cache) == expected


def test_per_head_results_sum_to_attention_output(run):
    model, _, _, cache = run
    for i, block in enumerate(model.params["blocks"]):
        b_o = block["attn"].get("b_o", 0.0)
        np.testing.assert_allclose(cache[f"blocks.{i}.attn.hook_result"].sum(1),
                                   cache[f"blocks.{i}.hook_attn_out"] - b_o, atol=1e-4, rtol=1e-4)


def test_without_positions_order_is_invisible_to_the_first_block(model):
    """Attention is causal, so position t sees tokens 0..t. Without positional information,
    block 0's output at t depends only on token t and the bag of tokens 0..t: shuffling the
    first k tokens leaves it unchanged at positions k.. (with positions, it changes).
    Deeper blocks attend to earlier positions' residuals, which depend on their own prefixes,
    so the causal mask alone lets a multi-layer model tell some orders apart: the whole model
    is not permutation-invariant, and this test does not claim it is."""
    tokens = tokens_for(model)
    k = len(tokens) // 2
    shuffled = list(np.random.default_rng(0).permutation(tokens[:k])) + tokens[k:]
    assert shuffled != tokens

    def first_block(x, **kw):
        return model.forward(x, n_layers=1, **kw)[k:]
    np.testing.assert_allclose(first_block(shuffled, use_positions=False),
                               first_block(tokens, use_positions=False), atol=1e-4)
    assert np.abs(first_block(shuffled) - first_block(tokens)).max() > 1e-3

    _, cache = model.run_with_cache(tokens, use_positions=False)
    assert "hook_pos_embed" not in cache and "blocks.0.attn.hook_rot_q" not in cache


def test_without_positions_a_repeated_token_looks_the_same_everywhere(model):
    """Every position of "a a a a ..." holds the same vector at every layer when nothing
    tells the positions apart. With learned positions the rows differ. (With RoPE they do
    not: the values are all equal and are not rotated, so any pattern mixes the same vector.)"""
    same = [tokens_for(model)[1]] * 12
    logits = model.forward(same, use_positions=False)
    np.testing.assert_allclose(logits, np.broadcast_to(logits[0], logits.shape), atol=1e-4)
    if model.config.positions == "learned":
        logits = model.forward(same)
        assert np.abs(logits - logits[0]).max() > 1e-3


def test_n_layers_equals_a_truncated_model(model):
    tokens = tokens_for(model)
    for k in range(model.config.n_layers + 1):
        cut = Model(dataclasses.replace(model.config, n_layers=k),
                    {**model.params, "blocks": model.params["blocks"][:k]}, model.tokenizer)
        np.testing.assert_array_equal(model.forward(tokens, n_layers=k), cut.forward(tokens))
        logits, cache = model.run_with_cache(tokens, n_layers=k)
        np.testing.assert_array_equal(logits, cut.forward(tokens))
        assert f"blocks.{k}.hook_resid_pre" not in cache
        if k:
            assert f"blocks.{k - 1}.hook_resid_post" in cache


def test_cached_decoding_equals_full_recompute_every_step(model):
    tokens = tokens_for(model, 6)
    kv = model.new_kv_cache(capacity=4)  # small, so the buffers grow (and copy) on the way
    logits = model.prefill(tokens, kv)
    np.testing.assert_allclose(logits, model.forward(tokens), atol=1e-4)
    steps = min(34, model.config.n_ctx - len(tokens))
    assert steps >= 30
    for _ in range(steps):
        tokens.append(int(np.argmax(logits[-1] if logits.ndim == 2 else logits)))
        logits = model.decode(tokens[-1], kv)
        assert logits.shape == (model.config.vocab_size,)
        assert np.abs(logits - model.forward(tokens)[-1]).max() <= 1e-4
    assert len(kv) == len(tokens)


def test_decode_batch_equals_decoding_each_alone(model):
    prompts = [tokens_for(model, n) for n in (3, 9, 14)]
    nexts = [5, 17, 2]
    alone, kvs = [], []
    for prompt, nxt in zip(prompts, nexts, strict=True):
        kv = model.new_kv_cache()
        model.prefill(prompt, kv)
        kvs.append(model.new_kv_cache())
        model.prefill(prompt, kvs[-1])
        alone.append(model.decode(nxt, kv))
    batch = model.decode_batch(nexts, kvs)
    assert batch.shape == (3, model.config.vocab_size)
    assert np.abs(batch - np.stack(alone)).max() <= 1e-4
    assert [len(kv) for kv in kvs] == [4, 10, 15]
    again = model.decode_batch([1, 1, 1], kvs)  # and a second step, from the updated caches
    for prompt, nxt, row in zip(prompts, nexts, again, strict=True):
        assert np.abs(row - model.forward(prompt + [nxt, 1])[-1]).max() <= 1e-4


def test_kv_cache_bytes_follow_the_formula(model):
    c = model.config
    kv = model.new_kv_cache()
    assert len(kv) == 0 and kv.nbytes == 0
    model.prefill(tokens_for(model, 10), kv)
    buffer = kv.k
    model.decode(1, kv)
    assert kv.k is buffer, "a decode step within capacity must not reallocate the cache"
    assert len(kv) == 11
    assert kv.nbytes == 2 * c.n_layers * c.n_kv_heads * c.head_dim * 4 * len(kv)
    assert kv.allocated_nbytes >= kv.nbytes


def test_generate_is_greedy_and_stops(model):
    tokens = tokens_for(model, 5)
    out = [p.token for p in decode_loop(model, tokens, 8, stop_at_eos=False)]
    assert len(out) == 8
    full = list(tokens)
    for t in out:
        assert t == int(np.argmax(model.forward(full)[-1]))
        full.append(t)
    # a sampler hook sees the logits and the tokens so far; stopping at the end token
    eos = model.config.eos_token_id
    seen = []

    def always_eos(logits, history):
        seen.append(len(history))
        return eos
    assert [p.token for p in decode_loop(model, tokens, 8, sample=always_eos)] == [eos]
    assert seen == [len(tokens)]


def test_bad_inputs_raise_value_errors(model):
    c = model.config
    with pytest.raises(ValueError):
        model.forward([])
    with pytest.raises(ValueError):
        model.forward([c.vocab_size])
    with pytest.raises(ValueError):
        model.forward([1] * (c.n_ctx + 1))
    kv = model.new_kv_cache()
    model.prefill([1] * c.n_ctx, kv)
    with pytest.raises(ValueError):
        model.decode(1, kv)
    assert len(kv) == c.n_ctx


def test_compact_recording_holds_every_value_of_a_full_one(model):
    """A compact cache (each block's input kept, the rest computed again when read) gives every
    name the very values of a full recording, bit for bit, in any order of reading."""
    tokens = tokens_for(model)
    logits, full = model.run_with_cache(tokens)
    last, compact = model.run_with_cache(tokens, compact=True)
    np.testing.assert_array_equal(last, logits[-1:])
    assert set(compact) == set(full)
    held_at_start, recorded = compact.nbytes(), set(dict.keys(compact))
    names = list(full)
    random.Random(0).shuffle(names)
    for name in names:
        np.testing.assert_array_equal(compact[name], full[name], err_msg=name)
        assert name in recorded or not compact[name].flags.writeable, name
    assert compact.nbytes() > held_at_start          # what was read is kept


def test_compact_recording_keeps_only_block_inputs_until_read(model):
    tokens = tokens_for(model)
    _, compact = model.run_with_cache(tokens, compact=True)
    c = model.config
    kept = set(dict.keys(compact))
    assert {f"blocks.{i}.hook_resid_pre" for i in range(c.n_layers)} <= kept
    assert "logits" not in kept and "blocks.0.attn.hook_pattern" not in kept
    _, full = model.run_with_cache(tokens)
    assert compact.nbytes() < sum(v.nbytes for v in full.values()) / 4


def test_compact_recording_is_read_safely_from_threads(model):
    """Requests share a prompt's run: threads reading the same lazy names get one value."""
    tokens = tokens_for(model)
    _, compact = model.run_with_cache(tokens, compact=True)
    names = [f"blocks.{i}.attn.hook_pattern" for i in range(model.config.n_layers)] * 3
    got = {}

    def read(n):
        got[n] = [compact[name] for name in names]
    threads = [threading.Thread(target=read, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in range(1, 4):
        assert all(a is b for a, b in zip(got[0], got[n], strict=True))


@pytest.mark.parametrize("compact", [False, True])
def test_a_kv_cache_from_a_recording_is_the_one_prefill_leaves(model, compact):
    """Decoding can start from the prompt's recorded keys and values
    (web.model_state.forward.prefilled):
    the same cache, bit for bit, as a prefill, and the same next steps."""
    tokens = tokens_for(model, 10)
    logits, cache = model.run_with_cache(tokens, compact=compact)
    for capacity in (4, 64):
        kv = model.new_kv_cache(capacity)
        prefill_logits = model.prefill(tokens, kv)
        np.testing.assert_array_equal(logits[-1], prefill_logits[-1])
        built = model.kv_from_recording(cache, len(tokens), capacity)
        assert len(built) == len(kv) and built.k.shape == kv.k.shape
        np.testing.assert_array_equal(built.k, kv.k)
        np.testing.assert_array_equal(built.v, kv.v)
        for t in (5, 9, 2):
            np.testing.assert_array_equal(model.decode(t, built), model.decode(t, kv))


def test_n_params_counts_every_weight_once_and_follows_a_new_params_dict(model):
    """n_params is counted once per params dict (the page asks on every request), so it must
    be recounted when the dict is replaced, as a quantized or cut copy's is."""
    def total(node):
        if isinstance(node, dict):
            return sum(total(v) for v in node.values())
        if isinstance(node, list):
            return sum(total(v) for v in node)
        return node.size
    tied = model.config.tied_embeddings
    expected = total({k: v for k, v in model.params.items() if not (tied and k == "unembed")})
    assert model.n_params() == expected == model.n_params()
    copy = Model(model.config, dict(model.params), model.tokenizer)
    assert copy.n_params() == expected
    copy.params = {**copy.params, "blocks": copy.params["blocks"][:1]}
    one_block = total(copy.params["blocks"])
    assert copy.n_params() == expected - total(model.params["blocks"]) + one_block
