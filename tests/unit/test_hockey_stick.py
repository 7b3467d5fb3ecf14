import math

import numpy as np

from shuffledp.accounting.numerics.hockey_stick import hockey_stick, hockey_stick_product


def _brute(p1, q1, p2, q2, eps):
    P = np.outer(p1, p2)
    Q = np.outer(q1, q2)
    return float(np.sum(np.clip(P - math.exp(eps) * Q, 0, None)))


def test_product_matches_two_dimensional_sum():
    rng = np.random.default_rng(11)
    for trial in range(50):
        s1, s2 = rng.integers(1, 30, size=2)
        p1, q1 = rng.dirichlet(np.ones(s1)), rng.dirichlet(np.ones(s1))
        p2, q2 = rng.dirichlet(np.ones(s2)), rng.dirichlet(np.ones(s2))
        if trial % 5 == 0:  # zeros on either side exercise infinite losses
            p1[0], q2[-1] = 0.0, 0.0
            p1, q2 = p1 / p1.sum(), q2 / q2.sum()
        for eps in (0.0, 0.3, 2.0):
            assert (
                abs(hockey_stick_product(p1, q1, p2, q2, eps) - _brute(p1, q1, p2, q2, eps)) < 1e-13
            )


def test_one_dimensional():
    p = np.array([0.5, 0.5])
    q = np.array([0.25, 0.75])
    assert hockey_stick(p, q, 0.0) == 0.25
    assert hockey_stick(p, q, math.log(2.0)) == 0.0
