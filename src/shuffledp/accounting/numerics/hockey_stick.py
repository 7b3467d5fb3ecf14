"""Exact hockey-stick divergences of discrete distributions.

The hockey-stick divergence of order e^ε between distributions P and Q,

    H_ε(P ‖ Q) = Σ_z (P(z) − e^ε Q(z))_+ ,

is the smallest δ for which a mechanism whose outputs on two neighbouring
datasets are P and Q satisfies the (ε, δ) inequality of Def. II.1 (Cheu &
Zhilyaev, IEEE S&P 2022, arXiv 2104.02739) in the direction P → Q. Both
directions are needed for differential privacy.

The functions here take probability mass functions on a common finite grid
(numpy arrays) and evaluate the sum exactly up to floating-point rounding; the
product form evaluates the divergence of P1×P2 against Q1×Q2 in
O(S log S) instead of O(S²) by sorting the privacy losses of one coordinate.

Certified versions (:func:`certified_hockey_stick`,
:func:`certified_hockey_stick_product`) round the computed sum to the safe
side by an allowance proportional to P's mass on the region where the
privacy loss is within the rounding margin of ε or above it, so the allowance
shrinks with δ instead of flooring it (the argument is in their docstrings).

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import check_rounding

__all__ = [
    "certified_hockey_stick",
    "certified_hockey_stick_product",
    "exp_or_inf",
    "hockey_stick",
    "hockey_stick_both",
    "hockey_stick_product",
    "rounding_allowance",
]

FloatArray = NDArray[np.float64]
Rounding = Literal["up", "down"]

_UNIT_ROUNDOFF = 2.0**-53
#: Above this, e^ε overflows a double.
_LOG_MAX = 709.0


def exp_or_inf(epsilon: float) -> float:
    """Return e^ε, or ``math.inf`` where it overflows (ε > 709)."""
    return math.exp(epsilon) if epsilon <= _LOG_MAX else math.inf


def _scaled(scale: float, x: FloatArray) -> FloatArray:
    """scale·x elementwise with 0 where x = 0 (so an infinite scale times 0 is 0)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out: FloatArray = np.where(x > 0, scale * x, 0.0)
    return out


def rounding_allowance(pmf_relative_error: float, n_terms: int) -> float:
    """Return an absolute bound on the floating-point error of a computed δ.

    If every probability entering :func:`hockey_stick_product` is within a
    relative ``pmf_relative_error`` of the truth (per coordinate), every product
    P1(x)P2(y) is within r = 2·pmf_relative_error + u. Over the points where
    P > e^ε Q the exact terms move by at most r(P + e^ε Q) ≤ 2rP, points whose
    sign flips contribute at most as much, and the running sums add at most
    ``n_terms`` roundings on a total mass ≤ 2. This bound charges the whole
    mass; :func:`certified_hockey_stick_product` charges only the mass of the
    region that matters and is what the accountants use.

    Args:
        pmf_relative_error: Bound on each coordinate pmf's relative error.
        n_terms: Number of grid points summed over.
    """
    r = 2.0 * pmf_relative_error + _UNIT_ROUNDOFF
    return 4.0 * r + 4.0 * n_terms * _UNIT_ROUNDOFF


def _log_ratio(p: FloatArray, q: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(p) - np.log(q)
    out[(p > 0) & (q == 0)] = np.inf
    out[p == 0] = -np.inf
    return out


def hockey_stick(p: FloatArray, q: FloatArray, epsilon: float) -> float:
    """Return H_ε(P ‖ Q) = Σ (P − e^ε Q)_+ for two pmfs on the same grid.

    Args:
        p: Probabilities of P on the grid.
        q: Probabilities of Q on the same grid.
        epsilon: ε ≥ 0 (any size: e^ε may overflow, points with Q = 0 still count).
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    diff = p - _scaled(exp_or_inf(epsilon), q)
    return float(np.sum(diff[diff > 0]))


def hockey_stick_both(p: FloatArray, q: FloatArray, epsilon: float) -> float:
    """Return max(H_ε(P‖Q), H_ε(Q‖P)): the δ(ε) of a pair of neighbouring outputs."""
    return max(hockey_stick(p, q, epsilon), hockey_stick(q, p, epsilon))


def _finish(
    value: float,
    mass: float,
    *,
    relative_error: float,
    n_terms: int,
    dropped: float,
    epsilon: float,
    rounding: Rounding,
) -> float:
    allowance = (4.0 * relative_error + (n_terms + 32) * _UNIT_ROUNDOFF) * mass
    if rounding == "up":
        return min(1.0, value + dropped + allowance)
    charged = exp_or_inf(epsilon) * dropped if dropped > 0 else 0.0
    return max(0.0, value - charged - allowance)


def certified_hockey_stick(
    p: FloatArray,
    q: FloatArray,
    epsilon: float,
    *,
    relative_error: float,
    dropped: float = 0.0,
    rounding: Rounding = "up",
    both: bool = True,
) -> float:
    """Return max(H_ε(P‖Q), H_ε(Q‖P)) (or the first only) rounded to the safe side.

    Setting. ``p`` and ``q`` are computed pmfs: each entry is within a relative
    r = ``relative_error`` of the true law restricted to the computed support
    (entries ≤ the truth, the rest of each law at most ``dropped``).

    Upper bound. Restricting P to the support loses at most ``dropped`` of
    H_ε. On the support, a point z with P(z) > e^ε Q(z) has
    f(z) = P − e^ε Q ≤ f̂(z) + (r + 3u)(P + e^ε Q)(z) ≤ f̂(z)₊ + 2(r + 3u)(1 + r)·P̂(z)
    (e^ε is computed within 2u, the product and difference add one rounding
    each), and z lies in Ŵ = {P̂ > e^ε(1 − 3r − 8u)·Q̂}. So
    H_ε ≤ Σ f̂₊ + 2.1(r + 3u)·P̂(Ŵ) + dropped, and summing N positive terms in
    floating point adds at most N·u·P̂(Ŵ). Lower bound: the computed positive
    set Ŝ ⊆ Ŵ gives H_ε ≥ Σ_Ŝ (P − e^ε Q) ≥ Σ f̂₊ − 2.1(r + 3u)·P̂(Ŝ) − e^ε·dropped
    (Q's missing mass). The allowance used, (4r + (N + 32)u)·P̂(Ŵ), covers both.

    Args:
        p: Computed pmf of P.
        q: Computed pmf of Q (same grid).
        epsilon: ε ≥ 0.
        relative_error: r, the relative error of every entry.
        dropped: Mass of either law outside the grid.
        rounding: ``"up"`` for an upper bound, ``"down"`` for a lower bound.
        both: Take the larger direction (True) or H_ε(P‖Q) only.
    """
    rounding = check_rounding(rounding)
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    e_eps = exp_or_inf(epsilon)
    widen = 1.0 - 3.0 * relative_error - 8.0 * _UNIT_ROUNDOFF
    best, mass = 0.0, 0.0
    for first, second in ((p, q), (q, p)) if both else ((p, q),):
        diff = first - _scaled(e_eps, second)
        best = max(best, float(np.sum(diff[diff > 0])))
        wide = first > _scaled(e_eps * widen, second)
        mass = max(mass, float(np.sum(first[wide])))
    return _finish(
        best,
        mass,
        relative_error=relative_error,
        n_terms=p.size,
        dropped=dropped,
        epsilon=epsilon,
        rounding=rounding,
    )


def _product_sums(
    p1: FloatArray,
    q1: FloatArray,
    p2: FloatArray,
    q2: FloatArray,
    epsilon: float,
    margin: float,
) -> tuple[float, float]:
    """(Σ over the computed positive region, P's mass where the loss exceeds ε − margin)."""
    l1 = _log_ratio(p1, q1)
    l2 = _log_ratio(p2, q2)

    keep2 = p2 > 0
    l2k, p2k, q2k = l2[keep2], p2[keep2], q2[keep2]
    order = np.argsort(l2k, kind="stable")
    l2s, p2s, q2s = l2k[order], p2k[order], q2k[order]
    # suffix[i] = sum over sorted indices >= i; suffix[len] = 0.
    p_suffix = np.concatenate([np.cumsum(p2s[::-1])[::-1], [0.0]])
    q_suffix = np.concatenate([np.cumsum(q2s[::-1])[::-1], [0.0]])

    keep1 = p1 > 0
    with np.errstate(invalid="ignore"):
        thresholds = epsilon - l1[keep1]
    start = np.searchsorted(l2s, thresholds, side="right")
    contrib = p1[keep1] * p_suffix[start] - _scaled(
        exp_or_inf(epsilon), q1[keep1] * q_suffix[start]
    )
    # Every exact contribution is a sum of positive terms; clip rounding noise.
    value = float(np.sum(np.clip(contrib, 0.0, None)))
    if margin <= 0:
        return value, 0.0
    wide = np.searchsorted(l2s, thresholds - margin, side="right")
    return value, float(np.sum(p1[keep1] * p_suffix[wide]))


def hockey_stick_product(
    p1: FloatArray,
    q1: FloatArray,
    p2: FloatArray,
    q2: FloatArray,
    epsilon: float,
) -> float:
    """Return H_ε(P1×P2 ‖ Q1×Q2) for independent coordinates.

    With privacy losses L1(x) = ln P1(x)/Q1(x) and L2(y) = ln P2(y)/Q2(y), a
    point (x, y) contributes iff L2(y) > ε − L1(x); for a fixed x the sum over
    those y is P1(x)·P2(S_x) − e^ε Q1(x)·Q2(S_x), where S_x is a suffix of the
    points sorted by L2. Suffix sums are accumulated from the small end so no
    probability is obtained by subtracting two numbers close to one.

    Args:
        p1: First-coordinate pmf under P.
        q1: First-coordinate pmf under Q (same grid as ``p1``).
        p2: Second-coordinate pmf under P.
        q2: Second-coordinate pmf under Q (same grid as ``p2``).
        epsilon: ε ≥ 0.

    Returns:
        The divergence, as computed in floating point (see
        :func:`certified_hockey_stick_product` for a certified rounding).
    """
    p1, q1, p2, q2 = (np.asarray(a, dtype=np.float64) for a in (p1, q1, p2, q2))
    if p1.shape != q1.shape or p2.shape != q2.shape:
        raise ValueError("each coordinate's P and Q must share a grid")
    return _product_sums(p1, q1, p2, q2, epsilon, 0.0)[0]


def certified_hockey_stick_product(
    p1: FloatArray,
    q1: FloatArray,
    p2: FloatArray,
    q2: FloatArray,
    epsilon: float,
    *,
    relative_error: float,
    dropped: float = 0.0,
    rounding: Rounding = "up",
    both: bool = False,
) -> float:
    """Return H_ε(P1×P2 ‖ Q1×Q2) (and the reverse when ``both``) rounded to the safe side.

    Every coordinate pmf entry is within a relative r = ``relative_error`` of
    the true (support-restricted) law, so every product is within 2r + u, and
    each computed log-ratio within λ = 2.1r + 3000u of the truth (two logs of
    numbers above 1e-324, each below 745 in size, and their difference, each
    rounded). The computed region
    {l̂₁ + l̂₂ > ε} may differ from the true one only at points whose loss is
    within 2λ of ε, where |P − e^ε Q| ≤ 2.1·2λ·P; suffix sums of N₂ positive
    terms carry at most N₂·u relative error. The argument of
    :func:`certified_hockey_stick` then bounds the error by
    (4(2r + λ) + (N₂ + 32)u)·P̂(Ŵ) with Ŵ the region where the computed loss
    exceeds ε − 4λ; the allowance charges that (P̂(Ŵ) is summed alongside).

    Args:
        p1: First-coordinate pmf under P.
        q1: First-coordinate pmf under Q.
        p2: Second-coordinate pmf under P.
        q2: Second-coordinate pmf under Q.
        epsilon: ε ≥ 0.
        relative_error: r, per coordinate entry.
        dropped: Mass of either product law outside the grid.
        rounding: ``"up"`` or ``"down"``.
        both: Also evaluate H_ε(Q‖P) and return the larger.
    """
    rounding = check_rounding(rounding)
    p1, q1, p2, q2 = (np.asarray(a, dtype=np.float64) for a in (p1, q1, p2, q2))
    if p1.shape != q1.shape or p2.shape != q2.shape:
        raise ValueError("each coordinate's P and Q must share a grid")
    lam = 2.1 * relative_error + 3000.0 * _UNIT_ROUNDOFF
    value, mass = _product_sums(p1, q1, p2, q2, epsilon, 4.0 * lam)
    if both:
        back, back_mass = _product_sums(q1, p1, q2, p2, epsilon, 4.0 * lam)
        value, mass = max(value, back), max(mass, back_mass)
    return _finish(
        value,
        mass,
        relative_error=2.0 * relative_error + lam,
        n_terms=len(p2),
        dropped=dropped,
        epsilon=epsilon,
        rounding=rounding,
    )
