import itertools
import math

import dp_accounting  # noqa: F401  (the pld extra; a missing install fails here)
import numpy as np
import pytest
from _bruteforce import histogram_law, krr_channel
from _bruteforce import hockey_stick_both as law_hockey_stick
from scipy.stats import binom

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.flip import flip_delta
from shuffledp.accounting.certificates.krr import krr_delta, krr_probabilities
from shuffledp.accounting.composition.pld import (
    ApproxDPPair,
    DistributionPair,
    PairAccountant,
    TwoCountMixture,
    delta_from_distributions,
    flip_certificate_distributions,
    flip_dominating_pair,
    krr_dominating_pair,
    shuffled_randomizer_distributions,
    two_count_distributions,
    two_count_loss_distribution,
)
from shuffledp.accounting.numerics.two_counts import TwoCountPair, two_count_delta
from shuffledp.accounting.published.variation_ratio import fmt2021_numeric_pair


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


# --- dominating pairs at scale: the line-by-line two-count PLD, k-RR blocks, FLIP product ---


def _losses(p, q):
    """Unrounded privacy losses ln P/Q and P-masses of a pair on a grid (P > 0 points)."""
    p, q = np.asarray(p).ravel(), np.asarray(q).ravel()
    keep = p > 0
    assert np.all(q[keep] > 0)
    return np.log(p[keep]) - np.log(q[keep]), p[keep]


def _exact_product_delta(first, second, epsilon):
    """H_ε of the product of two pairs from their loss lists: E[(1 − e^{ε − L1 − L2})_+]."""
    l1, p1 = first
    l2, p2 = second
    order = np.argsort(l2)
    l2, p2 = l2[order], p2[order]
    upper = np.concatenate([np.cumsum(p2[::-1])[::-1], [0.0]])
    lower = np.concatenate([np.cumsum((p2 * np.exp(-l2))[::-1])[::-1], [0.0]])
    threshold = epsilon - l1
    j = np.searchsorted(l2, threshold, side="right")
    return float(np.sum(p1 * (upper[j] - np.exp(threshold) * lower[j])))


def _krr_joint_losses(epsilon0, k, n):
    """Loss list of the exact (unblocked) k-RR blanket pair (B, pair_B), from dense grids."""
    a, b = krr_probabilities(epsilon0, k)
    losses, masses = [], []
    for blanket in range(n):
        weight = binom.pmf(blanket, n - 1, k * b)
        grid = two_count_distributions(TwoCountPair(blanket, 2.0 / k, a, b))
        loss, mass = _losses(grid.p, grid.q)
        losses.append(loss)
        masses.append(weight * mass)
    return np.concatenate(losses), np.concatenate(masses)


def test_exact_product_formula_matches_the_outer_product():
    rng = np.random.default_rng(11)
    p1, q1 = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
    p2, q2 = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    for eps in (0.0, 0.3, 1.0):
        direct = float(
            np.sum(np.clip(np.outer(p1, p2) - math.exp(eps) * np.outer(q1, q2), 0, None))
        )
        assert _exact_product_delta(_losses(p1, q1), _losses(p2, q2), eps) == pytest.approx(
            direct, rel=1e-12, abs=1e-15
        )


def test_line_by_line_pld_matches_the_dense_grid():
    a, b = krr_probabilities(2.0, 5)
    pair = TwoCountPair(blanket=400, rate=0.4, w1=a, w2=b)
    lines = PairAccountant.from_rounded(two_count_loss_distribution(pair, 1e-4), None, 1e-4)
    grid = PairAccountant(two_count_distributions(pair))
    rounded = two_count_loss_distribution(pair, 1e-4)
    total = float(np.sum(rounded.masses)) + rounded.infinity
    assert 1.0 - 1e-12 <= total <= 1.0 + 1e-9
    assert rounded.infinity < 1e-13
    for eps in (0.0, 0.2, 0.5, 1.0):
        exact = two_count_delta(pair, eps, rounding="down")
        assert lines.delta(eps) >= exact
        # the same PLD up to the floating-point allowances (which depend on the grid size)
        assert lines.delta(eps) - lines.allowance() == pytest.approx(
            grid.delta(eps) - grid.allowance(), rel=1e-6, abs=1e-13
        )
        assert lines.delta(eps) <= 1.01 * exact + lines.allowance() + 1e-14


def test_two_count_pld_is_symmetric():
    # The PLD of (Q‖P) equals that of (P‖Q): x <-> y maps P to Q.
    a, b = krr_probabilities(1.5, 4)
    grid = two_count_distributions(TwoCountPair(blanket=60, rate=0.5, w1=a, w2=b))
    for eps in (0.0, 0.4, 1.0):
        forward = float(np.sum(np.clip(grid.p - math.exp(eps) * grid.q, 0, None)))
        backward = float(np.sum(np.clip(grid.q - math.exp(eps) * grid.p, 0, None)))
        assert forward == pytest.approx(backward, rel=1e-10, abs=1e-16)


def test_krr_blocks_dominate_the_exact_mixture_and_stay_close():
    epsilon0, k, n = 4.5, 10, 5000
    pair = krr_dominating_pair(epsilon0, k, n)
    a, b = krr_probabilities(epsilon0, k)
    window_blankets = range(int(n * k * b * 0.5), int(n * k * b * 1.5))
    # the mixture really is blocked (fewer components than B values)
    assert len(pair.components) < 256 < len(window_blankets)
    acc = pair.accountant(1e-4)
    weights = binom.pmf(np.array(window_blankets), n - 1, k * b)
    for eps in (0.0, 0.5, 1.0):
        exact = sum(
            w * two_count_delta(TwoCountPair(m, 2.0 / k, a, b), eps, rounding="down")
            for w, m in zip(weights, window_blankets, strict=True)
            if w > 1e-18
        )
        assert pair.delta(eps) >= exact  # the blocked mixture, certified sums
        assert acc.delta(eps) >= exact  # its PLD
        assert acc.delta(eps) <= 1.01 * exact  # measured: 1.0004, 1.0013, 1.0052
        if eps > 0:  # both are within 1% of the exact mixture
            certified = krr_delta(eps, epsilon0, k, n)
            assert exact <= certified <= 1.01 * exact
            assert acc.delta(eps) <= 1.01 * certified


def test_krr_pld_at_deployment_size_is_fast_and_tight():
    # n = 1e6, k = 10, epsilon0 calibrated by krr-blanket for (1, 1e-6).
    epsilon0 = 10.061222215727062
    acc = krr_dominating_pair(epsilon0, 10, 1_000_000).accountant(1e-4)
    certified = krr_delta(1.0, epsilon0, 10, 1_000_000)
    assert 0.97 * certified <= acc.delta(1.0) <= 1.05 * certified  # measured 0.984


def test_flip_product_pair_matches_the_certificate():
    q, k, n = 4.265400550778376e-06, 100, 100_000
    acc = flip_dominating_pair(q, k, n).accountant(1e-4)
    for eps in (0.5, 1.0):
        exact = flip_delta(eps, q, k, n)
        assert exact - 1e-11 <= acc.delta(eps) <= 1.01 * exact  # measured 1.0017 at eps = 1
    grid = PairAccountant(flip_certificate_distributions(1e-2, 5, 200))
    product = flip_dominating_pair(1e-2, 5, 200).accountant(1e-4)
    for eps in (0.2, 0.8):
        assert product.delta(eps) == pytest.approx(grid.delta(eps), rel=2e-3)


def test_two_fold_krr_against_the_exact_product():
    epsilon0, k, n = 2.0, 3, 12
    exact_pair = _krr_joint_losses(epsilon0, k, n)
    twice = krr_dominating_pair(epsilon0, k, n).accountant(1e-4).compose(2)
    for eps in (0.2, 0.6, 1.2, 2.0):
        exact = _exact_product_delta(exact_pair, exact_pair, eps)
        assert twice.delta(eps) >= exact - 1e-12
        assert twice.delta(eps) <= 1.002 * exact + 1e-9


def test_two_fold_krr_dominates_the_real_mechanism_brute_force():
    epsilon0, k, n = 1.5, 3, 4
    channel = krr_channel(k, epsilon0)
    twice = krr_dominating_pair(epsilon0, k, n).accountant(1e-4).compose(2)
    worst = dict.fromkeys((0.1, 0.5, 1.0), 0.0)
    for others in itertools.combinations_with_replacement(range(k), n - 1):
        laws = {x: histogram_law([*others, x], channel) for x in range(k)}
        squared = {
            x: {(h1, h2): p1 * p2 for h1, p1 in law.items() for h2, p2 in law.items()}
            for x, law in laws.items()
        }
        for x0, x1 in itertools.permutations(range(k), 2):
            for eps in worst:
                worst[eps] = max(worst[eps], law_hockey_stick(squared[x0], squared[x1], eps))
    for eps, value in worst.items():
        assert twice.delta(eps) >= value


def test_two_fold_heterogeneous_against_the_exact_product():
    flip_grid = flip_certificate_distributions(0.05, 2, 10)
    flip = _losses(flip_grid.p, flip_grid.q)
    krr = _krr_joint_losses(2.5, 4, 10)
    both = (
        flip_dominating_pair(0.05, 2, 10)
        .accountant(1e-4)
        .compose_with(krr_dominating_pair(2.5, 4, 10).accountant(1e-4))
    )
    for eps in (0.3, 1.0, 2.0):
        exact = _exact_product_delta(flip, krr, eps)
        assert exact - 1e-12 <= both.delta(eps) <= 1.003 * exact + 1e-9


def test_approx_dp_pair_and_accountant_checks():
    acc = ApproxDPPair(1.0, 1e-6).accountant(1e-4)
    assert 1e-6 <= acc.delta(1.0) <= 1e-6 + 1e-9
    assert acc.epsilon(1e-3) < 1.0
    with pytest.raises(InvalidParameterError, match="different grids"):
        acc.compose_with(ApproxDPPair(1.0, 1e-6).accountant(1e-3))
    with pytest.raises(InvalidParameterError, match="discretization"):
        ApproxDPPair(1.0, 1e-6).accountant(0.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        acc.delta(-1.0)
    with pytest.raises(InvalidParameterError, match="weights"):
        TwoCountMixture(
            ((0.7, TwoCountPair(5, 0.5, 0.6, 0.2)), (0.7, TwoCountPair(6, 0.5, 0.6, 0.2)))
        )
