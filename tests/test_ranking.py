"""pipeline.ranking.top_k: the one top-k of the app, equal to a stable sort of the negated
values."""
import numpy as np
import pytest

from pipeline.ranking import top_k


def stable_order(values, k=None):  # what every top-k computed before: a stable sort, cut at k
    return np.argsort(-np.asarray(values), kind="stable")[:k]


@pytest.mark.parametrize("seed", range(40))
def test_equal_to_a_stable_sort_with_ties_nan_and_inf(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    values = rng.integers(-3, 4, n).astype(np.float32)        # few distinct values: many ties
    if seed % 3 == 0:
        values[rng.integers(0, n)] = np.nan
    if seed % 4 == 0:
        values[rng.integers(0, n)] = -np.inf
    for k in (None, 0, 1, 2, 3, n // 2, n - 1, n, n + 5):
        assert np.array_equal(top_k(values, k), stable_order(values, k)), k


def test_ties_go_to_the_lower_index_also_at_the_cut():
    values = np.array([1.0, 3.0, 2.0, 3.0, 2.0, 2.0], dtype=np.float32)
    assert top_k(values, 2).tolist() == [1, 3]
    assert top_k(values, 3).tolist() == [1, 3, 2]              # 2, 4 and 5 tie: 2 is first
    assert top_k(values, 4).tolist() == [1, 3, 2, 4]
    assert top_k(values).tolist() == [1, 3, 2, 4, 5, 0]


def test_integers_and_a_large_vocabulary():
    rng = np.random.default_rng(7)
    logits = rng.standard_normal(50_000).astype(np.float32)
    logits[[10, 20, 30]] = logits.max() + 1                    # a three-way tie at the top
    assert top_k(logits, 5).tolist()[:3] == [10, 20, 30]
    assert np.array_equal(top_k(logits, 50), stable_order(logits, 50))
    counts = np.array([5, 9, 9, 1])
    assert top_k(counts, 2).tolist() == [1, 2]


def test_the_pipeline_uses_it_with_the_same_results_as_before():
    from pipeline.attention_analysis import strongest_heads
    from pipeline.embedding_space import cosine_neighbours, unit_rows
    from pipeline.feedforward import top_neurons
    from pipeline.generation import top_candidates
    from pipeline.sampling import top_k_keep

    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(300)).astype(np.float32)
    probs[[4, 9]] = probs.max()                                # a tie at the top
    before = np.argsort(-probs, kind="stable")[:7]
    assert [i for i, _ in top_candidates(probs, 7)] == before.tolist()
    keep = np.zeros(300, dtype=bool)
    keep[before] = True
    assert np.array_equal(top_k_keep(probs, 7), keep)
    row = rng.standard_normal(64).astype(np.float32)
    assert top_neurons(row, 5).tolist() == np.argsort(-np.abs(row), kind="stable")[:5].tolist()
    scores = rng.random((4, 6))
    flat = np.argsort(-scores.reshape(-1), kind="stable")[:3]
    assert [(layer, h) for layer, h, _ in strongest_heads(scores, 3)] == \
        [(i // 6, i % 6) for i in flat]
    W = unit_rows(rng.standard_normal((200, 16)).astype(np.float32))
    ids, sims = cosine_neighbours(W, W[5], 8, exclude=(5,))
    all_sims = W @ W[5]
    all_sims[5] = -np.inf
    assert ids.tolist() == np.argsort(-all_sims, kind="stable")[:8].tolist()
