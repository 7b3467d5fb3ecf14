import math

import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.reproductions.flip_paper import (
    paper_error_bound,
    paper_flip_q,
    paper_min_fake_users,
)


def _rhs(eps, delta, n, k):
    c = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    return 33 / (5 * n * k) * c**2 * math.log(4 / delta)


@pytest.mark.parametrize(
    ("eps", "delta", "n", "k"),
    [(1.0, 1e-6, 10**5, 10), (0.1, 1e-9, 10**6, 500), (3.0, 0.01, 200, 40)],
)
def test_q_solves_the_quadratic(eps, delta, n, k):
    q = paper_flip_q(eps, delta, n, k)
    assert 0 < q < 0.5
    assert q * (1 - q) == pytest.approx(_rhs(eps, delta, n, k), rel=1e-12)


def test_min_fake_users_is_the_threshold():
    eps, delta, n = 0.5, 1e-6, 1000
    k_min = paper_min_fake_users(eps, delta, n)
    assert _rhs(eps, delta, n, k_min) < 0.25 <= _rhs(eps, delta, n, k_min - 1)
    paper_flip_q(eps, delta, n, k_min)
    with pytest.raises(InvalidParameterError, match=f"fake_users must be at least {k_min}"):
        paper_flip_q(eps, delta, n, k_min - 1)


def test_paper_requires_small_delta():
    with pytest.raises(InvalidParameterError, match="< 1/32"):
        paper_flip_q(1.0, 0.05, 1000, 100)


def test_error_bound_matches_theorem_form():
    # Thm III.3(b): (1/n)·c·sqrt(264/5·ln(4/δ)·ln 20·g(k)), g(k) = (k+1)/(k(1−q)(1−2q)²).
    eps, delta, n, k = 1.0, 1e-6, 10**5, 10
    q = paper_flip_q(eps, delta, n, k)
    c = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    g = (k + 1) / (k * (1 - q) * (1 - 2 * q) ** 2)
    theorem = c * math.sqrt(264 / 5 * math.log(4 / delta) * math.log(20) * g)
    assert paper_error_bound(q, k, n) == pytest.approx(theorem, rel=1e-12)
