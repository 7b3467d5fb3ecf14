"""The blocked sums behind the fast accountants (issue 8), against exact sums and the old code.

Every blocked number must stay an upper bound of the exact line sum (or of the
exact mixture over the blanket count), and within 1% of the accountants as they
were before (kept in ``_oracle_accounting``).
"""

import itertools
import math

import numpy as np
import pytest
from _oracle_accounting import poisson_delta_before
from scipy.stats import binom

from shuffledp.accounting import amplified_epsilon
from shuffledp.accounting.certificates.krr import _accounted, krr_delta, krr_delta_curve
from shuffledp.accounting.certificates.poisson import poisson_delta, poisson_delta_curve
from shuffledp.accounting.numerics.binomial import binomial_window
from shuffledp.accounting.numerics.hockey_stick import hockey_stick_both
from shuffledp.accounting.numerics.two_counts import (
    TwoCountPair,
    two_count_delta,
    two_count_delta_direct,
    two_count_delta_lines,
    two_count_deltas,
)
from shuffledp.accounting.published.variation_ratio import fmt2021_numeric_pair, vr_generic_pair

PAIRS = [
    TwoCountPair(blanket=3_000, rate=0.2, w1=0.69, w2=0.034, w0=0.276),
    TwoCountPair(blanket=340_000, rate=0.2, w1=0.69, w2=0.034, w0=0.276),
    TwoCountPair(blanket=2_000_000, rate=0.02, w1=0.505, w2=0.0049, w0=0.4901),
    vr_generic_pair(1.0, 1_000_000),
    fmt2021_numeric_pair(3.0, 10_000_000),
]


def _epsilons(pair):
    # Where δ runs from about 1e-3 to 1e-9: the range a calibration visits.
    sd = math.sqrt(max(pair.blanket * pair.rate, 1.0))
    return [c / sd for c in (1.0, 3.0, 6.0)]


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"m={p.blanket}")
def test_blocked_sum_brackets_the_exact_line_sum(pair):
    for eps in _epsilons(pair):
        exact_low = two_count_delta_lines(pair, eps, rounding="down")
        exact_up = two_count_delta_lines(pair, eps)
        up = two_count_delta(pair, eps)
        down = two_count_delta(pair, eps, rounding="down")
        assert down <= exact_up and up >= exact_low
        if exact_low > 1e-15:
            assert up <= exact_up * (1 + 2e-3) + 1e-18  # the default tolerance
            assert down >= exact_low * (1 - 2e-3)


def test_batched_pairs_equal_single_pairs():
    eps = 0.02
    together = two_count_deltas(PAIRS[1:3], eps)
    alone = [two_count_delta(pair, eps) for pair in PAIRS[1:3]]
    for a, b in zip(together, alone, strict=True):
        # Batched evaluations share the widest relative error: at most a hair looser.
        assert b <= a <= b * (1 + 1e-7) + 1e-20


def _line_divergence(lam, s, eps):
    """G(λ, s): the normalized line λU + (1 − λ)V against (1 − λ)U + λV, by brute force."""
    x = np.arange(s + 1)
    u = binom.pmf(x - 1, s - 1, 0.5)  # X + 1, X ~ Bin(s − 1, 1/2)
    v = binom.pmf(x, s - 1, 0.5)
    p = lam * u + (1 - lam) * v
    q = (1 - lam) * u + lam * v
    return hockey_stick_both(p, q, eps)


def test_line_divergence_is_monotone_in_lambda_and_s():
    # The two facts the block bounds rest on (two_count_delta's docstring).
    for eps in (0.0, 0.3, 1.0):
        for s in (1, 2, 5, 20, 60):
            values = [_line_divergence(lam, s, eps) for lam in np.linspace(0.5, 1.0, 11)]
            assert all(b >= a - 1e-15 for a, b in itertools.pairwise(values))
        for lam in (0.55, 0.8, 1.0):
            values = [_line_divergence(lam, s, eps) for s in range(1, 40)]
            assert all(b <= a + 1e-15 for a, b in itertools.pairwise(values))


def test_pair_delta_is_convex_in_the_victims_presence_and_falls_with_blanket():
    # The Poisson mixture's bracket: δ(m, λ)/λ grows with λ, δ falls with m.
    r = 2.0 / 5.0

    def pair(m, lam):
        w2 = (1 - lam) * r / 2
        return TwoCountPair(blanket=m, rate=r, w1=lam + w2, w2=w2, w0=(1 - lam) * (1 - r))

    for eps in (0.2, 0.7):
        lams = np.linspace(0.05, 1.0, 12)
        ratios = [two_count_delta_direct(pair(12, lam), eps) / lam for lam in lams]
        assert all(b >= a - 1e-13 for a, b in itertools.pairwise(ratios))
        by_m = [two_count_delta_direct(pair(m, 0.6), eps) for m in range(0, 25)]
        assert all(b <= a + 1e-13 for a, b in itertools.pairwise(by_m))


def _exact_krr_mixture(eps, epsilon0, k, n):
    """Σ_B P[B]·H(pair_B) over every B of the window, each pair summed line by line (down)."""
    a, b = _accounted(epsilon0, k)
    window = binomial_window(n - 1, k * b, 1e-20, -math.expm1(-epsilon0) * a)
    total = 0.0
    for i, p in enumerate(window.pmf):
        pair = TwoCountPair(
            blanket=window.lo + i,
            rate=2.0 / k,
            w1=a,
            w2=b,
            w0=(k - 2) * b,
            rate_complement=(k - 2) / k,
        )
        total += p * two_count_delta_lines(pair, eps, rounding="down")
    return total


@pytest.mark.parametrize(
    ("epsilon0", "k", "n"),
    [(3.0, 10, 2_000), (1.0, 2, 500), (6.0, 100, 3_000), (8.0, 3, 800), (20.0, 2, 50)],
)
def test_krr_delta_is_an_upper_bound_within_a_percent_of_the_exact_mixture(epsilon0, k, n):
    for eps in (0.2 * epsilon0, 0.5 * epsilon0, epsilon0 - 1e-4):
        exact = _exact_krr_mixture(eps, epsilon0, k, n)
        new = krr_delta(eps, epsilon0, k, n)
        assert new >= exact
        if exact > 1e-12:
            # The blocks cost at most 1% over the exact mixture.
            assert new <= exact * 1.01, (eps, new, exact)
        assert krr_delta(eps, epsilon0, k, n, rounding="down") <= exact * (1 + 1e-9) + 1e-18


def _every_blanket_count(eps, epsilon0, k, n):
    """Σ_B P[B]·H(pair_B) over every B within 9 standard deviations, no blocks: (low, high).

    Written from the definition (a = e^ε₀/(e^ε₀ + k − 1), b = 1/(e^ε₀ + k − 1),
    B ~ Bin(n − 1, kb), scipy's pmf; each pair summed line by line and rounded
    down), not from the accountant's mixture: the outer sum is what the blocked
    sum bounds. ``high`` adds the mass of B beyond the window (< 1e-18) and
    1e-9 of the sum for the pairs' own rounding.
    """
    a = 1.0 / (1.0 + (k - 1) * math.exp(-epsilon0))
    b = math.exp(-epsilon0) * a
    p = k * b
    mean, sd = (n - 1) * p, math.sqrt((n - 1) * p * (1 - p))
    blankets = np.arange(max(0, int(mean - 9 * sd)), min(n - 1, int(mean + 9 * sd)) + 1)
    weights = binom.pmf(blankets, n - 1, p)
    total = 0.0
    for blanket, weight in zip(blankets, weights, strict=True):
        pair = TwoCountPair(
            blanket=int(blanket),
            rate=2.0 / k,
            w1=a,
            w2=b,
            w0=(k - 2) * b,
            rate_complement=(k - 2) / k,
        )
        total += weight * two_count_delta_lines(pair, eps, rounding="down")
    outside = max(0.0, 1.0 - float(weights.sum()))
    return total, total * (1.0 + 1e-9) + outside + 1e-15


def test_krr_delta_matches_the_unblocked_mixture_at_scale():
    # n = 1e5: the blocked sum against every blanket count summed one by one.
    n = 100_000
    eps = amplified_epsilon(
        1e-6, n=n, mechanism="krr", method="krr-two-count", epsilon0=3.0, domain_size=10
    ).epsilon
    certified = krr_delta(eps, 3.0, 10, n)
    low, high = _every_blanket_count(eps, 3.0, 10, n)
    assert low <= certified <= 1.01 * high


@pytest.mark.parametrize(
    ("lam", "d", "messages", "gamma"),
    [
        (0.5, 3, 6, 0.5),
        (0.3, 20, 400, 0.5),
        (0.9, 10, 2_000, 0.7),
        (1.0, 5, 100, 0.4),
        (0.5, 100, 20_000, 1.0),
        (0.05, 10, 3_000, 0.3),
    ],
)
def test_poisson_mixture_equals_the_two_dimensional_sum(lam, d, messages, gamma):
    # Two algorithms for the same exact view: the mixture over the number of
    # messages received, and the sum over (count of x0 and x1, count of others).
    for eps in (0.1, 0.4, 1.0):
        before_up = poisson_delta_before(eps, lam, d, messages, blanket_probability=gamma)
        before_down = poisson_delta_before(
            eps, lam, d, messages, blanket_probability=gamma, rounding="down"
        )
        new = poisson_delta(eps, lam, d, messages, blanket_probability=gamma)
        assert new >= before_down
        if before_up > 1e-12:
            assert new <= before_up * 1.01, (eps, new, before_up)
        assert (
            poisson_delta(eps, lam, d, messages, blanket_probability=gamma, rounding="down")
            <= before_up
        )


def test_poisson_answers_at_1e8_messages_for_any_gamma():
    for gamma in (1.0, 0.5, 0.05):
        eps = 0.005 / math.sqrt(gamma)
        up = poisson_delta(eps, 0.5, 100, 10**8, blanket_probability=gamma)
        down = poisson_delta(eps, 0.5, 100, 10**8, blanket_probability=gamma, rounding="down")
        assert 0 < down <= up <= down * 1.01


def test_curves_are_upper_bounds_everywhere_and_tight_where_built():
    epsilon0, k, n = 3.0, 10, 2_000
    curve = krr_delta_curve(0.6, epsilon0, k, n)
    for eps in (0.3, 0.6, 0.9, 2.0):
        assert curve(eps) >= _exact_krr_mixture(eps, epsilon0, k, n)
    assert curve(0.6) <= krr_delta(0.6, epsilon0, k, n) * 1.01
    assert curve(epsilon0) == 0.0
    pcurve = poisson_delta_curve(0.4, 0.3, 20, 400, blanket_probability=0.5)
    for eps in (0.2, 0.4, 0.8):
        assert pcurve(eps) >= poisson_delta_before(
            eps, 0.3, 20, 400, blanket_probability=0.5, rounding="down"
        )


@pytest.mark.parametrize(
    ("mechanism", "params"),
    [
        ("krr", {"epsilon0": 3.0, "domain_size": 10}),
        ("krr", {"epsilon0": 8.0, "domain_size": 2}),
        (
            "poisson",
            {
                "report_probability": 0.3,
                "domain_size": 20,
                "blanket_messages": 3000,
                "blanket_probability": 0.5,
            },
        ),
    ],
)
def test_epsilon_search_is_certified_and_nearly_smallest(mechanism, params):
    n = 3000
    row = amplified_epsilon(1e-6, n=n, mechanism=mechanism, **params)
    assert row.certified and row.bound.value == "upper"
    if mechanism == "krr":
        exact = lambda e: _exact_krr_mixture(e, params["epsilon0"], params["domain_size"], n)  # noqa: E731
    else:
        exact = lambda e: poisson_delta_before(  # noqa: E731
            e,
            params["report_probability"],
            params["domain_size"],
            params["blanket_messages"],
            blanket_probability=params["blanket_probability"],
        )
    assert exact(row.epsilon) <= 1e-6
    if row.epsilon < params.get("epsilon0", math.inf):
        # Nearly the smallest: 1% below, even the exact value is above the target.
        assert exact(row.epsilon * 0.99) > 1e-6


def test_deciding_mode_agrees_with_the_full_sum():
    epsilon0, k, n = 3.0, 10, 100_000
    for eps in (0.03, 0.05, 0.07):
        full = krr_delta(eps, epsilon0, k, n)
        decided = krr_delta(eps, epsilon0, k, n, target=1e-6)
        assert (decided <= 1e-6) == (full <= 1e-6) or abs(full / 1e-6 - 1) < 0.01
        assert decided >= _exact_lower(eps, epsilon0, k, n)


def _exact_lower(eps, epsilon0, k, n):
    return krr_delta(eps, epsilon0, k, n, rounding="down")


def test_block_starting_at_line_zero_is_not_dropped():
    # Audit counterexample: a window starting at 0 with more than 512 lines put the
    # first block's upper line at s = 0, which carries nothing, and lost its share.
    pair = TwoCountPair(1000, 0.02, w1=0.6, w2=0.05, w0=0.35)
    for eps in (0.1, 0.5):
        exact = two_count_delta_direct(pair, eps)
        assert two_count_delta(pair, eps, tail=1e-300) >= exact
    assert krr_delta(2.0, 8.0, 100, 31_000, tail=1e-300) >= 1.0245e-4  # a real dataset's δ


def test_lower_side_survives_underflow():
    # γ underflowing to 0 made a dead line look live: "down" was above the exact 0.
    pair = TwoCountPair(16, 1e-3, w1=0.9, w2=1e-300)
    assert two_count_delta(pair, 700.0, rounding="down") == 0.0
    assert two_count_delta_lines(pair, 700.0, rounding="down") == 0.0
    tiny = TwoCountPair(2, 1e-300, 0.3, 0.0, 0.7)
    assert two_count_delta(tiny, 690.0, rounding="down") <= 2.2e-301


def test_probabilities_a_rounding_above_one_are_one():
    assert poisson_delta(0.5, 0.5, 3, 4, blanket_probability=1 + 1e-13) == poisson_delta(
        0.5, 0.5, 3, 4, blanket_probability=1.0
    )
