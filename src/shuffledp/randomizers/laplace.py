"""The Laplace randomizer for per-user histograms (per-user histograms paper, Alg. 1 lines 2–5).

A user holds counts H ∈ ℕ^d with total s_H > 0 and randomizes the normalized
histogram H̄ = H/s_H by adding independent Laplace noise to every coordinate.

Sensitivity (Def. 1 as printed). Two histograms are c-neighbours when they
have the same total s and ‖H − H′‖₁ ≤ ⌊c·s⌋. Then

    ‖H̄ − H̄′‖₁ = ‖H − H′‖₁ / s ≤ ⌊c·s⌋ / s ≤ c,

with equality whenever c·s is an integer, so over all totals the L1
sensitivity of H ↦ H̄ is exactly c. The Laplace mechanism with scale b = c/ε
is therefore ε-hLDP (Def. 2): for every output y,

    p(y | H) / p(y | H′) = ∏_j exp((|y_j − H̄′_j| − |y_j − H̄_j|) / b)
                         ≤ exp(‖H̄ − H̄′‖₁ / b) ≤ exp(c / b) = e^ε.

This is ``calibration="proven"`` (the default). Alg. 1 adds Lap(2c/ε), twice
that scale (``calibration="paper"``): the paper's factor doubles the noise
(the same release then also satisfies (ε/2)-hLDP).

Two copies (Alg. 1 lines 3–5): W = H̄ + Lap(b₁) with ε₁ and T = H̄ + Lap(b₂)
with ε₂ = ε − ε₁; the pair (W, T) is ε-hLDP by basic composition, and any
R = a·W + (1 − a)·T is post-processing. Per coordinate
Var R = 2a²b₁² + 2(1 − a)²b₂², minimized by

    a = b₂² / (b₁² + b₂²) = ε₁² / (ε₁² + ε₂²)          (weight on W)

(App. D's a, ``weighting="min-variance"``), with variance 2b₁²b₂²/(b₁² + b₂²)
= 2k²c²/(ε₁² + ε₂²) for scale factor k (1 proven, 2 paper). The printed line 5
puts ε₂²/(ε₁² + ε₂²) on W instead (``weighting="printed"``); the two agree
only when ε₁ = ε₂ and otherwise the printed weights have the larger variance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_epsilon

__all__ = [
    "CALIBRATIONS",
    "WEIGHTINGS",
    "Calibration",
    "CopyVariances",
    "HistogramLaplaceRandomizer",
    "Weighting",
    "check_c",
    "check_counts",
    "combine_weight",
    "copy_variances",
    "laplace_scale",
    "normalize_counts",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

Calibration = Literal["proven", "paper"]
Weighting = Literal["min-variance", "printed"]

#: Noise calibrations: ``proven`` scale c/ε (Def. 1's sensitivity), ``paper`` 2c/ε (Alg. 1).
CALIBRATIONS: tuple[str, ...] = get_args(Calibration)
#: Weightings of the two copies: ``min-variance`` (App. D) or ``printed`` (Alg. 1 line 5).
WEIGHTINGS: tuple[str, ...] = get_args(Weighting)

_SCALE_FACTOR = {"proven": 1.0, "paper": 2.0}


def check_c(value: object, name: str = "c") -> float:
    """Return the neighbouring fraction c of Def. 1 if it lies in (0, 1].

    Raises:
        InvalidParameterError: If ``value`` is not a real number in (0, 1].
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | np.integer | np.floating)
        or not (0.0 < float(value) <= 1.0)
    ):
        raise InvalidParameterError(f"{name} must be a number in (0, 1], got {value!r}")
    return float(value)


def _check_calibration(calibration: str) -> Calibration:
    if calibration not in CALIBRATIONS:
        raise InvalidParameterError(
            f"calibration must be one of {', '.join(CALIBRATIONS)}, got {calibration!r}"
        )
    return calibration  # type: ignore[return-value]


def _check_weighting(weighting: str) -> Weighting:
    if weighting not in WEIGHTINGS:
        raise InvalidParameterError(
            f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}"
        )
    return weighting  # type: ignore[return-value]


def laplace_scale(epsilon: float, c: float, calibration: str = "proven") -> float:
    """Return the Laplace scale b of an ε-hLDP copy (module docstring).

    Args:
        epsilon: The copy's budget ε > 0.
        c: The neighbouring fraction c of Def. 1, in (0, 1].
        calibration: ``"proven"`` (b = c/ε) or ``"paper"`` (b = 2c/ε, Alg. 1 lines 3–4).
    """
    eps = check_epsilon(epsilon)
    return _SCALE_FACTOR[_check_calibration(calibration)] * check_c(c) / eps


def combine_weight(epsilon1: float, epsilon2: float, weighting: str = "min-variance") -> float:
    """Return a, the weight of W in R = a·W + (1 − a)·T (Alg. 1 line 5, App. D).

    Args:
        epsilon1: W's budget ε₁.
        epsilon2: T's budget ε₂ = ε − ε₁.
        weighting: ``"min-variance"``: a = ε₁²/(ε₁² + ε₂²), the unbiased
            combination of least variance (App. D); ``"printed"``:
            a = ε₂²/(ε₁² + ε₂²), line 5 as printed.
    """
    e1 = check_epsilon(epsilon1, "epsilon1")
    e2 = check_epsilon(epsilon2, "epsilon2")
    total = e1 * e1 + e2 * e2
    if _check_weighting(weighting) == "min-variance":
        return e1 * e1 / total
    return e2 * e2 / total


@dataclass(frozen=True)
class CopyVariances:
    """Per-coordinate noise variances of the copies of Alg. 1 (Var Lap(b) = 2b²).

    Attributes:
        w: Var of W's noise, 2b₁².
        t: Var of T's noise, 2b₂².
        r: Var of R's noise, 2a²b₁² + 2(1 − a)²b₂².
        weight: a, the weight on W.
    """

    w: float
    t: float
    r: float
    weight: float


def copy_variances(
    epsilon: float,
    epsilon1: float,
    c: float,
    *,
    calibration: str = "proven",
    weighting: str = "min-variance",
) -> CopyVariances:
    """Return the theoretical per-coordinate variances of W, T and R (module docstring).

    Args:
        epsilon: Total budget ε.
        epsilon1: W's budget, 0 < ε₁ < ε.
        c: Def. 1's c.
        calibration: ``"proven"`` or ``"paper"``.
        weighting: ``"min-variance"`` or ``"printed"``.
    """
    eps = check_epsilon(epsilon)
    e1 = check_epsilon(epsilon1, "epsilon1")
    if not e1 < eps:
        raise InvalidParameterError(f"epsilon1 must be < epsilon = {eps:g}, got {e1:g}")
    b1 = laplace_scale(e1, c, calibration)
    b2 = laplace_scale(eps - e1, c, calibration)
    a = combine_weight(e1, eps - e1, weighting)
    return CopyVariances(
        w=2 * b1 * b1,
        t=2 * b2 * b2,
        r=2 * a * a * b1 * b1 + 2 * (1 - a) * (1 - a) * b2 * b2,
        weight=a,
    )


def check_counts(counts: object, *, user_ids: object = None) -> IntArray:
    """Return per-user counts as an n × d int64 array after checking them.

    Args:
        counts: n × d non-negative integer counts, one row per user (n ≥ 1, d ≥ 2).
        user_ids: Optional labels of the rows, used in error messages.

    Raises:
        DataError: If the array is not two-dimensional, holds a negative or
            non-integer count, or a user's total is 0 (naming the user).
    """
    arr = np.asarray(counts)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
        raise DataError(f"counts must be an n x d array with n >= 1 and d >= 2, got {arr.shape}")
    ids = None if user_ids is None else list(np.asarray(user_ids, dtype=object))

    def who(i: int) -> str:
        return f"user {ids[i]!r}" if ids is not None else f"user at row {i}"

    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating):
            raise DataError(f"counts must be integers, got an array of {arr.dtype}")
        bad = ~np.isfinite(arr) | (arr != np.floor(arr))
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise DataError(
                f"{who(int(i))} has a non-integer count {arr[i, j].item()!r} in class {int(j)}"
            )
    if np.any(arr < 0):
        i, j = np.argwhere(arr < 0)[0]
        value = arr[i, j].item()
        raise DataError(f"{who(int(i))} has a negative count {value!r} in class {int(j)}")
    out = arr.astype(np.int64)
    totals = out.sum(axis=1)
    if np.any(totals == 0):
        i = int(np.flatnonzero(totals == 0)[0])
        raise DataError(
            f"{who(i)} has total count 0; a histogram needs at least one count to be normalized"
        )
    return out


def normalize_counts(counts: object) -> FloatArray:
    """Return H̄ = H/s_H row by row (Alg. 1's input), after :func:`check_counts`."""
    arr = check_counts(counts)
    out: FloatArray = arr / arr.sum(axis=1, keepdims=True)
    return out


class HistogramLaplaceRandomizer:
    """Adds Lap(b) to every coordinate of normalized histograms: ε-hLDP (Def. 2).

    Args:
        epsilon: The copy's budget ε > 0.
        c: Def. 1's neighbouring fraction, in (0, 1].
        calibration: ``"proven"`` (b = c/ε, the default) or ``"paper"`` (b = 2c/ε).

    Attributes:
        scale: The Laplace scale b.
    """

    def __init__(self, epsilon: float, c: float, *, calibration: str = "proven") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.c = check_c(c)
        self.calibration: Calibration = _check_calibration(calibration)
        self.scale = laplace_scale(self.epsilon, self.c, self.calibration)

    @property
    def variance(self) -> float:
        """Per-coordinate noise variance 2b²."""
        return 2.0 * self.scale * self.scale

    def randomize(self, normalized: NDArray[np.floating], seed: SeedLike = None) -> FloatArray:
        """Return H̄ + Lap(b)^{n×d} (one independent draw per user and class).

        Args:
            normalized: n × d normalized histograms (rows of :func:`normalize_counts`).
            seed: ``None`` for OS entropy, an int or a generator.
        """
        arr = np.asarray(normalized, dtype=np.float64)
        if arr.ndim != 2:
            raise DataError(f"normalized histograms must be n x d, got shape {arr.shape}")
        rng = make_rng(seed)
        noise: FloatArray = rng.laplace(0.0, self.scale, size=arr.shape)
        return arr + noise
