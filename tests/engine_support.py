"""Shared by the tests/test_engine_*.py files: where the test models are, loaded once each."""
import functools
import os
import time

import pytest

from pipeline import DEFAULT_MODEL_DIR, ModelLoadError, load_model

TESTS = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(TESTS, "fixtures", "models")


def fixture_names() -> list:
    """Reference checkpoints written by tests/fixtures/make_fixtures.py (those complete)."""
    if not os.path.isdir(FIXTURES):
        return []
    return sorted(n for n in os.listdir(FIXTURES)
                  if os.path.exists(os.path.join(FIXTURES, n, "reference.json")))


def has_default_model() -> bool:
    return os.path.exists(os.path.join(DEFAULT_MODEL_DIR, "model.safetensors"))


# Tiny GGUF checkpoints (tests/gguf_support.py), written once per session to a temporary
# directory: the invariants hold for a model read from llama.cpp's format too.
GGUF_MODELS = ("gguf_llama_q4_1", "gguf_gpt2_q8_0")


@functools.lru_cache(maxsize=None)
def _gguf_file(name: str) -> str:
    import json
    import tempfile

    from gguf_support import write_checkpoint
    checkpoint = name[len("gguf_"):]
    with open(os.path.join(TESTS, "fixtures", "gguf_reference.json"), encoding="utf-8") as f:
        seed = json.load(f)["tiny"][checkpoint]["seed"]
    directory = tempfile.mkdtemp(prefix="engine-gguf-")
    return write_checkpoint(os.path.join(directory, f"{checkpoint}.gguf"), checkpoint, seed)


def model_dir(name: str) -> str:
    if name in GGUF_MODELS:
        return _gguf_file(name)
    return DEFAULT_MODEL_DIR if name == "default" else os.path.join(FIXTURES, name)


@functools.lru_cache(maxsize=None)
def get_model(name: str):
    """"default" (models/austen) or a fixture name. The default model's weights are rewritten
    while it trains, so a read that catches the file mid-write is retried once."""
    if name == "default" and not has_default_model():
        pytest.skip("the default model has not been trained yet")
    try:
        return load_model(model_dir(name))
    except ModelLoadError:
        if name != "default":
            raise
        time.sleep(2)
        return load_model(model_dir(name))


def all_models() -> list:
    return ["default"] + fixture_names() + list(GGUF_MODELS)
