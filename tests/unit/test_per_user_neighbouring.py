"""Both readings of Def. 1 (per-user histograms paper), recomputed by brute force at small totals.

Every histogram of total s over d classes is enumerated. Moved-items
neighbours are found by a breadth-first search over single-item moves (not by
the L1 formula the code uses); L1-distance neighbours by ‖H − H′‖₁ ≤ ⌊c·s⌋.
For each pair, the worst-case log-likelihood ratio of one Laplace copy
H/s + Lap(b)^d is the sum over coordinates of the largest difference of
scipy's Laplace log-densities over the points where it can change slope
(both centres) and far outside both: the copy's density is a product, so
the supremum over y separates by coordinate. The largest value over all
pairs is the exact ε of the copy under that relation.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from functools import cache

import numpy as np
import pytest

from shuffledp.protocols.per_user import PerUserHistograms
from shuffledp.randomizers.laplace import hldp_epsilon, laplace_scale, normalized_sensitivity

stats = pytest.importorskip("scipy.stats")


@cache
def _histograms(s: int, d: int) -> tuple[tuple[int, ...], ...]:
    """Every count vector of total s over d classes."""
    return tuple(h for h in itertools.product(range(s + 1), repeat=d) if sum(h) == s)


@cache
def _moves(s: int, d: int) -> dict[tuple[int, ...], dict[tuple[int, ...], int]]:
    """Fewest single-item moves between every two histograms of total s (BFS)."""
    out: dict[tuple[int, ...], dict[tuple[int, ...], int]] = {}
    for start in _histograms(s, d):
        dist = {start: 0}
        queue = deque([start])
        while queue:
            h = queue.popleft()
            for i, j in itertools.permutations(range(d), 2):
                if h[i] == 0:
                    continue
                nxt = list(h)
                nxt[i] -= 1
                nxt[j] += 1
                key = tuple(nxt)
                if key not in dist:
                    dist[key] = dist[h] + 1
                    queue.append(key)
        out[start] = dist
    return out


def _pairs(s: int, d: int, c: float, relation: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every ordered pair of c-neighbours of total s under ``relation``."""
    budget = math.floor(c * s)
    moves = _moves(s, d)
    pairs = []
    for h, h2 in itertools.product(_histograms(s, d), repeat=2):
        if relation == "moved-items":
            ok = moves[h][h2] <= budget
        else:
            ok = sum(abs(a - b) for a, b in zip(h, h2, strict=True)) <= budget
        if ok and h != h2:
            pairs.append((np.array(h, dtype=float), np.array(h2, dtype=float)))
    return pairs


def _worst_log_ratio(x: np.ndarray, x2: np.ndarray, scale: float) -> float:
    """sup_y log p(y | x) / p(y | x2) for y = centre + Lap(scale)^d, from scipy's densities."""
    total = 0.0
    for a, b in zip(x, x2, strict=True):
        far = 10.0 * (abs(a) + abs(b) + scale + 1.0)
        points = np.array([a, b, -far, far])
        ratio = stats.laplace.logpdf(points, loc=a, scale=scale) - stats.laplace.logpdf(
            points, loc=b, scale=scale
        )
        total += float(ratio.max())
    return total


def _worst_epsilon(scales: tuple[float, ...], c: float, relation: str, totals, d: int) -> float:
    """The exact ε of independent copies H/s + Lap(b)^d, one per scale, over the totals."""
    worst = 0.0
    for s in totals:
        for h, h2 in _pairs(s, d, c, relation):
            x, x2 = h / s, h2 / s
            worst = max(worst, sum(_worst_log_ratio(x, x2, b) for b in scales))
    return worst


TOTALS = range(1, 9)
CASES = [(c, d) for c in (0.25, 0.5, 1.0) for d in (2, 3)]


def test_moved_items_pairs_are_the_pairs_within_twice_floor_cs_in_l1() -> None:
    """The BFS relation is ||H - H'||_1 <= 2 floor(c s), and contains the L1 reading's pairs."""
    for s, d, c in itertools.product(range(1, 8), (2, 3, 4), (0.2, 0.5, 1.0)):
        moved = {(tuple(a), tuple(b)) for a, b in _pairs(s, d, c, "moved-items")}
        l1 = {(tuple(a), tuple(b)) for a, b in _pairs(s, d, c, "l1-distance")}
        assert l1 <= moved
        bound = 2 * math.floor(c * s)
        assert moved == {
            (a, b)
            for a, b in itertools.product(_histograms(s, d), repeat=2)
            if a != b and sum(abs(x - y) for x, y in zip(a, b, strict=True)) <= bound
        }


@pytest.mark.parametrize("c, d", CASES)
def test_default_scale_is_epsilon_under_both_readings(c: float, d: int) -> None:
    epsilon = 0.7
    scale = laplace_scale(epsilon, c)  # the default: moved-items, 2c/epsilon
    assert scale == pytest.approx(2 * c / epsilon)
    moved = _worst_epsilon((scale,), c, "moved-items", TOTALS, d)
    l1 = _worst_epsilon((scale,), c, "l1-distance", TOTALS, d)
    # Exactly epsilon under moved items and epsilon / 2 under the L1 reading (some s in 1..8
    # makes c*s an even integer, so both suprema are attained).
    assert moved == pytest.approx(epsilon, rel=1e-9)
    assert l1 == pytest.approx(epsilon / 2, rel=1e-9)
    assert hldp_epsilon(scale, c, "moved-items") == pytest.approx(epsilon)
    assert hldp_epsilon(scale, c, "l1-distance") == pytest.approx(epsilon / 2)


@pytest.mark.parametrize("c, d", CASES)
def test_l1_distance_scale_is_epsilon_for_l1_and_twice_epsilon_for_moved_items(
    c: float, d: int
) -> None:
    """Why the L1 reading is not the default: the same copy is 2ε-hLDP if items may move."""
    epsilon = 0.7
    scale = laplace_scale(epsilon, c, "l1-distance")
    assert scale == pytest.approx(c / epsilon)
    l1 = _worst_epsilon((scale,), c, "l1-distance", TOTALS, d)
    moved = _worst_epsilon((scale,), c, "moved-items", TOTALS, d)
    # Some s in 1..8 makes c*s an even integer: both values are attained.
    assert l1 == pytest.approx(epsilon, rel=1e-9)
    assert moved == pytest.approx(2 * epsilon, rel=1e-9)
    assert hldp_epsilon(scale, c, "moved-items") == pytest.approx(2 * epsilon)
    assert hldp_epsilon(scale, c, "l1-distance") == pytest.approx(epsilon)


def test_sensitivity_is_a_supremum_over_totals() -> None:
    """No total exceeds Δ (2c or c), whatever c; hldp_epsilon is an upper bound at every s."""
    for c in (0.15, 0.3, 0.45, 0.8):
        for relation, factor in (("moved-items", 2.0), ("l1-distance", 1.0)):
            assert normalized_sensitivity(c, relation) == pytest.approx(factor * c)
            for s in range(1, 9):
                worst = max(
                    (float(np.abs(h - h2).sum()) / s for h, h2 in _pairs(s, 3, c, relation)),
                    default=0.0,
                )
                assert worst <= factor * c + 1e-12


@pytest.mark.parametrize("neighbouring", ["moved-items", "l1-distance"])
def test_protocol_report_is_the_brute_force_epsilon_of_its_two_copies(neighbouring: str) -> None:
    """The report's ε₁ + ε₂ is the exact ε of (W, T) under its relation; the other: 2ε or ε."""
    epsilon, epsilon1, c, d = 1.3, 0.4, 0.5, 3
    protocol = PerUserHistograms(
        epsilon,
        epsilon1,
        c,
        neighbouring=neighbouring,  # type: ignore[arg-type]
        clusters=2,
    )
    report = protocol.privacy_report(10)
    scales = (protocol.scale_w, protocol.scale_t)
    own = _worst_epsilon(scales, c, neighbouring, TOTALS, d)
    assert own == pytest.approx(report.epsilon, rel=1e-9)
    moved = _worst_epsilon(scales, c, "moved-items", TOTALS, d)
    l1 = _worst_epsilon(scales, c, "l1-distance", TOTALS, d)
    assert l1 <= report.epsilon * (1 + 1e-9)
    if neighbouring == "moved-items":
        assert moved == pytest.approx(epsilon, rel=1e-9)
        assert "also covers the reading" in report.notes
    else:
        assert moved == pytest.approx(2 * epsilon, rel=1e-9)
        assert f"only ({2 * epsilon:g}, 0, c)-hDP" in report.notes
    assert report.parameters["neighbouring"] == neighbouring
    assert report.neighbouring.startswith("c-neighbouring histograms (Def. 1 and 3): one user's")
