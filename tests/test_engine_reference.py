"""The engine against transformers' own outputs, stored with each fixture checkpoint
(tests/fixtures/models/<name>/reference.json): the best oracle is a reference implementation."""
import json
import os

import numpy as np
import pytest

from engine_support import FIXTURES, fixture_names, get_model
from pipeline.generation import decode_loop

pytestmark = pytest.mark.skipif(not fixture_names(), reason="no fixture checkpoints yet")


def reference(name):
    with open(os.path.join(FIXTURES, name, "reference.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name", fixture_names())
def test_logits_match_transformers(name):
    ref, model = reference(name), get_model(name)
    expected = np.array(ref["logits"], dtype=np.float32)
    logits = model.forward(ref["input_ids"])
    assert logits.shape == expected.shape
    diff = np.abs(logits - expected).max()
    assert diff <= 1e-4, f"{name}: max |logit difference| {diff:.3g}"


@pytest.mark.parametrize("name", fixture_names())
def test_greedy_tokens_match_transformers(name):
    ref, model = reference(name), get_model(name)
    ids = [p.token for p in decode_loop(model, ref["input_ids"], len(ref["greedy_ids"]),
                                        stop_at_eos=False)]
    assert ids == ref["greedy_ids"]
