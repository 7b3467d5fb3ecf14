"""Every k-RR bound against the exact worst case over all datasets, in 60-digit arithmetic.

The brute force (``_bruteforce.mp_krr_all_datasets``) builds the law of the
whole histogram user by user from k-RR's definition in mpmath, for every
histogram of the other n − 1 users and every move x0 → x1, without any code
of the package. Near ε = ε₀ the true δ is about 1e-4 to 1e-6 of the mass of
the region where P > e^ε Q, so a relative error of 1e-8 in a small
probability shows up as a bound below the truth; these grids are where that
happened (``fmt2021-numeric`` at k = 2, ε₀ = 20, ε = 19.9999 gave 9.9967e-5
against an exact 9.9995e-5).
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
import pytest
from _bruteforce import mp_krr_all_datasets, mp_krr_probabilities

from shuffledp.accounting import compare
from shuffledp.accounting.certificates.krr import (
    krr_delta,
    krr_delta_for_dataset,
    krr_delta_homogeneous,
    krr_delta_lower_bound,
)
from shuffledp.privacy import BoundKind


def _epsilons(eps0: float) -> tuple[float, ...]:
    return (eps0 - 1e-4, eps0 - 1e-6, eps0 - 0.1, 0.05)


@functools.cache
def _exact(n: int, k: int, eps0: float, epsilons: tuple[float, ...]) -> dict:
    return mp_krr_all_datasets(n, k, eps0, list(epsilons))


@pytest.mark.parametrize("n", [1, 2, 10])
@pytest.mark.parametrize("eps0", [0.5, 2.0, 8.0, 20.0])
@pytest.mark.parametrize("k", [2, 3])
def test_every_row_against_the_exact_worst_case(k, eps0, n):
    epsilons = _epsilons(eps0)
    exact = _exact(n, k, eps0, epsilons)
    for eps in epsilons:
        worst = max(exact[eps].values())
        rows = compare(epsilon=eps, n=n, mechanism="krr", epsilon0=eps0, domain_size=k)
        upper = [r for r in rows if r.bound is BoundKind.UPPER and r.delta is not None]
        lower = [r for r in rows if r.bound is BoundKind.LOWER and r.delta is not None]
        assert {r.method for r in upper} >= {"krr-blanket", "vr2024", "fmt2021-numeric"}
        assert len(lower) >= 1  # k = 2: krr-splits; k = 3: krr-homogeneous and krr-two-count
        for r in upper:
            assert r.certified, (r.method, eps)
            assert mpmath.mpf(r.delta) >= worst, (r.method, eps, r.delta, float(worst))
        for r in lower:
            assert not r.certified
            assert 0.0 <= r.delta, (r.method, eps)
            assert mpmath.mpf(r.delta) <= worst, (r.method, eps, r.delta, float(worst))
        assert min(r.delta for r in upper) >= max(r.delta for r in lower) >= 0.0
        if k == 2:
            # All n splits: the exact worst case, rounded down by at most the allowance.
            (splits,) = [r for r in lower if r.method == "krr-splits"]
            assert worst - mpmath.mpf(splits.delta) <= 1e-11
        # krr-blanket is tight: within its floating-point allowance of the worst case
        # (at n = 1 it is exact: the shuffled output is the local report).
        (blanket,) = [r for r in upper if r.method == "krr-blanket"]
        if n == 1:
            a, b = mp_krr_probabilities(k, eps0)
            local = max(mpmath.mpf(0), a - mpmath.exp(mpmath.mpf(eps)) * b)
            assert abs(worst - local) <= mpmath.mpf(10) ** -50
            assert mpmath.mpf(blanket.delta) - local <= 1e-8


def test_the_reported_regression_at_epsilon0_20():
    # account delta --mechanism krr --k 2 --epsilon0 20 --n 2 --epsilon 19.9999
    rows = {
        r.method: r
        for r in compare(epsilon=19.9999, n=2, mechanism="krr", epsilon0=20, domain_size=2)
    }
    p = mpmath.exp(20) / (1 + mpmath.exp(20))
    truth = p * p * (1 - mpmath.exp(mpmath.mpf(19.9999) - 20))
    assert float(truth) == pytest.approx(9.9995e-5, rel=1e-5)
    for name in ("fmt2021-numeric", "vr2024", "krr-blanket"):
        assert mpmath.mpf(rows[name].delta) >= truth
        assert rows[name].delta <= float(truth) * (1 + 1e-4)  # and close to it
    assert rows["krr-two-count"].delta is None  # no third value when k = 2


@pytest.mark.parametrize(
    ("n", "k", "eps0", "eps"),
    [
        (8, 3, 8.0, 7.999992),  # all others on x0 (or x1) is worst, not a third value
        (6, 3, 2.0, 0.5),
        (5, 4, 3.0, 2.9999),
        (5, 4, 1.0, 0.3),
        (8, 2, 8.0, 7.9999),
        (8, 2, 2.0, 0.2),
        (4, 3, 20.0, 19.99999),
    ],
)
def test_blanket_bound_holds_for_every_dataset(n, k, eps0, eps):
    exact = _exact(n, k, eps0, (eps,))[eps]
    worst = max(exact.values())
    assert mpmath.mpf(krr_delta(eps, eps0, k, n)) >= worst
    assert mpmath.mpf(krr_delta_lower_bound(eps, eps0, k, n)) <= worst
    # The exact δ of each dataset (enumerated or one-dimensional) sandwiches the truth.
    for (others, x0, x1), value in exact.items():
        counts = np.bincount(np.array(others, dtype=int), minlength=k)
        up = krr_delta_for_dataset(eps, eps0, k, counts, x0=x0, x1=x1)
        down = krr_delta_for_dataset(eps, eps0, k, counts, x0=x0, x1=x1, rounding="down")
        assert mpmath.mpf(down) <= value <= mpmath.mpf(up), (others, x0, x1)


def test_the_third_value_dataset_is_not_always_the_worst():
    n, k, eps0, eps = 8, 3, 8.0, 7.999992
    exact = _exact(n, k, eps0, (eps,))[eps]
    homogeneous = exact[((2,) * (n - 1), 0, 1)]
    on_x1 = exact[((1,) * (n - 1), 1, 0)]  # every other user on x1; the victim moves x1 → x0
    assert float(homogeneous) == pytest.approx(3.804e-30, rel=1e-3)
    assert float(on_x1) == pytest.approx(7.957e-6, rel=1e-3)
    assert max(exact.values()) == on_x1
    # The homogeneous dataset's own δ is exact (and far below the worst case) ...
    assert krr_delta_homogeneous(eps, eps0, k, n, rounding="down") <= homogeneous
    # ... while the certificate covers the worst one.
    assert mpmath.mpf(krr_delta(eps, eps0, k, n)) >= on_x1


def test_lower_bounds_are_zero_at_and_above_epsilon0():
    # k-RR is ε₀-LDP: δ = 0 for every dataset at ε ≥ ε₀ (it was 1.8e-8 at ε = ε₀ = 20).
    for k in (2, 3):
        for eps0 in (2.0, 20.0):
            for eps in (eps0, eps0 * 1.5):
                assert krr_delta_lower_bound(eps, eps0, k, 5) == 0.0
                rows = compare(epsilon=eps, n=5, mechanism="krr", epsilon0=eps0, domain_size=k)
                kept = [r for r in rows if r.bound is not BoundKind.REPRODUCTION]
                assert all(r.delta in (None, 0.0) for r in kept)
    # Just below ε₀ the lower bound stays below the exact worst case.
    eps0, eps = 20.0, 20.0 * (1 - 1e-12)
    worst = max(_exact(5, 2, eps0, (eps,))[eps].values())
    assert 0.0 < krr_delta_lower_bound(eps, eps0, 2, 5) <= worst


def test_binary_lower_bound_is_attained_by_a_split():
    # account delta --mechanism krr --k 2 --epsilon0 2 --n 8 --epsilon 0.2 gave 0.376279
    # labelled lower (a dataset with a third value, which k = 2 lacks); the truth is 0.331322.
    worst = max(_exact(8, 2, 2.0, (0.2,))[0.2].values())
    assert float(worst) == pytest.approx(0.331322, abs=1e-6)
    rows = {
        r.method: r for r in compare(epsilon=0.2, n=8, mechanism="krr", epsilon0=2.0, domain_size=2)
    }
    assert rows["krr-two-count"].delta is None and "k >= 3" in rows["krr-two-count"].note
    assert rows["krr-homogeneous"].delta is None
    assert 0 <= worst - mpmath.mpf(rows["krr-splits"].delta) <= 1e-11
    assert rows["krr-blanket"].delta >= float(worst)
    assert math.isclose(rows["krr-blanket"].delta, 0.376279, abs_tol=1e-6)
