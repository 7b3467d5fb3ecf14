import math

import numpy as np
import pytest

from shuffledp.accounting.two_counts import (
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
