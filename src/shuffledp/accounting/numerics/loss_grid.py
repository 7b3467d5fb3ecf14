"""Privacy-loss distributions on a grid: pessimistic discretization and FFT composition.

A mechanism's privacy loss L = ln P/Q under P (with an atom at +∞ where Q has
no mass) determines every hockey-stick divergence,
δ(ε) = E_P[(1 − e^{ε − L})₊], and the loss of independent releases (or of
independent coordinates of one view) is the sum of their losses, so the
composed loss distribution is the convolution of theirs (Meiser & Mohammadi,
"Tight on budget? Tight bounds for r-fold approximate differential privacy",
CCS 2018; Koskela, Jälkö & Honkela, "Computing tight differential privacy
guarantees using FFT", AISTATS 2020).

**Discretization that stays an upper bound ("connect the dots").** Write
y = e^{−L}. For every ε the map y ↦ (1 − e^{ε}·y·c)₊ is convex (c ≥ 0 the
product of the other coordinates' y), so replacing the law of one coordinate's
y by a mean-preserving spread can only raise δ(ε), at every ε and for every
sum it enters (Jensen, one coordinate at a time). An atom of mass μ at loss l,
with grid points l_i = i·h ≤ l < l_{i+1}, is split into μ_{i+1} =
μ·(1 − e^{−(l − l_i)})/(1 − e^{−h}) at l_{i+1} and μ_i = μ − μ_{i+1} at l_i:
the spread in y that keeps E[y]. This is the construction of Doroshenko,
Ghazi, Kamath, Kumar and Manurangsi, "Connect the dots: tighter discrete
approximations of privacy loss distributions", PETS 2022 (arXiv 2207.04380),
re-derived here from the convexity above; unlike rounding every loss up it
adds no bias of h per composed coordinate.

**What else is charged, and on which side.** ``rounding="up"`` (an upper
bound): a bound on each loss value's floating-point error is added before the
split, and the split moves a few units of roundoff of mass to the upper point;
atoms above the grid's upper cut (at most ``tail`` of mass) go to +∞; atoms
below its lower cut are raised to it (raising a loss only raises δ, and at
most ``tail`` of mass moves); after each convolution the same two cuts keep the
grid short. ``rounding="down"`` (a lower bound): losses are lowered by their
error bound and every atom goes to its lower grid point (lowering a loss only
lowers δ), and cut tails are dropped. Either way the FFT's rounding is
charged by :meth:`GridLoss.allowance`.

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_rounding

__all__ = ["DEFAULT_GRID_TAIL", "GridLoss", "grid_loss"]

FloatArray = NDArray[np.float64]
Rounding = Literal["up", "down"]

_UNIT_ROUNDOFF = 2.0**-53
#: Mass a grid's cuts may move (to +∞ or up to the lower cut), per cut.
DEFAULT_GRID_TAIL = 1e-18


def _cuts(masses: FloatArray, tail: float) -> tuple[int, int]:
    """Indices [lo, hi) that keep all but at most ``tail`` of mass on each side."""
    below = np.cumsum(masses)
    above = np.cumsum(masses[::-1])
    lo = int(np.searchsorted(below, tail, side="right"))
    hi = len(masses) - int(np.searchsorted(above, tail, side="right"))
    if hi <= lo:  # everything within two tails: keep the heaviest point
        top = int(np.argmax(masses))
        return top, top + 1
    return lo, hi


#: The largest exponent :meth:`GridLoss.delta_after` evaluates (e^700 < float max).
_LARGEST_EXPONENT = 700.0


def _step_error(size: int) -> float:
    """ℓ₁ bound on the rounding of one FFT convolution of two vectors with ‖·‖₁ ≤ 1.

    An FFT convolution has an ℓ₂ error of at most c·u·log₂N‖x‖₂‖y‖₂ (Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2nd ed. 2002, §24.1, c ≤ 5
    for the transforms used; ‖·‖₂ ≤ ‖·‖₁ ≤ 1), so over N points its ℓ₁ error is
    at most √N times that; 16 stands for c with margin.
    """
    return _UNIT_ROUNDOFF * 16.0 * math.ceil(math.log2(max(size, 2))) * math.sqrt(size)


@dataclass(frozen=True)
class GridLoss:
    """A privacy-loss distribution on the grid {(offset + i)·h}, plus an atom at +∞.

    Attributes:
        h: The grid step (nats).
        offset: Grid index of ``pmf[0]``.
        pmf: Masses of the finite losses (a sub-probability, non-negative).
        infinite: Mass at +∞ (charged whole to every δ).
        rounding: ``"up"`` if every δ it gives is an upper bound, ``"down"`` a lower one.
        error: Bound on the ℓ₁ distance between ``pmf`` and the exact convolutions it
            stands for (FFT rounding; a convolution of x + e_x with y + e_y errs by at
            most ‖e_x‖₁ + ‖e_y‖₁ + ‖e_x‖₁‖e_y‖₁ plus its own rounding, and clipping
            negative entries to 0 only shrinks an error).
        tail: Mass each cut may move.
    """

    h: float
    offset: int
    pmf: FloatArray
    infinite: float
    rounding: Rounding
    error: float = 0.0
    tail: float = DEFAULT_GRID_TAIL

    @property
    def values(self) -> FloatArray:
        """The finite losses, one per ``pmf`` entry."""
        return (self.offset + np.arange(len(self.pmf), dtype=np.float64)) * self.h

    def allowance(self) -> float:
        """What a δ from this distribution may be off by: its ℓ₁ error and a sum's rounding."""
        return self.error + _UNIT_ROUNDOFF * (len(self.pmf) + 16)

    def delta(self, epsilon: float) -> float:
        """δ(ε) = E[(1 − e^{ε − L})₊], the allowance added (``"up"``) or taken off (``"down"``)."""
        start = max(0, math.floor(epsilon / self.h) - self.offset + 1)
        pmf = self.pmf[start:]
        values = (self.offset + start + np.arange(len(pmf), dtype=np.float64)) * self.h
        keep = values > epsilon
        total = float(np.sum(pmf[keep] * -np.expm1(epsilon - values[keep])))
        if self.rounding == "up":
            return min(1.0, total + self.infinite + self.allowance())
        return max(0.0, total + self.infinite - self.allowance())

    def delta_after(
        self,
        values: FloatArray,
        masses: FloatArray,
        infinite: float,
        epsilon: float,
    ) -> float:
        """δ(ε) of X + L, X the atoms (``values``, ``masses``, ``infinite``) independent of L.

        Summed exactly over X's atoms (no grid for them): for an atom x the inner sum
        Σ_{l > ε − x} p_l(1 − e^{ε − x − l}) comes from two suffix sums of L's grid.
        Where e^{ε − x − l₀} would overflow (a spread beyond 700 nats) the inner sum is
        only known to lie in [0, P[L > ε − x]], and its safe end is taken. L's +∞
        mass weighs X's whole mass and X's +∞ mass L's; L's ℓ₁ error (times X's mass)
        and the sums' rounding (units of P[X + L > ε]) are added for an upper bound and
        taken off for a lower one.
        """
        grid = self.values
        shift = float(grid[0])
        suffix_mass = np.concatenate([np.cumsum(self.pmf[::-1])[::-1], [0.0]])
        scaled = self.pmf * np.exp(shift - grid)
        suffix_scaled = np.concatenate([np.cumsum(scaled[::-1])[::-1], [0.0]])
        thresholds = epsilon - values
        index = np.searchsorted(grid, thresholds, side="right")
        above = suffix_mass[index]
        live = above > 0
        exponent = thresholds[live] - shift
        overflow = exponent > _LARGEST_EXPONENT
        factor = np.exp(np.minimum(exponent, _LARGEST_EXPONENT))
        inner = np.clip(above[live] - factor * suffix_scaled[index[live]], 0.0, None)
        up = self.rounding == "up"
        inner[overflow] = above[live][overflow] if up else 0.0
        total = float(np.sum(masses[live] * inner))
        region = float(np.sum(masses[live] * above[live]))
        weight = float(np.sum(masses))
        whole = float(np.sum(self.pmf)) + self.infinite
        total += self.infinite * weight + infinite * whole
        region += self.infinite * weight + infinite * whole
        # The ℓ₁ error of L's pmf weighs X's whole mass; the suffix sums, the difference
        # in each inner sum and the outer sum round by a few units of the region's mass.
        units = 2 * len(self.pmf) + len(values) + 16
        slack = self.error * (weight + infinite) + units * 2.0 * _UNIT_ROUNDOFF * region
        if up:
            return min(1.0, total + slack)
        return max(0.0, total - slack)

    def _cut(self, pmf: FloatArray, offset: int) -> tuple[FloatArray, int, float]:
        """Apply the two cuts: (pmf, offset, mass sent to +∞)."""
        lo, hi = _cuts(pmf, self.tail)
        upper = float(np.sum(pmf[hi:]))
        kept = pmf[lo:hi].copy()
        if self.rounding == "up":
            kept[0] += float(np.sum(pmf[:lo]))
            return kept, offset + lo, upper
        return kept, offset + lo, 0.0

    def compose(self, other: GridLoss) -> GridLoss:
        """The loss of the two independent coordinates: the convolution, cut again."""
        if other.h != self.h or other.rounding != self.rounding:
            raise InvalidParameterError("composed grid losses must share h and rounding")
        size = len(self.pmf) + len(other.pmf) - 1
        fft_size = 1 << max(1, (size - 1).bit_length())
        spectrum = np.fft.rfft(self.pmf, fft_size) * np.fft.rfft(other.pmf, fft_size)
        pmf = np.clip(np.fft.irfft(spectrum, fft_size)[:size], 0.0, None)
        # P[L = ∞] = i₁(f₂ + i₂) + f₁i₂ (f the finite masses), at most i₁ + i₂ − i₁i₂ since
        # f + i ≤ 1; an upper bound takes that, a lower one the exact form less its rounding.
        i1, i2 = self.infinite, other.infinite
        if self.rounding == "up":
            infinite = min(1.0, i1 + i2 - i1 * i2 + 4.0 * _UNIT_ROUNDOFF)
        else:
            f1, f2 = float(np.sum(self.pmf)), float(np.sum(other.pmf))
            exact = i1 * (f2 + i2) + f1 * i2
            infinite = max(0.0, exact * (1.0 - 8.0 * _UNIT_ROUNDOFF) - self.error - other.error)
        error = self.error + other.error + self.error * other.error + _step_error(fft_size)
        pmf, offset, sent = self._cut(pmf, self.offset + other.offset)
        return GridLoss(
            h=self.h,
            offset=offset,
            pmf=pmf,
            infinite=min(1.0, infinite + sent),
            rounding=self.rounding,
            error=error,
            tail=self.tail,
        )

    def self_compose(self, count: int) -> GridLoss:
        """The loss of ``count`` ≥ 1 independent copies (composition by squaring)."""
        if count < 1:
            raise InvalidParameterError(f"count must be an integer >= 1, got {count!r}")
        result: GridLoss | None = None
        power: GridLoss = self
        while True:
            if count & 1:
                result = power if result is None else result.compose(power)
            count >>= 1
            if not count:
                break
            power = power.compose(power)
        assert result is not None
        return result


def grid_loss(
    values: FloatArray,
    masses: FloatArray,
    *,
    infinite: float,
    h: float,
    rounding: Rounding = "up",
    value_error: float = 0.0,
    tail: float = DEFAULT_GRID_TAIL,
) -> GridLoss:
    """Put finite loss atoms (and a +∞ mass) on the grid of step ``h`` (module docstring).

    Args:
        values: Finite loss values.
        masses: Their masses (non-negative).
        infinite: Mass at +∞.
        h: Grid step > 0.
        rounding: ``"up"`` (connect the dots, upper bound) or ``"down"`` (floor, lower).
        value_error: Bound on each value's absolute error.
        tail: Mass each cut may move.
    """
    rounding = check_rounding(rounding)
    if not (math.isfinite(h) and h > 0.0):
        raise InvalidParameterError(f"h must be a finite number > 0, got {h!r}")
    values = np.asarray(values, dtype=np.float64)
    masses = np.asarray(masses, dtype=np.float64)
    live = masses > 0.0
    values, masses = values[live], masses[live]
    if len(values) == 0:
        return GridLoss(h, 0, np.zeros(1), float(infinite), rounding, tail=tail)
    shifted = values + value_error if rounding == "up" else values - value_error
    order = np.argsort(shifted, kind="stable")
    shifted, masses = shifted[order], masses[order]
    lo, hi = _cuts(masses, tail)
    sent = 0.0
    if rounding == "up":
        sent = float(np.sum(masses[hi:]))
        raised = float(np.sum(masses[:lo]))
        shifted, masses = shifted[lo:hi], masses[lo:hi].copy()
        masses[0] += raised
    else:
        shifted, masses = shifted[lo:hi], masses[lo:hi]
    scaled = shifted / h
    index = np.floor(scaled)
    # The float index can be off by one ulp of l/h: take the point below for sure.
    index -= (index * h > shifted).astype(np.float64)
    first = int(index[0])
    offset_index = (index - first).astype(np.int64)
    size = int(offset_index[-1]) + 2
    if rounding == "up":
        fraction = np.clip(shifted - index * h, 0.0, h)
        upper = masses * (np.expm1(-fraction) / math.expm1(-h))
        upper = np.minimum(masses, upper * (1.0 + 8.0 * _UNIT_ROUNDOFF))
        lower = masses - upper
        pmf = np.bincount(offset_index, weights=lower, minlength=size)
        pmf += np.bincount(offset_index + 1, weights=upper, minlength=size)
    else:
        pmf = np.bincount(offset_index, weights=masses, minlength=size)
    return GridLoss(
        h=h,
        offset=first,
        pmf=pmf.astype(np.float64),
        infinite=min(1.0, float(infinite) + sent),
        rounding=rounding,
        tail=tail,
    )
