"""binomial_pmf against scipy, including the degenerate laws p = 0 and p = 1."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from shuffledp.accounting.numerics.binomial import binomial_pmf, binomial_window


@pytest.mark.parametrize("p", [0.0, 1.0, 1e-12, 0.3, 0.5, 1.0 - 1e-9])
@pytest.mark.parametrize("m", [0, 1, 2, 7, 1000])
def test_pmf_matches_scipy(m, p):
    x = np.arange(-1, m + 2, dtype=np.float64)
    expected = stats.binom.pmf(x, m, p)
    got = binomial_pmf(x, m, p)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-300)
    assert np.isclose(got.sum(), 1.0, rtol=1e-12)


def test_degenerate_laws_are_point_masses():
    x = np.arange(0, 6, dtype=np.float64)
    assert binomial_pmf(x, 5, 0.0).tolist() == [1, 0, 0, 0, 0, 0]
    assert binomial_pmf(x, 5, 1.0).tolist() == [0, 0, 0, 0, 0, 1]
    assert binomial_pmf(x, 5, 1.0, complement=0.0).tolist() == [0, 0, 0, 0, 0, 1]


@pytest.mark.parametrize(("p", "point"), [(0.0, 0), (1.0, 10)])
def test_windows_of_degenerate_laws(p, point):
    window = binomial_window(10, p)
    points = window.lo + np.arange(len(window.pmf))
    assert window.pmf[points == point].tolist() == [1.0]
    assert float(np.sum(window.pmf[points != point])) == 0.0


@pytest.mark.parametrize(
    ("m", "p", "complement"),
    [
        (9_999_999, 0.7550813375962909, 0.24491866240370913),
        (10**8, 0.2, None),
        (3_000, 0.5, None),
        (20, 1e-7, None),
        (10**9, 1.0 - 1e-9, 1e-9),
    ],
)
def test_one_number_of_trials_gives_the_doubles_of_the_array_form(m, p, complement):
    # binomial_pmf(x, m) with m a number takes a shorter path (the remainder of m once,
    # the means as numbers); each entry must still be the double of the array form,
    # which the windows and the kept values rely on.
    rng = np.random.default_rng(m % 1000)
    centre = m * p
    spread = np.sqrt(m * p * (1.0 - p)) + 1.0
    x = np.floor(centre + rng.normal(0.0, 1.0, 5000) * spread * rng.uniform(0.0, 12.0, 5000))
    x = np.concatenate([x, [-1.0, 0.0, 1.0, m - 1.0, float(m), m + 1.0]])
    together = binomial_pmf(x, np.full(len(x), float(m)), p, complement)
    assert np.array_equal(binomial_pmf(x, m, p, complement), together)
    # Short arrays take both deviances in one call, long ones one call each.
    assert np.array_equal(binomial_pmf(x[-200:], m, p, complement), together[-200:])
    inside = x[(x > 0) & (x < m)]
    assert np.array_equal(
        binomial_pmf(inside, m, p, complement),
        binomial_pmf(inside, np.full(len(inside), float(m)), p, complement),
    )
