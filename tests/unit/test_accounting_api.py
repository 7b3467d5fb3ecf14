import math

import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting import amplified_epsilon, calibrate, compare, delta
from shuffledp.accounting.certificates.krr import krr_delta
from shuffledp.privacy import BoundKind


def test_delta_and_epsilon_are_consistent():
    row = amplified_epsilon(1e-6, n=5000, epsilon0=2.0, mechanism="krr", domain_size=10)
    assert row.method == "krr-blanket" and row.bound is BoundKind.UPPER and row.certified
    assert delta(row.epsilon, n=5000, epsilon0=2.0, mechanism="krr", domain_size=10).delta <= 1e-6
    assert (
        delta(row.epsilon * 0.999, n=5000, epsilon0=2.0, mechanism="krr", domain_size=10).delta
        > 1e-6
    )


def test_compare_orders_the_bounds_and_labels_them():
    rows = {
        r.method: r
        for r in compare(delta=1e-6, n=5000, mechanism="krr", epsilon0=2.0, domain_size=10)
    }
    assert rows["krr-homogeneous"].bound is BoundKind.LOWER
    assert rows["biswas2023"].epsilon is None  # needs n_x0
    upper = [r.epsilon for r in rows.values() if r.bound is BoundKind.UPPER and r.certified]
    # krr-splits is for k = 2 only: a row with no number, not the local epsilon0.
    assert rows["krr-splits"].epsilon is None and rows["krr-splits"].delta is None
    lower = [r.epsilon for r in rows.values() if r.bound is BoundKind.LOWER]
    assert lower.count(None) == 1 and len(lower) == 3
    lower = [eps for eps in lower if eps is not None]
    assert min(upper) >= max(lower)
    # A lower bound is never a guarantee: never certified.
    assert not any(r.certified for r in rows.values() if r.bound is not BoundKind.UPPER)
    assert rows["krr-blanket"].epsilon == min(upper)
    assert not rows["erlingsson2019"].certified
    assert rows["erlingsson2019"].bound is BoundKind.REPRODUCTION


def test_lower_bound_epsilon_rounds_down():
    low = amplified_epsilon(
        1e-6, n=3000, epsilon0=3.0, mechanism="krr", domain_size=8, method="krr-two-count"
    )
    up = amplified_epsilon(
        1e-6, n=3000, epsilon0=3.0, mechanism="krr", domain_size=8, method="krr-blanket"
    )
    assert low.epsilon <= up.epsilon


@pytest.mark.parametrize(
    ("kind", "params"),
    [("generic", {}), ("krr", {"domain_size": 10})],
)
def test_calibrated_epsilon0_is_certified_and_nearly_largest(kind, params):
    cal = calibrate(1.0, 1e-6, n=20_000, mechanism=kind, **params)
    assert cal.parameter == "epsilon0"
    assert cal.result.delta <= 1e-6 and cal.result.certified
    above = delta(1.0, n=20_000, mechanism=kind, epsilon0=cal.value * 1.001, **params)
    assert above.delta > 1e-6


def test_calibrate_flip_and_poisson():
    cal = calibrate(1.0, 1e-6, n=10_000, mechanism="flip", fake_users=50)
    assert cal.parameter == "q" and cal.result.delta <= 1e-6
    lam = calibrate(1.0, 1e-6, n=1000, mechanism="poisson", domain_size=20, blanket_messages=200)
    assert 0 < lam.value <= 1 and lam.result.delta <= 1e-6
    if lam.value < 1:
        worse = delta(
            1.0,
            n=1000,
            mechanism="poisson",
            domain_size=20,
            blanket_messages=200,
            report_probability=min(1.0, lam.value * 1.01),
        )
        assert worse.delta > 1e-6
    count = calibrate(
        1.0,
        1e-6,
        n=1000,
        mechanism="poisson",
        domain_size=20,
        report_probability=0.5,
        parameter="blanket_messages",
    )
    assert count.result.delta <= 1e-6
    fewer = delta(
        1.0,
        n=1000,
        mechanism="poisson",
        domain_size=20,
        report_probability=0.5,
        blanket_messages=int(count.value) - 1,
    )
    assert fewer.delta > 1e-6


def test_poisson_items_use_group_composition():
    one = delta(
        1.0,
        n=100,
        mechanism="poisson",
        domain_size=10,
        blanket_messages=500,
        report_probability=0.5,
    )
    two = delta(
        2.0,
        n=100,
        mechanism="poisson",
        domain_size=10,
        blanket_messages=500,
        report_probability=0.5,
        items=2,
    )
    assert two.delta == pytest.approx(min(1.0, 2 * math.exp(2.0) * one.delta), rel=1e-12)


def test_bad_requests():
    with pytest.raises(InvalidParameterError, match="epsilon0"):
        delta(0.5, n=100, mechanism="krr", domain_size=5)
    with pytest.raises(InvalidParameterError, match="does not apply"):
        delta(0.5, n=100, epsilon0=1.0, method="flip-exact")
    with pytest.raises(InvalidParameterError, match="unknown method"):
        delta(0.5, n=100, epsilon0=1.0, method="magic")
    with pytest.raises(InvalidParameterError, match="calibration needs an upper bound"):
        calibrate(1.0, 1e-6, n=100, mechanism="krr", domain_size=5, method="krr-two-count")
    with pytest.raises(InvalidParameterError, match="mechanism must be"):
        delta(0.5, n=100, mechanism="laplace", epsilon0=1.0)


def test_krr_api_matches_module():
    assert delta(0.4, n=800, mechanism="krr", epsilon0=3.0, domain_size=6).delta == krr_delta(
        0.4, 3.0, 6, 800
    )


def test_k_rr_domain_size_is_domain_size_and_k_a_deprecated_spelling():
    """One name per quantity: k-RR's domain size is ``domain_size`` like FLIP's and the
    Poisson randomizer's; ``k=`` still works, with a DeprecationWarning, for the same number."""
    from shuffledp.accounting import delta
    from shuffledp.accounting.methods import Mechanism

    now = delta(1.0, n=5000, epsilon0=2.0, mechanism="krr", domain_size=10)
    with pytest.warns(DeprecationWarning, match="k-RR's domain size is domain_size"):
        before = delta(1.0, n=5000, epsilon0=2.0, mechanism="krr", k=10)
    assert before.delta == now.delta and before.inputs == now.inputs
    assert now.inputs["domain_size"] == 10 and "k" not in now.inputs
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(InvalidParameterError, match="k 10 and domain_size 9 name the same"),
    ):
        Mechanism(kind="krr", n=100, epsilon0=1.0, k=10, domain_size=9)
    with pytest.raises(InvalidParameterError, match="needs domain_size"):
        Mechanism(kind="krr", n=100, epsilon0=1.0)
