"""Values kept within one search are the very doubles the computation gives.

:mod:`shuffledp.accounting.numerics.symmetric_memo` hands back a symmetric
binomial tail or point computed earlier instead of computing it again. That is
only sound if each value is an elementwise function of its own arguments
(whatever else shares the array it was computed in), and if the store never
mixes up two keys. These tests compare, bit for bit, against the plain
computations: scipy's ``betainc`` and :func:`binomial_pmf` on single elements.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from scipy import special

from shuffledp.accounting import amplified_epsilon
from shuffledp.accounting.numerics import symmetric_memo
from shuffledp.accounting.numerics.binomial import binomial_pmf
from shuffledp.accounting.numerics.symmetric_memo import (
    kept_values,
    symmetric_line_values,
    symmetric_points,
    symmetric_tails,
)
from shuffledp.accounting.numerics.two_counts import (
    TwoCountPair,
    line_divergence_each,
    two_count_delta,
    two_count_deltas,
)
from shuffledp.accounting.published.variation_ratio import fmt2021_numeric_pair, vr_generic_pair


def _arguments(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trials from 1 to 1e9, tail thresholds in [1, trials], points in [0, trials]."""
    trials = np.floor(10.0 ** rng.uniform(0.0, 9.0, size))
    spread = np.sqrt(trials) * rng.uniform(0.0, 6.0, size)
    at_least = np.clip(np.floor(trials / 2.0 + rng.normal(0.0, 1.0, size) * spread), 1.0, trials)
    points = np.clip(np.floor(trials / 2.0 + rng.normal(0.0, 1.0, size) * spread), 0.0, trials)
    return trials, at_least, points


def test_binomial_pmf_is_elementwise():
    # What keeping a value relies on: its double does not depend on its neighbours.
    rng = np.random.default_rng(1)
    for p in (0.5, 0.3, 1e-7, 1.0 - 1e-9):
        trials, _, points = _arguments(rng, 300)
        together = binomial_pmf(points, trials, p)
        alone = np.array(
            [binomial_pmf(points[i : i + 1], trials[i : i + 1], p)[0] for i in range(300)]
        )
        assert np.array_equal(together, alone)


def test_kept_values_are_the_computed_doubles():
    rng = np.random.default_rng(2)
    trials, at_least, points = _arguments(rng, 4000)
    tails = special.betainc(at_least, trials - at_least + 1.0, 0.5)
    masses = binomial_pmf(points, trials, 0.5)
    with kept_values():
        for _ in range(6):
            # Subsets in a new order, with repeats: hits, misses and twins in one call.
            pick = rng.integers(0, len(trials), int(rng.integers(1, 3000)))
            assert np.array_equal(symmetric_tails(trials[pick], at_least[pick]), tails[pick])
            assert np.array_equal(symmetric_points(points[pick], trials[pick]), masses[pick])
        kept = symmetric_memo._KEPT.get()
        assert kept is not None and kept.table("tails").used > 0  # something was kept
    assert symmetric_memo._KEPT.get() is None  # and nothing outside the block


def test_line_values_are_the_tails_and_point_computed_alone():
    # (P[Bin >= j], P[Bin >= j + 1], P[Bin = j]): each the double scipy's betainc or
    # binomial_pmf gives for that element alone, with the ends (j = 0: first tail 1;
    # j = trials: second tail 0), plainly and kept, with hits, misses and twins.
    rng = np.random.default_rng(4)
    trials, at_least, _ = _arguments(rng, 3000)
    at_least = np.concatenate([at_least, [0.0, 0.0, 7.0, 5000.0]])
    trials = np.concatenate([trials, [1.0, 9000.0, 7.0, 5000.0]])

    def tail(n: float, j: float) -> float:
        if j <= 0:
            return 1.0
        if j > n:
            return 0.0
        return float(special.betainc(np.array([j]), np.array([n - j + 1.0]), 0.5)[0])

    expected = np.array(
        [
            (tail(n, j), tail(n, j + 1.0), binomial_pmf(np.array([j]), np.array([n]), 0.5)[0])
            for n, j in zip(trials, at_least, strict=True)
        ]
    )
    assert np.array_equal(np.column_stack(symmetric_line_values(trials, at_least)), expected)
    with kept_values():
        for _ in range(5):
            pick = rng.integers(0, len(trials), int(rng.integers(1, 2500)))
            got = np.column_stack(symmetric_line_values(trials[pick], at_least[pick]))
            assert np.array_equal(got, expected[pick])


def test_a_line_kept_without_its_first_tail_gets_it_when_asked():
    # Lines that need no mass ask for the last two values only; the same key asked
    # later with its first tail gets the very double it would have had.
    rng = np.random.default_rng(6)
    trials, at_least, _ = _arguments(rng, 2000)
    trials = trials + 5000.0
    full = np.column_stack(symmetric_line_values(trials, at_least))
    some = rng.random(len(trials)) < 0.5
    with kept_values():
        first, second, point = symmetric_line_values(trials, at_least, some)
        assert np.array_equal(first[some], full[some, 0]) and np.all(np.isnan(first[~some]))
        assert np.array_equal(second, full[:, 1]) and np.array_equal(point, full[:, 2])
        pick = rng.integers(0, len(trials), 3000)
        again = np.column_stack(symmetric_line_values(trials[pick], at_least[pick]))
        assert np.array_equal(again, full[pick])
        assert np.array_equal(np.column_stack(symmetric_line_values(trials, at_least)), full)


def test_a_crowded_table_misses_but_never_answers_wrong(monkeypatch):
    # With one probe per key most keys collide: they are computed again (misses), or
    # not kept at all, and every answer is still the computed double.
    monkeypatch.setattr(symmetric_memo, "_PROBES", 1)
    monkeypatch.setattr(symmetric_memo, "_FIRST_BITS", 4)
    monkeypatch.setattr(symmetric_memo, "_MAX_ENTRIES", 64)
    rng = np.random.default_rng(5)
    trials, at_least, _ = _arguments(rng, 500)
    trials = trials + 5000.0  # all looked up (above the kept-from threshold)
    expected = special.betainc(at_least, trials - at_least + 1.0, 0.5)
    with kept_values():
        for _ in range(8):
            pick = rng.integers(0, len(trials), int(rng.integers(1, 120)))
            assert np.array_equal(symmetric_tails(trials[pick], at_least[pick]), expected[pick])


def test_a_table_that_grows_or_starts_over_keeps_answering_exactly(monkeypatch):
    monkeypatch.setattr(symmetric_memo, "_MAX_ENTRIES", 3000)
    rng = np.random.default_rng(3)
    trials, at_least, _ = _arguments(rng, 20_000)
    expected = special.betainc(at_least, trials - at_least + 1.0, 0.5)
    with kept_values():
        for start in range(0, 20_000, 1700):
            chunk = slice(start, start + 2500)
            assert np.array_equal(symmetric_tails(trials[chunk], at_least[chunk]), expected[chunk])
        assert np.array_equal(symmetric_tails(trials, at_least), expected)


@pytest.mark.parametrize(
    "pair",
    [
        vr_generic_pair(1.0, 10**6),
        fmt2021_numeric_pair(0.5, 30_000),
        TwoCountPair(blanket=400, rate=0.3, w1=0.6, w2=0.1, w0=0.3),
    ],
)
def test_a_certificate_is_bit_for_bit_the_same_with_values_kept(pair):
    # A search's sequence of nearby ε, each δ computed plainly, then all inside one block.
    crossing = 0.05 if pair.blanket < 1000 else 0.004
    grid = [crossing * (1.0 + step) for step in (0.0, 1e-6, -1e-6, 1e-4, 3e-3, -2e-2, 1e-6)]
    plain = [two_count_delta(pair, e, rounding=r) for e in grid for r in ("up", "down")]
    with kept_values():
        kept = [two_count_delta(pair, e, rounding=r) for e in grid for r in ("up", "down")]
    assert kept == plain


@pytest.mark.parametrize("relative_error", [0.0, 1e-12])
def test_massless_lines_have_the_same_divergences_and_charges(relative_error):
    # The lower sides of blocks that steer an upper bound skip their masses (a
    # tail each); what they do report must be the same doubles.
    rng = np.random.default_rng(7)
    size = 3000
    s = np.floor(10.0 ** rng.uniform(0.0, 7.5, size))
    alpha = 10.0 ** rng.uniform(-12.0, -2.0, size)
    gamma = alpha * rng.uniform(0.0, 1.0, size) ** 2
    massless = rng.random(size) < 0.5
    for epsilon in (0.0, 1e-4, 3e-3, 0.1, 2.0, 40.0):
        with kept_values():
            plain = line_divergence_each(alpha, gamma, s, epsilon, relative_error=relative_error)
            light = line_divergence_each(
                alpha, gamma, s, epsilon, relative_error=relative_error, massless=massless
            )
        assert np.array_equal(light[0], plain[0]) and np.array_equal(light[2], plain[2])
        assert np.array_equal(light[1][~massless], plain[1][~massless])


def test_an_upper_bound_is_the_same_whether_lower_sides_carry_masses():
    # two_count_deltas rounding up skips the lower sides' masses; with a memo (which
    # a later call may round down) it keeps them. Both give the same upper bound,
    # and the memo's blocks still give the lower bound (the pairs in one batch, as
    # without a memo: a batch shares its largest relative error).
    pairs = [vr_generic_pair(0.8, 3 * 10**6), fmt2021_numeric_pair(1.5, 200_000)]
    for epsilon in (0.002, 0.01):
        memo = {}
        light = two_count_deltas(pairs, epsilon, rounding="up")
        kept = two_count_deltas(pairs, epsilon, rounding="up", memo=memo)
        down = two_count_deltas(pairs, epsilon, rounding="down", memo=memo)
        assert light == kept
        assert down == two_count_deltas(pairs, epsilon, rounding="down")


def test_nested_blocks_share_and_threads_do_not():
    seen: list[object] = []
    with kept_values():
        outer = symmetric_memo._KEPT.get()
        with kept_values():
            assert symmetric_memo._KEPT.get() is outer
        worker = threading.Thread(target=lambda: seen.append(symmetric_memo._KEPT.get()))
        worker.start()
        worker.join()
    assert outer is not None and seen == [None]


def test_an_answer_is_the_same_inside_and_outside_a_search():
    # amplified_epsilon keeps values for its own search only; asking again gives the same row.
    first = amplified_epsilon(1e-7, n=200_000, epsilon0=1.5)
    assert symmetric_memo._KEPT.get() is None
    with kept_values():
        again = amplified_epsilon(1e-7, n=200_000, epsilon0=1.5)
    assert (first.epsilon, first.delta) == (again.epsilon, again.delta)
