"""The correlated protocol's noise: its parameters, and the negative binomial pmfs it is made of.

With m honest users, every bin of the analyzer's view holds N⁺ = h + A + W and
N⁻ = A′ + W, A, A′ ~ Geo(α) = NB(1, α) and W ~ NB(r, q) (Ghazi, Kumar,
Manurangsi & Pagh, ICML 2020, arXiv 2106.04247; Ghazi, Kumar, Manurangsi, Pagh
& Sinha, ICML 2021, arXiv 2109.13158): :class:`CorrelatedNoise` holds (α, r, q)
(the randomizer's own type, :mod:`shuffledp.randomizers.correlated`, re-exported here).
The certificates of both neighbouring relations
(:mod:`shuffledp.accounting.certificates.correlated` and
:mod:`shuffledp.accounting.certificates.correlated_add_remove`) sum over NB pmfs
evaluated on a window with a bound on their relative error
(:func:`negative_binomial_window`), cut where Chernoff's bound leaves a given
tail (:func:`negative_binomial_tail_point`).

Group: mechanism certificates (``shuffledp.accounting.certificates``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError
from shuffledp.randomizers.correlated import CorrelatedNoise

__all__ = [
    "DEFAULT_TAIL",
    "NEIGHBOURS",
    "CorrelatedNoise",
    "NegativeBinomialWindow",
    "Neighbours",
    "check_neighbours",
    "dlap_std",
    "negative_binomial_tail_point",
    "negative_binomial_window",
]

Neighbours = Literal["replacement", "add-remove"]
NEIGHBOURS: tuple[str, ...] = ("replacement", "add-remove")

_UNIT_ROUNDOFF = 2.0**-53
#: Mass W's window leaves out (a Chernoff bound), added to every upper bound.
DEFAULT_TAIL = 1e-20


def check_neighbours(neighbours: object) -> Neighbours:
    """Return ``neighbours`` as a :data:`Neighbours` if it is one of :data:`NEIGHBOURS`.

    Raises:
        InvalidParameterError: Naming the parameter, the value and the two allowed.
    """
    if neighbours not in NEIGHBOURS:
        raise InvalidParameterError(
            f"neighbours must be 'replacement' or 'add-remove', got {neighbours!r}"
        )
    return "replacement" if neighbours == "replacement" else "add-remove"


def dlap_std(a: float) -> float:
    """Standard deviation of the discrete Laplace DLap(a) (P(k) ∝ e^{−a|k|}): √(2α)/(1 − α)."""
    alpha = math.exp(-a)
    return math.sqrt(2.0 * alpha) / (-math.expm1(-a))


# -- the flooding count's pmf ------------------------------------------------------------


def _log_chernoff(t: float, r: float, q: float) -> float:
    """Chernoff's bound on P[NB(r, q) ≥ t], in logs, for t above the mean (optimal s)."""
    # E[e^{sW}] = ((1 − q)/(1 − q e^s))^r; the minimizer has q e^s = t/(r + t).
    return t * math.log(q * (r + t) / t) + r * math.log((1.0 - q) * (r + t) / r)


def negative_binomial_tail_point(r: float, q: float, tail: float) -> int:
    """The smallest integer t ≥ the mean with P[NB(r, q) ≥ t] ≤ ``tail`` by Chernoff's bound."""
    if r == 0.0 or q == 0.0:
        return 0
    mean = r * q / (1.0 - q)
    log_tail = math.log(tail)
    lo = max(1.0, mean)
    hi = max(2.0 * lo, lo + 10.0)
    while _log_chernoff(hi, r, q) > log_tail:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1.0:
        mid = 0.5 * (lo + hi)
        if _log_chernoff(mid, r, q) > log_tail:
            lo = mid
        else:
            hi = mid
    return math.ceil(hi)


@dataclass(frozen=True)
class NegativeBinomialWindow:
    """A pmf on 0..len(pmf) − 1, with the mass left out and a relative error bound."""

    pmf: NDArray[np.float64]
    dropped: float
    rel_error: float


#: lnΓ(k + 1) for k = 0, 1, …, grown on demand (every pmf below shares it).
_LOG_FACTORIALS = np.zeros(1)


def _log_factorials(end: int) -> NDArray[np.float64]:
    """lnΓ(k + 1) for k = 0 … ``end`` (a read-only view of a shared table)."""
    global _LOG_FACTORIALS
    table = _LOG_FACTORIALS
    if len(table) <= end:
        from scipy import special  # here: importing the noise type stays light

        table = special.gammaln(np.arange(max(end + 1, 2 * len(table)), dtype=np.float64) + 1.0)
        table.flags.writeable = False
        _LOG_FACTORIALS = table
    return table[: end + 1]


def negative_binomial_window(
    shape: float, q: float, tail: float, *, end: int | None = None
) -> NegativeBinomialWindow:
    """NB(shape, q) on [0, X] (X past the Chernoff point for ``tail``), with its error bound.

    ``end`` fixes X instead (the caller vouches that at most ``tail`` lies beyond it, as
    for a smaller shape at the same q: NB(s, q) grows stochastically with s).

    ln P(k) = lnΓ(k + s) − lnΓ(s) − lnΓ(k + 1) + s·ln(1 − q) + k·ln q; each term
    carries a few units of its own size, so the pmf's relative error is at most
    e^{Σ} − 1 of their sum (about 16 units of each, with margin).
    """
    if shape == 0.0 or q == 0.0:
        return NegativeBinomialWindow(np.ones(1), 0.0, 0.0)
    if end is None:
        end = negative_binomial_tail_point(shape, q, tail)
    k = np.arange(end + 1, dtype=np.float64)
    from scipy import special

    # The five terms, added left to right (as a sum over a stacked array adds its rows).
    first = special.gammaln(k + shape)
    second = -special.gammaln(shape)
    third = -_log_factorials(end)
    fourth = shape * math.log1p(-q)
    fifth = k * math.log(q)
    log_pmf = first + second
    log_pmf += third
    log_pmf += fourth
    log_pmf += fifth
    size = np.abs(first) + abs(second)
    size += np.abs(third)
    size += abs(fourth)
    size += np.abs(fifth)
    err = float(np.max(16.0 * _UNIT_ROUNDOFF * (size + 1.0)))
    with np.errstate(under="ignore"):
        pmf = np.exp(log_pmf)
    return NegativeBinomialWindow(pmf, tail, math.expm1(err))
