"""The Laplace randomizer of per-user histograms: scale, sensitivity and the two copies' weights."""

import math

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.randomizers.laplace import (
    HistogramLaplaceRandomizer,
    check_c,
    check_counts,
    combine_weight,
    copy_variances,
    laplace_scale,
    normalize_counts,
)


def test_scale_is_2c_over_epsilon_by_default_and_c_over_epsilon_for_l1_distance():
    assert laplace_scale(2.0, 0.1) == pytest.approx(0.1)  # Alg. 1's 2c/epsilon
    assert laplace_scale(2.0, 0.1, "moved-items") == pytest.approx(0.1)
    assert laplace_scale(2.0, 0.1, "l1-distance") == pytest.approx(0.05)
    assert HistogramLaplaceRandomizer(2.0, 0.1).scale == pytest.approx(0.1)
    with pytest.raises(InvalidParameterError, match="neighbouring must be one of moved-items"):
        laplace_scale(2.0, 0.1, "paper")
    with pytest.raises(InvalidParameterError, match=r"got 'proven'"):
        HistogramLaplaceRandomizer(2.0, 0.1, neighbouring="proven")


@pytest.mark.parametrize("neighbouring, factor", [("l1-distance", 1.0), ("moved-items", 2.0)])
def test_empirical_scale_matches(neighbouring, factor):
    eps, c = 1.5, 0.2
    randomizer = HistogramLaplaceRandomizer(eps, c, neighbouring=neighbouring)
    base = np.full((50_000, 4), 0.25)
    noise = randomizer.randomize(base, seed=11) - base
    b = factor * c / eps
    # E|eta| = b and sd(|eta|) = b: the mean of N draws is within 5 b / sqrt(N).
    n = noise.size
    assert abs(np.abs(noise).mean() - b) < 5 * b / math.sqrt(n)
    assert abs(noise.mean()) < 5 * math.sqrt(2) * b / math.sqrt(n)


def test_normalized_sensitivity_is_at_most_c():
    # Def. 1: same total s, ||H - H'||_1 <= floor(c s); then ||H/s - H'/s||_1 <= c.
    rng = np.random.default_rng(5)
    c = 0.3
    for _ in range(2000):
        s = int(rng.integers(1, 40))
        d = 5
        h = rng.multinomial(s, np.full(d, 1 / d))
        budget = math.floor(c * s) // 2  # moving one unit changes the L1 norm by 2
        h2 = h.copy()
        for _ in range(budget):
            src = rng.choice(np.flatnonzero(h2))
            h2[src] -= 1
            h2[rng.integers(d)] += 1
        assert np.abs(h - h2).sum() <= math.floor(c * s)
        assert np.abs(h / s - h2 / s).sum() <= c + 1e-12


def test_density_ratio_bounded_by_e_epsilon():
    # The Laplace density ratio at any output is at most exp(||x - x'||_1 / b).
    eps, c = 1.0, 0.25
    b = laplace_scale(eps, c, "l1-distance")
    x = np.array([0.5, 0.25, 0.25, 0.0])
    x2 = np.array([0.375, 0.25, 0.25, 0.125])  # L1 distance exactly c
    y = np.random.default_rng(1).normal(0, 1, size=(10_000, 4))
    log_ratio = (np.abs(y - x2) - np.abs(y - x)).sum(axis=1) / b
    assert log_ratio.max() <= eps + 1e-12
    assert log_ratio.max() > eps - 1e-6  # attained where y is beyond both


def test_min_variance_weight_and_printed_weight():
    assert combine_weight(1.0, 3.0) == pytest.approx(1 / 10)
    assert combine_weight(1.0, 3.0, "printed") == pytest.approx(9 / 10)
    assert combine_weight(2.0, 2.0) == combine_weight(2.0, 2.0, "printed") == 0.5


def _fourth_moment(weights_scales):
    """E X^4 and E X^2 of a sum of independent Laplaces a_k Lap(b_k)."""
    m2 = sum(2 * (a * b) ** 2 for a, b in weights_scales)
    m4 = sum(24 * (a * b) ** 4 for a, b in weights_scales)
    pairs = [2 * (a * b) ** 2 for a, b in weights_scales]
    m4 += 6 * pairs[0] * pairs[1] if len(pairs) == 2 else 0
    return m2, m4


@pytest.mark.parametrize("weighting", ["min-variance", "printed"])
def test_empirical_variance_of_copies_matches_theory(weighting):
    eps, eps1, c = 3.0, 0.8, 0.1
    v = copy_variances(eps, eps1, c, weighting=weighting)
    b1, b2 = laplace_scale(eps1, c), laplace_scale(eps - eps1, c)
    assert b1 == pytest.approx(2 * c / eps1)
    a = v.weight
    n = 400_000
    rng = np.random.default_rng(2024)
    w = rng.laplace(0, b1, n)
    t = rng.laplace(0, b2, n)
    r = a * w + (1 - a) * t
    for sample, parts, theory in (
        (w, [(1.0, b1)], v.w),
        (t, [(1.0, b2)], v.t),
        (r, [(a, b1), (1 - a, b2)], v.r),
    ):
        m2, m4 = _fourth_moment(parts)
        assert m2 == pytest.approx(theory)
        sd_of_variance = math.sqrt((m4 - m2 * m2) / n)
        assert abs(sample.var() - theory) < 5 * sd_of_variance


def test_min_variance_beats_printed_unless_budgets_are_equal():
    for eps1 in (0.3, 1.0, 2.5):
        best = copy_variances(3.0, eps1, 0.1)
        printed = copy_variances(3.0, eps1, 0.1, weighting="printed")
        assert best.r < printed.r
        # The minimum is 2 Delta^2 / (eps1^2 + eps2^2): Delta = 2c by default, c for L1.
        assert best.r == pytest.approx(2 * 0.04 / (eps1**2 + (3.0 - eps1) ** 2))
        l1 = copy_variances(3.0, eps1, 0.1, neighbouring="l1-distance")
        assert l1.r == pytest.approx(2 * 0.01 / (eps1**2 + (3.0 - eps1) ** 2))
        assert best.r < min(best.w, best.t)
    equal = copy_variances(3.0, 1.5, 0.1)
    assert equal.r == pytest.approx(copy_variances(3.0, 1.5, 0.1, weighting="printed").r)
    # Empirically too, with one fixed seed.
    rng = np.random.default_rng(7)
    b1, b2 = laplace_scale(0.5, 0.1), laplace_scale(2.5, 0.1)
    w, t = rng.laplace(0, b1, 200_000), rng.laplace(0, b2, 200_000)
    a_best, a_printed = combine_weight(0.5, 2.5), combine_weight(0.5, 2.5, "printed")
    assert (a_best * w + (1 - a_best) * t).var() < (a_printed * w + (1 - a_printed) * t).var()


def test_check_counts_errors_name_the_user_and_value():
    with pytest.raises(DataError, match=r"user 'bob' has a negative count -1"):
        check_counts([[1, 2], [-1, 3]], user_ids=["ann", "bob"])
    with pytest.raises(DataError, match=r"non-integer count 2.5"):
        check_counts(np.array([[1.0, 2.5]]))
    with pytest.raises(DataError, match=r"user 'ann' has total count 0"):
        check_counts([[0, 0], [1, 0]], user_ids=["ann", "bob"])
    with pytest.raises(DataError, match="n x d"):
        check_counts([1, 2, 3])
    np.testing.assert_array_equal(check_counts(np.array([[1.0, 2.0]])), [[1, 2]])
    np.testing.assert_allclose(normalize_counts([[1, 3]]), [[0.25, 0.75]])


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.01, True, "0.1", float("nan")])
def test_c_must_be_in_zero_one(bad):
    with pytest.raises(InvalidParameterError, match=r"c must be a number in \(0, 1\]"):
        check_c(bad)
    assert check_c(1) == 1.0


def test_copy_variances_rejects_epsilon1_not_below_epsilon():
    with pytest.raises(InvalidParameterError, match="epsilon1 must be <"):
        copy_variances(1.0, 1.0, 0.1)
