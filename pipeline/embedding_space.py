"""The geometry of a token embedding matrix: a 2D map, nearest neighbours, analogies.

`W` is the token embedding table [V, d] (row i is the vector the model reads for token i).
Similarity is cosine similarity: the dot product of the rows made unit length, so a token's
frequency (which tends to set the length of its vector) does not decide who its neighbours are.
"""
import numpy as np

from pipeline.ranking import top_k


def unit_rows(W):  # [V, d] -> [V, d]: each row divided by its length
    norms = np.linalg.norm(W, axis=-1, keepdims=True)
    return W / np.maximum(norms, np.float32(1e-12))


def pca_2d(W):
    """The two directions along which the rows of W vary most, and every row projected on them.

    Returns (coords [V, 2], components [2, d], explained [2]): the components are the top two
    unit eigenvectors of the covariance of the centred rows (orthogonal to each other), and
    `explained` is the share of the total variance each one carries.
    """
    W = np.asarray(W, dtype=np.float32)
    centred = W - W.mean(axis=0)                                     # [V, d]
    # The d x d product in float32 (BLAS sgemm: 0.1 s for SmolLM2's 49,152 x 576 table on one
    # core, where float64 took 1.4 s; the difference is ~5e-7 of the largest entry), then
    # float64 for the small eigenproblem, so that eigh is exact enough.
    cov = (centred.T @ centred).astype(np.float64) / (len(W) - 1)    # [d, d]
    eigenvalues, eigenvectors = np.linalg.eigh(cov)                  # ascending order
    top = top_k(eigenvalues, 2)
    components = eigenvectors[:, top].T                              # [2, d]
    # an eigenvector's sign is arbitrary: make each one's largest entry positive, so the map
    # does not flip between runs or machines
    signs = np.sign(components[np.arange(2), np.abs(components).argmax(axis=1)])
    components = (components * signs[:, None]).astype(np.float32)
    explained = eigenvalues[top] / eigenvalues.sum()                 # [2]
    return centred @ components.T, components, explained.astype(np.float32)  # [V, 2]


def cosine_neighbours(W_unit, query, k, exclude=()):
    """The k rows of W_unit most similar to `query` (a vector [d]) by cosine, best first.

    W_unit has unit rows (see unit_rows). Returns (ids [k], similarities [k]); ids in
    `exclude` are never returned.
    """
    query = np.asarray(query, dtype=np.float32)
    sims = W_unit @ (query / max(float(np.linalg.norm(query)), 1e-12))  # [V]
    if len(exclude):
        sims = sims.copy()
        sims[list(exclude)] = -np.inf
    k = min(k, len(sims) - len(set(exclude)))
    best = top_k(sims, k)                                            # by similarity, then id
    return best, sims[best]


def neighbours_of_tokens(W_unit, ids, k):
    """For each token id: its k nearest other tokens. [(ids [k], similarities [k]), ...]

    cosine_neighbours for every id at once: one [n, d] x [d, V] product instead of n of them
    (14 tokens of a 49,152-row vocabulary: 25 ms instead of 160)."""
    ids = [int(i) for i in ids]
    if not ids:
        return []
    queries = W_unit[ids]
    norms = np.maximum(np.linalg.norm(queries, axis=-1, keepdims=True), 1e-12)
    sims = (queries / norms) @ W_unit.T                                  # [n, V]
    sims[np.arange(len(ids)), ids] = -np.inf
    k = min(k, W_unit.shape[0] - 1)
    found = []
    for row in sims:
        best = top_k(row, k)
        found.append((best, row[best]))
    return found


def analogy_vector(W_unit, a, b, c):  # -> [d]: a - b + c, on unit-length embeddings
    """The 3CosAdd rule of word2vec's analogies ("king - man + woman"), as gensim computes it:
    the three vectors are made unit length first, so no one word dominates by its length."""
    return W_unit[a] - W_unit[b] + W_unit[c]


def analogy(W_unit, a, b, c, k):
    """Tokens nearest to a - b + c by cosine, a, b and c themselves excluded (else a or c
    would usually win). Returns (ids [k], similarities [k])."""
    return cosine_neighbours(W_unit, analogy_vector(W_unit, a, b, c), k, exclude=(a, b, c))


def rank_of(W_unit, query, token, exclude=()):
    """1-based rank of `token` among all tokens by cosine to `query` (`exclude` not ranked),
    and its similarity."""
    sims = W_unit @ (query / max(float(np.linalg.norm(query)), 1e-12))
    mask = np.ones(len(sims), dtype=bool)
    mask[list(exclude)] = False
    return int((sims[mask] > sims[token]).sum()) + 1, float(sims[token])


def cosine_matrix(vectors):  # [T, d] -> [T, T]: cosine similarity of every pair of rows
    unit = unit_rows(np.asarray(vectors, dtype=np.float32))
    return unit @ unit.T


def far_rows(W):
    """The rows of W that stand apart by their length: those longer than the widest gap between
    neighbouring values of the sorted row norms (in the longest tenth of the rows).

    A row whose token never occurs as an input in the training text (a byte no UTF-8 text of
    the corpus holds, a BPE piece always merged further) is never read; with tied embeddings it
    is moved only as an output, and the softmax pushes every such token down the same way: the
    rows end up as one tight cluster of long vectors. Returns (ids, threshold): the
    ids in increasing order and the norm that separates them (the gap's midpoint); no ids when
    the gap is not wide (a tenth of the other rows' spread) or cuts off under 0.5% of the rows
    (an outlier or two, not a group).
    """
    norms = np.linalg.norm(np.asarray(W, dtype=np.float32), axis=-1)   # [V]
    ordered = np.sort(norms)
    tail = ordered[int(len(ordered) * 0.9) - 1:]                       # the longest tenth
    gaps = np.diff(tail)
    at = int(gaps.argmax())
    body = ordered[:int(len(ordered) * 0.9)]
    if (gaps[at] <= float(body.max() - body.min()) / 10
            or len(tail) - 1 - at < len(norms) / 200):       # no clear break, or no group
        return np.zeros(0, dtype=np.int64), float("inf")
    threshold = float(tail[at] + tail[at + 1]) / 2
    return np.flatnonzero(norms > threshold), threshold
