"""Published model configurations, as their `config.json` files give them.

The explainer computes sizes it cannot run (parameter counts, KV-cache bytes, weight memory,
roofline points) by applying a named formula to these configs. Each entry holds the fields of
the model's Hugging Face `config.json` (only the ones the formulas read) and is parsed by the
same code that parses a checkpoint the app loads (`pipeline.loader`), so a published model and
the running model go through one path.

`reported_params` is the parameter count the publisher's checkpoint reports (the safetensors
weights, a tied embedding counted once); `nominal` is the size in the model's name or paper.
GPT-2's paper (Radford et al. 2019, table 2) gave 117M / 345M / 762M / 1542M; the released
checkpoints hold 124M / 355M / 774M / 1.56B. Counting the checkpoints' arrays (pipeline.sizes)
does not give the paper's numbers, with or without the position and token embedding tables, and
the paper does not say what it counted: both are kept because learners meet both.
"""
from dataclasses import dataclass

from pipeline.loader import gpt2_config, llama_config
from pipeline.model import ModelConfig


@dataclass(frozen=True)
class Published:
    name: str              # as learners know it
    repo: str              # the Hugging Face repository its config.json comes from
    nominal: str           # size in the name or paper
    reported_params: int   # parameters in the released checkpoint (None: not recorded here)
    hf_config: dict        # the config.json fields the formulas need, copied from the repo

    @property
    def config(self) -> ModelConfig:
        parse = gpt2_config if self.hf_config["model_type"] == "gpt2" else llama_config
        return parse(self.hf_config, self.repo)


def _gpt2(n_embd, n_layer, n_head):
    return dict(model_type="gpt2", vocab_size=50257, n_positions=1024, n_ctx=1024,
                n_embd=n_embd, n_layer=n_layer, n_head=n_head, layer_norm_epsilon=1e-5,
                activation_function="gelu_new", bos_token_id=50256, eos_token_id=50256)


def _llama(hidden, intermediate, layers, heads, kv_heads, vocab, ctx, theta, tied,
           head_dim=None, scaling=None, bos=None, eos=None):
    cfg = dict(model_type="llama", hidden_size=hidden, intermediate_size=intermediate,
               num_hidden_layers=layers, num_attention_heads=heads,
               num_key_value_heads=kv_heads, vocab_size=vocab, max_position_embeddings=ctx,
               rms_norm_eps=1e-5, rope_theta=theta, tie_word_embeddings=tied,
               hidden_act="silu", bos_token_id=bos, eos_token_id=eos)
    if head_dim:
        cfg["head_dim"] = head_dim
    if scaling:
        cfg["rope_scaling"] = dict(zip(("factor", "low_freq_factor", "high_freq_factor",
                                        "original_max_position_embeddings"), scaling, strict=True),
                                   rope_type="llama3")
    return cfg


L31_SCALING = (8.0, 1.0, 4.0, 8192)
L32_SCALING = (32.0, 1.0, 4.0, 8192)

PUBLISHED = (
    Published("GPT-2 small", "openai-community/gpt2", "117M (paper)", 124_439_808,
              _gpt2(768, 12, 12)),
    Published("GPT-2 medium", "openai-community/gpt2-medium", "345M (paper)", 354_823_168,
              _gpt2(1024, 24, 16)),
    Published("GPT-2 large", "openai-community/gpt2-large", "762M (paper)", 774_030_080,
              _gpt2(1280, 36, 20)),
    Published("GPT-2 XL", "openai-community/gpt2-xl", "1542M (paper)", 1_557_611_200,
              _gpt2(1600, 48, 25)),
    Published("SmolLM 135M", "HuggingFaceTB/SmolLM-135M", "135M", 134_515_008,
              _llama(576, 1536, 30, 9, 3, 49152, 2048, 10000.0, True, bos=0, eos=0)),
    Published("TinyLlama 1.1B", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "1.1B",
              1_100_048_384, _llama(2048, 5632, 22, 32, 4, 32000, 2048, 10000.0, False,
                                    bos=1, eos=2)),
    Published("Llama 3.2 1B", "meta-llama/Llama-3.2-1B", "1B", 1_235_814_400,
              _llama(2048, 8192, 16, 32, 8, 128256, 131072, 500000.0, True, head_dim=64,
                     scaling=L32_SCALING, bos=128000, eos=128001)),
    Published("Llama 3.2 3B", "meta-llama/Llama-3.2-3B", "3B", 3_212_749_824,
              _llama(3072, 8192, 28, 24, 8, 128256, 131072, 500000.0, True, head_dim=128,
                     scaling=L32_SCALING, bos=128000, eos=128001)),
    Published("Llama 2 7B", "meta-llama/Llama-2-7b-hf", "7B", 6_738_415_616,
              _llama(4096, 11008, 32, 32, 32, 32000, 4096, 10000.0, False, bos=1, eos=2)),
    Published("Llama 3 8B", "meta-llama/Meta-Llama-3-8B", "8B", 8_030_261_248,
              _llama(4096, 14336, 32, 32, 8, 128256, 8192, 500000.0, False,
                     bos=128000, eos=128001)),
    Published("Llama 3.1 8B", "meta-llama/Llama-3.1-8B", "8B", 8_030_261_248,
              _llama(4096, 14336, 32, 32, 8, 128256, 131072, 500000.0, False,
                     scaling=L31_SCALING, bos=128000, eos=128001)),
    Published("Llama 2 70B", "meta-llama/Llama-2-70b-hf", "70B", 68_976_648_192,
              _llama(8192, 28672, 80, 64, 8, 32000, 4096, 10000.0, False, bos=1, eos=2)),
    Published("Llama 3 70B", "meta-llama/Meta-Llama-3-70B", "70B", 70_553_706_496,
              _llama(8192, 28672, 80, 64, 8, 128256, 8192, 500000.0, False,
                     bos=128000, eos=128001)),
    Published("Llama 3.1 70B", "meta-llama/Llama-3.1-70B", "70B", 70_553_706_496,
              _llama(8192, 28672, 80, 64, 8, 128256, 131072, 500000.0, False,
                     scaling=L31_SCALING, bos=128000, eos=128001)),
    Published("Llama 3.1 405B", "meta-llama/Llama-3.1-405B", "405B", 405_853_388_800,
              _llama(16384, 53248, 126, 128, 8, 128256, 131072, 500000.0, False,
                     scaling=L31_SCALING, bos=128000, eos=128001)),
)


def published(name: str) -> Published:
    """The entry called `name` (KeyError naming the known ones otherwise)."""
    for p in PUBLISHED:
        if p.name == name:
            return p
    raise KeyError(f"{name!r}: known are {', '.join(p.name for p in PUBLISHED)}")


# --- KV cache: attention shapes of families the loader does not run ---------------------------
# The KV-cache formula needs only the attention shape. For a family the loader cannot parse
# (its blocks differ from GPT-2's and Llama's), the config.json fields are kept here and read
# by a parser that follows transformers' own code for that family.

@dataclass(frozen=True)
class AttentionShape:
    """The config fields that fix the size of a KV cache, named as in ModelConfig."""
    n_layers: int
    n_heads: int           # query heads
    n_kv_heads: int        # key/value heads: n_heads (multi-head), 1 (multi-query), or between
    head_dim: int
    n_ctx: int             # the context window the model was trained for


def falcon_attention(hf: dict) -> AttentionShape:
    """transformers' FalconConfig / FalconAttention: head_dim = hidden_size / heads; one k/v head
    when `multi_query` (unless `new_decoder_architecture`, which uses num_kv_heads); the context
    window defaults to 2048 (max_position_embeddings is not in falcon-7b's config.json)."""
    n_heads = int(hf["num_attention_heads"])
    n_kv = int(hf.get("num_kv_heads") or n_heads)
    if hf.get("multi_query", True) and not hf.get("new_decoder_architecture", False):
        n_kv = 1
    return AttentionShape(n_layers=int(hf["num_hidden_layers"]), n_heads=n_heads,
                          n_kv_heads=n_kv, head_dim=int(hf["hidden_size"]) // n_heads,
                          n_ctx=int(hf.get("max_position_embeddings", 2048)))


@dataclass(frozen=True)
class PublishedAttention:
    name: str
    repo: str              # the Hugging Face repository its config.json comes from
    nominal: str
    hf_config: dict        # the config.json fields the parser reads, copied from the repo

    @property
    def config(self) -> AttentionShape:
        return {"falcon": falcon_attention}[self.hf_config["model_type"]](self.hf_config)


KV_ONLY = (
    # tiiuae/falcon-7b config.json: multi-query attention (71 query heads share one key/value
    # head of width 4544 / 71 = 64; its fused query_key_value projection is 4544 -> 4672 =
    # (71 + 2) x 64). The Falcon paper (Almazrouei et al. 2023) describes the same.
    PublishedAttention("Falcon 7B", "tiiuae/falcon-7b", "7B", dict(
        model_type="falcon", hidden_size=4544, num_attention_heads=71, num_hidden_layers=32,
        multi_query=True, new_decoder_architecture=False, vocab_size=65024)),
)


def attention_config(name: str):
    """The attention shape (ModelConfig or AttentionShape) of any published model by name."""
    for p in PUBLISHED + KV_ONLY:
        if p.name == name:
            return p.config
    raise KeyError(f"{name!r}: known are {', '.join(p.name for p in PUBLISHED + KV_ONLY)}")
