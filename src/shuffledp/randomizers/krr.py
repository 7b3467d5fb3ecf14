"""k-randomized response (Def. 5 of the k-RR paper): one message per user.

Source: S. Biswas, K. Jung and C. Palamidessi, "Tight differential privacy guarantees
for the shuffle model with k-randomized response", FPS 2023, arXiv 2205.08858.

A user with value x reports x with probability a = e^{ε₀}/(e^{ε₀} + k − 1) and
each other value with probability b = 1/(e^{ε₀} + k − 1). The message carries
the reported value only.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import check_epsilon, check_int
from shuffledp.data.checks import check_histogram, check_values
from shuffledp.messages import MessageBatch

__all__ = ["KRRRandomizer", "krr_probabilities"]

IntArray = NDArray[np.int64]


def krr_probabilities(epsilon0: float, k: int) -> tuple[float, float]:
    """Return (a, b): k-RR's probability of the true value and of each other value.

    a = e^{ε₀}/(e^{ε₀} + k − 1) and b = 1/(e^{ε₀} + k − 1) (Def. 5 of the k-RR paper),
    computed from e^{−ε₀} so that neither overflows and each is within 4
    rounding units of the truth (b underflows to 0 only beyond ε₀ ≈ 745).
    """
    return krr_probabilities_unchecked(
        check_epsilon(epsilon0, "epsilon0"), check_int(k, "k", minimum=2)
    )


def krr_probabilities_unchecked(epsilon0: float, k: int) -> tuple[float, float]:
    """:func:`krr_probabilities` on checked ε₀ > 0 and k ≥ 2 (what the accountant's loops call)."""
    shrink = math.exp(-epsilon0)
    denom = 1.0 + (k - 1) * shrink
    return 1.0 / denom, shrink / denom


class KRRRandomizer:
    """k-RR with local privacy ε₀ over the values 0, …, k − 1.

    Args:
        domain_size: k ≥ 2.
        epsilon0: ε₀ > 0.
    """

    def __init__(self, domain_size: int, epsilon0: float) -> None:
        self.domain_size = check_int(domain_size, "domain_size", minimum=2)
        self.epsilon0 = check_epsilon(epsilon0, "epsilon0")
        self.keep_probability, self.other_probability = krr_probabilities(
            self.epsilon0, self.domain_size
        )

    @property
    def channel(self) -> NDArray[np.float64]:
        """The k × k matrix R[x, y] = P[report y | value x]."""
        k = self.domain_size
        matrix = np.full((k, k), self.other_probability)
        np.fill_diagonal(matrix, self.keep_probability)
        return matrix

    def randomize(self, values: NDArray[np.integer], seed: SeedLike = None) -> MessageBatch:
        """Randomize every user's value; one message per user, before shuffling."""
        arr = check_values(values, self.domain_size)
        rng = make_rng(seed)
        n = arr.shape[0]
        keep = rng.random(n) < self.keep_probability
        # Otherwise a uniform value among the k − 1 others.
        shift = rng.integers(0, self.domain_size - 1, size=n)
        other = shift + (shift >= arr)
        report = np.where(keep, arr, other).astype(np.int64)
        return MessageBatch(payload=report, sender=np.arange(n, dtype=np.int64), n_users=n)

    def sample_counts(self, histogram: NDArray[np.integer], seed: SeedLike = None) -> IntArray:
        """Draw the histogram of reports directly (the count-level path).

        Users holding j keep it Bin(h_j, a) times; the rest spread uniformly over
        the other k − 1 values (one multinomial per source value).
        """
        k = self.domain_size
        hist = check_histogram(histogram, k)
        rng = make_rng(seed)
        hist = hist.astype(np.int64)
        kept = rng.binomial(hist, self.keep_probability)
        moved = rng.multinomial(hist - kept, np.full(k - 1, 1.0 / (k - 1)))  # shape (k, k − 1)
        counts = kept.copy()
        for source in range(k):
            targets = np.arange(k - 1) + (np.arange(k - 1) >= source)
            counts[targets] += moved[source]
        return counts
