"""The accounting API at the edges: what "certified" means, ranges, overflow, tiny δ."""

from __future__ import annotations

import math
import re

import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting import amplified_epsilon, calibrate, compare, delta
from shuffledp.accounting.calibration import calibrate_flip_q, flip_delta_floor
from shuffledp.accounting.certificates.flip import flip_delta
from shuffledp.accounting.certificates.krr import krr_probabilities
from shuffledp.privacy import BoundKind

MECHANISMS = [
    ("generic", {"epsilon0": 1.0}),
    ("krr", {"epsilon0": 2.0, "domain_size": 5}),
    ("krr", {"epsilon0": 2.0, "domain_size": 2}),
    ("flip", {"q": 0.05, "fake_users": 5}),
    ("poisson", {"report_probability": 0.5, "domain_size": 10, "blanket_messages": 300}),
]


@pytest.mark.parametrize(("kind", "params"), MECHANISMS)
def test_certified_means_a_guarantee(kind, params):
    for rows in (
        compare(epsilon=0.5, n=500, mechanism=kind, **params),
        compare(delta=1e-6, n=500, mechanism=kind, **params),
    ):
        assert any(r.certified for r in rows)
        for r in rows:
            if r.certified:
                assert r.bound in (BoundKind.UPPER, BoundKind.EXACT), r.method
                assert r.epsilon is not None and r.delta is not None
            if r.bound in (BoundKind.LOWER, BoundKind.REPRODUCTION):
                assert not r.certified, r.method
            if r.bound is BoundKind.LOWER and r.delta is not None:
                assert "lower bound" in r.note or "attained" in r.note or "split" in r.note


def test_published_formulas_are_reproductions_never_certified():
    rows = {r.method: r for r in compare(epsilon=0.3, n=10_000, epsilon0=1.0)}
    published = rows["bbgn2019-bennett-published"]
    assert published.bound is BoundKind.REPRODUCTION and not published.certified
    rows = {
        r.method: r
        for r in compare(
            epsilon=1.0,
            n=100,
            mechanism="poisson",
            report_probability=0.5,
            domain_size=5,
            blanket_messages=100,
        )
    }
    assert rows["poisson-lemma3"].bound is BoundKind.REPRODUCTION
    assert not rows["poisson-lemma3"].certified and rows["poisson-lemma3"].delta is not None
    assert rows["poisson-exact"].certified


def test_calibration_uses_upper_bounds_only():
    cal = calibrate(1.0, 1e-6, n=5000, mechanism="krr", domain_size=2)
    assert cal.result.method == "krr-blanket" and cal.result.certified
    for name in ("krr-splits", "krr-two-count", "bbgn2019-bennett-published"):
        with pytest.raises(InvalidParameterError, match="calibration needs an upper bound"):
            calibrate(1.0, 1e-6, n=5000, mechanism="krr", domain_size=3, method=name)


@pytest.mark.parametrize("mode", [{"epsilon": 1.0}, {"delta": 1e-6}])
def test_a_method_out_of_range_gives_a_row_not_an_error(mode):
    # account delta --mechanism poisson --report-probability 0.1 --domain-size 5
    #   --blanket-messages 100 --epsilon 1 --n 100 exited with "q must be >= 1".
    rows = {
        r.method: r
        for r in compare(
            n=100,
            mechanism="poisson",
            report_probability=0.1,
            domain_size=5,
            blanket_messages=100,
            **mode,
        )
    }
    lemma3 = rows["poisson-lemma3"]
    assert lemma3.delta is None or lemma3.epsilon is None
    assert not lemma3.certified and "d*lambda" in lemma3.note and "0.5" in lemma3.note
    assert rows["poisson-exact"].certified
    assert rows["poisson-exact"].epsilon is not None and rows["poisson-exact"].delta is not None


@pytest.mark.parametrize("eps0", [355.0, 400.0, 700.0, 800.0])
@pytest.mark.parametrize(
    ("kind", "extra"), [("generic", {}), ("krr", {"domain_size": 5}), ("krr", {"domain_size": 2})]
)
def test_huge_epsilon0_never_overflows(eps0, kind, extra):
    # account delta --epsilon0 400 --n 100 --epsilon 1 raised OverflowError.
    for eps in (1.0, eps0 - 0.5, eps0, eps0 + 100.0):
        rows = compare(epsilon=eps, n=100, mechanism=kind, epsilon0=eps0, **extra)
        upper = [r.delta for r in rows if r.bound is BoundKind.UPPER and r.delta is not None]
        lower = [r.delta for r in rows if r.bound is BoundKind.LOWER and r.delta is not None]
        assert all(0.0 <= d <= 1.0 for d in upper + lower)
        if upper and lower:
            assert min(upper) >= max(lower)
        if eps >= eps0:
            assert upper and all(d == 0.0 for d in upper + lower)
        for r in rows:
            if r.delta is None:
                assert r.note and not r.certified
    rows = compare(delta=1e-6, n=100, mechanism=kind, epsilon0=eps0, **extra)
    assert all(r.epsilon is None or r.epsilon <= eps0 for r in rows if r.certified)


def test_huge_epsilon_for_every_mechanism():
    for kind, params in MECHANISMS:
        for row in compare(epsilon=800.0, n=50, mechanism=kind, **params):
            assert row.delta is None or 0.0 <= row.delta <= 1.0
    # Poisson at ε → ∞: exactly the mass where Q = 0 (the victim sent and no blanket
    # message hit x1): λ·(1 − 1/d)^N.
    row = delta(
        800.0,
        n=100,
        mechanism="poisson",
        report_probability=0.5,
        domain_size=5,
        blanket_messages=100,
    )
    assert row.delta == pytest.approx(0.5 * 0.8**100, rel=1e-6)
    assert row.delta >= 0.5 * 0.8**100
    assert krr_probabilities(800.0, 5) == (1.0, 0.0)  # the randomizer itself still works


@pytest.mark.parametrize("target", [1e-300, 1e-100, 1e-20])
@pytest.mark.parametrize(("kind", "extra"), [("generic", {}), ("krr", {"domain_size": 3})])
def test_epsilon_never_exceeds_epsilon0(target, kind, extra):
    # account amplify --epsilon0 0.1 --n 10 --delta 1e-300 returned 0.125 for every upper row.
    rows = compare(delta=target, n=10, mechanism=kind, epsilon0=0.1, **extra)
    certified = [r for r in rows if r.certified]
    assert certified
    for r in certified:
        assert r.epsilon <= 0.1, r.method
        again = delta(r.epsilon, n=10, mechanism=kind, epsilon0=0.1, method=r.method, **extra)
        assert again.delta <= target
    if target < 1e-19:  # below every certificate's truncation floor: only ε₀ itself
        assert all(r.epsilon == 0.1 for r in certified)


def test_epsilon_search_is_tight_and_safe_at_small_delta():
    for target in (1e-6, 1e-15, 1e-19):
        row = amplified_epsilon(target, n=20_000, epsilon0=1.0)
        assert row.certified and row.epsilon < 1.0
        assert delta(row.epsilon, n=20_000, epsilon0=1.0).delta <= target
        assert delta(row.epsilon * (1 - 1e-5), n=20_000, epsilon0=1.0).delta > target


def test_flip_calibration_reaches_every_delta_and_names_the_real_floor():
    # The message named 1.9e-10 ("allowances near q = 1/2") while 5e-12 was accepted:
    # the allowance was a constant that grew with q. It is now relative to the mass
    # of the region that matters, and one report is ε-LDP from q = 1/(1 + e^(ε/2)) on.
    n, k, eps = 10**4, 100, 1.0
    for target in (1e-9, 1e-12, 5e-12, 1e-15, 1e-18, 1e-25, 1e-300):
        q = calibrate_flip_q(eps, target, n, k)
        assert flip_delta(eps, q, k, n) <= target
    local = 1.0 / (1.0 + math.exp(eps / 2.0))
    assert calibrate_flip_q(eps, 1e-25, n, k) == pytest.approx(local, rel=1e-5)
    assert calibrate_flip_q(eps, 1e-15, n, k) < 1e-3 < local
    # An ε below the local ε of every admissible q: the message names the real floor.
    eps = 1e-9
    with pytest.raises(InvalidParameterError, match="below what the FLIP accountant") as info:
        calibrate_flip_q(eps, 1e-30, n, k)
    floor = float(re.search(r"smallest certified delta is ([0-9.e+-]+)", str(info.value)).group(1))
    assert floor == pytest.approx(flip_delta_floor(eps, n, k)[0], rel=1e-2)
    q = calibrate_flip_q(eps, floor * 1.01, n, k)
    assert flip_delta(eps, q, k, n) <= floor * 1.01
    with pytest.raises(InvalidParameterError, match="below what the FLIP accountant"):
        calibrate_flip_q(eps, floor * 0.99, n, k)


def test_calibrate_reports_bad_fixed_parameters_before_searching():
    with pytest.raises(InvalidParameterError, match=r"domain_size must be an integer >= 2, got 1"):
        calibrate(1.0, 1e-6, n=1000, mechanism="krr", domain_size=1)
    with pytest.raises(InvalidParameterError, match="needs domain_size"):
        calibrate(1.0, 1e-6, n=1000, mechanism="krr")
    with pytest.raises(InvalidParameterError, match="do not pass it"):
        calibrate(1.0, 1e-6, n=1000, mechanism="generic", epsilon0=2.0)
    with pytest.raises(InvalidParameterError, match="domain_size"):
        calibrate(1.0, 1e-6, n=1000, mechanism="poisson", blanket_messages=10)


def test_n_equal_one_everywhere():
    for kind, params in MECHANISMS:
        for row in compare(epsilon=0.5, n=1, mechanism=kind, **params):
            assert row.delta is None or 0.0 <= row.delta <= 1.0
        compare(delta=1e-6, n=1, mechanism=kind, **params)
    # n = 1: the shuffled output is the local report, δ = a − e^ε b for k-RR.
    a, b = krr_probabilities(2.0, 5)
    row = delta(0.5, n=1, mechanism="krr", epsilon0=2.0, domain_size=5)
    assert row.delta >= a - math.exp(0.5) * b
    assert row.delta == pytest.approx(a - math.exp(0.5) * b, abs=1e-8)
