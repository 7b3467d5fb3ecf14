"""Privacy loss distributions (PLDs): dominating pairs that compose.

Give the laws P and Q of a mechanism's output on two neighbouring datasets
(numpy arrays on a common grid). :func:`delta_from_distributions` returns
their exact hockey-stick divergence in both directions.
:class:`PairAccountant` turns a pair into a privacy loss distribution with
Google's ``dp-accounting`` package (the ``pld`` extra; Meiser & Mohammadi,
CCS 2018; Koskela, Jälkö & Honkela, AISTATS 2020; the dp-accounting PLD
library, Google 2022), so that several releases compose exactly up to a
pessimistic discretization: :meth:`PairAccountant.compose`,
:meth:`PairAccountant.compose_with`, :meth:`PairAccountant.delta` and
:meth:`PairAccountant.epsilon`.

Dominating pairs. A pair (P, Q) *dominates* a mechanism M if, for every pair
of neighbouring datasets D, D', the laws of M(D) and M(D') are one
post-processing (a Markov kernel that does not depend on the data) of P and Q
(or of Q and P). Then every hockey-stick divergence of M is at most that of
(P, Q), at every ε (negative ones included), and the product of dominating
pairs dominates the composition of the mechanisms (Zhu, Dong & Wang,
AISTATS 2022, Thm 10; also the "worst-case pair" of Koskela et al.). Every
:class:`DominatingPair` here is of that kind:

* :class:`DistributionPair`: two laws on a grid, any mechanism given exactly;
* :class:`TwoCountMixture`: a mixture, over a public variable, of two-count
  pairs (:mod:`shuffledp.accounting.numerics.two_counts`); k-RR's blanket certificate
  (:func:`krr_dominating_pair`);
* :class:`ProductPair`: independent coordinates; FLIP's certificate
  (:func:`flip_dominating_pair`);
* :class:`ApproxDPPair`: the pair that dominates every (ε, δ)-DP mechanism
  (Kairouz, Oh & Viswanath, ICML 2015, Thm 2.4; ``from_privacy_parameters``
  in dp-accounting).

Every δ the PLD reports is an upper bound. Privacy losses are rounded *up* to
the grid (after adding a bound on their floating-point error), in each
direction separately; probability masses are inflated by their relative error
bound; mass that P puts where Q has none, or that was left out of a binomial
window, goes to the infinite loss. Rounding losses up only raises
δ(ε) = E_P[(1 − e^{ε − L})_+], for one release and for sums of independent
losses, so compositions stay pessimistic. dp-accounting's FFT convolutions
carry rounding errors; :meth:`PairAccountant.delta` adds a bound on them
(see :meth:`PairAccountant.allowance`).

Group: composition (``shuffledp.accounting.composition``); may import the
numerical core, published bounds, certificates and ``shuffledp.privacy``.
"""

from __future__ import annotations

import abc
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special

from shuffledp._optional import require
from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_flip_probability,
    check_int,
)
from shuffledp.accounting.certificates.krr import krr_probabilities
from shuffledp.accounting.numerics.binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_window,
    plus_bernoulli,
)
from shuffledp.accounting.numerics.hockey_stick import hockey_stick_both
from shuffledp.accounting.numerics.two_counts import TwoCountPair, two_count_delta

__all__ = [
    "PLD_TAIL",
    "ApproxDPPair",
    "DistributionPair",
    "DominatingPair",
    "PairAccountant",
    "ProductPair",
    "RoundedLoss",
    "TwoCountMixture",
    "delta_from_distributions",
    "flip_certificate_distributions",
    "flip_dominating_pair",
    "krr_dominating_pair",
    "shuffled_randomizer_distributions",
    "two_count_distributions",
    "two_count_loss_distribution",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_UNIT_ROUNDOFF = 2.0**-53
#: Probability left out on each side of every binomial window of a PLD. The mass
#: left out goes to the infinite loss, so it is added to every δ the PLD gives
#: (a few 1e-15 per release): far below any δ worth stating, and windows about
#: 15% narrower than with the accountants' 1e-20.
PLD_TAIL = 1e-15
#: Grid units added before rounding a loss up, against the rounding of l / h.
_GRID_MARGIN = 1e-6
#: Bound on the absolute floating-point error of a log-ratio of two positive
#: numbers below 1 whose relative errors are accounted separately (|ln x| ≤ 745).
_LOG_ERROR = 1e-12
_LOG2 = math.log(2.0)
#: Points evaluated at once when building a two-count pair's PLD.
_CHUNK = 1 << 20


def _check_discretization(value: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (0.0 < float(value) <= 1.0)
        or not math.isfinite(float(value))
    ):
        raise InvalidParameterError(f"discretization must be in (0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RoundedLoss:
    """A privacy-loss pmf on the grid j·h, losses rounded up (one direction).

    Attributes:
        lowest: Grid index j of ``masses[0]`` (its loss is ``lowest·h``).
        masses: Probability (under the first law) of each grid loss, in order.
        infinity: Probability of an infinite loss (the second law is 0 there,
            or the mass was left out of a window).
    """

    lowest: int
    masses: FloatArray
    infinity: float

    @property
    def support(self) -> int:
        """Number of grid points spanned by ``masses``."""
        return len(self.masses)


def _round_up(
    losses: FloatArray, masses: FloatArray, infinity: float, h: float, loss_error: float
) -> RoundedLoss:
    """Return the pmf of ⌈(L + loss_error)/h⌉·h, L with the given masses.

    ``loss_error`` bounds the floating-point error of each computed loss, so the
    rounded loss is never below the true one; a margin of 1e-6 grid units covers
    the rounding of the division itself. Infinite losses join ``infinity``.
    """
    finite = np.isfinite(losses)
    infinity = float(infinity + np.sum(masses[~finite & (masses > 0)]))
    losses, masses = losses[finite], masses[finite]
    if losses.size == 0:
        return RoundedLoss(0, np.zeros(1), infinity)
    index = np.ceil((losses + loss_error) / h + _GRID_MARGIN).astype(np.int64)
    lowest = int(index.min())
    dense = np.bincount(index - lowest, weights=masses).astype(np.float64)
    return RoundedLoss(lowest, dense, infinity)


class _Accumulator:
    """Sum of weighted :class:`RoundedLoss` pmfs on one growing dense grid."""

    def __init__(self) -> None:
        self.lowest = 0
        self.masses: FloatArray = np.zeros(0)
        self.infinity = 0.0

    def add(self, weight: float, part: RoundedLoss) -> None:
        self.infinity += weight * part.infinity
        if self.masses.size == 0:
            self.lowest, self.masses = part.lowest, weight * part.masses
            return
        lo = min(self.lowest, part.lowest)
        hi = max(self.lowest + self.masses.size, part.lowest + part.masses.size)
        if lo < self.lowest or hi > self.lowest + self.masses.size:
            grown = np.zeros(hi - lo)
            grown[self.lowest - lo : self.lowest - lo + self.masses.size] = self.masses
            self.lowest, self.masses = lo, grown
        start = part.lowest - self.lowest
        self.masses[start : start + part.masses.size] += weight * part.masses

    def result(self) -> RoundedLoss:
        if self.masses.size == 0:
            return RoundedLoss(0, np.zeros(1), self.infinity)
        return RoundedLoss(self.lowest, self.masses, self.infinity)


def _dense_pmf(rounded: RoundedLoss, h: float) -> Any:
    """dp-accounting's pessimistic dense PMF of a :class:`RoundedLoss` (zeros trimmed)."""
    pld_pmf = require("dp_accounting.pld.pld_pmf", extra="pld")
    nonzero = np.flatnonzero(rounded.masses > 0)
    if nonzero.size == 0:
        masses, lowest = np.zeros(1), 0
    else:
        masses = np.array(rounded.masses[nonzero[0] : nonzero[-1] + 1], dtype=np.float64)
        lowest = rounded.lowest + int(nonzero[0])
    return pld_pmf.DensePLDPmf(h, lowest, masses, min(1.0, rounded.infinity), True)


def delta_from_distributions(p: FloatArray, q: FloatArray, epsilon: float) -> float:
    """Return max(H_ε(P‖Q), H_ε(Q‖P)) for two pmfs on the same grid (exact sum)."""
    p = np.asarray(p, dtype=np.float64).ravel()
    q = np.asarray(q, dtype=np.float64).ravel()
    if p.shape != q.shape:
        raise InvalidParameterError("p and q must be on the same grid")
    if np.any(p < 0) or np.any(q < 0):
        raise InvalidParameterError("probabilities must be >= 0")
    return hockey_stick_both(p, q, epsilon)


class DominatingPair(abc.ABC):
    """A pair of output laws that dominates a mechanism (see the module docstring).

    Subclasses build the pair's privacy loss distribution with
    :meth:`accountant`; composing accountants composes the pairs.
    """

    @abc.abstractmethod
    def accountant(self, discretization: float = 1e-4) -> PairAccountant:
        """Return the pair's PLD on the grid of width ``discretization`` (pessimistic)."""


class PairAccountant:
    """Privacy loss distribution of a dominating pair, composable (needs the ``pld`` extra).

    Args:
        pair: The pair: a :class:`DistributionPair` or any other
            :class:`DominatingPair`.
        discretization: Width h of the privacy-loss grid (smaller is tighter,
            slower). Losses are rounded up to multiples of h, which costs about
            h·|d ln δ/dε| in relative δ per release.
    """

    _pld: Any
    _h: float
    _support: int
    _convolutions: int

    def __init__(self, pair: DominatingPair, *, discretization: float = 1e-4) -> None:
        h = _check_discretization(discretization)
        if isinstance(pair, DistributionPair):
            remove, add = pair.rounded_losses(h)
            built = PairAccountant.from_rounded(remove, add, h)
        elif isinstance(pair, DominatingPair):
            built = pair.accountant(h)
        else:
            raise InvalidParameterError(f"pair must be a DominatingPair, got {type(pair).__name__}")
        self._pld = built._pld
        self._h = built._h
        self._support = built._support
        self._convolutions = built._convolutions

    @classmethod
    def from_rounded(
        cls, remove: RoundedLoss, add: RoundedLoss | None, discretization: float
    ) -> PairAccountant:
        """Build an accountant from rounded-up loss pmfs.

        Args:
            remove: PLD of (P‖Q): losses ln P/Q under P.
            add: PLD of (Q‖P), or ``None`` when it equals ``remove`` (a pair
                mapped to its swap by a bijection of the outputs).
            discretization: The grid width h both pmfs are on.
        """
        pld_module = require("dp_accounting.pld.privacy_loss_distribution", extra="pld")
        h = _check_discretization(discretization)
        pld = pld_module.PrivacyLossDistribution(
            _dense_pmf(remove, h), None if add is None else _dense_pmf(add, h)
        )
        support = max(remove.support, 1 if add is None else add.support)
        return cls._wrap(pld, h, support, 0)

    @classmethod
    def _wrap(cls, pld: Any, h: float, support: int, convolutions: int) -> PairAccountant:
        obj = cls.__new__(cls)
        obj._pld = pld
        obj._h = h
        obj._support = support
        obj._convolutions = convolutions
        return obj

    @property
    def discretization(self) -> float:
        """The width of the privacy-loss grid."""
        return float(self._h)

    def compose(self, times: int) -> PairAccountant:
        """Return the accountant of ``times`` independent releases."""
        times = check_int(times, "times", minimum=1)
        if times == 1:
            return self
        return self._wrap(
            self._pld.self_compose(times),
            self._h,
            times * (self._support - 1) + 1,
            self._convolutions + times,
        )

    def compose_with(self, other: PairAccountant) -> PairAccountant:
        """Return the accountant of this release followed by ``other`` (same grid)."""
        if not isinstance(other, PairAccountant):
            raise InvalidParameterError(
                f"other must be a PairAccountant, got {type(other).__name__}"
            )
        if other._h != self._h:
            raise InvalidParameterError(
                f"cannot compose PLDs on different grids: discretization {self._h!r} "
                f"and {other._h!r}"
            )
        return self._wrap(
            self._pld.compose(other._pld),
            self._h,
            self._support + other._support - 1,
            self._convolutions + other._convolutions + 1,
        )

    def allowance(self) -> float:
        """Return a bound on the floating-point error of a δ this PLD computes.

        A convolution by FFT of pmfs with ‖·‖₁ ≤ 1 has an ℓ₂ error of at most
        c·u·log₂N per step (Higham, *Accuracy and Stability of Numerical
        Algorithms*, 2002, §24.1; c ≤ 5 for the radix-2/mixed-radix transforms
        used), so the error summed over N grid points is at most √N times that;
        the final dot product adds N·u. The bound used is
        u·(N + 16·⌈log₂N⌉·(steps + 2)·√N), with N the grid size: about 1e-10
        for 10⁶ points and 10 steps.
        """
        n = max(self._support, 2)
        logn = math.ceil(math.log2(n))
        return float(_UNIT_ROUNDOFF * (n + 16.0 * logn * (self._convolutions + 2) * math.sqrt(n)))

    def delta(self, epsilon: float) -> float:
        """Return an upper bound on δ(ε) (both directions, FFT allowance added)."""
        if (
            isinstance(epsilon, bool)
            or not isinstance(epsilon, int | float)
            or not math.isfinite(float(epsilon))
            or float(epsilon) < 0
        ):
            raise InvalidParameterError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        value = float(self._pld.get_delta_for_epsilon(float(epsilon)))
        return min(1.0, max(0.0, value) + self.allowance())

    def epsilon(self, delta: float) -> float:
        """Return the smallest grid-checked ε with :meth:`delta` (ε) ≤ ``delta`` (inf if none)."""
        delta = check_delta(delta)
        target = delta - self.allowance()
        if target <= 0:
            return math.inf
        eps = float(self._pld.get_epsilon_for_delta(target))
        if not math.isfinite(eps):
            return math.inf
        # dp-accounting solves δ(ε) = target from running sums; re-evaluate and step
        # up until the direct sum agrees (one or two grid steps at most in practice).
        for _ in range(1000):
            if float(self._pld.get_delta_for_epsilon(eps)) <= target:
                return eps
            eps += self._h
        return math.inf  # pragma: no cover - the δ curve is continuous and decreasing


@dataclass(frozen=True)
class DistributionPair(DominatingPair):
    """Two output laws on a common grid, plus mass each leaves off the grid.

    Attributes:
        p: First dataset's law on the grid.
        q: Second dataset's law on the grid.
        missing_p: Upper bound on P's mass outside the grid.
        missing_q: Upper bound on Q's mass outside the grid.
        rel_error: Upper bound on the relative floating-point error of every entry.
    """

    p: FloatArray
    q: FloatArray
    missing_p: float = 0.0
    missing_q: float = 0.0
    rel_error: float = 0.0

    def rounded_losses(self, discretization: float) -> tuple[RoundedLoss, RoundedLoss]:
        """Return the rounded-up PLDs of (P‖Q) and (Q‖P)."""
        h = _check_discretization(discretization)
        p = np.asarray(self.p, dtype=np.float64).ravel()
        q = np.asarray(self.q, dtype=np.float64).ravel()
        if p.shape != q.shape:
            raise InvalidParameterError("p and q must be on the same grid")
        return (
            _rounded(p, q, self.missing_p, h, self.rel_error),
            _rounded(q, p, self.missing_q, h, self.rel_error),
        )

    def accountant(self, discretization: float = 1e-4) -> PairAccountant:
        """Return the pair's PLD (both directions)."""
        return PairAccountant(self, discretization=discretization)


def _rounded(
    upper: FloatArray, lower: FloatArray, missing_upper: float, h: float, rel_error: float
) -> RoundedLoss:
    keep = upper > 0
    with np.errstate(divide="ignore"):
        loss = np.where(lower[keep] > 0, np.log(upper[keep]) - np.log(lower[keep]), np.inf)
    masses = upper[keep] * (1.0 + rel_error + 4 * _UNIT_ROUNDOFF)
    return _round_up(loss, masses, missing_upper, h, 2.0 * rel_error + _LOG_ERROR)


@dataclass(frozen=True)
class ApproxDPPair(DominatingPair):
    """The pair dominating every (ε, δ)-DP mechanism (Kairouz, Oh & Viswanath 2015).

    P = (δ, (1 − δ)e^ε/(1 + e^ε), (1 − δ)/(1 + e^ε), 0) and Q its mirror image:
    any mechanism that is (ε, δ)-DP on a neighbouring pair is a post-processing
    of it, so composing it gives the optimal composition of (ε, δ) guarantees
    known only by their values.

    Attributes:
        epsilon: ε ≥ 0.
        delta: δ in [0, 1).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise InvalidParameterError(f"epsilon must be finite and >= 0, got {self.epsilon!r}")
        if not (0.0 <= self.delta < 1.0):
            raise InvalidParameterError(f"delta must be in [0, 1), got {self.delta!r}")

    def accountant(self, discretization: float = 1e-4) -> PairAccountant:
        """Return dp-accounting's pessimistic PLD of the pair."""
        pld_module = require("dp_accounting.pld.privacy_loss_distribution", extra="pld")
        common = require("dp_accounting.pld.common", extra="pld")
        h = _check_discretization(discretization)
        pld = pld_module.from_privacy_parameters(
            common.DifferentialPrivacyParameters(self.epsilon, self.delta), h
        )
        support = math.ceil(self.epsilon / h) - math.ceil(-self.epsilon / h) + 1
        return PairAccountant._wrap(pld, h, support, 0)


@dataclass(frozen=True)
class ProductPair(DominatingPair):
    """Independent coordinates (P₁ × P₂ × …, Q₁ × Q₂ × …): the PLD is the factors' composition.

    Attributes:
        factors: The pairs of the coordinates.
    """

    factors: tuple[DominatingPair, ...]

    def __post_init__(self) -> None:
        if not self.factors:
            raise InvalidParameterError("a ProductPair needs at least one factor")

    def accountant(self, discretization: float = 1e-4) -> PairAccountant:
        """Return the composition of the factors' PLDs."""
        accountants = [factor.accountant(discretization) for factor in self.factors]
        out = accountants[0]
        for other in accountants[1:]:
            out = out.compose_with(other)
        return out


def two_count_loss_distribution(
    pair: TwoCountPair, discretization: float, *, tail: float = PLD_TAIL
) -> RoundedLoss:
    """Return the rounded-up PLD of a two-count pair, line by line (no 2-D grid).

    Notation of :mod:`shuffledp.accounting.numerics.two_counts`: on the line x + y = s,
    P = α_s·b_{s−1}(x−1) + γ_s·b_{s−1}(x) and Q swaps α_s and γ_s. Since
    b_{s−1}(x−1) = b_s(x)·2x/s and b_{s−1}(x) = b_s(x)·2(s−x)/s,

        P(x, s − x) = (2 b_s(x)/s)·(α_s x + γ_s (s − x)),
        L(x, s − x) = ln[(α_s x + γ_s (s − x)) / (γ_s x + α_s (s − x))],

    with b_s the Bin(s, 1/2) pmf. All points of all lines are evaluated at once
    (one flat array, ln b_s(x) from a table of ln k!), then rounded up to the
    grid and summed with ``np.bincount``. The work is the number of points
    kept: about 8.6·√s per line on 16.6·σ_C lines.

    Truncation (the left-out P-mass goes to the infinite loss, so δ only rises):

    * C's window (Bernstein, ``tail`` per side). Revealing whether C fell in it
      is a dominating pair (the flag has the same law under P and Q); on the
      flag's "in" side the masses and losses are those computed here, and the
      "out" side (≤ ``window.dropped``) is charged as infinite.
    * On line s, x is kept in [s − x_h, x_h] with x_h − (s − 1)/2 ≥
      √((s − 1)·ln(1/tail)/2). The P-mass left out is at most
      (α_s + γ_s)·2·P[Bin(s − 1, 1/2) ≥ x_h] ≤ 2(α_s + γ_s)·exp(−2(x_h − (s−1)/2)²/(s − 1))
      (Hoeffding). The kept set is symmetric under x ↔ s − x, which maps P to
      Q, so the PLD of (Q‖P) is the same and one direction suffices.

    Floating point: α, γ carry the window's and the weights' relative error r
    (:attr:`~shuffledp.accounting.numerics.two_counts.TwoCountPair.weight_error`);
    each loss is within
    2r + 1e-12 of the truth and is rounded up after adding that. ln k! comes
    from ``scipy.special.gammaln`` (a few ulps), so ln b_s(x) is within
    16u·ln(s!) + 4u·s; masses are inflated by the sum of these relative errors.

    Args:
        pair: The two-count pair.
        discretization: Grid width h.
        tail: Mass left out on each side of each window.
    """
    h = _check_discretization(discretization)
    window = binomial_window(pair.blanket, pair.rate, tail, pair.rate_complement)
    w0 = pair.idle
    s = np.arange(window.lo, window.hi + 2, dtype=np.int64)
    b_s = np.concatenate([window.pmf, [0.0]])
    b_prev = np.concatenate([[0.0], window.pmf])
    alpha = 0.5 * w0 * b_s + pair.w1 * b_prev
    gamma = 0.5 * w0 * b_s + pair.w2 * b_prev
    infinity = window.dropped
    # α, γ: the pmf's and the weights' errors, plus two products and a sum.
    rel_alpha = window.rel_error + pair.weight_error + 8.0 * _UNIT_ROUNDOFF

    zero_mass = 0.0
    if s[0] == 0:  # the point (0, 0): P = Q = w0·P[C = 0], loss exactly 0
        zero_mass = float(alpha[0] + gamma[0]) * (1.0 + rel_alpha)
        s, alpha, gamma = s[1:], alpha[1:], gamma[1:]
    live = (alpha + gamma) > 0
    s, alpha, gamma = s[live], alpha[live], gamma[live]

    m = (s - 1).astype(np.float64)
    log_inv_tail = math.log(1.0 / tail)
    x_hi = np.minimum(s, np.ceil(0.5 * m + np.sqrt(0.5 * m * log_inv_tail)).astype(np.int64))
    x_hi[m == 0] = s[m == 0]  # s = 1: both points kept
    x_lo = s - x_hi
    cut = x_hi < s
    if np.any(cut):
        t = x_hi[cut] - 0.5 * m[cut]
        bound = 2.0 * (alpha[cut] + gamma[cut]) * np.exp(-2.0 * t * t / m[cut])
        infinity += float(np.sum(bound)) * (1.0 + 1e-12)

    s_max = int(s.max()) if s.size else 0
    log_factorial = special.gammaln(np.arange(s_max + 1, dtype=np.float64) + 1.0)
    rel_b = 16.0 * _UNIT_ROUNDOFF * (float(log_factorial[-1]) + s_max) + 1e-14
    inflate = 1.0 + rel_alpha + rel_b + 8.0 * _UNIT_ROUNDOFF
    loss_error = 2.0 * rel_alpha + _LOG_ERROR
    acc = _Accumulator()
    widths = x_hi - x_lo + 1
    ends = np.cumsum(widths)
    # Lines in chunks of about _CHUNK points, to bound memory on large pairs.
    first = 0
    while first < s.size:
        last = int(np.searchsorted(ends, ends[first] - widths[first] + _CHUNK, side="right"))
        last = max(last, first + 1)
        part = slice(first, last)
        w = widths[part]
        line = np.repeat(np.arange(w.size), w)
        offsets = np.cumsum(w) - w
        x = x_lo[part][line] + (np.arange(line.size, dtype=np.int64) - offsets[line])
        ss = s[part][line]
        a, g = alpha[part][line], gamma[part][line]
        num = a * x + g * (ss - x)
        den = g * x + a * (ss - x)
        log_b = log_factorial[ss] - log_factorial[x] - log_factorial[ss - x]
        mass = np.exp(log_b - ss * _LOG2) * (num * (2.0 * inflate) / ss)
        with np.errstate(divide="ignore"):
            loss = np.log(num / den)
        positive = num > 0
        acc.add(1.0, _round_up(loss[positive], mass[positive], 0.0, h, loss_error))
        first = last
    if zero_mass > 0:
        acc.add(1.0, RoundedLoss(0, np.array([zero_mass]), 0.0))
    acc.infinity += infinity
    return acc.result()


@dataclass(frozen=True)
class TwoCountMixture(DominatingPair):
    """A mixture of two-count pairs over a public variable (its value revealed).

    The joint pair (V, pair_V), with V's law the same under P and Q, has the PLD
    Σ_v P[V = v]·PLD(pair_v). Each two-count pair maps to its swap by x ↔ y, so
    the PLD is symmetric.

    Attributes:
        components: (weight, pair) for each value of V.
        missing: Upper bound on V's mass not listed (charged as an infinite loss).
        weight_rel_error: Upper bound on the relative error of each weight.
        tail: Mass left out on each side of each pair's windows in the PLD.
    """

    components: tuple[tuple[float, TwoCountPair], ...]
    missing: float = 0.0
    weight_rel_error: float = 0.0
    tail: float = PLD_TAIL

    def __post_init__(self) -> None:
        if not self.components:
            raise InvalidParameterError("a TwoCountMixture needs at least one component")
        weights = np.array([w for w, _ in self.components], dtype=np.float64)
        if np.any(weights < 0) or float(np.sum(weights)) > 1.0 + 1e-9:
            raise InvalidParameterError("mixture weights must be >= 0 and sum to at most 1")

    def accountant(self, discretization: float = 1e-4) -> PairAccountant:
        """Return the mixture's PLD (one symmetric direction)."""
        h = _check_discretization(discretization)
        acc = _Accumulator()
        inflate = 1.0 + self.weight_rel_error + 4 * _UNIT_ROUNDOFF
        for weight, pair in self.components:
            acc.add(weight * inflate, two_count_loss_distribution(pair, h, tail=self.tail))
        out = acc.result()
        out = RoundedLoss(out.lowest, out.masses, out.infinity + self.missing)
        return PairAccountant.from_rounded(out, None, h)

    def delta(self, epsilon: float) -> float:
        """Return Σ weight·H_ε(pair) + missing, each pair's δ certified upward (no PLD)."""
        inflate = 1.0 + self.weight_rel_error + 4 * _UNIT_ROUNDOFF
        total = sum(w * two_count_delta(pair, epsilon) for w, pair in self.components)
        return min(1.0, total * inflate + self.missing)


#: Blocks of about equal probability that the blanket count's window starts from.
_INITIAL_BLOCKS = 8
#: Reference ε's at which the blocking's slack is controlled (besides the caller's).
DEFAULT_REFERENCE_EPSILONS: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0)
#: Reference δ's below this are not refined (nothing worth stating is that small).
_SMALLEST_REFINED = 1e-12


def _blocks(
    window: Window,
    pair_delta: Callable[[int], FloatArray],
    max_blocks: int,
    tolerance: float,
) -> list[tuple[int, int]]:
    """Split the window into blocks [i, j) of positions, refined where they are loose.

    ``pair_delta(i)`` returns δ of the pair at the window's i-th value, at each
    reference ε; it decreases in i. A block charged at its first value costs at
    most mass·(δ(i) − δ(j − 1)) more than the exact mixture. While these costs
    add up to more than ``tolerance`` times the total at some reference ε, the
    block costing most there is split at its middle (up to ``max_blocks``).
    """
    size = len(window.pmf)
    if size <= max_blocks:
        return [(i, i + 1) for i in range(size)]
    cumulative = np.concatenate([[0.0], np.cumsum(window.pmf)])
    cuts = np.searchsorted(
        cumulative[1:], np.linspace(0, cumulative[-1], _INITIAL_BLOCKS + 1)[1:-1]
    )
    edges = sorted(set(np.concatenate([[0], cuts, [size]]).tolist()))
    blocks = [(int(i), int(j)) for i, j in itertools.pairwise(edges) if j > i]
    while len(blocks) < max_blocks:
        mass = np.array([cumulative[j] - cumulative[i] for i, j in blocks])
        first = np.array([pair_delta(i) for i, _ in blocks])
        last = np.array([pair_delta(j - 1) for _, j in blocks])
        total = mass @ first
        relevant = total > _SMALLEST_REFINED
        if not np.any(relevant):
            break
        spans = mass[:, None] * (first - last)[:, relevant] / total[relevant]
        spans[np.array([j - i <= 1 for i, j in blocks])] = 0.0
        loosest = int(np.argmax(spans.sum(axis=0)))
        if spans[:, loosest].sum() <= tolerance:
            break
        worst = int(np.argmax(spans[:, loosest]))
        i, j = blocks[worst]
        mid = (i + j) // 2
        blocks[worst : worst + 1] = [(i, mid), (mid, j)]
    return blocks


def krr_dominating_pair(
    epsilon0: float,
    k: int,
    n: int,
    *,
    reference_epsilons: Sequence[float] = DEFAULT_REFERENCE_EPSILONS,
    max_blocks: int = 256,
    tolerance: float = 0.002,
    tail: float = PLD_TAIL,
) -> TwoCountMixture:
    """Return a pair dominating k-RR shuffled among n users (the ``krr-blanket`` certificate).

    The blanket argument of :mod:`shuffledp.accounting.certificates.krr` (Balle, Bell, Gascón
    & Nissim, CRYPTO 2019): every other user draws from the uniform part of
    k-RR with probability kb; revealing which ones did, the histogram is a
    post-processing (the same kernel under both datasets) of (B, pair_B), with
    B ~ Bin(n − 1, kb) and pair_B the two-count pair C ~ Bin(B, 2/k),
    w₁ = a, w₂ = b. So the joint pair (B, pair_B), whose PLD is
    Σ_B P[B]·PLD(pair_B), dominates k-RR for every dataset.

    Blocks. pair_{B+1} is a post-processing of pair_B: one more blanket message,
    on x₀ or x₁ with probability 1/k each, the same kernel under P and Q. So
    for B in a block [B_i, B_j), (B, pair_B) is a post-processing of
    (B, pair_{B_i}) (add B − B_i messages), and the mixture that charges every
    B of a block at the block's smallest B_i dominates the exact one. That
    needs one pair per block instead of one per B. Blocks start from 8 of about
    equal probability and are split until charging each at its B_i costs at
    most ``tolerance`` of δ in all, at every reference ε whose δ is above
    1e-12 (or until ``max_blocks``); windows of
    B at most ``max_blocks`` wide are kept value by value (exact mixture). B's
    mass outside its window goes to the infinite loss.

    Args:
        epsilon0: Local ε₀ of k-RR.
        k: Domain size, ≥ 2.
        n: Number of users.
        reference_epsilons: ε's at which the blocking's slack is controlled (0,
            the TV distance, matters most for many compositions).
        max_blocks: Most components of the mixture.
        tolerance: Relative slack of the blocking (summed over blocks) at which
            splitting stops.
        tail: Mass left out on each side of each binomial window.
    """
    a, b = krr_probabilities(epsilon0, k)
    n = check_int(n, "n", minimum=1)
    max_blocks = check_int(max_blocks, "max_blocks", minimum=_INITIAL_BLOCKS)
    refs = tuple(float(e) for e in reference_epsilons)
    if not refs or any(not math.isfinite(e) or e < 0 for e in refs):
        raise InvalidParameterError(
            f"reference_epsilons must be finite numbers >= 0, got {reference_epsilons!r}"
        )
    if not (0.0 < tolerance < 1.0):
        raise InvalidParameterError(f"tolerance must be in (0, 1), got {tolerance!r}")
    if not b > 1e-300:
        raise InvalidParameterError(
            f"epsilon0={epsilon0:g} with k={k} is outside the k-RR accountant's range "
            "(1/(e^epsilon0 + k - 1) underflows)"
        )
    return _krr_dominating_pair(
        float(epsilon0), a, b, int(k), n, refs, max_blocks, float(tolerance), float(tail)
    )


@functools.lru_cache(maxsize=32)
def _krr_dominating_pair(
    epsilon0: float,
    a: float,
    b: float,
    k: int,
    n: int,
    refs: tuple[float, ...],
    max_blocks: int,
    tolerance: float,
    tail: float,
) -> TwoCountMixture:
    # B ~ Bin(n − 1, kb), with 1 − kb = (1 − e^{−ε₀})·a computed directly.
    window = binomial_window(n - 1, min(1.0, k * b), tail, -math.expm1(-epsilon0) * a)
    rate, rate_complement = min(1.0, 2.0 / k), max(0.0, (k - 2) / k)

    def pair_at(i: int) -> TwoCountPair:
        return TwoCountPair(
            blanket=window.lo + i,
            rate=rate,
            w1=a,
            w2=b,
            w0=(k - 2) * b,
            rate_complement=rate_complement,
        )

    cache: dict[int, FloatArray] = {}

    def pair_delta(i: int) -> FloatArray:
        if i not in cache:
            cache[i] = np.array([two_count_delta(pair_at(i), e) for e in refs])
        return cache[i]

    blocks = _blocks(window, pair_delta, max_blocks, tolerance)
    components = tuple((float(np.sum(window.pmf[i:j])), pair_at(i)) for i, j in blocks)
    return TwoCountMixture(
        components=components,
        missing=window.dropped,
        weight_rel_error=window.rel_error + (len(window.pmf) + 2) * _UNIT_ROUNDOFF,
        tail=tail,
    )


def flip_dominating_pair(
    q: float, fake_users: int, n: int, *, tail: float = PLD_TAIL
) -> ProductPair:
    """Return a pair dominating FLIP for every dataset (certificate ``flip-exact``).

    :mod:`shuffledp.accounting.certificates.flip` shows that the two bin counts a moving user
    touches are a post-processing of P = (X + Ber(1 − q), Y + Ber(q)),
    Q = (X + Ber(q), Y + Ber(1 − q)) with X, Y ~ Bin(nk, q) i.i.d. (the nk fake
    reports), whatever the other users hold; the other bins have the same law
    under both datasets. The coordinates are independent, so the pair is the
    product of (P₁, Q₁) = (X + Ber(1 − q), X + Ber(q)) and its swap (Q₁, P₁),
    and its PLD is the composition of two one-dimensional PLDs. Rounding each
    factor costs at most twice the discretization in loss.
    """
    q = check_flip_probability(q)
    fake_users = check_int(fake_users, "fake_users", minimum=0)
    n = check_int(n, "n", minimum=1)
    window = binomial_window(n * fake_users, q, tail)
    keep = 1.0 - q  # q < 1/2, so exact up to one rounding
    one, zero = plus_bernoulli(window, keep, q), plus_bernoulli(window, q, keep)
    rel = max(one.rel_error, zero.rel_error)
    first = DistributionPair(
        p=one.pmf, q=zero.pmf, missing_p=window.dropped, missing_q=window.dropped, rel_error=rel
    )
    second = DistributionPair(
        p=zero.pmf, q=one.pmf, missing_p=window.dropped, missing_q=window.dropped, rel_error=rel
    )
    return ProductPair((first, second))


def flip_certificate_distributions(q: float, fake_users: int, n: int) -> DistributionPair:
    """Return FLIP's certificate pair on a grid.

    The pair is the one :func:`shuffledp.accounting.certificates.flip.flip_delta` sums.

    P = (X + Ber(1 − q), Y + Ber(q)), Q = (X + Ber(q), Y + Ber(1 − q)) with
    X, Y ~ Bin(nk, q); the grid is the product of the two windows. For
    composition, :func:`flip_dominating_pair` gives the same pair as a product,
    without the two-dimensional grid.
    """
    window = binomial_window(n * fake_users, q, DEFAULT_TAIL)
    one_w, zero_w = plus_bernoulli(window, 1.0 - q, q), plus_bernoulli(window, q, 1.0 - q)
    one, zero = one_w.pmf, zero_w.pmf
    p = np.outer(one, zero)
    qq = np.outer(zero, one)
    return DistributionPair(
        p=p,
        q=qq,
        missing_p=2 * window.dropped,
        missing_q=2 * window.dropped,
        rel_error=2.0 * one_w.rel_error + _UNIT_ROUNDOFF,
    )


def shuffled_randomizer_distributions(channel: NDArray[np.float64], n: int) -> DistributionPair:
    """Return a pair dominating any randomizer (a row-stochastic matrix) shuffled among n users.

    The randomizer is ε₀-LDP with ε₀ = ln of its largest output-probability ratio;
    the variation-ratio pair with generic parameters (p = q = e^{ε₀},
    β = (p − 1)/(p + 1)) bounds it for every dataset. Mechanism-specific β is
    not used: with it the reduction is not an upper bound (docs/accounting.md).
    """
    from shuffledp.accounting.published.variation_ratio import (
        variation_ratio_from_channel,
        vr_generic_pair,
    )

    ratio = variation_ratio_from_channel(channel)
    if not math.isfinite(ratio.p):
        raise InvalidParameterError("the randomizer is not epsilon0-LDP for any finite epsilon0")
    return two_count_distributions(vr_generic_pair(math.log(ratio.p), check_int(n, "n", minimum=1)))


def two_count_distributions(pair: TwoCountPair, *, max_cells: int = 20_000_000) -> DistributionPair:
    """Return a two-count pair's laws on the dense grid (x, y), truncated to C's window.

    A reference for small m (and for tests): composition at scale uses
    :class:`TwoCountMixture` / :func:`two_count_loss_distribution`, which never
    builds the grid.

    Raises:
        InvalidParameterError: If the grid would exceed ``max_cells`` cells.
    """
    from scipy.stats import binom

    window = binomial_window(pair.blanket, pair.rate, DEFAULT_TAIL, pair.rate_complement)
    size = window.hi + 2
    if size * size > max_cells:
        raise InvalidParameterError(
            f"the two-count grid would have {size * size:.3g} cells (limit {max_cells:.3g}); "
            "use TwoCountMixture for a PLD without the grid"
        )
    w0 = pair.idle
    p = np.zeros((size, size))
    q = np.zeros((size, size))
    for c in range(window.lo, window.hi + 1):
        weight_c = window.pmf[c - window.lo]
        a = np.arange(c + 1)
        a_pmf = binom.pmf(a, c, 0.5) * weight_c
        for (d1, d2), weight in (((1, 0), pair.w1), ((0, 1), pair.w2), ((0, 0), w0)):
            if weight == 0:
                continue
            p[a + d1, c - a + d2] += weight * a_pmf
            q[a + d2, c - a + d1] += weight * a_pmf
    # scipy's binomial pmf: within 1.6e-11 relative error even at m = 1e8 (see _binomial).
    return DistributionPair(
        p=p,
        q=q,
        missing_p=window.dropped,
        missing_q=window.dropped,
        rel_error=window.rel_error + pair.weight_error + 1e-10,
    )
