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

What shuffling adds, per user, conditional on the grouping (an analysis number,
never released: it depends on the true histograms, paper §4). For the variant
that releases the shuffled T (groups built from W), the view is the grouping G
— a post-processing of W, so ε₁-hDP — and T shuffled within G. Given G, let Q
be the k users of the victim's group nearest to it (victim-centred L1 radius
ρ_k of the normalized histograms). Hand every other user's report to the
adversary (post-processing, App. C). Within Q each user's output density is
within e^{ε₀} of either of the victim's two, ε₀ = (ρ_k + Δ)/b₂ with b₂ = Δ/ε₂
the Laplace scale of T, i.e. ε₀ = ε₂(1 + ρ_k/Δ): ε₂(1 + ρ_k/(2c)) for moved
items, ε₂(1 + ρ_k/c) for the L1 distance. (App. C prints (1 + r(Q)/c)·ε₂ with
the group's diameter r(Q) ≥ ρ_k; with its scale 2c/ε₂ that is sound, and
loose by the factor 2 in front of r(Q), under the moved-items reading, and
twice the right value under the L1 reading.) Both reductions used need only
ratios relative to the victim's two inputs (FMT's clones: every other output
density is at least e^{−ε₀} times each of the victim's two; variation ratio:
the q property with q = e^{ε₀}, and the victim's own pair within
e^{Δ/b₂} = e^{ε₂} ≤ e^{ε₀}), not LDP over the whole domain, so users outside Q
or far from the victim never enter. So the shuffled T of Q is
amplified as k ε₀-LDP reports: this package's tightest sound generic bounds
(``vr2024`` and ``fmt2021-numeric``; the smaller is kept) give ε_T(k) at δ.
Nested balls around the victim are enough: any Q with victim radius ρ sits in
the ball of that radius, which has at least as many users and the same ε₀.
The user's number is ε′ = ε₁ + min_k ε_T(k) (basic composition of the
grouping and the shuffled T, given G). It is conditional on G: G is random
and data-dependent, so an unconditional statement would also have to bound
the probability of groupings that isolate the user; we do not, and so ε′ is
never a release's guarantee.

The paper's Alg. 1 releases the shuffled R = a·W + (1 − a)·T instead, and
App. C analyses W and the shuffled T separately. That does not cover R:
shuffled R is not a post-processing of (W with identities, shuffled T), and an
adversary who knew the W's could match each R to its W (R − a·W leaves the
T-noise only) and undo the shuffle. Its per-user number is kept as a
reproduction (:func:`paper_per_user_epsilon`, App. C's formula with FMT's
closed form, Thm 6), never a guarantee.

Thm 1 (one copy is not amplified) is demonstrated by :func:`regroup_attack`:
re-clustering the released sequence recovers the groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon
from shuffledp.accounting.api import amplified_epsilon
from shuffledp.accounting.generic_bounds import fmt2021_closed_epsilon
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.randomizers.laplace import (
    Neighbouring,
    check_c,
    laplace_scale,
    neighbouring_in_words,
    normalized_sensitivity,
)

__all__ = [
    "PerUserEpsilons",
    "paper_per_user_epsilon",
    "per_user_epsilons",
    "regroup_attack",
    "release_guarantee",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _check_budget(epsilon: float, epsilon1: float, c: float) -> tuple[float, float, float]:
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
    epsilon, epsilon1, c = _check_budget(epsilon, epsilon1, c)
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


@dataclass(frozen=True)
class PerUserEpsilons:
    """Per-user amplification for the shuffled-T variant (analysis output, never released).

    Attributes:
        epsilon_prime: ε′ per user at δ, conditional on the grouping.
        group_size: The size of each user's group.
        users_in_ball: k of the ball that gives ε′.
        radius: The ball's victim-centred L1 radius ρ_k.
        local_epsilon: ε₀ of that ball.
        delta: The δ of every ε′.
    """

    epsilon_prime: FloatArray
    group_size: IntArray
    users_in_ball: IntArray
    radius: FloatArray
    local_epsilon: FloatArray
    delta: float


class _AmplificationTable:
    """min(vr2024, fmt2021-numeric) ε at δ for (ε₀, k), on grids rounded to the safe side.

    ε₀ is rounded up to a 3% log grid and k down to a 1.25× grid: a bound for a
    larger ε₀ or fewer users is a bound for the true ones (an ε₀-LDP
    randomizer is ε₀′-LDP for ε₀′ ≥ ε₀; extra users can be handed to the
    adversary). Evaluations are memoized.
    """

    _STEP = 1.03

    def __init__(self, delta: float) -> None:
        self.delta = delta
        self.memo: dict[tuple[int, int], float] = {}

    def epsilon0_up(self, e0: float) -> tuple[int, float]:
        index = math.ceil(math.log(e0) / math.log(self._STEP) - 1e-12)
        return index, self._STEP**index

    def __call__(self, e0: float, k: int) -> float:
        index, e0_grid = self.epsilon0_up(e0)
        key = (index, k)
        if key not in self.memo:
            if k <= 1:
                self.memo[key] = e0_grid
            else:
                best = e0_grid
                for method in ("vr2024", "fmt2021-numeric"):
                    row = amplified_epsilon(
                        self.delta, n=k, mechanism="generic", method=method, epsilon0=e0_grid
                    )
                    if row.certified and row.epsilon is not None:
                        best = min(best, row.epsilon)
                self.memo[key] = best
        return self.memo[key]


_TABLES: dict[float, _AmplificationTable] = {}


def _table(delta: float) -> _AmplificationTable:
    """The memoized table for δ, shared by every call in this process."""
    if delta not in _TABLES:
        _TABLES[delta] = _AmplificationTable(delta)
    return _TABLES[delta]


def _worth_evaluating(e0: float, k: int) -> bool:
    """Whether k ε₀-LDP reports can amplify noticeably: at least one expected blanket report.

    In the variation-ratio reduction with p = q = e^{ε₀} the other k − 1 users
    contribute Bin(k − 1, 2/(e^{ε₀} + 1)) blanket reports; with fewer than one
    expected the bound stays near ε₀. Skipping a candidate only loses
    tightness (ε′ is a minimum over valid bounds), never soundness.
    """
    return 2.0 * (k - 1) / (math.exp(min(e0, 700.0)) + 1.0) >= 1.0


def _k_grid(size: int) -> IntArray:
    """Ball sizes searched: 1, 2, 3, … growing by 1.25× up to the group's size."""
    values = {1, size}
    k = 1.0
    while k < size:
        k = max(k + 1.0, k * 1.25)
        values.add(min(size, int(k)))
    return np.array(sorted(values), dtype=np.int64)


def per_user_epsilons(
    histograms: FloatArray,
    groups: Sequence[int] | IntArray,
    *,
    epsilon: float,
    epsilon1: float,
    c: float,
    delta: float,
    neighbouring: Neighbouring = "moved-items",
    users: Sequence[int] | IntArray | None = None,
) -> PerUserEpsilons:
    """ε′ per user for the shuffled-T release, conditional on the grouping (module docstring).

    Args:
        histograms: The true normalized histograms H̄ (n × d, rows summing to 1).
        groups: Each user's group label (users sharing a label were shuffled together).
        epsilon: ε.
        epsilon1: ε₁, the clustering copy's budget.
        c: The neighbouring fraction of Def. 1.
        delta: δ of every ε′.
        neighbouring: The reading of Def. 1 the release was calibrated for
            (``"moved-items"``: Δ = 2c, scale 2c/ε₂; ``"l1-distance"``: Δ = c, c/ε₂);
            ε′ holds under that reading.
        users: Only these users (default: all).

    Raises:
        InvalidParameterError: On bad parameters or shapes.
    """
    epsilon, epsilon1, c = _check_budget(epsilon, epsilon1, c)
    delta = check_delta(delta)
    h = np.asarray(histograms, dtype=np.float64)
    labels = np.asarray(groups)
    if h.ndim != 2 or labels.shape != (h.shape[0],):
        raise InvalidParameterError(
            f"histograms must be n x d and groups length n, got {h.shape} and {labels.shape}"
        )
    b2 = laplace_scale(epsilon - epsilon1, c, neighbouring)
    sensitivity = normalized_sensitivity(c, neighbouring)
    table = _table(delta)
    chosen = np.arange(h.shape[0]) if users is None else np.asarray(users, dtype=np.int64)
    out_eps = np.empty(len(chosen))
    out_size = np.empty(len(chosen), dtype=np.int64)
    out_k = np.empty(len(chosen), dtype=np.int64)
    out_radius = np.empty(len(chosen))
    out_e0 = np.empty(len(chosen))
    members_of: dict[object, IntArray] = {}
    for row, user in enumerate(chosen.tolist()):
        label = labels[user]
        if label not in members_of:
            members_of[label] = np.flatnonzero(labels == label)
        members = members_of[label]
        distances = np.sort(np.abs(h[members] - h[user]).sum(axis=1))  # includes 0 (itself)
        # k = 1 is the victim alone: no amplification, ε₀ = Δ/b₂ = ε₂.
        best = (sensitivity / b2, 1, 0.0, sensitivity / b2)
        for k in _k_grid(len(members)).tolist()[1:]:
            radius = float(distances[k - 1])
            e0 = (radius + sensitivity) / b2
            if not _worth_evaluating(e0, k):
                continue
            value = table(e0, k)
            if value < best[0]:
                best = (value, k, radius, e0)
        out_eps[row] = epsilon1 + best[0]
        out_size[row] = len(members)
        out_k[row], out_radius[row], out_e0[row] = best[1], best[2], best[3]
    return PerUserEpsilons(out_eps, out_size, out_k, out_radius, out_e0, delta)


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
    epsilon, epsilon1, c = _check_budget(epsilon, epsilon1, c)
    delta = check_delta(delta)
    h = np.asarray(histograms, dtype=np.float64)
    labels = np.asarray(groups)
    members = np.flatnonzero(labels == labels[user])
    order = np.argsort(np.abs(h[members] - h[user]).sum(axis=1), kind="stable")
    eps2 = epsilon - epsilon1
    best = eps2
    for k in _k_grid(len(members)).tolist():
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
