"""FLIP's analyzer A_FLIP (Alg. 3): de-bias and re-scale the column sums."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, check_flip_probability, check_int
from shuffledp.analyzers.estimate import HistogramEstimate

__all__ = ["FlipAnalyzer", "flip_count_stderr"]


def flip_count_stderr(n: int, q: float, fake_users: int) -> float:
    """Return the standard error of every estimated count: sqrt(N·q(1−q))/(1 − 2q).

    Each of the N = n(k + 1) bits in a column is Bernoulli(q) or Bernoulli(1 − q),
    both of variance q(1 − q), so the column sum's variance is N·q(1 − q) for
    every dataset; Alg. 3 divides by (1 − 2q).
    """
    total = n * (fake_users + 1)
    return math.sqrt(total * q * (1.0 - q)) / (1.0 - 2.0 * q)


class FlipAnalyzer:
    """A_FLIP (Alg. 3) on message counts, reporting counts rather than frequencies.

    ẑ_j = (C_j − N·q)/(1 − 2q) is unbiased for h_j because
    E[C_j] = h_j(1 − q) + (N − h_j)q = N·q + h_j(1 − 2q). Alg. 3's frequency is ẑ_j/n.

    Args:
        n: Number of users.
        domain_size: d.
        q: Flip probability.
        fake_users: k.
    """

    def __init__(self, n: int, domain_size: int, q: float, fake_users: int) -> None:
        self.n = check_int(n, "n", minimum=1)
        self.domain_size = check_int(domain_size, "domain_size", minimum=2)
        self.q = check_flip_probability(q)
        self.fake_users = check_int(fake_users, "fake_users", minimum=0)

    def count_messages(self, payload: NDArray[np.integer]) -> NDArray[np.int64]:
        """Return the per-bin message counts of a shuffled batch.

        Raises:
            DataError: If a message carries a bin index outside ``[0, d)``.
        """
        arr = np.asarray(payload)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.domain_size):
            raise DataError(f"a message carries a bin index outside [0, {self.domain_size - 1}]")
        return np.bincount(arr.astype(np.int64), minlength=self.domain_size).astype(np.int64)

    def estimate(
        self, message_counts: NDArray[np.integer], domain: Sequence[str] | None = None
    ) -> HistogramEstimate:
        """Return the unbiased count estimate with its standard errors.

        Args:
            message_counts: C_j, the number of messages per bin.
            domain: Bin labels (defaults to "0", "1", …).
        """
        counts = np.asarray(message_counts, dtype=np.float64)
        if counts.shape != (self.domain_size,):
            raise DataError(f"expected {self.domain_size} bin counts, got shape {counts.shape}")
        total = self.n * (self.fake_users + 1)
        estimate = (counts - total * self.q) / (1.0 - 2.0 * self.q)
        se = flip_count_stderr(self.n, self.q, self.fake_users)
        labels = list(domain) if domain is not None else [str(j) for j in range(len(counts))]
        return HistogramEstimate(
            domain=labels,
            counts=estimate,
            stderr=np.full(self.domain_size, se),
            n=self.n,
            estimator="flip-debias",
            unbiased=True,
        )
