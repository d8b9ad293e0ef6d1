"""pipeline/kvcache.py: the size formula equals the cache's own nbytes on every model, cached and
recomputed generation agree, and the formula on published configs matches sums done by hand."""
import numpy as np
import pytest

from engine_support import all_models, get_model
from pipeline.cached_generation import CachedSteps, cache_vs_recompute
from pipeline.generation import decode_loop
from pipeline.kvcache import (
    BYTES_PER_VALUE,
    KVCache,
    attention_kind,
    context_lengths,
    kv_bytes_per_token,
    kv_cache_bytes,
)
from pipeline.published import (
    KV_ONLY,
    PUBLISHED,
    AttentionShape,
    attention_config,
    falcon_attention,
)

MODELS = all_models()          # the default model and every fixture in tests/fixtures/models


@pytest.fixture(params=MODELS)
def model(request):
    return get_model(request.param)


def prompt_for(model, n=7):
    return [(17 * i + 5) % model.config.vocab_size for i in range(n)]


def test_formula_equals_nbytes_token_by_token(model):
    cfg = model.config
    kv = model.new_kv_cache(capacity=4)
    model.prefill(prompt_for(model), kv)
    assert kv.nbytes == kv_cache_bytes(cfg, 7, 4) == kv.k[:, :7].nbytes * 2
    for step in range(10):
        model.decode(step % cfg.vocab_size, kv)
        assert len(kv) == 8 + step
        assert kv.nbytes == kv_cache_bytes(cfg, len(kv), BYTES_PER_VALUE["fp32"])
        # the buffers hold `capacity` tokens: the same formula gives their size
        assert kv.allocated_nbytes == kv_cache_bytes(cfg, kv.k.shape[1], 4) >= kv.nbytes


def test_formula_equals_nbytes_after_a_batched_decode(model):
    kvs = [model.new_kv_cache() for _ in range(3)]
    for n, kv in zip((2, 5, 3), kvs, strict=True):
        model.prefill(prompt_for(model, n), kv)
    model.decode_batch([1, 2, 3], kvs)
    assert [kv.nbytes for kv in kvs] == [kv_cache_bytes(model.config, n, 4) for n in (3, 6, 4)]


def test_per_token_bytes_by_hand_for_the_default_model():
    cfg = get_model("default").config          # 4 layers, 2 kv heads of width 32, float32
    assert kv_bytes_per_token(cfg, 4) == 2 * 4 * 2 * 32 * 4 == 2048


def test_cached_and_recomputed_generation_agree(model):
    prompt = prompt_for(model)
    run = cache_vs_recompute(model, prompt, 6, capacity=4)
    assert len(run.steps) == 7
    assert [s.n_tokens for s in run.steps] == list(range(7, 14))
    assert run.max_abs_diff < 1e-4
    assert all(s.same_argmax for s in run.steps)
    # the tokens are greedy generation's, computed independently by decode_loop
    assert run.generated[:6] == [p.token for p in decode_loop(model, prompt, 6, stop_at_eos=False)]
    # step 3's difference is between decoding the 3rd generated token after prefilling the
    # prompt and recomputing: the row of that token in one forward pass over the whole final
    # sequence (the model is causal, so that row is a forward pass over the prefix's last row,
    # up to float rounding). Recompute both here.
    ids = list(prompt) + run.generated[:3]
    kv = model.new_kv_cache(capacity=4)
    model.prefill(prompt, kv)
    for t in ids[len(prompt):-1]:
        model.decode(t, kv)
    cached = model.decode(ids[-1], kv)
    full = model.forward(list(prompt) + run.generated[:6])
    assert run.steps[3].max_abs_diff == float(np.abs(cached - full[len(ids) - 1]).max())
    assert np.abs(model.forward(ids)[-1] - full[len(ids) - 1]).max() < 1e-4
    for s in run.steps:
        assert s.nbytes == kv_cache_bytes(model.config, s.n_tokens, 4)
        assert s.capacity >= s.n_tokens and s.allocated_nbytes == kv_cache_bytes(
            model.config, s.capacity, 4)


def test_the_cache_doubles_from_its_first_capacity():
    model = get_model("default")
    run = cache_vs_recompute(model, prompt_for(model, 5), 20, capacity=4)
    assert [s.capacity for s in run.steps] == [8 if n <= 8 else 16 if n <= 16 else 32
                                               for n in range(5, 26)]


def test_generation_stops_at_the_context_window():
    model = get_model("default")
    n_ctx = model.config.n_ctx
    run = cache_vs_recompute(model, prompt_for(model, n_ctx - 2), 10)
    assert [s.n_tokens for s in run.steps] == [n_ctx - 2, n_ctx - 1, n_ctx]


def test_published_configs_by_hand():
    fp16 = BYTES_PER_VALUE["fp16"]
    # Llama 2 7B: 32 layers, 32 kv heads (multi-head) of 128
    assert kv_bytes_per_token(attention_config("Llama 2 7B"), fp16) == 2 * 32 * 32 * 128 * 2
    # Llama 3 8B: 32 layers, 8 kv heads (grouped) of 128: a quarter of Llama 2 7B
    assert kv_bytes_per_token(attention_config("Llama 3 8B"), fp16) == 131072
    # Llama 3 70B at 128k tokens: 80 x 8 x 128 x 2 x 2 bytes x 131072 = 40 GiB
    assert kv_cache_bytes(attention_config("Llama 3 70B"), 131072, fp16) == 40 * 2 ** 30
    # GPT-2 small: 12 layers, 12 heads of 64, fp16, its full 1024-token window: 36 MiB
    assert kv_cache_bytes(attention_config("GPT-2 small"), 1024, fp16) == 36 * 2 ** 20
    assert kv_cache_bytes(attention_config("Llama 3 8B"), 1000, BYTES_PER_VALUE["int8"]) == \
        kv_cache_bytes(attention_config("Llama 3 8B"), 1000, fp16) // 2


def test_falcon_is_multi_query_with_heads_of_64():
    shape = attention_config("Falcon 7B")
    assert shape == AttentionShape(n_layers=32, n_heads=71, n_kv_heads=1, head_dim=64,
                                   n_ctx=2048)
    assert kv_bytes_per_token(shape, 2) == 2 * 32 * 1 * 64 * 2
    # fused q/k/v projection of falcon-7b: 4544 -> 4672 = (71 query + 1 key + 1 value) x 64
    assert (shape.n_heads + 2 * shape.n_kv_heads) * shape.head_dim == 4672
    # the parser follows transformers: new_decoder_architecture uses num_kv_heads
    assert falcon_attention(dict(hidden_size=8192, num_attention_heads=128,
                                 num_hidden_layers=60, num_kv_heads=8,
                                 new_decoder_architecture=True)).n_kv_heads == 8
    assert falcon_attention(dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=1,
                                 multi_query=False)).n_kv_heads == 4


def test_attention_kinds():
    kinds = {p.name: attention_kind(p.config) for p in PUBLISHED + KV_ONLY}
    assert kinds["Llama 2 7B"] == kinds["GPT-2 small"] == "multi-head"
    assert kinds["Llama 3 8B"] == kinds["Llama 2 70B"] == "grouped-query"
    assert kinds["Falcon 7B"] == "multi-query"
    with pytest.raises(KeyError, match="known are"):
        attention_config("GPT-5")


def test_context_lengths_cover_1_to_128k_on_a_log_scale():
    xs = context_lengths(131072, per_octave=4)
    assert xs[0] == 1 and xs[-1] == 131072 and xs == sorted(set(xs))
    assert {1024, 8192, 131072} <= set(xs)


def test_the_model_fills_the_cache_this_module_holds():
    import pipeline
    model = get_model("default")
    kv = model.new_kv_cache()
    assert isinstance(kv, KVCache) and pipeline.KVCache is KVCache
    model.prefill([1, 2, 3], kv)
    assert len(kv) == 3 and kv.nbytes == kv_cache_bytes(model.config, 3)


def test_a_check_made_longer_or_shorter_from_kept_steps_is_the_check_from_the_prompt(model):
    """The prompt's kept cached steps (CachedSteps) made longer, or read shorter, give every
    length's check exactly as a run from the prompt does: tokens, logits differences, bytes
    and capacities; the tokens are greedy decoding's."""
    prompt = prompt_for(model, 7)
    kept = CachedSteps(model, prompt, capacity=4)
    for n in (3, 4, 9, 2, 9, 12):
        grown = cache_vs_recompute(model, prompt, n, capacity=4, steps=kept)
        fresh = cache_vs_recompute(model, prompt, n, capacity=4)
        assert grown == fresh
        assert grown.generated[:-1] == [p.token for p in decode_loop(model, prompt, n)]
    assert len(kept.tokens) == 13                     # 12 decode steps after the prefill, once
