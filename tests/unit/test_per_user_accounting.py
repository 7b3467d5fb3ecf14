"""Per-user histogram accounting: the release guarantee, the Laplace scale and one user's ε′.

The per-user ε′ is recomputed independently: every subset Q of a small group
that contains the victim (not only nested balls), its victim radius by brute
force, and the accountant's generic bounds evaluated at the exact ε₀.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.api import amplified_epsilon
from shuffledp.accounting.certificates.per_user import release_guarantee
from shuffledp.accounting.per_user_epsilons import per_user_epsilons
from shuffledp.accounting.reproductions.per_user_appendix_c import paper_per_user_epsilon


def _neighbour_pairs(rng: np.random.Generator, d: int, total: int, c: float, trials: int):
    """Random c-neighbours under Def. 1's L1 reading: same total, L1 change ≤ ⌊c·total⌋."""
    budget = math.floor(c * total)
    for _ in range(trials):
        h = rng.multinomial(total, rng.dirichlet(np.ones(d)))
        h2 = h.copy()
        moved = int(rng.integers(0, budget // 2 + 1))  # moving m units changes L1 by 2m
        for _ in range(moved):
            source = rng.choice(np.flatnonzero(h2 > 0))
            h2[source] -= 1
            h2[rng.integers(0, d)] += 1
        yield h, h2


def test_normalized_sensitivity_under_the_l1_reading_is_c() -> None:
    """L1-reading neighbours are within c after normalization (Lap(c/ε) is ε-hLDP for them).

    The moved-items reading (2c) is checked by brute force in test_per_user_neighbouring.
    """
    rng = np.random.default_rng(3)
    worst = 0.0
    for c in (0.05, 0.3, 1.0):
        for total in (1, 7, 50):
            for h, h2 in _neighbour_pairs(rng, 6, total, c, 200):
                assert h.sum() == h2.sum() == total
                worst = max(worst, float(np.abs(h - h2).sum()) / total / c)
    assert worst <= 1.0
    # The bound is attained: moving ⌊c·s⌋/2 units when c·s is an even integer.
    h = np.array([10, 0])
    h2 = np.array([5, 5])
    assert np.abs(h / 10 - h2 / 10).sum() == pytest.approx(1.0)  # c = 1, s = 10


def test_release_guarantee_is_pure_epsilon_for_every_variant() -> None:
    report = release_guarantee(1.5, 0.5, 0.25, 100, release="r")
    assert report.guarantee.epsilon == 1.5
    assert report.guarantee.delta == 0.0
    assert report.parameters["epsilon2"] == pytest.approx(1.0)
    assert report.parameters["neighbouring"] == "moved-items"
    assert "moving at most floor(0.25*s) of its items" in report.neighbouring
    l1 = release_guarantee(1.5, 0.5, 0.25, 100, neighbouring="l1-distance")
    assert "||H - H'||_1 <= floor(0.25*s)" in l1.neighbouring
    assert l1.neighbouring != report.neighbouring  # reports of the two never compose silently
    with pytest.raises(InvalidParameterError, match="neighbouring must be one of"):
        release_guarantee(1.5, 0.5, 0.25, 100, neighbouring="paper")  # type: ignore[arg-type]
    for bad in ({"epsilon1": 1.5}, {"epsilon1": 2.0}, {"c": 0.0}, {"c": 1.5}):
        kwargs = {"epsilon": 1.5, "epsilon1": 0.5, "c": 0.25, "n": 100} | bad
        with pytest.raises(InvalidParameterError):
            release_guarantee(**kwargs)  # type: ignore[arg-type]


def _one_group_case() -> tuple[np.ndarray, np.ndarray]:
    """A tight group of 12 around user 0 plus a far group of 5."""
    rng = np.random.default_rng(11)
    d = 5
    centre = np.array([0.4, 0.3, 0.1, 0.1, 0.1])
    near = np.array([centre + 0.02 * rng.uniform(-1, 1, d) for _ in range(11)])
    near = near / near.sum(axis=1, keepdims=True)
    far = rng.dirichlet(np.ones(d), 5)
    histograms = np.vstack([centre, near, far])
    groups = np.array([7] * 12 + [3] * 5)
    return histograms, groups


@pytest.mark.parametrize("neighbouring, sensitivity", [("moved-items", 2.0), ("l1-distance", 1.0)])
def test_one_users_epsilon_prime_recomputed_over_every_subset(
    neighbouring: str, sensitivity: float
) -> None:
    histograms, groups = _one_group_case()
    epsilon, epsilon1, c, delta = 0.9, 0.4, 1.0, 1e-3
    epsilon2 = epsilon - epsilon1
    result = per_user_epsilons(
        histograms,
        groups,
        epsilon=epsilon,
        epsilon1=epsilon1,
        c=c,
        delta=delta,
        neighbouring=neighbouring,  # type: ignore[arg-type]
        users=[0],
    )
    # The victim's two normalized histograms are up to delta_l1 apart in L1 (2c when up to
    # floor(c s) items move, c when ||H - H'||_1 <= floor(c s)); T's scale is delta_l1 / epsilon2.
    delta_l1 = sensitivity * c
    scale_t = delta_l1 / epsilon2

    members = np.flatnonzero(groups == groups[0])
    others = [int(u) for u in members if u != 0]
    memo: dict[tuple[int, float], float] = {}

    def amplified(e0: float, k: int) -> float:
        if (k, e0) not in memo:
            values = [e0]
            for method in ("vr2024", "fmt2021-numeric"):
                row = amplified_epsilon(delta, n=k, mechanism="generic", method=method, epsilon0=e0)
                if row.certified and row.epsilon is not None:
                    values.append(row.epsilon)
            memo[(k, e0)] = min(values)
        return memo[(k, e0)]

    brute = epsilon2  # Q = {victim}: the local Laplace copy alone
    for size in range(1, len(others) + 1):
        for subset in itertools.combinations(others, size):
            radius = max(float(np.abs(histograms[u] - histograms[0]).sum()) for u in subset)
            e0 = (radius + delta_l1) / scale_t
            brute = min(brute, amplified(e0, size + 1))
    brute_up = min(
        [epsilon2]
        + [
            amplified(round((max(r[:k]) + delta_l1) / scale_t * 1.03, 12), k + 1)
            for r in [sorted(float(np.abs(histograms[u] - histograms[0]).sum()) for u in others)]
            for k in range(1, len(others) + 1)
        ]
    )
    got = float(result.epsilon_prime[0])
    assert brute < epsilon2  # the case amplifies
    assert epsilon1 + brute - 1e-12 <= got <= epsilon1 + brute_up + 1e-12
    assert result.group_size[0] == 12
    # The far group never enters: its users are not in the victim's group.
    assert result.users_in_ball[0] <= 12


def test_epsilon_prime_never_exceeds_the_local_budget() -> None:
    histograms, groups = _one_group_case()
    result = per_user_epsilons(histograms, groups, epsilon=0.9, epsilon1=0.4, c=0.05, delta=1e-6)
    assert np.all(result.epsilon_prime <= 0.9 + 1e-12)
    assert np.all(result.epsilon_prime >= 0.4)


def test_paper_reproduction_gives_no_amplification_outside_its_condition() -> None:
    histograms, groups = _one_group_case()
    # FMT's closed form needs ε₀ ≤ ln(|Q|/(16 ln(2/δ))): never for 12 users.
    value = paper_per_user_epsilon(
        histograms, groups, 0, epsilon=0.9, epsilon1=0.4, c=1.0, delta=1e-3
    )
    assert value == pytest.approx(0.9)


def test_per_user_epsilons_rejects_bad_shapes() -> None:
    with pytest.raises(InvalidParameterError, match="n x d"):
        per_user_epsilons(np.ones((3, 2)), [0, 0], epsilon=1.0, epsilon1=0.5, c=0.5, delta=1e-6)
