"""Checks of the data a histogram protocol runs on: users' bin indices and true histograms.

Every randomizer and protocol over a public domain of ``domain_size`` bins takes
the same two inputs, so they are checked here, once, with the same words:
one bin index per user (the message-level path) and the users per bin (the
count-level path). Parameter checks that need no numpy are in
:mod:`shuffledp._validation`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError

__all__ = ["check_histogram", "check_values"]


def check_values(values: NDArray[np.integer], domain_size: int) -> NDArray[np.int64]:
    """Return ``values`` as int64 after checking they lie in ``[0, domain_size)``.

    Raises:
        DataError: If ``values`` is empty, not one-dimensional, not integer, or
            holds an index outside the domain.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise DataError(f"values must be a one-dimensional array, got shape {arr.shape}")
    if arr.size == 0:
        raise DataError("values is empty: at least one user is needed")
    if not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"values must be integer bin indices, got dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= domain_size:
        bad = lo if lo < 0 else hi
        raise DataError(f"value index {bad} is outside the domain [0, {domain_size - 1}]")
    return arr.astype(np.int64, copy=False)


def check_histogram(
    histogram: NDArray[np.integer], domain_size: int, *, users_needed: bool = True
) -> NDArray[np.integer]:
    """Return ``histogram`` as an array after checking it holds ``domain_size`` counts ≥ 0.

    Args:
        histogram: h_j, the number of users holding each value.
        domain_size: d, the number of bins.
        users_needed: Whether at least one user is needed (a histogram of zeros
            is refused).

    Raises:
        DataError: If ``histogram`` is not d non-negative integer counts (with at
            least one user when ``users_needed``).
    """
    hist = np.asarray(histogram)
    if hist.shape != (domain_size,) or not np.issubdtype(hist.dtype, np.integer):
        raise DataError(f"histogram must be {domain_size} integer counts, got shape {hist.shape}")
    if users_needed:
        if np.any(hist < 0) or hist.sum() == 0:
            raise DataError("histogram counts must be >= 0 with at least one user")
    elif np.any(hist < 0):
        raise DataError("histogram counts must be >= 0")
    return hist
