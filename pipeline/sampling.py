"""From the model's scores for the next token to the token that is chosen.

The logits section and the sampler both turn scores into probabilities here, so a temperature
means the same thing everywhere on the page.
"""
import numpy as np

from pipeline.model import softmax


def softmax_with_temperature(logits, temperature: float):  # [V] -> [V] probabilities
    """softmax(logits / T). T = 1 is the model's own distribution; T -> 0 puts all the
    probability on the highest score (greedy), so T = 0 is taken to mean exactly that."""
    logits = np.asarray(logits, dtype=np.float32)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, not {temperature}")
    if temperature == 0:
        p = np.zeros_like(logits)
        p[int(np.argmax(logits))] = 1.0
        return p
    return softmax(logits * np.float32(1.0 / temperature))


def entropy_bits(p) -> float:
    """Shannon entropy -sum p log2 p of a distribution, in bits (0 log 0 = 0)."""
    p = np.asarray(p, dtype=np.float64)
    nz = p[p > 0]
    return float(-(nz * np.log2(nz)).sum())
