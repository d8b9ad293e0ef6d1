"""The k largest values of a vector, largest first: every "top k" in the app comes from here.

Ties are broken by the lower index, as a stable sort of the negated values would: the same
prompt always shows the same candidates in the same order.
"""
import numpy as np


def top_k(values, k=None):  # [n] -> [min(k, n)] indices, largest value first
    """Indices of the k largest values, largest first, ties by lower index; k = None: all n.

    Equal to `np.argsort(-values, kind="stable")[:k]`; for a small k it sorts only the values
    that can be in the top k (those at least as large as the k-th largest).
    """
    neg = -np.asarray(values)
    n = neg.shape[0]
    if k is None or k >= n:
        return np.argsort(neg, kind="stable")[:k]
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    cut = np.partition(neg, k - 1)[k - 1]                 # the k-th largest value, negated
    if np.isnan(cut):                                     # NaNs sort last: not a usable cut
        return np.argsort(neg, kind="stable")[:k]
    candidates = np.flatnonzero(neg <= cut)               # ascending index: ties stay in order
    return candidates[np.argsort(neg[candidates], kind="stable")[:k]]
