"""The generic path: any mechanism given by its two output distributions, through PLDs.

Give the laws P and Q of a mechanism's output on two neighbouring datasets
(numpy arrays on a common grid). :func:`delta_from_distributions` returns
their exact hockey-stick divergence in both directions.
:class:`PairAccountant` turns the pair into a privacy loss distribution with
Google's ``dp-accounting`` package (the ``pld`` extra), so that several
releases compose exactly up to a pessimistic discretization:
:meth:`PairAccountant.compose` and :meth:`PairAccountant.delta` /
:meth:`PairAccountant.epsilon`.

The privacy losses are rounded *up* to the discretization grid for P's side
and for Q's side (each direction separately), and mass P puts where Q has
none, or that was truncated away, goes to the infinite loss. That keeps every
δ the PLD reports an upper bound.

Pairs that dominate a shuffled mechanism in the post-processing sense compose
correctly, because composing dominating pairs dominates the composed
mechanisms. Helpers return such pairs for FLIP's certificate
(:func:`flip_certificate_distributions`), for two-count reductions
(:func:`two_count_distributions`) and for any randomizer given as a channel
matrix (:func:`shuffled_randomizer_distributions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._optional import require
from shuffledp._validation import InvalidParameterError, check_delta, check_int
from shuffledp.accounting._binomial import DEFAULT_TAIL, binomial_window, plus_bernoulli
from shuffledp.accounting.hockey_stick import hockey_stick_both
from shuffledp.accounting.two_counts import TwoCountPair

__all__ = [
    "DistributionPair",
    "PairAccountant",
    "delta_from_distributions",
    "flip_certificate_distributions",
    "shuffled_randomizer_distributions",
    "two_count_distributions",
]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class DistributionPair:
    """Two output laws on a common grid, plus mass each leaves off the grid.

    Attributes:
        p: First dataset's law on the grid.
        q: Second dataset's law on the grid.
        missing_p: Upper bound on P's mass outside the grid.
        missing_q: Upper bound on Q's mass outside the grid.
    """

    p: FloatArray
    q: FloatArray
    missing_p: float = 0.0
    missing_q: float = 0.0


def delta_from_distributions(p: FloatArray, q: FloatArray, epsilon: float) -> float:
    """Return max(H_ε(P‖Q), H_ε(Q‖P)) for two pmfs on the same grid (exact sum)."""
    p = np.asarray(p, dtype=np.float64).ravel()
    q = np.asarray(q, dtype=np.float64).ravel()
    if p.shape != q.shape:
        raise InvalidParameterError("p and q must be on the same grid")
    if np.any(p < 0) or np.any(q < 0):
        raise InvalidParameterError("probabilities must be >= 0")
    return hockey_stick_both(p, q, epsilon)


def _rounded(
    upper: FloatArray, lower: FloatArray, missing_upper: float, interval: float
) -> tuple[dict[int, float], float]:
    keep = upper > 0
    infinite = keep & (lower == 0)
    finite = keep & ~infinite
    with np.errstate(divide="ignore"):
        loss = np.log(upper[finite]) - np.log(lower[finite])
    index = np.ceil(loss / interval - 1e-12).astype(np.int64)
    uniq, inverse = np.unique(index, return_inverse=True)
    mass = np.bincount(inverse, weights=upper[finite])
    pmf = {int(i): float(m) for i, m in zip(uniq, mass, strict=True) if m > 0}
    return pmf, float(np.sum(upper[infinite]) + missing_upper)


class PairAccountant:
    """Privacy loss distribution of a pair (P, Q), composable (needs the ``pld`` extra).

    Args:
        pair: The two laws.
        discretization: Width of the privacy-loss grid (smaller is tighter, slower).
    """

    def __init__(self, pair: DistributionPair, *, discretization: float = 1e-4) -> None:
        pld_module = require("dp_accounting.pld.privacy_loss_distribution", extra="pld")
        p = np.asarray(pair.p, dtype=np.float64).ravel()
        q = np.asarray(pair.q, dtype=np.float64).ravel()
        if p.shape != q.shape:
            raise InvalidParameterError("p and q must be on the same grid")
        remove, inf_remove = _rounded(p, q, pair.missing_p, discretization)
        add, inf_add = _rounded(q, p, pair.missing_q, discretization)
        self._pld: Any = pld_module.PrivacyLossDistribution.create_from_rounded_probability(
            remove,
            inf_remove,
            discretization,
            pessimistic_estimate=True,
            rounded_probability_mass_function_add=add,
            infinity_mass_add=inf_add,
            symmetric=False,
        )

    @classmethod
    def _wrap(cls, pld: Any) -> PairAccountant:
        obj = cls.__new__(cls)
        obj._pld = pld
        return obj

    def compose(self, times: int) -> PairAccountant:
        """Return the accountant of ``times`` independent releases."""
        times = check_int(times, "times", minimum=1)
        return self._wrap(self._pld.self_compose(times)) if times > 1 else self

    def compose_with(self, other: PairAccountant) -> PairAccountant:
        """Return the accountant of this release followed by ``other``."""
        return self._wrap(self._pld.compose(other._pld))

    def delta(self, epsilon: float) -> float:
        """Return an upper bound on δ(ε) (both directions)."""
        return float(self._pld.get_delta_for_epsilon(epsilon))

    def epsilon(self, delta: float) -> float:
        """Return an upper bound on ε(δ)."""
        return float(self._pld.get_epsilon_for_delta(check_delta(delta)))


def flip_certificate_distributions(q: float, fake_users: int, n: int) -> DistributionPair:
    """Return FLIP's certificate pair (:func:`shuffledp.accounting.flip.flip_delta`) on a grid.

    P = (X + Ber(1 − q), Y + Ber(q)), Q = (X + Ber(q), Y + Ber(1 − q)) with
    X, Y ~ Bin(nk, q); the grid is the product of the two windows.
    """
    window = binomial_window(n * fake_users, q, DEFAULT_TAIL)
    one, zero = plus_bernoulli(window, 1.0 - q).pmf, plus_bernoulli(window, q).pmf
    p = np.outer(one, zero)
    qq = np.outer(zero, one)
    return DistributionPair(p=p, q=qq, missing_p=2 * window.dropped, missing_q=2 * window.dropped)


def shuffled_randomizer_distributions(channel: NDArray[np.float64], n: int) -> DistributionPair:
    """Return a pair dominating any randomizer (a row-stochastic matrix) shuffled among n users.

    The randomizer is ε₀-LDP with ε₀ = ln of its largest output-probability ratio;
    the variation-ratio pair with generic parameters (p = q = e^{ε₀},
    β = (p − 1)/(p + 1)) bounds it for every dataset. Mechanism-specific β is
    not used: with it the reduction is not an upper bound (docs/accounting.md).
    """
    from shuffledp.accounting.variation_ratio import variation_ratio_from_channel, vr_generic_pair

    ratio = variation_ratio_from_channel(channel)
    if not math.isfinite(ratio.p):
        raise InvalidParameterError("the randomizer is not epsilon0-LDP for any finite epsilon0")
    return two_count_distributions(vr_generic_pair(math.log(ratio.p), check_int(n, "n", minimum=1)))


def two_count_distributions(pair: TwoCountPair, *, max_cells: int = 20_000_000) -> DistributionPair:
    """Return a two-count pair's laws on the grid (x, y), truncated to C's window.

    Raises:
        InvalidParameterError: If the grid would exceed ``max_cells`` cells.
    """
    from scipy.stats import binom

    window = binomial_window(pair.blanket, pair.rate, DEFAULT_TAIL)
    size = window.hi + 2
    if size * size > max_cells:
        raise InvalidParameterError(
            f"the two-count grid would have {size * size:.3g} cells (limit {max_cells:.3g})"
        )
    w0 = 1.0 - pair.w1 - pair.w2
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
    return DistributionPair(p=p, q=q, missing_p=window.dropped, missing_q=window.dropped)
