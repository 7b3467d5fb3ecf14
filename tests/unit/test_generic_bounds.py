import math

import numpy as np
import pytest

from shuffledp.accounting.certificates.krr import krr_delta_for_dataset, krr_delta_lower_bound
from shuffledp.accounting.numerics.two_counts import two_count_delta
from shuffledp.accounting.published.generic_bounds import (
    bbgn2019_bennett_delta,
    bbgn2019_hoeffding_delta,
    erlingsson2019_delta,
    erlingsson2019_epsilon,
    fmt2021_closed_delta,
    fmt2021_closed_epsilon,
)
from shuffledp.accounting.published.variation_ratio import (
    VariationRatio,
    fmt2021_numeric_pair,
    group_composition,
    variation_ratio_from_channel,
    vr_generic_pair,
)
from shuffledp.accounting.reproductions.bbgn2019_bennett import bbgn2019_bennett_published_delta


def test_erlingsson_formula_inverse_and_range():
    eps = erlingsson2019_epsilon(0.4, 10_000, 1e-6)
    assert eps.certified and eps.value == pytest.approx(
        12 * 0.4 * math.sqrt(math.log(1e6) / 10_000)
    )
    back = erlingsson2019_delta(eps.value, 0.4, 10_000)
    assert back.value == pytest.approx(1e-6, rel=1e-9)
    assert not erlingsson2019_epsilon(0.5, 10_000, 1e-6).certified
    assert not erlingsson2019_epsilon(0.4, 999, 1e-6).certified
    assert not erlingsson2019_delta(0.01, 0.4, 10_000).certified  # δ ≥ 1/100 there


def test_fmt_closed_form_value_and_range():
    n, e0, d = 10**5, 1.0, 1e-6
    value = fmt2021_closed_epsilon(e0, n, d)
    e = math.e
    expected = math.log(
        1 + (e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4 / d) / n) + 8 * e / n)
    )
    assert value.certified and value.value == pytest.approx(expected, rel=1e-12)
    inverse = fmt2021_closed_delta(value.value, e0, n)
    assert inverse.certified and inverse.value == pytest.approx(d, rel=1e-6)
    assert not fmt2021_closed_epsilon(6.0, 1000, 1e-6).certified


def test_bbgn_hoeffding_matches_its_formula():
    eps, e0, n = 0.3, 1.0, 5000
    g = math.exp(-e0)
    a = math.expm1(eps)
    b = (math.exp(eps) + 1) * (math.exp(e0) - math.exp(-e0))
    expected = 1 / (g * n) * b * b / (4 * a) * (1 - g * (1 - math.exp(-2 * a * a / (b * b)))) ** n
    assert bbgn2019_hoeffding_delta(eps, e0, n).value == pytest.approx(expected, rel=1e-10)
    assert bbgn2019_hoeffding_delta(1.5, 1.0, n).value == 0.0


@pytest.mark.parametrize(("n", "e0"), [(200, 1.0), (1000, 2.0), (3000, 0.5), (10**6, 1.0)])
def test_generic_upper_bounds_dominate_binary_rr(n, e0):
    # Binary randomized response is e0-LDP; its exact δ over every split of the
    # other users is a lower bound for any generic bound.
    for eps in (0.002, 0.05, 0.15, 0.4):
        exact = max(
            krr_delta_for_dataset(eps, e0, 2, np.array([m, n - 1 - m]), rounding="down")
            for m in np.linspace(0, n - 1, 21).round().astype(int)
        )
        exact = max(exact, krr_delta_lower_bound(eps, e0, 2, n))
        for bound in (
            bbgn2019_hoeffding_delta(eps, e0, n).value,
            bbgn2019_bennett_delta(eps, e0, n).value,
            two_count_delta(fmt2021_numeric_pair(e0, n), eps),
            two_count_delta(vr_generic_pair(e0, n), eps),
        ):
            assert bound >= exact - 1e-12
        closed = fmt2021_closed_delta(eps, e0, n)
        if closed.certified:
            assert closed.value >= exact - 1e-12


def test_ordering_of_numerical_bounds():
    # The variation-ratio pair has more blanket than FMT's clones (2/(e^e0+1) ≥ e^-e0).
    for eps in (0.05, 0.1, 0.2):
        assert two_count_delta(vr_generic_pair(1.5, 5000), eps) <= two_count_delta(
            fmt2021_numeric_pair(1.5, 5000), eps
        )


def test_channel_parameters():
    p = math.exp(1.2)
    rr = np.array([[p, 1, 1], [1, p, 1], [1, 1, p]]) / (p + 2)
    ratio = variation_ratio_from_channel(rr)
    assert ratio.p == pytest.approx(p)
    assert ratio.beta == pytest.approx((p - 1) / (p + 2))
    with pytest.raises(ValueError):
        VariationRatio(0.5, 0.1, 1.0)
    assert group_composition(0.5, 1e-6, 3) == (1.5, pytest.approx(3 * math.exp(1.5) * 1e-6))


def test_published_bennett_integration_is_not_a_bound():
    # Binary randomized response, n = 1e6, eps0 = 1: a concrete dataset has
    # delta(0.002) = 1.1e-5; the reference code's Bennett expression gives less.
    n, e0, eps = 10**6, 1.0, 0.002
    exact = krr_delta_for_dataset(eps, e0, 2, np.array([0, n - 1]), rounding="down")
    assert exact > 1.0e-5
    assert bbgn2019_bennett_published_delta(eps, e0, n).value < exact
    assert not bbgn2019_bennett_published_delta(eps, e0, n).certified
    assert bbgn2019_bennett_delta(eps, e0, n).value >= exact


def test_tiny_bounds_do_not_underflow_to_zero():
    assert bbgn2019_hoeffding_delta(0.05, 0.5, 10**6).value > 0.0
    assert erlingsson2019_delta(0.4, 0.45, 10**7).value > 0.0


def test_generic_numerical_bounds_hold_for_random_randomizers():
    # Every dataset and every move, for random eps0-LDP channels with up to 3
    # outputs, by enumerating all report tuples (tests/unit/_bruteforce.py).
    import itertools

    from _bruteforce import histogram_law, hockey_stick_both

    rng = np.random.default_rng(31)
    for trial in range(12):
        inputs, outputs, n = (
            int(rng.integers(2, 4)),
            int(rng.integers(2, 4)),
            int(rng.integers(3, 5)),
        )
        channel = rng.uniform(0.05, 1.0, (inputs, outputs))
        if trial % 3 == 0:  # rows with one heavy output, like randomized response
            channel = np.ones((inputs, outputs))
            for row in range(inputs):
                channel[row, rng.integers(0, outputs)] = math.exp(rng.uniform(0.5, 2.5))
        channel /= channel.sum(axis=1, keepdims=True)
        eps0 = float(np.log(np.max(channel[:, None, :] / channel[None, :, :])))
        for eps in (0.05, 0.3, 0.8):
            worst = 0.0
            for others in itertools.combinations_with_replacement(range(inputs), n - 1):
                for x0, x1 in itertools.permutations(range(inputs), 2):
                    worst = max(
                        worst,
                        hockey_stick_both(
                            histogram_law([*others, x0], channel),
                            histogram_law([*others, x1], channel),
                            eps,
                        ),
                    )
            assert two_count_delta(vr_generic_pair(eps0, n), eps) >= worst - 1e-12
            assert two_count_delta(fmt2021_numeric_pair(eps0, n), eps) >= worst - 1e-12


@pytest.mark.parametrize("beta", [1e-12, 1e-6, 1e-3, 0.01, 0.05, 0.099999, 0.1, 0.3, 2.0])
def test_bennett_phi_matches_its_closed_form_in_high_precision(beta):
    # φ(β) = (1 + β)ln(1 + β) − β ≈ β²/2: the series for small β once had its sign flipped,
    # which gave φ < 0 and threw Bennett's tail away (sound, but loose by orders of magnitude).
    import mpmath

    from shuffledp.accounting.published.generic_bounds import _bennett_phi

    with mpmath.workdps(60):
        b = mpmath.mpf(beta)
        exact = float((1 + b) * mpmath.log1p(b) - b)
    assert _bennett_phi(beta) == pytest.approx(exact, rel=1e-12)


def test_bennett_bound_has_no_jump_where_its_series_hands_over():
    # β = a·b₊/c crosses 0.1 near ε = 0.28725 at ε₀ = 1: δ must move smoothly there.
    below = bbgn2019_bennett_delta(0.28725, 1.0, 2000).value
    above = bbgn2019_bennett_delta(0.28726, 1.0, 2000).value
    assert 0 < above <= below <= above * 1.01
