"""Exact hockey-stick divergences of discrete distributions.

The hockey-stick divergence of order e^ε between distributions P and Q,

    H_ε(P ‖ Q) = Σ_z (P(z) − e^ε Q(z))_+ ,

is the smallest δ for which a mechanism whose outputs on two neighbouring
datasets are P and Q satisfies the (ε, δ) inequality of Def. II.1 (FLIP paper)
in the direction P → Q. Both directions are needed for differential privacy.

The functions here take probability mass functions on a common finite grid
(numpy arrays) and evaluate the sum exactly up to floating-point rounding; the
product form evaluates the divergence of P1×P2 against Q1×Q2 in
O(S log S) instead of O(S²) by sorting the privacy losses of one coordinate.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "hockey_stick",
    "hockey_stick_both",
    "hockey_stick_product",
    "rounding_allowance",
]

FloatArray = NDArray[np.float64]

_UNIT_ROUNDOFF = 2.0**-53


def rounding_allowance(pmf_relative_error: float, n_terms: int) -> float:
    """Return an upper bound on the floating-point error of a computed δ.

    If every probability entering :func:`hockey_stick_product` is within a
    relative ``pmf_relative_error`` of the truth (per coordinate), every product
    P1(x)P2(y) is within r = 2·pmf_relative_error + u. Over the points where
    P > e^ε Q the exact terms move by at most r(P + e^ε Q) ≤ 2rP, points whose
    sign flips contribute at most as much, and the running sums add at most
    ``n_terms`` roundings on a total mass ≤ 2.

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
        epsilon: ε ≥ 0.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {p.shape} and {q.shape}")
    diff = p - math.exp(epsilon) * q
    return float(np.sum(diff[diff > 0]))


def hockey_stick_both(p: FloatArray, q: FloatArray, epsilon: float) -> float:
    """Return max(H_ε(P‖Q), H_ε(Q‖P)): the δ(ε) of a pair of neighbouring outputs."""
    return max(hockey_stick(p, q, epsilon), hockey_stick(q, p, epsilon))


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
        :func:`rounding_allowance` for the error to add when certifying).
    """
    p1, q1, p2, q2 = (np.asarray(a, dtype=np.float64) for a in (p1, q1, p2, q2))
    if p1.shape != q1.shape or p2.shape != q2.shape:
        raise ValueError("each coordinate's P and Q must share a grid")
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
    e_eps = math.exp(epsilon)
    contrib = p1[keep1] * p_suffix[start] - e_eps * q1[keep1] * q_suffix[start]
    # Every exact contribution is a sum of positive terms; clip rounding noise.
    return float(np.sum(np.clip(contrib, 0.0, None)))
