"""The result type of every histogram analyzer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["HistogramEstimate"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class HistogramEstimate:
    """Estimated counts with per-bin standard errors.

    Attributes:
        domain: The label of each bin.
        counts: Estimated number of users per bin (may be negative or
            non-integer for unbiased estimators).
        stderr: Standard error of each count; ``None`` for biased estimators
            without one.
        n: Number of users.
        estimator: Name of the estimator.
        unbiased: Whether E[counts] equals the true histogram.
    """

    domain: Sequence[str]
    counts: FloatArray
    stderr: FloatArray | None
    n: int
    estimator: str
    unbiased: bool

    def __post_init__(self) -> None:
        if len(self.domain) != len(self.counts):
            raise ValueError("domain and counts must have the same length")
        if self.stderr is not None and len(self.stderr) != len(self.counts):
            raise ValueError("stderr and counts must have the same length")

    @property
    def frequencies(self) -> FloatArray:
        """Estimated fraction of users per bin (counts / n)."""
        return self.counts / self.n

    @property
    def frequency_stderr(self) -> FloatArray | None:
        """Standard error of each frequency."""
        return None if self.stderr is None else self.stderr / self.n

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary (lists of floats)."""
        freq_se = self.frequency_stderr
        return {
            "estimator": self.estimator,
            "unbiased": self.unbiased,
            "counts": [float(c) for c in self.counts],
            "frequencies": [float(f) for f in self.frequencies],
            "stderr": None if self.stderr is None else [float(s) for s in self.stderr],
            "frequency_stderr": None if freq_se is None else [float(s) for s in freq_se],
        }

    def linf_error(self, true_counts: NDArray[np.integer] | FloatArray) -> float:
        """Return max_j |counts_j − true_j| (the paper's ℓ∞ error, in counts)."""
        return float(np.max(np.abs(self.counts - np.asarray(true_counts, dtype=np.float64))))
