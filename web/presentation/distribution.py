"""A next-token distribution and what the page says about it, each number computed once.

The logits section shows the prompt's distribution at the chosen temperature beside the model's
own (T = 1); the sampling section, the model's own and the one the sampler draws from. Both read
the same named numbers here, from pipeline.sampling's functions (the sampler's own), instead of
computing them into loose keys of their contexts.
"""
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from pipeline.sampling import (
    entropy_bits,
    softmax_with_temperature,
    tokens_holding_mass,
    top_p_keep,
)


class Nucleus(NamedTuple):
    """What top-p alone keeps of a distribution."""
    kept: int            # tokens kept
    mass: float          # the probability they hold


@dataclass(frozen=True, eq=False)
class Distribution:
    """Probabilities over the vocabulary; every number below is computed on first use, once."""
    probs: np.ndarray           # [V] float32, adding up to 1
    temperature: float = 1.0    # the T of softmax(logits / T) that made it (0: greedy, one-hot)

    @classmethod
    def at(cls, logits, temperature: float) -> "Distribution":
        """softmax(logits / T): pipeline.sampling.softmax_with_temperature."""
        return cls(softmax_with_temperature(logits, temperature), float(temperature))

    @property
    def size(self) -> int:
        return len(self.probs)

    @cached_property
    def entropy(self) -> float:
        """Shannon entropy in bits (abs: a one-hot distribution gives -0.0)."""
        return abs(entropy_bits(self.probs))

    @cached_property
    def top(self) -> float:
        """The probability of the most probable token."""
        return float(self.probs.max())

    @cached_property
    def mass50(self) -> int:
        """The fewest tokens that hold 50% of the probability."""
        return tokens_holding_mass(self.probs, 0.5)

    @cached_property
    def mass90(self) -> int:
        """The fewest tokens that hold 90% of the probability."""
        return tokens_holding_mass(self.probs, 0.9)

    @cached_property
    def survivors(self) -> int:
        """Tokens that can be drawn (probability above 0)."""
        return int((self.probs > 0).sum())

    def nucleus(self, p: float) -> Nucleus:
        """Top-p = p alone: the tokens it keeps and the probability they hold."""
        keep = top_p_keep(self.probs, p)
        return Nucleus(int(keep.sum()), float(self.probs[keep].sum(dtype=np.float64)))
