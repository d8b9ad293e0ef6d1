"""Live comparison with transformers (skipped when it is not installed): tiny random models
saved by transformers itself, in float32, bfloat16 and sharded, must give the same logits."""
import os
import shutil

import numpy as np
import pytest

from pipeline import load_model

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_DIR = os.path.join(ROOT, "models", "austen")  # any tokenizer will do; ids are ids
TOKENS = [5, 300, 17, 4000, 42, 42, 1024, 7, 99, 3000, 12, 1]


def save(model, out, **kw):
    model.eval()
    model.save_pretrained(out, **kw)
    for name in ("tokenizer.tiktoken", "tiktoken_config.json"):
        shutil.copy(os.path.join(TOKENIZER_DIR, name), out)


@torch.no_grad()
def hf_logits(model):
    return model(torch.tensor([TOKENS])).logits[0].float().numpy()


def random_init(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            base = 1.0 if ("norm" in name or "ln_" in name) and name.endswith("weight") else 0.0
            p.copy_(base + 0.3 * torch.randn(p.shape, generator=g))
    return model


def test_gpt2_matches_transformers(tmp_path):
    cfg = transformers.GPT2Config(vocab_size=4096, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    model = random_init(transformers.GPT2LMHeadModel(cfg), 1)
    save(model, tmp_path)
    ours = load_model(str(tmp_path))
    assert np.abs(ours.forward(TOKENS) - hf_logits(model)).max() < 1e-4


@pytest.mark.parametrize("kv_heads", [4, 1])
def test_llama_matches_transformers_bf16_and_sharded(tmp_path, kv_heads):
    cfg = transformers.LlamaConfig(
        vocab_size=4096, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=kv_heads, max_position_embeddings=32,
        tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 1000.0})
    model = random_init(transformers.LlamaForCausalLM(cfg), 2)
    save(model, tmp_path / "f32", max_shard_size="100KB")  # sharded: an index + several files
    assert (tmp_path / "f32" / "model.safetensors.index.json").exists()
    assert np.abs(load_model(str(tmp_path / "f32")).forward(TOKENS) - hf_logits(model)).max() < 1e-4

    model.to(torch.bfloat16)
    save(model, tmp_path / "bf16")
    # The reference: float32 math on the bf16-rounded weights. Reloaded rather than cast back,
    # because casting the model also rounds its RoPE inv_freq buffer (a 1e-3 logit change).
    model = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "bf16", dtype=torch.float32)
    ours = load_model(str(tmp_path / "bf16")).forward(TOKENS)
    assert np.abs(ours - hf_logits(model)).max() < 1e-4


def test_llama3_rope_scaling_matches_transformers(tmp_path):
    """Llama 3.1+ checkpoints stretch RoPE's long wavelengths (rope_type "llama3"). Chosen so
    all three bands (kept, interpolated, divided) occur for head_dim 16 and theta 10000."""
    cfg = transformers.LlamaConfig(
        vocab_size=4096, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 64})
    model = random_init(transformers.LlamaForCausalLM(cfg), 3)
    save(model, tmp_path)
    ours = load_model(str(tmp_path))
    np.testing.assert_allclose(ours.inv_freq, model.model.rotary_emb.inv_freq.numpy(), rtol=1e-6)
    assert np.abs(ours.forward(TOKENS) - hf_logits(model)).max() < 1e-4
