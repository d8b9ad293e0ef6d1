"""Parameter counts (formula vs arrays vs published checkpoints) and the logit lens (vs the
engine cut after k blocks), on the default model and every fixture."""
import dataclasses

import numpy as np
import pytest

from engine_support import all_models, get_model
from pipeline.lens import logit_lens, residual_norms, residual_stream
from pipeline.published import PUBLISHED
from pipeline.sizes import counted_from_arrays, parameter_counts

MODELS = all_models()
PROMPT = [11, 40, 7, 200, 33, 40, 150, 2, 99, 64, 11, 5]


@pytest.fixture(params=MODELS)
def model(request):
    return get_model(request.param)


def tokens_for(model):
    return [t % model.config.vocab_size for t in PROMPT]


def test_models_include_both_families_and_the_default():
    families = {get_model(m).config.model_type for m in MODELS}
    assert {"gpt2", "llama"} <= families
    assert "default" in MODELS


def test_formula_equals_the_arrays_component_by_component(model):
    assert parameter_counts(model.config) == counted_from_arrays(model)


def test_formula_total_equals_the_engines_own_count(model):
    assert parameter_counts(model.config).total == model.n_params()


def test_default_model_breakdown_by_hand():
    c = get_model("default").config          # 4 layers, d 256, 8 / 2 heads of 32, d_ff 768
    counts = parameter_counts(c)
    assert counts.embedding == 4096 * 256
    assert (counts.attn_q, counts.attn_k, counts.attn_v, counts.attn_o) == (
        256 * 256, 256 * 64, 256 * 64, 256 * 256)
    assert counts.ffn == 3 * 256 * 768 and counts.norms == 512 and counts.final_norm == 256
    assert counts.positions == 0 and counts.unembedding == 0
    assert counts.total == 4_065_536                         # the model card's number


def test_untying_adds_one_unembedding_matrix():
    c = get_model("default").config
    untied = parameter_counts(dataclasses.replace(c, tied_embeddings=False))
    assert untied.total - parameter_counts(c).total == c.vocab_size * c.d_model


@pytest.mark.parametrize("entry", PUBLISHED, ids=lambda p: p.name)
def test_formula_gives_every_published_checkpoints_reported_count(entry):
    assert entry.reported_params is not None
    assert parameter_counts(entry.config).total == entry.reported_params


def test_grouped_query_attention_shrinks_k_and_v_only():
    llama3_8b = next(p for p in PUBLISHED if p.name == "Llama 3 8B").config
    counts = parameter_counts(llama3_8b)
    assert counts.attn_q == counts.attn_o == 4096 * 4096
    assert counts.attn_k == counts.attn_v == 4096 * 1024     # 8 of 32 heads' width


def test_logit_lens_equals_the_model_cut_after_k_blocks(model):
    tokens = tokens_for(model)
    logits, cache = model.run_with_cache(tokens)
    lens = logit_lens(model, cache)
    assert lens.shape == (model.config.n_layers + 1, len(tokens), model.config.vocab_size)
    assert lens.dtype == np.float32
    for k in range(model.config.n_layers + 1):
        np.testing.assert_allclose(lens[k], model.forward(tokens, n_layers=k),
                                   rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(lens[-1], logits)


def test_logit_lens_at_chosen_positions_is_a_slice(model):
    tokens = tokens_for(model)
    _, cache = model.run_with_cache(tokens)
    np.testing.assert_allclose(logit_lens(model, cache, positions=[3, -1]),
                               logit_lens(model, cache)[:, [3, -1]], rtol=1e-5, atol=1e-4)


def test_residual_norms_follow_the_stream(model):
    tokens = tokens_for(model)
    _, cache = model.run_with_cache(tokens)
    n = model.config.n_layers
    norms, names = residual_norms(cache, n)
    assert norms.shape == (2 * n + 1, len(tokens)) and len(names) == 2 * n + 1
    stream = residual_stream(cache, n)
    np.testing.assert_allclose(norms[0], np.sqrt((stream[0] ** 2).sum(-1)), rtol=1e-5)
    np.testing.assert_allclose(norms[-1], np.sqrt((stream[-1] ** 2).sum(-1)), rtol=1e-5)
    mid = cache["blocks.0.hook_resid_mid"]
    np.testing.assert_allclose(norms[1], np.sqrt((mid ** 2).sum(-1)), rtol=1e-5)
