import math

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from shuffledp.accounting.flip import flip_delta
from shuffledp.accounting.pld import (
    DistributionPair,
    PairAccountant,
    delta_from_distributions,
    flip_certificate_distributions,
    shuffled_randomizer_distributions,
    two_count_distributions,
)
from shuffledp.accounting.two_counts import two_count_delta
from shuffledp.accounting.variation_ratio import fmt2021_numeric_pair


def test_pld_is_a_tight_upper_bound_for_one_release():
    pair = flip_certificate_distributions(1e-3, 20, 1000)
    acc = PairAccountant(pair)
    for eps in (0.5, 1.0, 1.5):
        exact = flip_delta(eps, 1e-3, 20, 1000)
        assert acc.delta(eps) >= exact - 1e-11  # the certificate adds its own ~1e-11 allowance
        assert acc.delta(eps) <= 1.01 * exact + 1e-11
    tp = fmt2021_numeric_pair(1.0, 300)
    acc = PairAccountant(two_count_distributions(tp))
    assert acc.delta(0.3) >= two_count_delta(tp, 0.3, rounding="down")


def test_composition_against_the_product_distribution():
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.ones(6))
    q = rng.dirichlet(np.ones(6))
    acc = PairAccountant(DistributionPair(p, q), discretization=1e-5)
    twice = acc.compose(2)
    pp, qq = np.outer(p, p).ravel(), np.outer(q, q).ravel()
    for eps in (0.2, 0.6, 1.2):
        exact = delta_from_distributions(pp, qq, eps)
        assert twice.delta(eps) >= exact - 1e-12
        assert twice.delta(eps) <= exact + 1e-3
    assert twice.epsilon(1e-3) >= acc.epsilon(1e-3)


def test_exact_pair_delta_both_directions():
    p = np.array([0.5, 0.5, 0.0])
    q = np.array([0.25, 0.25, 0.5])
    assert delta_from_distributions(p, q, 0.0) == pytest.approx(0.5)
    assert delta_from_distributions(p, q, math.log(2)) == pytest.approx(0.5)


def test_any_randomizer_through_its_channel_composes():
    p = math.exp(1.0)
    channel = np.array([[p, 1, 1], [1, p, 1], [1, 1, p]]) / (p + 2)
    acc = PairAccountant(shuffled_randomizer_distributions(channel, 300))
    one, ten = acc.epsilon(1e-6), acc.compose(10).epsilon(1e-6)
    # Ten releases cost more than one and less than ten times as much (advanced composition).
    assert 0 < one < 1.0 and 2 * one < ten < 10 * one
