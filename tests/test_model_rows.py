"""pipeline.model.matmul: a product of a few rows padded to a multiple of ROWS is still the
product of those rows (the zero rows are dropped), for every row count a decode step asks for."""
import numpy as np
import pytest

from pipeline import model as M


@pytest.mark.parametrize("rows", range(1, 12))
def test_padded_product_is_the_product_of_the_rows(rows):
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 48), dtype=np.float32)
    w = rng.standard_normal((48, 80), dtype=np.float32)
    got = M.matmul(x, w)
    assert got.shape == (rows, 80) and got.dtype == np.float32
    # Each row against a float64 product of the same row: the padding adds nothing.
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.astype(np.float64),
                               rtol=1e-5, atol=1e-4)
    # A row count that is not a multiple of ROWS runs as the padded product, its first rows.
    padded = -rows % M.ROWS if 1 < rows < 2 * M.ROWS else 0
    if padded:
        whole = np.concatenate([x, np.zeros((padded, 48), dtype=np.float32)]) @ w
        assert np.array_equal(got, whole[:rows]) and got.base is None   # no padded rows held
    else:
        assert np.array_equal(got, x @ w)


def test_a_vector_and_one_row_are_not_padded():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(48, dtype=np.float32)
    w = rng.standard_normal((48, 16), dtype=np.float32)
    assert np.array_equal(M.matmul(x, w), x @ w)
    assert np.array_equal(M.matmul(x[None], w), x[None] @ w)


def test_linear_adds_the_bias_to_the_padded_product():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 8), dtype=np.float32)
    w = rng.standard_normal((8, 5), dtype=np.float32)
    b = rng.standard_normal(5, dtype=np.float32)
    assert np.array_equal(M.linear(x, w, b), M.matmul(x, w) + b)
