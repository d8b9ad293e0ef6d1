"""pipeline/embedding_space.py against independent computations: PCA vs an SVD of the data,
neighbours vs a brute-force loop, the analogy's arithmetic, and the examples the page offers."""
import numpy as np
import pytest

from pipeline import DEFAULT_MODEL_DIR, load_model
from pipeline.embedding_space import (
    analogy,
    analogy_vector,
    cosine_neighbours,
    neighbours_of_tokens,
    pca_2d,
    rank_of,
    unit_rows,
)
from web_support import has_default_model


@pytest.fixture(scope="module")
def wte():
    if not has_default_model():
        pytest.skip(f"{DEFAULT_MODEL_DIR}/model.safetensors is missing")
    model = load_model(None)
    return model.params["wte"], model.tokenizer


def test_pca_equals_the_svd_of_the_centred_data(wte):
    W, _ = wte
    coords, components, explained = pca_2d(W)
    X = W.astype(np.float64) - W.astype(np.float64).mean(0)
    _, S, Vt = np.linalg.svd(X, full_matrices=False)           # independent of the covariance
    for i in range(2):                                         # equal up to sign
        assert abs(abs(float(components[i] @ Vt[i])) - 1) < 1e-5
    np.testing.assert_allclose(explained, (S ** 2 / (S ** 2).sum())[:2], rtol=1e-5)
    np.testing.assert_allclose(components @ components.T, np.eye(2), atol=1e-5)
    np.testing.assert_allclose(coords, X @ components.T, atol=1e-4)
    # the projections along the components carry exactly the explained share of the variance
    np.testing.assert_allclose(coords.var(0, ddof=1) / X.var(0, ddof=1).sum(), explained,
                               rtol=1e-4)


def test_pca_finds_a_planted_direction():
    rng = np.random.default_rng(0)
    direction = rng.normal(size=16)
    direction /= np.linalg.norm(direction)
    W = (rng.normal(size=(500, 1)) * 10 * direction + rng.normal(size=(500, 16))).astype(
        np.float32)
    _, components, explained = pca_2d(W)
    assert abs(float(components[0] @ direction)) > 0.99
    assert explained[0] > 0.8 > explained[1]
    assert components.dtype == np.float32


def brute_force_cosines(W, v):
    return np.array([float(np.dot(w, v) / (np.linalg.norm(w) * np.linalg.norm(v))) for w in W])


def test_neighbours_equal_a_brute_force_ranking(wte):
    W, tok = wte
    unit = unit_rows(W)
    for token in (tok.encode(" man")[0], tok.encode(",")[0], 0, len(W) - 1):
        ids, sims = cosine_neighbours(unit, unit[token], 10, exclude=(token,))
        cos = brute_force_cosines(W, W[token])
        cos[token] = -np.inf
        order = sorted(range(len(W)), key=lambda i: (-cos[i], i))[:10]
        np.testing.assert_allclose(sims, cos[order], atol=1e-5)
        assert list(ids) == order or np.allclose(cos[list(ids)], cos[order], atol=1e-6)
        assert token not in ids


def test_neighbours_of_many_tokens_at_once_equal_one_at_a_time(wte):
    W, tok = wte
    unit = unit_rows(W)
    ids = [tok.encode(" man")[0], tok.encode(",")[0], 0, len(W) - 1, 7, 7]
    together = neighbours_of_tokens(unit, ids, 12)
    assert len(together) == len(ids)
    for token, (nids, sims) in zip(ids, together, strict=True):
        alone_ids, alone_sims = cosine_neighbours(unit, unit[token], 12, exclude=(token,))
        np.testing.assert_allclose(sims, alone_sims, atol=1e-6)
        assert token not in nids and len(nids) == 12
        assert list(nids) == list(alone_ids) or np.allclose(sims, alone_sims, atol=1e-6)
    assert neighbours_of_tokens(unit, [], 5) == []


def test_analogy_is_the_arithmetic_on_unit_vectors(wte):
    W, tok = wte
    unit = unit_rows(W)
    a, b, c = (tok.encode(w)[0] for w in (" brother", " he", " she"))
    v = W[a] / np.linalg.norm(W[a]) - W[b] / np.linalg.norm(W[b]) + W[c] / np.linalg.norm(W[c])
    np.testing.assert_allclose(analogy_vector(unit, a, b, c), v, atol=1e-6)
    ids, sims = analogy(unit, a, b, c, 5)
    cos = brute_force_cosines(W, v)
    cos[[a, b, c]] = -np.inf
    np.testing.assert_allclose(sims, np.sort(cos)[::-1][:5], atol=1e-5)
    assert not {a, b, c} & set(ids.tolist())
    # the rank of each listed result is its place in the list
    for place, i in enumerate(ids, 1):
        assert rank_of(unit, v, int(i), exclude=(a, b, c))[0] == place


def test_analogy_recovers_a_planted_relation():
    # 4 words built from two features (royal/common x male/female) plus noise words
    rng = np.random.default_rng(1)
    royal, common, male, female = (rng.normal(size=32) for _ in range(4))
    words = np.stack([royal + male, royal + female, common + male, common + female])
    W = np.concatenate([words, rng.normal(size=(200, 32))]).astype(np.float32)
    ids, _ = analogy(unit_rows(W), 0, 2, 3, 1)        # king - man + woman
    assert ids[0] == 1                                 # queen


def test_the_pages_examples_say_what_the_model_gives(wte):
    """web/sections/embeddings.py documents these results; they must stay true."""
    from web.sections.embeddings import EXAMPLES, single_token
    W, tok = wte
    unit = unit_rows(W)
    results = {}
    for ex in EXAMPLES:
        a, b, c = (single_token(tok, ex[k])[0] for k in "abc")
        ids, _ = analogy(unit, a, b, c, 3)
        results[ex["a"]] = tok.decode([int(ids[0])])
    assert results["his"] == " her"
    assert results["brother"] == " sister"
    assert results["was"] == " had"
    assert results["father"] != " mother"


def test_single_token_prefers_the_leading_space_form(wte):
    from web.sections.embeddings import single_token
    _, tok = wte
    assert single_token(tok, "man") == (tok.encode(" man")[0], " man")
    assert single_token(tok, "  man ") == (tok.encode(" man")[0], " man")
    assert single_token(tok, "king") == (tok.encode("king")[0], "king")   # " king" is 2 tokens
    token, message = single_token(tok, "queen")
    assert token is None and "“·queen” is 2 tokens" in message
