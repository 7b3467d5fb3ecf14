"""Per-user ε′ of the shuffled copy in per-user histograms (the per-user paper, §4, App. C).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

The release's guarantee is (ε, 0, c)-hDP for every user
(:func:`shuffledp.accounting.certificates.per_user.release_guarantee`).

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

Group: the questions users ask (it asks :func:`shuffledp.accounting.amplified_epsilon`
for the generic bounds); may import every other group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shuffledp._validation import InvalidParameterError, check_delta
from shuffledp.accounting.api import amplified_epsilon
from shuffledp.accounting.certificates.per_user import (
    FloatArray,
    IntArray,
    ball_sizes,
    check_budget,
)
from shuffledp.randomizers.laplace import Neighbouring, laplace_scale, normalized_sensitivity

__all__ = ["PerUserEpsilons", "per_user_epsilons"]


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
    epsilon, epsilon1, c = check_budget(epsilon, epsilon1, c)
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
        for k in ball_sizes(len(members)).tolist()[1:]:
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
