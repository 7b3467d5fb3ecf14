"""The Laplace randomizer for per-user histograms (per-user histograms paper, Alg. 1 lines 2–5).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

A user holds counts H ∈ ℕ^d with total s_H > 0 and randomizes the normalized
histogram H̄ = H/s_H by adding independent Laplace noise to every coordinate.

Two readings of "c-neighbouring" (Def. 1). Both require the same total s.

* ``"moved-items"`` (the default): H′ is obtained from H by moving at most
  ⌊c·s⌋ of its items from one class to another. Moving m items changes
  ‖H − H′‖₁ by at most 2m, and equal totals at L1 distance 2m are m moves
  apart, so this is ‖H − H′‖₁ ≤ 2⌊c·s⌋. It fits the paper's own example
  (totals 5 "differing by 5": no two histograms of equal total are at odd L1
  distance) and its Alg. 1, which adds Lap(2c/ε).
* ``"l1-distance"``: ‖H − H′‖₁ ≤ ⌊c·s⌋, Def. 1 as printed; at most ⌊c·s⌋/2
  items moved. Every such pair is also a moved-items pair.

Sensitivity. ‖H̄ − H̄′‖₁ = ‖H − H′‖₁/s, so the L1 sensitivity of H ↦ H̄ is
Δ = 2c for moved items and Δ = c for the L1 distance (suprema over the
totals s, attained whenever c·s is an integer, an even one for the L1
distance). The Laplace mechanism with scale b = Δ/ε is
ε-hLDP (Def. 2) under its relation: for every output y,

    p(y | H) / p(y | H′) = ∏_j exp((|y_j − H̄′_j| − |y_j − H̄_j|) / b)
                         ≤ exp(‖H̄ − H̄′‖₁ / b) ≤ exp(Δ / b) = e^ε,

with equality for y far from both in every coordinate. So the default scale
2c/ε (Alg. 1 as printed) is ε-hLDP under both readings; the scale c/ε of
``neighbouring="l1-distance"`` is ε-hLDP only under the L1 reading and
exactly 2ε-hLDP under the moved-items one (:func:`hldp_epsilon`).

Two copies (Alg. 1 lines 3–5): W = H̄ + Lap(b₁) with ε₁ and T = H̄ + Lap(b₂)
with ε₂ = ε − ε₁; the pair (W, T) is ε-hLDP by basic composition, and any
R = a·W + (1 − a)·T is post-processing. Per coordinate
Var R = 2a²b₁² + 2(1 − a)²b₂², minimized by

    a = b₂² / (b₁² + b₂²) = ε₁² / (ε₁² + ε₂²)          (weight on W)

(App. D's a, ``weighting="min-variance"``), with variance 2b₁²b₂²/(b₁² + b₂²)
= 2Δ²/(ε₁² + ε₂²). The printed line 5 puts ε₂²/(ε₁² + ε₂²) on W instead
(``weighting="printed"``); the two agree only when ε₁ = ε₂ and otherwise the
printed weights have the larger variance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_epsilon

__all__ = [
    "NEIGHBOURINGS",
    "WEIGHTINGS",
    "CopyVariances",
    "HistogramLaplaceRandomizer",
    "Neighbouring",
    "Weighting",
    "check_c",
    "check_counts",
    "check_neighbouring",
    "combine_weight",
    "copy_variances",
    "hldp_epsilon",
    "laplace_scale",
    "neighbouring_in_words",
    "normalize_counts",
    "normalized_sensitivity",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

Neighbouring = Literal["moved-items", "l1-distance"]
Weighting = Literal["min-variance", "printed"]

#: Readings of Def. 1 (module docstring): ``moved-items`` (at most ⌊c·s⌋ items moved
#: between classes; Lap(2c/ε), the default) or ``l1-distance`` (‖H − H′‖₁ ≤ ⌊c·s⌋; Lap(c/ε)).
NEIGHBOURINGS: tuple[str, ...] = get_args(Neighbouring)
#: Weightings of the two copies: ``min-variance`` (App. D) or ``printed`` (Alg. 1 line 5).
WEIGHTINGS: tuple[str, ...] = get_args(Weighting)

#: Δ/c, the L1 sensitivity of H ↦ H/s per unit of c under each reading.
_SENSITIVITY_FACTOR = {"moved-items": 2.0, "l1-distance": 1.0}


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


def check_neighbouring(value: object, name: str = "neighbouring") -> Neighbouring:
    """Return the reading of Def. 1 if it is one of :data:`NEIGHBOURINGS`.

    Raises:
        InvalidParameterError: Naming ``name``, the value and the readings allowed.
    """
    if value not in NEIGHBOURINGS:
        raise InvalidParameterError(
            f"{name} must be one of {', '.join(NEIGHBOURINGS)} (moved-items: at most "
            f"floor(c*s) items moved between classes; l1-distance: ||H - H'||_1 <= floor(c*s)), "
            f"got {value!r}"
        )
    return value  # type: ignore[return-value]


def normalized_sensitivity(c: float, neighbouring: str = "moved-items") -> float:
    """Return Δ, the L1 sensitivity of H ↦ H/s_H under a reading of Def. 1 (module docstring).

    Args:
        c: Def. 1's neighbouring fraction, in (0, 1].
        neighbouring: ``"moved-items"`` (Δ = 2c) or ``"l1-distance"`` (Δ = c).
    """
    return _SENSITIVITY_FACTOR[check_neighbouring(neighbouring)] * check_c(c)


def hldp_epsilon(scale: float, c: float, neighbouring: str = "moved-items") -> float:
    """Return the ε for which one Lap(scale) copy of H/s_H is ε-hLDP (Def. 2): Δ/scale.

    The worst-case likelihood ratio of the copy is exp(‖H̄ − H̄′‖₁/scale), and
    the largest ‖H̄ − H̄′‖₁ over neighbours is Δ (module docstring), so Δ/scale
    is the exact ε, not only an upper bound. A copy calibrated for
    ``"l1-distance"`` (scale c/ε) is thus 2ε-hLDP under ``"moved-items"``.

    Args:
        scale: The Laplace scale b > 0.
        c: Def. 1's neighbouring fraction, in (0, 1].
        neighbouring: The reading the guarantee is stated for.
    """
    b = check_epsilon(scale, "scale")
    return normalized_sensitivity(c, neighbouring) / b


def neighbouring_in_words(c: float, neighbouring: str = "moved-items") -> str:
    """Return the neighbouring relation of a per-user release (Def. 1 and 3), in words.

    Args:
        c: Def. 1's neighbouring fraction, in (0, 1].
        neighbouring: ``"moved-items"`` or ``"l1-distance"``.
    """
    c = check_c(c)
    if check_neighbouring(neighbouring) == "moved-items":
        return (
            f"one user's histogram H replaced by any H' with the same total s obtained by "
            f"moving at most floor({c:g}*s) of its items from one class to another "
            f"(||H - H'||_1 <= 2*floor({c:g}*s)); this includes every H' with "
            f"||H - H'||_1 <= floor({c:g}*s)"
        )
    return (
        f"one user's histogram H replaced by any H' with the same total s and "
        f"||H - H'||_1 <= floor({c:g}*s), i.e. at most floor({c:g}*s)/2 items moved from one "
        "class to another (not covered: moving more items, up to floor(c*s))"
    )


def _check_weighting(weighting: str) -> Weighting:
    if weighting not in WEIGHTINGS:
        raise InvalidParameterError(
            f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}"
        )
    return weighting  # type: ignore[return-value]


def laplace_scale(epsilon: float, c: float, neighbouring: str = "moved-items") -> float:
    """Return the Laplace scale b = Δ/ε of an ε-hLDP copy (module docstring).

    Args:
        epsilon: The copy's budget ε > 0.
        c: The neighbouring fraction c of Def. 1, in (0, 1].
        neighbouring: ``"moved-items"`` (b = 2c/ε, Alg. 1 lines 3–4; ε-hLDP under
            both readings) or ``"l1-distance"`` (b = c/ε; ε-hLDP under that reading only).
    """
    eps = check_epsilon(epsilon)
    return normalized_sensitivity(c, neighbouring) / eps


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
    neighbouring: str = "moved-items",
    weighting: str = "min-variance",
) -> CopyVariances:
    """Return the theoretical per-coordinate variances of W, T and R (module docstring).

    Args:
        epsilon: Total budget ε.
        epsilon1: W's budget, 0 < ε₁ < ε.
        c: Def. 1's c.
        neighbouring: ``"moved-items"`` or ``"l1-distance"`` (the scale's reading).
        weighting: ``"min-variance"`` or ``"printed"``.
    """
    eps = check_epsilon(epsilon)
    e1 = check_epsilon(epsilon1, "epsilon1")
    if not e1 < eps:
        raise InvalidParameterError(f"epsilon1 must be < epsilon = {eps:g}, got {e1:g}")
    b1 = laplace_scale(e1, c, neighbouring)
    b2 = laplace_scale(eps - e1, c, neighbouring)
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
        neighbouring: The reading of Def. 1 the copy is ε-hLDP for:
            ``"moved-items"`` (b = 2c/ε, Alg. 1; the default, ε-hLDP under both
            readings) or ``"l1-distance"`` (b = c/ε).

    Attributes:
        scale: The Laplace scale b.
    """

    def __init__(self, epsilon: float, c: float, *, neighbouring: str = "moved-items") -> None:
        self.epsilon = check_epsilon(epsilon)
        self.c = check_c(c)
        self.neighbouring: Neighbouring = check_neighbouring(neighbouring)
        self.scale = laplace_scale(self.epsilon, self.c, self.neighbouring)

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
