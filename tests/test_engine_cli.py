"""`python -m pipeline generate / logits`, run as a learner would run them."""
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from engine_support import TESTS, all_models, get_model, has_default_model, model_dir
from pipeline.__main__ import generate
from pipeline.generation import decode_loop

ROOT = os.path.dirname(TESTS)
CLI_MODELS = [m for m in all_models() if m in ("default", "gpt2", "llama_mha")]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "pipeline", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def model_args(name):
    return [] if name == "default" else ["--model", model_dir(name)]


@pytest.mark.parametrize("name", CLI_MODELS)
def test_logits_json(name):
    if name == "default" and not has_default_model():
        pytest.skip("the default model has not been trained yet")
    text = "It is a truth universally acknowledged, that a single man"
    run = cli("logits", *model_args(name), "--text", text, "--top", "5")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    model = get_model(name)
    assert out["ids"] == model.tokenizer.encode(text)
    assert len(out["top"]) == 5
    for row in out["top"]:
        assert set(row) == {"id", "text", "logit", "prob"}
        assert isinstance(row["id"], int) and 0.0 <= row["prob"] <= 1.0
    logits = [row["logit"] for row in out["top"]]
    assert logits == sorted(logits, reverse=True)
    if name == "default":
        return  # its weights may be re-exported by training between two loads: schema only
    assert out["top"][0]["id"] == int(np.argmax(model.forward(out["ids"])[-1]))

    again = json.loads(cli("logits", *model_args(name), "--ids",
                           ",".join(map(str, out["ids"])), "--top", "5").stdout)
    assert again == out


@pytest.mark.parametrize("name", CLI_MODELS)
def test_generate_streams_text(name):
    if name == "default" and not has_default_model():
        pytest.skip("the default model has not been trained yet")
    run = cli("generate", *model_args(name), "--max-new-tokens", "12", "It is a truth")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("It is a truth") and len(run.stdout.strip()) > len("It is a truth")
    if name == "default":
        return  # (see above)
    model = get_model(name)
    ids = model.tokenizer.encode("It is a truth")
    new = [p.token for p in decode_loop(model, ids, 12) if p.token != model.config.eos_token_id]
    assert run.stdout == "It is a truth" + model.tokenizer.decode(new) + "\n"


def test_bad_model_dir_is_one_line_not_a_traceback(tmp_path):
    run = cli("logits", "--model", str(tmp_path), "--ids", "1,2")
    assert run.returncode == 2
    assert "config.json" in run.stderr and "Traceback" not in run.stderr


def test_generate_holds_back_partial_utf8():
    """Characters split across tokens are printed once complete, never as replacement marks."""
    if not has_default_model():
        pytest.skip("needs the default model's tokenizer")
    tok = get_model("default").tokenizer
    text = "é😀✓"
    byte_ids = [tok.encode_single_token(bytes([b])) for b in text.encode("utf-8")]

    class OneByteAtATime:  # a stand-in model whose greedy choices spell the text byte by byte
        tokenizer = tok

        class config:
            eos_token_id = None
            n_ctx = 1024

        def new_kv_cache(self):
            return []

        def next_logits(self, kv):  # [V]: the next byte of the text scores highest
            logits = np.zeros(tok.n_vocab, np.float32)
            logits[byte_ids[len(kv) - 1]] = 1.0
            return logits

        def prefill(self, ids, kv):
            kv.extend(ids)
            return self.next_logits(kv)[None]

        def decode(self, token, kv):
            kv.append(token)
            return self.next_logits(kv)

    out = io.StringIO()
    writes = []
    out.write = lambda s, w=out.write: (writes.append(s), w(s))[1]
    generate(OneByteAtATime(), "x", len(byte_ids), out=out)
    assert out.getvalue() == "x" + text + "\n"
    assert "\ufffd" not in "".join(writes)
    assert [w for w in writes if w] == ["x", "é", "😀", "✓", "\n"]
