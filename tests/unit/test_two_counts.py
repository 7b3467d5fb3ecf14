import math

import numpy as np
import pytest

from shuffledp.accounting.numerics.two_counts import (
    TwoCountPair,
    sample_two_count_loss,
    two_count_delta,
    two_count_delta_direct,
)


@pytest.mark.parametrize(
    ("m", "r", "w1", "w2"),
    [
        (20, 0.3, 0.6, 0.2),
        (50, 0.6, 0.5, 0.5),
        (80, 0.1, 0.3, 0.0),
        (99, 0.12, 0.45, 0.06),
        (0, 0.5, 0.7, 0.1),
    ],
)
def test_fast_sum_matches_direct_sum(m, r, w1, w2):
    pair = TwoCountPair(m, r, w1, w2)
    for eps in (0.0, 0.1, 0.5, 1.5):
        exact = two_count_delta_direct(pair, eps)
        up = two_count_delta(pair, eps)
        down = two_count_delta(pair, eps, rounding="down")
        assert down <= exact + 1e-15 <= up + 2e-15
        # The allowance is relative to the mass where P > e^ε Q (≤ 1e-7 of it).
        assert up - down < 1e-6 * max(exact, 1e-6) + 1e-18


def test_monte_carlo_agrees_at_large_blanket():
    # δ(ε) = E_P[(1 − e^{ε − L})_+]; compare with a 5-standard-error interval.
    pair = TwoCountPair(10**5 - 1, 2 / (math.e + 4), math.e / (math.e + 4), 1 / (math.e + 4))
    losses = sample_two_count_loss(pair, 400_000, np.random.default_rng(2024))
    for eps in (0.005, 0.01, 0.02):
        values = np.clip(-np.expm1(eps - losses), 0.0, None)
        se = values.std() / math.sqrt(len(values))
        assert abs(values.mean() - two_count_delta(pair, eps)) < 5 * se + 1e-12


def test_rejects_bad_pairs():
    with pytest.raises(ValueError):
        TwoCountPair(10, 1.5, 0.5, 0.1)
    with pytest.raises(ValueError):
        TwoCountPair(10, 0.5, 0.1, 0.5)


def _mp_pair_delta(m, rate, w1, w2, w0, eps, dps=60):
    """H_ε of a two-count pair summed over every (x, y) in mpmath (weights as mp numbers)."""
    import mpmath

    mpmath.mp.dps = dps
    rate = mpmath.mpf(rate)
    e = mpmath.exp(mpmath.mpf(eps))
    p, q = {}, {}
    for c in range(m + 1):
        bc = mpmath.binomial(m, c) * rate**c * (1 - rate) ** (m - c)
        for a in range(c + 1):
            ba = bc * mpmath.binomial(c, a) / mpmath.mpf(2) ** c
            for (d1, d2), w in (((1, 0), w1), ((0, 1), w2), ((0, 0), w0)):
                key_p, key_q = (a + d1, c - a + d2), (a + d2, c - a + d1)
                p[key_p] = p.get(key_p, 0) + ba * w
                q[key_q] = q.get(key_q, 0) + ba * w
    zero = mpmath.mpf(0)
    return sum((max(zero, p.get(z, zero) - e * q.get(z, zero)) for z in set(p) | set(q)), zero)


@pytest.mark.parametrize("eps0", [8.0, 20.0, 35.0])
@pytest.mark.parametrize("n", [1, 2, 10])
def test_generic_pairs_near_epsilon0_against_mpmath(eps0, n):
    # w2 = 1/(e^eps0 + 1) is tiny; computed as 1 − w1 it lost 5e-8 of itself at eps0 = 20,
    # and the line sums multiply that by 1/(1 − e^(eps − eps0)) ~ 1e4 near eps0.
    import mpmath

    from shuffledp.accounting.published.variation_ratio import fmt2021_numeric_pair, vr_generic_pair

    mpmath.mp.dps = 60
    big = mpmath.exp(mpmath.mpf(eps0))
    w1, w2 = big / (big + 1), 1 / (big + 1)
    for eps in (eps0 - 1e-4, eps0 - 1e-6, eps0 - 0.5):
        for pair, rate in (
            (fmt2021_numeric_pair(eps0, n), 1 / big),
            (vr_generic_pair(eps0, n), 2 / (big + 1)),
        ):
            exact = _mp_pair_delta(n - 1, rate, w1, w2, mpmath.mpf(0), eps)
            up = two_count_delta(pair, eps)
            down = two_count_delta(pair, eps, rounding="down")
            assert mpmath.mpf(down) <= exact <= mpmath.mpf(up), (eps, up, down, float(exact))
            # The allowance is ~8e-9 of the mass where P > e^ε Q (here about 1).
            assert up - down <= 2e-8


def test_derived_small_w0_is_charged_its_rounding():
    # The pair's intended w0 = 1e-9 but it is left to be derived as 1 − w1 − w2:
    # the certificate must cover the intended pair (weight_error grows to ~5u/w0).
    import mpmath

    mpmath.mp.dps = 60
    w0 = mpmath.mpf("1e-9")
    w2 = mpmath.mpf(1) / 3e4
    w1 = 1 - w0 - w2
    pair = TwoCountPair(6, 0.01, float(w1), float(w2))
    assert pair.weight_error > 1e-8
    for eps in (9.0, 10.0, 10.3):
        exact = _mp_pair_delta(6, 0.01, w1, w2, w0, eps)
        assert mpmath.mpf(two_count_delta(pair, eps, rounding="down")) <= exact
        assert exact <= mpmath.mpf(two_count_delta(pair, eps))


def test_huge_epsilon_does_not_overflow():
    pair = TwoCountPair(50, 0.3, 0.6, 0.0, w0=0.4)  # w2 = 0: the top point has Q = 0
    value = two_count_delta(pair, 800.0)
    exact = two_count_delta_direct(pair, 600.0)  # any ε > ln(50) leaves only Q = 0 points
    assert value >= exact > 0.0
    assert two_count_delta(pair, 800.0, rounding="down") <= exact
