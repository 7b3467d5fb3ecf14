"""Privacy of per-user histograms shuffled within clusters (the per-user paper, Thm 1–2, App. B–C).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

What every release guarantees. Each user sends two Laplace copies of its
normalized histogram H̄: W with budget ε₁ and T with ε₂ = ε − ε₁. Under the
reading of Def. 1 a release is stated for (``neighbouring``, see
:mod:`shuffledp.randomizers.laplace`) the L1 distance of the normalized
histograms of two c-neighbours is at most Δ: 2c when up to ⌊c·s⌋ items may
move between classes (``"moved-items"``, the default), c when
‖H − H′‖₁ ≤ ⌊c·s⌋ (``"l1-distance"``). So Lap(Δ/ε₁) and Lap(Δ/ε₂) are ε₁-
and ε₂-hLDP and the pair is ε-hLDP. Clustering, shuffling and any
combination of the copies are post-processing: **every variant is
(ε, 0, c)-hDP for every user, whatever the data** (:func:`release_guarantee`).
That is what a release states.

What shuffling adds per user, conditional on the grouping, is an analysis
number, never released: :mod:`shuffledp.accounting.per_user_epsilons`. The
paper's own per-user number is a reproduction:
:mod:`shuffledp.accounting.reproductions.per_user_appendix_c`.

Thm 1 (one copy is not amplified) is demonstrated by :func:`regroup_attack`:
re-clustering the released sequence recovers the groups.

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core and
published bounds, never reproductions or the questions layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_epsilon
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.randomizers.laplace import (
    Neighbouring,
    check_c,
    neighbouring_in_words,
)

__all__ = [
    "regroup_attack",
    "release_guarantee",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def check_budget(epsilon: float, epsilon1: float, c: float) -> tuple[float, float, float]:
    """Check (ε, ε₁, c) of a per-user release: ε₁ < ε (ε₂ = ε − ε₁ is the shuffled copy's)."""
    epsilon = check_epsilon(epsilon)
    epsilon1 = check_epsilon(epsilon1, "epsilon1")
    if not epsilon1 < epsilon:
        raise InvalidParameterError(
            f"epsilon1 must be below epsilon (the rest is the shuffled copy's budget), got "
            f"epsilon1={epsilon1:g} and epsilon={epsilon:g}"
        )
    return epsilon, epsilon1, check_c(c)


def release_guarantee(
    epsilon: float,
    epsilon1: float,
    c: float,
    n: int,
    *,
    release: str = "t",
    neighbouring: Neighbouring = "moved-items",
) -> PrivacyReport:
    """The guarantee a release states: (ε, 0, c)-hDP for every user, whatever the data.

    Holds for every variant (both copies are local Laplace releases whose
    budgets sum to ε, each scaled for ``neighbouring``'s sensitivity;
    everything else is post-processing).
    """
    epsilon, epsilon1, c = check_budget(epsilon, epsilon1, c)
    relation = neighbouring_in_words(c, neighbouring)
    return PrivacyReport(
        guarantee=ApproxDP(epsilon, 0.0),
        method="per-user-laplace-local",
        bound=BoundKind.UPPER,
        n=n,
        neighbouring=f"c-neighbouring histograms (Def. 1 and 3): {relation}",
        parameters={
            "epsilon1": epsilon1,
            "epsilon2": epsilon - epsilon1,
            "c": c,
            "neighbouring": neighbouring,
            "release": release,
        },
        notes=(
            "both Laplace copies are local (epsilon1 + epsilon2 = epsilon); clustering and "
            "shuffling are post-processing. Shuffling within groups can only improve a user's "
            "privacy; by how much depends on the private data and is not released"
        ),
    )


def ball_sizes(size: int) -> IntArray:
    """Ball sizes searched: 1, 2, 3, … growing by 1.25× up to the group's size."""
    values = {1, size}
    k = 1.0
    while k < size:
        k = max(k + 1.0, k * 1.25)
        values.add(min(size, int(k)))
    return np.array(sorted(values), dtype=np.int64)


def regroup_attack(
    released: FloatArray, true_groups: Sequence[int] | IntArray, *, clusters: int, seed: int = 0
) -> dict[str, float]:
    """Thm 1's adversary: re-cluster the released sequence and compare with the shuffler's groups.

    Runs k-means (the shuffler's algorithm) on the released histograms. Returns
    the adjusted Rand index between the recovered and the true partitions, and
    whether the partition was recovered exactly (1.0) or not (0.0).
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    x = np.asarray(released, dtype=np.float64)
    recovered = KMeans(n_clusters=clusters, n_init=10, random_state=seed).fit_predict(x)
    truth = np.asarray(true_groups)
    ari = float(adjusted_rand_score(truth, recovered))
    return {"adjusted_rand_index": ari, "exact": 1.0 if math.isclose(ari, 1.0) else 0.0}
