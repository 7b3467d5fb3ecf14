"""Synthetic data sets with a known histogram."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import check_int

__all__ = ["zipf_histogram", "zipf_values"]


def zipf_histogram(n: int, domain_size: int, exponent: float = 1.1) -> NDArray[np.int64]:
    """Return a deterministic Zipf-shaped histogram of n users over d bins.

    Bin j (0-based) gets a share proportional to (j + 1)^(−exponent); counts are
    rounded by largest remainder so they sum to exactly n.
    """
    n = check_int(n, "n", minimum=1)
    d = check_int(domain_size, "domain_size", minimum=2)
    if not exponent > 0:
        raise ValueError(f"exponent must be > 0, got {exponent}")
    weights = np.arange(1, d + 1, dtype=np.float64) ** (-exponent)
    shares = n * weights / weights.sum()
    counts = np.floor(shares).astype(np.int64)
    remainder = n - int(counts.sum())
    counts[np.argsort(-(shares - counts), kind="stable")[:remainder]] += 1
    result: NDArray[np.int64] = counts
    return result


def zipf_values(
    n: int, domain_size: int, exponent: float = 1.1, seed: SeedLike = None
) -> NDArray[np.int64]:
    """Return n bin indices whose histogram is :func:`zipf_histogram`, in random order."""
    counts = zipf_histogram(n, domain_size, exponent)
    values = np.repeat(np.arange(domain_size, dtype=np.int64), counts)
    make_rng(seed).shuffle(values)
    return values
