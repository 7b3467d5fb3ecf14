import json
import math

import dp_accounting  # noqa: F401  (the pld extra; a missing install fails here)
import numpy as np
import pytest
from scipy.stats import binom

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.flip import flip_delta
from shuffledp.accounting.certificates.krr import krr_delta, krr_probabilities
from shuffledp.accounting.composition.compose import (
    BASIC_COMPOSITION_METHOD,
    FLIP_CERTIFICATE_METHOD,
    KRR_CERTIFICATE_METHOD,
    PLD_COMPOSITION_METHOD,
    basic_composition,
    compose,
    dominating_pair,
    reports_from_json,
)
from shuffledp.accounting.composition.pld import ProductPair, TwoCountMixture
from shuffledp.accounting.numerics.two_counts import TwoCountPair, two_count_delta
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport

# k-RR at n = 1e5, k = 10 and FLIP at n = 1e5, k = 100: calibrated for (1, 1e-6).
KRR_E0, KRR_K, KRR_N = 7.763431684063553, 10, 100_000
FLIP_Q, FLIP_K, FLIP_N = 4.265400550778376e-06, 100, 100_000


def krr_report(epsilon=1.0, epsilon0=KRR_E0, k=KRR_K, n=KRR_N):
    return PrivacyReport(
        guarantee=ApproxDP(epsilon, krr_delta(epsilon, epsilon0, k, n)),
        method=KRR_CERTIFICATE_METHOD,
        bound=BoundKind.UPPER,
        n=n,
        parameters={"epsilon0": epsilon0, "k": k},
    )


def flip_report(epsilon=1.0, q=FLIP_Q, k=FLIP_K, n=FLIP_N):
    return PrivacyReport(
        guarantee=ApproxDP(epsilon, flip_delta(epsilon, q, k, n)),
        method=FLIP_CERTIFICATE_METHOD,
        bound=BoundKind.UPPER,
        n=n,
        parameters={"q": q, "k": k, "calibration": "exact"},
    )


def other_report(epsilon=1.0, delta=1e-6, n=1000, bound=BoundKind.UPPER):
    return PrivacyReport(ApproxDP(epsilon, delta), "gaussian", bound, n)


def _unblocked_krr_delta(epsilon, epsilon0, k, n):
    """Σ_B P[B]·H_ε(pair_B) over every B, each rounded down: the exact blanket mixture."""
    a, b = krr_probabilities(epsilon0, k)
    mean, sd = (n - 1) * k * b, math.sqrt((n - 1) * k * b)
    blankets = np.arange(max(0, int(mean - 12 * sd)), int(mean + 12 * sd) + 1)
    weights = binom.pmf(blankets, n - 1, k * b)
    return sum(
        w * two_count_delta(TwoCountPair(int(m), 2.0 / k, a, b), epsilon, rounding="down")
        for w, m in zip(weights, blankets, strict=True)
        if w > 1e-18
    )


def test_method_names_match_the_protocols():
    from shuffledp.protocols.flip import FLIP_PRIVACY_METHOD
    from shuffledp.protocols.krr import KRR_PRIVACY_METHOD

    assert FLIP_CERTIFICATE_METHOD == FLIP_PRIVACY_METHOD
    assert KRR_CERTIFICATE_METHOD == KRR_PRIVACY_METHOD


def test_dominating_pairs_of_each_certificate():
    assert isinstance(dominating_pair(krr_report()), TwoCountMixture)
    assert isinstance(dominating_pair(flip_report()), ProductPair)
    assert dominating_pair(other_report()) is None
    bad = PrivacyReport(ApproxDP(1.0, 1e-6), KRR_CERTIFICATE_METHOD, BoundKind.UPPER, 10, {})
    with pytest.raises(InvalidParameterError, match="epsilon0"):
        dominating_pair(bad)


def test_one_release_is_never_tighter_than_the_exact_certificate():
    report = krr_report()
    acc = dominating_pair(report).accountant(1e-4)
    exact = _unblocked_krr_delta(1.0, KRR_E0, KRR_K, KRR_N)
    # the PLD is an upper bound on the exact mixture, and close to it (measured 1.0016)
    assert exact <= acc.delta(1.0) <= 1.05 * exact
    # ... and within 5% of the report's certificate (krr_delta blocks more coarsely: 0.984)
    assert acc.delta(1.0) == pytest.approx(report.delta, rel=0.05)
    once = compose(report)
    assert once.epsilon <= report.epsilon  # never worse than the report itself
    assert once.delta == report.delta
    # at its ε the PLD's δ is not below the exact mixture's
    assert compose(report, epsilon=1.0).delta >= exact

    flip = flip_report()
    acc = dominating_pair(flip).accountant(1e-4)
    assert flip.delta - 1e-11 <= acc.delta(1.0) <= 1.05 * flip.delta  # measured 1.0017
    once = compose(flip)
    assert once.epsilon <= flip.epsilon
    assert once.method == BASIC_COMPOSITION_METHOD  # PLD discretization costs a hair


def test_ten_releases_pld_beats_basic():
    krr = compose(*[krr_report()] * 10)
    assert krr.method == PLD_COMPOSITION_METHOD
    assert krr.bound is BoundKind.UPPER
    assert krr.delta == pytest.approx(10 * krr_report().delta)
    # measured 2.882 against 10 for basic composition
    assert krr.epsilon < 0.3 * 10
    assert krr.parameters["basic"]["epsilon"] == pytest.approx(10.0)
    assert krr.parameters["components"][0]["count"] == 10
    flip = compose(*[flip_report()] * 10)
    assert flip.method == PLD_COMPOSITION_METHOD
    assert flip.epsilon < 0.3 * 10  # measured 2.884
    json.dumps(krr.to_dict())  # serialisable


def test_composition_at_a_given_epsilon_and_delta():
    reports = [krr_report()] * 10
    at_delta = compose(*reports, delta=1e-4)
    assert at_delta.delta == 1e-4
    assert at_delta.epsilon < compose(*reports).epsilon
    at_eps = compose(*reports, epsilon=at_delta.epsilon)
    assert at_eps.delta <= 1e-4
    assert at_eps.method == PLD_COMPOSITION_METHOD
    # basic composition cannot reach δ below Σδ; the PLD can
    assert compose(*reports, delta=1e-7).method == PLD_COMPOSITION_METHOD


def test_never_worse_than_basic():
    # Reports known only by (ε, δ): at δ = Σδ the optimal composition is no better.
    generic = [other_report()] * 3
    out = compose(*generic)
    assert out.method == BASIC_COMPOSITION_METHOD
    assert out.epsilon == pytest.approx(3.0)
    assert out.delta == pytest.approx(3e-6)
    # with room in δ the (ε, δ) pair of Kairouz et al. composes better than basic
    looser = compose(*[other_report(epsilon=0.1)] * 50, delta=1e-3)
    assert looser.method == PLD_COMPOSITION_METHOD
    assert looser.epsilon < 5.0
    # whatever the mix, the answer is at most the basic bound at the default target
    for reports in (
        [krr_report(), flip_report(), other_report()],
        [krr_report(epsilon=2.0, n=1000, epsilon0=3.0)],
        [flip_report(), flip_report(epsilon=0.5)],
    ):
        out = compose(*reports, same_users=True)  # (different n: asserted)
        eps, delta = basic_composition(reports)
        assert out.epsilon <= eps
        assert out.delta == pytest.approx(delta)
        assert out.n == max(r.n for r in reports)


def test_compose_rejects_bad_input():
    report = krr_report()
    with pytest.raises(InvalidParameterError, match="at least one"):
        compose()
    with pytest.raises(InvalidParameterError, match=r"reports\[1\] must be a PrivacyReport"):
        compose(report, {"epsilon": 1.0})
    with pytest.raises(InvalidParameterError, match="bound='lower'"):
        compose(report, other_report(bound=BoundKind.LOWER))
    with pytest.raises(InvalidParameterError, match="at most one of delta and epsilon"):
        compose(report, delta=1e-6, epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="delta must be in the open interval"):
        compose(report, delta=1.5)
    with pytest.raises(InvalidParameterError, match="epsilon must be"):
        compose(report, epsilon=-1.0)
    with pytest.raises(InvalidParameterError, match="discretization"):
        compose(report, discretization=0.0)
    other = PrivacyReport(ApproxDP(1.0, 1e-6), "x", BoundKind.UPPER, 10, neighbouring="add-remove")
    with pytest.raises(InvalidParameterError, match="neighbouring"):
        compose(report, other)
    # pure DP throughout: the default target is δ = 0 and the total is the sum of the ε
    pure = compose(other_report(delta=0.0), other_report(epsilon=0.5, delta=0.0))
    assert (pure.epsilon, pure.delta, pure.method) == (1.5, 0.0, BASIC_COMPOSITION_METHOD)
    with pytest.raises(InvalidParameterError, match="same_users"):
        compose(report, other_report())
    # below a pure guarantee's ε only the (ε, δ) pair answers: δ = (e − e^0.5)/(1 + e)
    below = compose(other_report(epsilon=1.0, delta=0.0), epsilon=0.5)
    assert below.delta == pytest.approx((math.e - math.exp(0.5)) / (1 + math.e), rel=1e-3)


def test_reports_from_json_round_trips():
    reports = [krr_report(), flip_report(), other_report()]
    objs = json.loads(json.dumps([r.to_dict() for r in reports]))
    objs[1]["target_delta"] = 1e-6  # what the CLI adds
    objs[1]["calibration"] = "exact"
    # releases the package's certificates re-derive come back unchanged
    assert reports_from_json(objs[:2]) == reports[:2]
    run_output = {"protocol": "krr", "privacy": objs[0], "estimate": {}}
    assert reports_from_json([run_output]) == reports[:1]
    assert reports_from_json(objs[0]) == reports[:1]
    # a method no certificate here re-derives is refused from a file, unless the caller
    # takes its stated guarantee as their own claim, which its assumptions then say
    with pytest.raises(InvalidParameterError, match=r"#3 states \(1, 1e-06\).*'gaussian'"):
        reports_from_json(objs)
    read = reports_from_json(objs, accept_stated=True)
    assert read[:2] == reports[:2]
    assert read[2].guarantee == reports[2].guarantee
    assert read[2].assumptions == (
        "privacy object #3 (gaussian) is taken at the (epsilon, delta) it states, (1.0, 1e-06), "
        "because the caller said so (accept_stated=True): no certificate here re-derives it "
        "from the parameters it records",
    )
    composed = compose(*read, same_users=True)
    assert composed.epsilon <= 3.0
    assert [c["basis"].split(":")[0] for c in composed.parameters["components"]] == [
        "re-derived",
        "re-derived",
        "stated",
    ]
    stated = "1 release of the 3 ('gaussian') enters at the (epsilon, delta) it states"
    assert stated in composed.assumptions[1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bound": "lower"}, "bound='lower'"),
        ({"bound": "reproduction"}, "not a guarantee"),
        ({"method": "mystery", "epsilon": None}, "all that composes, so give them"),
        ({"epsilon": -1.0}, "no usable"),
        ({"delta": 1.0}, "no usable"),
        ({"n": 0}, "n >= 1"),
        ({"n": 2.5}, "n >= 1"),
        ({"parameters": {"k": 10}}, "epsilon0"),
        ({"parameters": {"epsilon0": 2.0, "k": 1}}, "domain_size must be"),
        ({"parameters": "x"}, "expected an object"),
        ({"method": 3}, "method"),
    ],
)
def test_reports_from_json_rejects_bad_objects(change, message):
    obj = krr_report().to_dict()
    obj.update(change)
    with pytest.raises(InvalidParameterError, match=message):
        reports_from_json([obj])


@pytest.mark.skipif(
    not hasattr(PrivacyReport, "with_context"), reason="PrivacyReport without context fields"
)
def test_context_is_carried_through():
    first = krr_report().with_context(assumptions=["one row per user"])
    second = flip_report().with_context(
        assumptions=["one row per user", "trusted shuffler"], not_covered=["the domain"]
    )
    out = compose(first, second)
    assert out.assumptions[0].startswith("the 2 releases are taken to be on the same users")
    assert out.assumptions[1:] == ("one row per user", "trusted shuffler")
    assert out.not_covered == ("the domain",)
    assert reports_from_json([second.to_dict()]) == [second]
    obj = second.to_dict()
    obj["not_covered"] = "the domain"
    with pytest.raises(InvalidParameterError, match="list of strings"):
        reports_from_json([obj])


def test_reports_from_json_rejects_non_objects_and_nothing():
    with pytest.raises(InvalidParameterError, match="#1 must be a JSON object"):
        reports_from_json([[1, 2]])
    with pytest.raises(InvalidParameterError, match="no privacy objects"):
        reports_from_json([])
    flip = flip_report().to_dict()
    flip["parameters"] = {"q": 0.7, "k": 100}
    with pytest.raises(InvalidParameterError, match="#1: "):
        reports_from_json([flip])
