"""pipeline/attention_analysis.py: head measures against brute-force loops and hand-made
patterns; the softmax of a score row is the pattern row; grouped heads as the engine groups them."""
import numpy as np
import pytest

from engine_support import all_models, get_model
from pipeline.attention_analysis import (
    attention_row,
    block_mean,
    first_token_score,
    head_measures,
    induction_score,
    induction_targets,
    kv_groups,
    masked_as_nan,
    previous_token_score,
    same_token_score,
    softmax_of_scores,
    stack_layers,
    strongest_heads,
)
from pipeline.model import softmax

PROMPT = [11, 40, 7, 200, 33, 40, 150, 2, 99, 64, 11, 5, 120, 40, 3, 70]


def random_patterns(rng, L, H, T):  # causal softmax of random scores: [L, H, T, T]
    scores = rng.normal(size=(L, H, T, T)).astype(np.float32) * 3
    scores[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] = -np.inf
    return softmax(scores)


def brute_force(patterns, ids):
    L, H, T, _ = patterns.shape
    out = {k: np.zeros((L, H)) for k in ("previous", "first", "same", "induction")}
    for layer in range(L):
        for h in range(H):
            p = patterns[layer, h]
            out["previous"][layer, h] = sum(p[t, t - 1] for t in range(1, T)) / (T - 1)
            out["first"][layer, h] = sum(p[t, 0] for t in range(1, T)) / (T - 1)
            out["same"][layer, h] = sum(p[t, t] for t in range(1, T)) / (T - 1)
            rows = []
            for t in range(T):
                earlier = [j for j in range(t - 1) if ids[j] == ids[t]]
                if earlier:
                    rows.append(sum(p[t, j + 1] for j in earlier))
            out["induction"][layer, h] = np.mean(rows)
    return out


def test_measures_equal_a_brute_force_loop():
    rng = np.random.default_rng(0)
    ids = [5, 1, 2, 5, 3, 1, 2, 5, 5, 9, 1, 2]
    patterns = random_patterns(rng, 3, 4, len(ids))
    got = head_measures(patterns, ids)
    want = brute_force(patterns, ids)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-7)


def one_hot_pattern(T, key_of_row):  # [T, T]: row t puts all its weight on key_of_row(t)
    p = np.zeros((T, T), dtype=np.float32)
    for t in range(T):
        p[t, key_of_row(t)] = 1.0
    return p


@pytest.mark.parametrize("T", [2, 3, 10])
def test_hand_made_heads(T):
    previous = one_hot_pattern(T, lambda t: max(t - 1, 0))
    first = one_hot_pattern(T, lambda t: 0)
    diagonal = np.eye(T, dtype=np.float32)
    uniform = np.tril(np.ones((T, T), dtype=np.float32))
    uniform /= uniform.sum(-1, keepdims=True)
    for p, want_prev, want_first, want_same in [
            (previous, 1.0, 1 / (T - 1), 0.0),     # row 1's previous token is the first token
            (first, 1 / (T - 1), 1.0, 0.0),
            (diagonal, 0.0, 0.0, 1.0),
            (uniform, *[np.mean([1 / (t + 1) for t in range(1, T)])] * 3)]:
        assert previous_token_score(p) == pytest.approx(want_prev)
        assert first_token_score(p) == pytest.approx(want_first)
        assert same_token_score(p) == pytest.approx(want_same)


def test_a_perfect_induction_head_on_repeated_text():
    ids = [7, 3, 9, 4, 7, 3, 9, 4]               # the second copy can look up what followed
    # row t >= 4 attends to the token after the earlier copy of its token: (t - 4) + 1
    p = one_hot_pattern(len(ids), lambda t: t - 3 if t >= 4 else t)
    assert induction_targets(ids).any(-1).tolist() == [False] * 4 + [True] * 4
    assert induction_score(p, ids) == pytest.approx(1.0)
    assert previous_token_score(p) == pytest.approx(0.0)
    # a previous-token head on the same text is no induction head
    assert induction_score(one_hot_pattern(8, lambda t: max(t - 1, 0)), ids) == 0.0


def test_induction_needs_a_repeated_token():
    p = np.eye(5, dtype=np.float32)
    assert induction_score(p, [1, 2, 3, 4, 5]) is None
    # a token repeated at once (j = t - 1) has no "token after" other than itself: not counted
    assert induction_score(p, [1, 1, 2, 3, 4]) is None


def test_one_token_has_no_measures():
    p = np.ones((2, 3, 1, 1), dtype=np.float32)
    for score in (previous_token_score, first_token_score, same_token_score):
        s = score(p)
        assert s.shape == (2, 3) and np.isnan(s).all()


def test_strongest_heads_in_order_with_ties_to_the_lower_head():
    scores = np.array([[0.1, 0.9, 0.3], [0.9, 0.2, 0.5]])
    assert strongest_heads(scores, 3) == [(0, 1, 0.9), (1, 0, 0.9), (1, 2, 0.5)]
    assert len(strongest_heads(scores, 10)) == 6


def test_attention_row_is_one_head_or_the_mean_of_all():
    rng = np.random.default_rng(1)
    p = random_patterns(rng, 1, 3, 6)[0]
    for t in range(6):
        np.testing.assert_array_equal(attention_row(p, 2, t), p[2, t, :t + 1])
        mean = [sum(p[h, t, s] for h in range(3)) / 3 for s in range(t + 1)]
        np.testing.assert_allclose(attention_row(p, None, t), mean, rtol=1e-6)
        assert attention_row(p, None, t).sum() == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("name", all_models())
def test_softmax_of_each_score_row_is_its_pattern_row(name):
    model = get_model(name)
    tokens = [t % model.config.vocab_size for t in PROMPT]
    _, cache = model.run_with_cache(tokens)
    L, H = model.config.n_layers, model.config.n_heads
    scores = stack_layers(cache, "attn.hook_attn_scores", L)
    patterns = stack_layers(cache, "attn.hook_pattern", L)
    assert patterns.shape == (L, H, len(tokens), len(tokens))
    for layer in range(L):
        for h in range(H):
            for t in range(len(tokens)):
                row = softmax_of_scores(scores[layer], h, t)
                np.testing.assert_allclose(row, patterns[layer, h, t], rtol=1e-6, atol=1e-7)
                assert (row[t + 1:] == 0).all() and np.isneginf(scores[layer, h, t, t + 1:]).all()


@pytest.mark.parametrize("name", all_models())
def test_query_heads_of_a_group_use_that_groups_keys(name):
    """Recompute each head's scores from its own query and its group's key: they are the
    engine's scores, so kv_groups says which heads really share a key/value head."""
    model = get_model(name)
    c = model.config
    tokens = [t % c.vocab_size for t in PROMPT]
    _, cache = model.run_with_cache(tokens)
    q_name = "attn.hook_rot_q" if c.positions == "rope" else "attn.hook_q"
    k_name = "attn.hook_rot_k" if c.positions == "rope" else "attn.hook_k"
    groups = kv_groups(c.n_heads, c.n_kv_heads)
    assert sorted(h for _, heads in groups for h in heads) == list(range(c.n_heads))
    T = len(tokens)
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for layer in range(c.n_layers):
        q, k = cache[f"blocks.{layer}.{q_name}"], cache[f"blocks.{layer}.{k_name}"]
        scores = cache[f"blocks.{layer}.attn.hook_attn_scores"]
        for g, heads in groups:
            for h in heads:
                mine = q[:, h] @ k[:, g].T * c.head_dim ** -0.5
                np.testing.assert_allclose(mine[~mask], scores[h][~mask], rtol=1e-4, atol=1e-5)


def test_default_model_groups_are_four_query_heads_per_kv_head():
    assert kv_groups(8, 2) == [(0, [0, 1, 2, 3]), (1, [4, 5, 6, 7])]
    assert kv_groups(4, 1) == [(0, [0, 1, 2, 3])]
    assert kv_groups(4, 4) == [(0, [0]), (1, [1]), (2, [2]), (3, [3])]


def test_masked_cells_become_nan_and_blocks_average_the_visible_ones():
    rng = np.random.default_rng(2)
    p = random_patterns(rng, 1, 2, 7)
    m = masked_as_nan(p)
    assert np.isnan(m[..., np.triu_indices(7, 1)[0], np.triu_indices(7, 1)[1]]).all()
    np.testing.assert_array_equal(np.nan_to_num(m), p)
    b = block_mean(m, 3)                                   # 7 tokens -> blocks of 3, 3, 1
    assert b.shape == (1, 2, 3, 3)
    for i in range(3):
        for j in range(3):
            cells = [m[0, 1, r, c] for r in range(3 * i, min(3 * i + 3, 7))
                     for c in range(3 * j, min(3 * j + 3, 7)) if not np.isnan(m[0, 1, r, c])]
            if cells:
                assert b[0, 1, i, j] == pytest.approx(np.mean(cells), rel=1e-6)
            else:
                assert np.isnan(b[0, 1, i, j])
    np.testing.assert_array_equal(block_mean(m, 1), m)
