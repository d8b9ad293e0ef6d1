"""pipeline/costs.py: the one cost table per model. Measured on the Austen model (small repeats:
what the numbers are does not matter, how they are taken and read does)."""
import os

import pytest

from pipeline import DEFAULT_MODEL_DIR, load_model
from pipeline.costs import CostTable, Timing, fmt_ms, measure_costs, price_speculative
from web_support import has_default_model

TEXT = "It is a truth universally acknowledged, that a single man in possession"
LENGTHS = (8, 16, 32, 64)


@pytest.fixture(scope="module")
def austen():
    if not has_default_model():
        pytest.skip("models/austen/model.safetensors is missing")
    return load_model(None)


class Recorder:
    """The model, its timed calls written down in order (prefill: its token count)."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def prefill(self, tokens, kv, cache=None):
        self.calls.append(("prefill", len(tokens), len(kv)))
        return self.model.prefill(tokens, kv, cache)

    def decode(self, token, kv, cache=None):
        self.calls.append(("decode", 1, len(kv)))
        return self.model.decode(token, kv, cache)

    def decode_batch(self, tokens, kvs):
        self.calls.append(("batch", len(tokens), len(kvs[0])))
        return self.model.decode_batch(tokens, kvs)


@pytest.fixture(scope="module")
def measured(austen):
    rec = Recorder(austen)
    ids = austen.tokenizer.encode_ordinary(TEXT)
    table = measure_costs(rec, ids, LENGTHS, pass_context=16, verify_sizes=(1, 2, 3),
                          batch_sizes=(1, 2, 3), repeats=3)
    return table, rec.calls


def test_every_entry_is_timed_repeats_times_and_a_step_of_one_is_the_decode_step(measured):
    table, _ = measured
    assert sorted(table.prefill) == sorted(table.decode) == list(LENGTHS)
    assert sorted(table.verify) == [1, 2, 3] and sorted(table.batch) == [1, 2, 3]
    for t in [*table.prefill.values(), *table.decode.values(), *table.verify.values(),
              *table.batch.values()]:
        assert t.n == 3 and all(s > 0 for s in t.samples)
        assert t.lo <= t.median <= t.hi
    # one decode step, one value: the pass over 1 token and the batch of 1 are its timings
    assert table.verify[1] is table.decode[16] and table.batch[1] is table.decode[16]
    assert table.verify_steps(1) == table.batch_steps(1) == 1.0
    assert table.verify_steps(3) == table.verify[3].median / table.decode[16].median


def test_the_repeats_are_interleaved(measured):
    """Each repeat goes once through every entry, in the same order: the calls of the whole
    measurement are one round repeated."""
    table, calls = measured
    # the set-up (filling the pass_context cache once) comes first
    assert calls[0] == ("prefill", 16, 0)
    rounds = calls[1:]
    n = len(rounds) // table.repeats
    one = rounds[:n]
    assert rounds == one * table.repeats
    expected = []
    for m in LENGTHS:
        expected += [("prefill", m, 0), ("decode", 1, m)]
    expected += [("prefill", 2, 16), ("prefill", 3, 16), ("batch", 2, 16), ("batch", 3, 16)]
    assert one == expected


def test_reading_the_table_at_a_measured_length_between_and_outside(measured):
    table, _ = measured
    at = table.decode_at(16)
    t = table.decode[16]
    assert (at.seconds, at.lo, at.hi, at.between, at.nearest) == (t.median, t.lo, t.hi, None,
                                                                   None)
    assert at.how() == f"median of 3, range {fmt_ms(1000 * t.lo)}–{fmt_ms(1000 * t.hi)} ms"
    # 26 tokens: between 16 and 32, linearly
    mid = table.prefill_at(26)
    a, b, w = table.prefill[16], table.prefill[32], 10 / 16
    assert mid.between == (16, 32)
    assert mid.seconds == pytest.approx((1 - w) * a.median + w * b.median)
    assert mid.lo == pytest.approx((1 - w) * a.lo + w * b.lo)
    assert mid.hi == pytest.approx((1 - w) * a.hi + w * b.hi)
    assert mid.how().endswith("; interpolated from 16 and 32 tokens")
    assert mid.phrase() == f"a prefill at 26 tokens: {fmt_ms(mid.ms)} ms ({mid.how()})"
    # outside: the nearest length, said
    low, high = table.decode_at(3), table.decode_at(100)
    assert low.seconds == table.decode[8].median and low.nearest == 8
    assert high.seconds == table.decode[64].median and high.nearest == 64
    assert low.how().endswith("measured at 8 tokens, the shortest length timed")
    assert high.how().endswith("measured at 64 tokens, the longest length timed")


def test_fmt_ms_keeps_three_figures():
    assert [fmt_ms(x) for x in (0.4567, 1.845, 46.64, 154.4, 1318.2)] == \
        ["0.46", "1.84", "46.6", "154", "1318"]


def table_of(step_s: float, verify: dict, draft_s: float = None) -> CostTable:
    step = Timing((step_s,))
    return CostTable(prefill={32: step}, decode={32: step},
                     verify={1: step, **{k: Timing((v,)) for k, v in verify.items()}},
                     batch={1: step}, pass_context=32, repeats=1, measured_at=0.0,
                     draft_decode=None if draft_s is None else Timing((draft_s,)))


def test_a_speculative_run_is_priced_in_decode_steps():
    """Passes at the table's price for their size, draft steps at c, other time at the step."""
    table = table_of(0.010, {2: 0.018, 5: 0.025}, draft_s=0.002)
    priced = price_speculative(table, [5, 5, 1, 2], n_tokens=9, draft_steps=12)
    assert priced.pass_steps == pytest.approx(2.5 + 2.5 + 1 + 1.8)
    assert priced.c == pytest.approx(0.2)
    assert priced.steps == pytest.approx(7.8 + 12 * 0.2)
    assert priced.mean_pass_steps == pytest.approx(7.8 / 4)
    assert priced.tokens_per_pass == 9 / 4
    assert priced.speedup == pytest.approx(9 / 10.2)
    lookup = price_speculative(table, [5, 1], n_tokens=4, c=0.0, other_seconds=0.001)
    assert lookup.other_steps == pytest.approx(0.1)
    assert lookup.speedup == pytest.approx(4 / (2.5 + 1 + 0.1))


def test_the_draft_ratio_is_measured_when_a_draft_is_given(austen):
    path = os.path.join(os.path.dirname(DEFAULT_MODEL_DIR), "austen-draft")
    if not os.path.isdir(path):
        pytest.skip("models/austen-draft is missing")
    draft = load_model(path)
    ids = austen.tokenizer.encode_ordinary(TEXT)
    table = measure_costs(austen, ids, (8, 16), pass_context=16, verify_sizes=(1, 2),
                          batch_sizes=(1,), repeats=2, draft=draft)
    assert table.draft_decode.n == 2
    assert table.draft_ratio == table.draft_decode.median / table.decode[16].median
    assert measure_costs(austen, ids, (8, 16), pass_context=16, verify_sizes=(1, 2),
                         batch_sizes=(1,), repeats=1).draft_decode is None


def test_a_timings_median_is_numpys():
    import numpy as np
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 5, 6, 9):
        for _ in range(50):
            samples = tuple(float(x) for x in rng.lognormal(-5, 1, n))
            assert Timing(samples).median == float(np.median(samples))
    assert Timing((0.3, 0.1, 0.2, 0.1)).median == 0.15000000000000002 == np.median(
        [0.3, 0.1, 0.2, 0.1])
