"""The augmented protocols' analyzer: subtract the dummies' known mean, divide by β.

Murakami, Sei & Eriguchi, "Augmented Shuffle Protocols for Accurate and Robust
Frequency Estimation under Differential Privacy", arXiv 2504.07362 (the LNF
framework's estimator).

With c_j = Bin(h_j, β) + z_j, E[c_j] = β·h_j + E[z], so

    ĥ_j = (c_j − E[z])/β

is unbiased, with Var ĥ_j = (Var z + β(1 − β)·h_j)/β². The reported standard
error plugs ĥ_j clipped to [0, n] in for h_j (at β = 1 it does not depend on
the data: √Var z).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.accounting.certificates.augmented import check_beta
from shuffledp.analyzers.estimate import HistogramEstimate

__all__ = ["AugmentedAnalyzer", "augmented_count_stderr"]

FloatArray = NDArray[np.float64]


def augmented_count_stderr(
    noise_variance: float, beta: float, counts: float | FloatArray
) -> float | FloatArray:
    """Return √(Var z + β(1 − β)·h)/β, the standard error of ĥ for a bin holding h users."""
    beta = check_beta(beta)
    if not (math.isfinite(noise_variance) and noise_variance >= 0):
        raise InvalidParameterError(
            f"noise_variance must be a finite number >= 0, got {noise_variance!r}"
        )
    h = np.asarray(counts, dtype=np.float64)
    out = np.sqrt(noise_variance + beta * (1.0 - beta) * h) / beta
    return float(out) if out.ndim == 0 else out


class AugmentedAnalyzer:
    """ĥ_j = (c_j − E[z])/β with standard errors.

    Args:
        n: Number of users.
        domain_size: d.
        beta: The shuffler's sampling rate β.
        noise_mean: E[z] of the dummy law.
        noise_variance: Var z of the dummy law.
    """

    def __init__(
        self, n: int, domain_size: int, beta: float, noise_mean: float, noise_variance: float
    ) -> None:
        self.n = check_int(n, "n", minimum=1)
        self.domain_size = check_int(domain_size, "domain_size", minimum=2)
        self.beta = check_beta(beta)
        if not (math.isfinite(noise_mean) and noise_mean >= 0):
            raise InvalidParameterError(
                f"noise_mean must be a finite number >= 0, got {noise_mean!r}"
            )
        self.noise_mean = float(noise_mean)
        self.noise_variance = float(noise_variance)
        augmented_count_stderr(self.noise_variance, self.beta, 0.0)  # validates the variance

    def count_messages(self, payload: NDArray[np.integer]) -> NDArray[np.int64]:
        """Return the per-bin message counts of a shuffled batch.

        Raises:
            DataError: If a message carries a value outside ``[0, d)``.
        """
        arr = np.asarray(payload)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.domain_size):
            raise DataError(f"a message carries a value outside [0, {self.domain_size - 1}]")
        return np.bincount(arr.astype(np.int64), minlength=self.domain_size).astype(np.int64)

    def estimate(
        self, message_counts: NDArray[np.integer], domain: Sequence[str] | None = None
    ) -> HistogramEstimate:
        """Return the unbiased estimate and its standard errors (ĥ clipped to [0, n] plugged in)."""
        counts = np.asarray(message_counts, dtype=np.float64)
        if counts.shape != (self.domain_size,):
            raise DataError(f"expected {self.domain_size} bin counts, got shape {counts.shape}")
        estimate = (counts - self.noise_mean) / self.beta
        plugged = np.clip(estimate, 0.0, float(self.n))
        stderr = np.asarray(augmented_count_stderr(self.noise_variance, self.beta, plugged))
        labels = list(domain) if domain is not None else [str(j) for j in range(len(counts))]
        return HistogramEstimate(
            domain=labels,
            counts=estimate,
            stderr=stderr.astype(np.float64),
            n=self.n,
            estimator="augmented-debias",
            unbiased=True,
        )
