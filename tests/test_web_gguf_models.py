"""Every section answers 200 with its content, never a 500, on a tiny GGUF checkpoint of each
architecture and vocabulary pipeline/gguf_file.py reads beyond the default ones (Llama 3.1's
rope_freqs, a SentencePiece vocabulary, Qwen2, Qwen3, Phi-3, Gemma 2, Gemma 3, Gemma 3's linear
RoPE scaling, Phi-3's LongRoPE): what the app
shows of a file given with `--model`. The checkpoints are tests/gguf_support.py's, with the
seeds of tests/fixtures/gguf_reference.json."""
import json
import os

import numpy as np
import pytest

from gguf_support import TESTS_DIR, write_checkpoint
from pipeline import load_model
from web.core.registry import SECTIONS
from web_support import HX

with open(os.path.join(TESTS_DIR, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
    SEEDS = {name: ref["seed"] for name, ref in json.load(f)["tiny"].items()}
NAMES = ["llama3_f32", "llama_spm_f32", "qwen2_f32", "qwen3_f32", "phi3_q8_0", "gemma2_f32",
         "gemma3_f32", "gemma3_linear_f32", "phi3_longrope_f32", "phi4mini_f32"]
PROMPT = "It is a truth universally acknowledged, that 12 men"


@pytest.fixture(scope="module", params=NAMES)
def gguf_client(request, tmp_path_factory):
    from app import create_app
    name = request.param
    path = write_checkpoint(str(tmp_path_factory.mktemp("gguf") / f"{name}.gguf"), name,
                            SEEDS[name])
    app = create_app({"MODEL": load_model(path), "TESTING": True, "PROBE_ENCODINGS": False,
                      "WARM_CACHES": False})
    return name, app.test_client()


@pytest.mark.parametrize("section", [s.id for s in SECTIONS])
def test_every_section_answers_for_every_gguf_architecture(gguf_client, section):
    name, client = gguf_client
    r = client.get(f"/section/{section}", query_string={"prompt": PROMPT},
                   headers={**HX, "HX-Target": section})
    assert r.status_code == 200, (name, section, r.status_code)
    assert f'id="{section}"' in r.get_data(as_text=True)


def test_logit_lens_after_the_last_block_is_the_output_on_gemma2(tmp_path):
    """The lens applies the model's own last steps, Gemma 2's final soft-cap included."""
    from pipeline.lens import logit_lens
    model = load_model(write_checkpoint(str(tmp_path / "g.gguf"), "gemma2_f32",
                                        SEEDS["gemma2_f32"]))
    ids = model.tokenizer.encode(PROMPT)
    logits, cache = model.run_with_cache(ids)
    lens = logit_lens(model, cache)
    np.testing.assert_allclose(lens[-1], logits, rtol=0, atol=1e-5)
    np.testing.assert_allclose(lens[1], model.forward(ids, n_layers=1), rtol=0, atol=1e-5)
