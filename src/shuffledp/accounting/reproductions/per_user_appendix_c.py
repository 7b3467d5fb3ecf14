"""App. C of the per-user paper: its per-user ε with FMT's closed form, as printed.

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

The paper's Alg. 1 releases the shuffled R = a·W + (1 − a)·T instead, and
App. C analyses W and the shuffled T separately. That does not cover R:
shuffled R is not a post-processing of (W with identities, shuffled T), and an
adversary who knew the W's could match each R to its W (R − a·W leaves the
T-noise only) and undo the shuffle. Its per-user number is kept as a
reproduction (:func:`paper_per_user_epsilon`, App. C's formula with FMT's
closed form, Thm 6), never a guarantee.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate. May import the numerical
core, published bounds and certificates; nothing imports it but the questions
layer, protocols, experiments and the command line.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from shuffledp._validation import check_delta
from shuffledp.accounting.certificates.per_user import (
    FloatArray,
    IntArray,
    ball_sizes,
    check_budget,
)
from shuffledp.accounting.published.generic_bounds import fmt2021_closed_epsilon

__all__ = ["paper_per_user_epsilon"]


def paper_per_user_epsilon(
    histograms: FloatArray,
    groups: Sequence[int] | IntArray,
    user: int,
    *,
    epsilon: float,
    epsilon1: float,
    c: float,
    delta: float,
) -> float:
    """App. C as printed: ε₁ + min_Q FMT's closed form at ε₀ = (1 + r(Q)/c)(ε − ε₁), n = |Q|.

    A reproduction (not a guarantee): it analyses W and the shuffled T while
    Alg. 1 releases the shuffled R, and takes the group's diameter r(Q) over
    nested balls around the user. Where the closed form's condition
    ε₀ ≤ ln(|Q|/(16 ln(2/δ))) fails, that Q gives no amplification.
    """
    epsilon, epsilon1, c = check_budget(epsilon, epsilon1, c)
    delta = check_delta(delta)
    h = np.asarray(histograms, dtype=np.float64)
    labels = np.asarray(groups)
    members = np.flatnonzero(labels == labels[user])
    order = np.argsort(np.abs(h[members] - h[user]).sum(axis=1), kind="stable")
    eps2 = epsilon - epsilon1
    best = eps2
    for k in ball_sizes(len(members)).tolist():
        if not fmt2021_closed_epsilon(eps2, k, delta).certified:
            continue  # ε₀ ≥ ε₂ for every Q: outside the closed form's range already
        diameter = _diameter(h[members[order[:k]]])
        e0 = (1.0 + diameter / c) * eps2
        bound = fmt2021_closed_epsilon(e0, k, delta)
        if bound.certified:
            best = min(best, bound.value)
    return epsilon1 + best


def _diameter(points: FloatArray, block: int = 256) -> float:
    """The largest pairwise L1 distance, in blocks of rows (memory O(block · k · d))."""
    best = 0.0
    for start in range(0, points.shape[0], block):
        rows = points[start : start + block]
        best = max(best, float(np.abs(rows[:, None, :] - points[None, :, :]).sum(axis=2).max()))
    return best
