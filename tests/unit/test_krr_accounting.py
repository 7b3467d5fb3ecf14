"""The k-RR accountant against brute-force enumeration of every dataset."""

import itertools

import numpy as np
import pytest
from _bruteforce import all_pairs, histogram_law, hockey_stick_both, krr_channel

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.krr import (
    krr_delta,
    krr_delta_for_dataset,
    krr_delta_homogeneous,
    krr_delta_lower_bound,
    krr_delta_two_count_marginal,
    krr_marginal_delta,
)
from shuffledp.accounting.numerics.two_counts import two_count_delta
from shuffledp.accounting.published.variation_ratio import fmt2021_numeric_pair, vr_generic_pair

CASES = [(5, 3, 2.0), (5, 4, 1.0), (4, 5, 3.0), (5, 2, 1.0), (4, 3, 0.5)]


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_bounds_sandwich_the_brute_force_worst_case(n, k, eps0):
    channel = krr_channel(k, eps0)
    for eps in (0.1, 0.5, 1.0):
        pairs = all_pairs(n, k, channel, eps)
        worst = max(pairs.values())
        assert krr_delta(eps, eps0, k, n) >= worst - 1e-12
        assert krr_delta_lower_bound(eps, eps0, k, n) <= worst + 1e-12
        # Generic bounds hold for k-RR, which is eps0-LDP.
        assert two_count_delta(vr_generic_pair(eps0, n), eps) >= worst - 1e-12
        assert two_count_delta(fmt2021_numeric_pair(eps0, n), eps) >= worst - 1e-12
        if k >= 3:
            # The dataset with every other user on one third value: its exact δ.
            # (Here it is also the worst case, but not always: see test_bounds_krr_exact.)
            homogeneous = pairs[((2,) * (n - 1), 0, 1)]
            up = krr_delta_homogeneous(eps, eps0, k, n)
            down = krr_delta_homogeneous(eps, eps0, k, n, rounding="down")
            assert down <= homogeneous + 1e-14 and homogeneous <= up + 1e-14
            assert up - down <= 1e-6 * homogeneous + 1e-9


@pytest.mark.parametrize(("n", "k", "eps0"), CASES)
def test_dataset_delta_matches_brute_force(n, k, eps0):
    channel = krr_channel(k, eps0)
    eps = 0.4
    for (others, x0, x1), value in all_pairs(n, k, channel, eps).items():
        counts = np.bincount(np.array(others, dtype=int), minlength=k)
        up = krr_delta_for_dataset(eps, eps0, k, counts, x0=x0, x1=x1)
        down = krr_delta_for_dataset(eps, eps0, k, counts, x0=x0, x1=x1, rounding="down")
        assert down <= value + 1e-12 and value <= up + 1e-12
        assert up - down <= 1e-6 * value + 1e-12


def test_variation_ratio_with_krr_parameters_is_not_an_upper_bound():
    # Thm 1 of the segmented paper with p = q = e^eps0, beta = TV(k-RR) gives the
    # two-count pair below; the full histogram leaks more (the count of z).
    n, k, eps0, eps = 6, 4, 2.0, 0.5
    channel = krr_channel(k, eps0)
    others = [2] * (n - 1)
    truth = hockey_stick_both(
        histogram_law([*others, 0], channel), histogram_law([*others, 1], channel), eps
    )
    published = krr_delta_two_count_marginal(eps, eps0, k, n, rounding="up")
    assert truth > published + 1e-4
    assert truth == pytest.approx(0.304417, abs=1e-6)
    assert published == pytest.approx(0.304305, abs=1e-6)
    assert krr_delta(eps, eps0, k, n) >= truth


def test_count_marginal_is_a_lower_bound_for_its_dataset():
    n, k, eps0 = 5, 3, 1.5
    channel = krr_channel(k, eps0)
    others = [0, 0, 2, 1]
    full = hockey_stick_both(
        histogram_law([*others, 0], channel), histogram_law([*others, 1], channel), 0.3
    )
    assert krr_marginal_delta(0.3, eps0, k, n, others.count(0)) <= full + 1e-12


def test_monotone_in_n_eps0_and_eps():
    d_n = [krr_delta(0.3, 3.0, 10, n) for n in (300, 1000, 3000, 10000)]
    assert all(a >= b for a, b in itertools.pairwise(d_n))
    d_e0 = [krr_delta(0.5, e0, 10, 2000) for e0 in (1.0, 2.0, 3.0, 4.0, 5.0)]
    assert all(a <= b for a, b in itertools.pairwise(d_e0))
    d_eps = [krr_delta(e, 3.0, 10, 2000) for e in (0.1, 0.3, 0.6, 1.0)]
    assert all(a >= b for a, b in itertools.pairwise(d_eps))


def test_upper_and_lower_are_close_at_moderate_n():
    for n, eps in ((1000, 0.3), (3000, 0.2)):
        up = krr_delta(eps, 4.0, 10, n)
        low = krr_delta_lower_bound(eps, 4.0, 10, n)
        assert low <= up <= 1.1 * low


def test_dataset_errors():
    with pytest.raises(InvalidParameterError, match="whole histogram law"):
        krr_delta_for_dataset(0.5, 1.0, 10, np.array([20, 5] + [10] * 8))
    with pytest.raises(InvalidParameterError, match="counts"):
        krr_delta_for_dataset(0.5, 1.0, 3, np.array([1, 2]))
