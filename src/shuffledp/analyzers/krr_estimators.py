"""Estimators for a shuffled k-RR histogram (k-RR paper, App. B).

Source: S. Biswas, K. Jung and C. Palamidessi, "Tight differential privacy guarantees
for the shuffle model with k-randomized response", FPS 2023, arXiv 2205.08858.

* ``raw``: the shuffled histogram itself ("shuffle" in the paper). Biased:
  E[C] = (a − b)h + n·b pulls every bin towards n/k.
* ``inversion``: matrix inversion ("shuffle+INV"): solve Rᵀĥ = C with R the k-RR
  channel. Unbiased; for k-RR it equals ĥ = (C − n·b)/(a − b), and
  Var(ĥ_j) = (h_j·a(1 − a) + (n − h_j)·b(1 − b))/(a − b)², estimated by plugging
  in ĥ clipped to [0, n].
* ``clip``: the inversion with negative counts set to 0, rescaled to sum to n.
  Biased (towards larger small bins), never negative.
* ``simplex``: the Euclidean projection of the inverted frequencies onto the
  probability simplex (Duchi, Shalev-Shwartz, Singer & Chandra, ICML 2008).
  Biased, never negative, sums to 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.analyzers.estimate import HistogramEstimate

__all__ = [
    "ESTIMATORS",
    "KRREstimator",
    "estimate_krr",
    "inversion_variance",
    "invert_channel",
    "project_to_simplex",
]

KRREstimator = Literal["raw", "inversion", "clip", "simplex"]
ESTIMATORS: tuple[str, ...] = ("raw", "inversion", "clip", "simplex")


def inversion_variance(
    counts: NDArray[np.floating] | float,
    n: float,
    keep_probability: float,
    other_probability: float,
) -> NDArray[np.float64]:
    """Var of the inverted count of a value held by ``counts`` of n users.

    The report count is Bin(h, a) + Bin(n − h, b), so the inverted count
    (C − n·b)/(a − b) has variance (h·a(1 − a) + (n − h)·b(1 − b))/(a − b)².
    """
    a, b = keep_probability, other_probability
    h = np.asarray(counts, dtype=np.float64)
    return np.asarray((h * a * (1 - a) + (n - h) * b * (1 - b)) / (a - b) ** 2, dtype=np.float64)


def invert_channel(
    counts: NDArray[np.floating], channel: NDArray[np.floating]
) -> NDArray[np.float64]:
    """Return ĥ solving channelᵀ·ĥ = counts (unbiased when E[counts] = channelᵀ·h)."""
    return np.asarray(
        np.linalg.solve(np.asarray(channel, dtype=np.float64).T, counts), dtype=np.float64
    )


def project_to_simplex(v: NDArray[np.floating]) -> NDArray[np.float64]:
    """Return argmin ‖x − v‖₂ over x ≥ 0, Σx = 1 (sort-based, O(k log k))."""
    v = np.asarray(v, dtype=np.float64)
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    index = np.arange(1, len(v) + 1)
    rho = int(np.nonzero(u - cumulative / index > 0)[0][-1])
    theta = cumulative[rho] / (rho + 1)
    projected: NDArray[np.float64] = np.maximum(v - theta, 0.0)
    return projected


def estimate_krr(
    counts: NDArray[np.integer],
    keep_probability: float,
    other_probability: float,
    *,
    estimator: KRREstimator = "inversion",
    domain: Sequence[str] | None = None,
) -> HistogramEstimate:
    """Estimate the true histogram from shuffled k-RR report counts.

    Args:
        counts: Reports per value (the shuffled histogram).
        keep_probability: a, the probability of reporting the true value.
        other_probability: b, the probability of each other value.
        estimator: ``raw``, ``inversion``, ``clip`` or ``simplex`` (module docstring).
        domain: Value labels.
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or c.size < 2 or np.any(c < 0):
        raise DataError("counts must be a 1-D array of >= 2 non-negative report counts")
    n = float(c.sum())
    if n <= 0:
        raise DataError("counts are all zero: no reports")
    k = c.size
    a, b = keep_probability, other_probability
    labels = list(domain) if domain is not None else [str(j) for j in range(k)]
    if estimator not in ESTIMATORS:
        raise InvalidParameterError(
            f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}"
        )
    if estimator == "raw":
        return HistogramEstimate(labels, c, None, int(n), "raw", unbiased=False)
    inverted = (c - n * b) / (a - b)
    if estimator == "inversion":
        var = inversion_variance(np.clip(inverted, 0.0, n), n, a, b)
        return HistogramEstimate(labels, inverted, np.sqrt(var), int(n), "inversion", unbiased=True)
    if estimator == "clip":
        clipped = np.clip(inverted, 0.0, None)
        total = clipped.sum()
        scaled = clipped * (n / total) if total > 0 else np.full(k, n / k)
        return HistogramEstimate(labels, scaled, None, int(n), "clip", unbiased=False)
    projected = project_to_simplex(inverted / n) * n
    return HistogramEstimate(labels, projected, None, int(n), "simplex", unbiased=False)
