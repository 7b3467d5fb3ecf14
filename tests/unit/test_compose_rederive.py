"""Composition re-derives every input's guarantee from its parameters (issue 24 §1).

A stated (ε, δ) below what its parameters certify is refused; one within
floating-point noise of it enters at the certificate's value; a weaker one
enters as stated. The certified figures the errors show are checked against
the certificates at nearby points, and a service release's message-bound cost
against the analyzer's own formula in exact arithmetic.
"""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction

import pytest

import shuffledp
from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.correlated import CorrelatedNoise, correlated_delta
from shuffledp.accounting.certificates.flip import calibrate_flip_q, flip_delta
from shuffledp.accounting.certificates.krr import krr_delta
from shuffledp.accounting.certificates.segmented import level_delta
from shuffledp.accounting.composition import rederive as rd
from shuffledp.accounting.composition.compose import (
    compose,
    populations_from_json,
    reports_from_json,
)
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport

N = 2000
K = 100
Q = calibrate_flip_q(1.0, 1e-6, N, K)


def flip(epsilon: float = 1.0, delta: float | None = None, **changes: object) -> PrivacyReport:
    """A FLIP report at ε whose δ is its certificate's (or ``delta``)."""
    stated = flip_delta(epsilon, Q, K, N) if delta is None else delta
    report = PrivacyReport(
        ApproxDP(epsilon, stated),
        rd.FLIP_METHOD,
        BoundKind.UPPER,
        N,
        parameters={"q": Q, "k": K, "calibration": "exact"},
    )
    return dataclasses.replace(report, **changes)  # type: ignore[arg-type]


def _number_after(text: str, prefix: str) -> float:
    return float(text.split(prefix, 1)[1].split(" ", 1)[0].rstrip(",;"))


def test_method_names_and_relations_match_the_protocols() -> None:
    from shuffledp.protocols.augmented import AUGMENTED_PRIVACY_METHOD
    from shuffledp.protocols.correlated import CORRELATED_PRIVACY_METHOD
    from shuffledp.protocols.flip import FLIP_PRIVACY_METHOD
    from shuffledp.protocols.krr import KRR_PRIVACY_METHOD
    from shuffledp.protocols.per_user import PER_USER_METHOD, PerUserHistograms
    from shuffledp.protocols.segmented import NEIGHBOURING, SEGMENTED_PRIVACY_METHODS

    assert rd.FLIP_METHOD == FLIP_PRIVACY_METHOD
    assert rd.KRR_METHOD == KRR_PRIVACY_METHOD
    assert rd.CORRELATED_METHOD == CORRELATED_PRIVACY_METHOD
    assert rd.AUGMENTED_METHOD == AUGMENTED_PRIVACY_METHOD
    assert rd.SEGMENTED_METHODS == SEGMENTED_PRIVACY_METHODS
    assert rd.SEGMENTED_RELATION == NEIGHBOURING
    assert rd.PER_USER_METHOD == PER_USER_METHOD
    for reading in ("moved-items", "l1-distance"):
        report = PerUserHistograms(1.0, 0.4, 0.5, neighbouring=reading, clusters=2).privacy_report(
            50
        )
        (entered, basis) = rd.rederive(report, where="r") or (None, "")
        assert entered == report and basis.startswith("re-derived: the Laplace copies' scales")


def test_flip_and_krr_reports_name_their_certificate_as_the_accounting_registry() -> None:
    """One name per certificate: a report's method is a registry method (`account delta
    --method`), and FLIP's 0.2 name is read as the same certificate."""
    from shuffledp.accounting.methods import METHODS

    assert {rd.FLIP_METHOD, rd.KRR_METHOD} <= set(METHODS)
    assert rd.FLIP_METHOD_0_2 not in METHODS
    parameters = {"q": Q, "fake_users": K}
    new = rd.certificate_for(rd.FLIP_METHOD, N, parameters)
    old = rd.certificate_for(rd.FLIP_METHOD_0_2, N, {"q": Q, "k": K})
    assert new is not None and old is not None and new.key == old.key
    assert new.delta_at(1.0) == old.delta_at(1.0) == flip_delta(1.0, Q, K, N)
    # a 0.2 FLIP report is re-derived from its parameters (not taken as stated) and composes
    # with a new one through the same dominating pair (two groups instead of one: the
    # PLD's discretization differs in the 10th digit)
    mixed = compose(flip(), dataclasses.replace(flip(), method=rd.FLIP_METHOD_0_2))
    same = compose(flip(), flip())
    bases = [c["basis"] for c in mixed.parameters["components"]]
    assert len(bases) == 2 and all(b.startswith("re-derived") for b in bases), bases
    assert mixed.delta == same.delta and math.isclose(mixed.epsilon, same.epsilon, rel_tol=1e-9)


def test_message_bound_parties_match_the_analyzer() -> None:
    from shuffledp.specs import spec_class

    for protocol in ("flip", "krr", "correlated", "augmented"):
        for variant in ("sageo", "s1geo", "sbin"):
            for users in (1, 2, 2000):
                spec = spec_class(protocol)
                expected = spec.capped_parties_when_calibrated(users, {"variant": variant})
                assert rd.message_bound_parties(protocol, users, variant) == expected
    with pytest.raises(InvalidParameterError, match="segmented"):
        rd.message_bound_parties("segmented", 10, None)


def test_the_issue_example_in_python_is_refused_naming_the_report() -> None:
    edited = flip(epsilon=0.01, delta=flip_delta(1.0, Q, K, N))
    with pytest.raises(InvalidParameterError) as info:
        compose(flip(), edited)
    message = str(info.value)
    assert message.startswith("reports[1] (flip-exact) states (0.01, ")
    assert f"gives delta = {flip_delta(0.01, Q, K, N):.3g} at epsilon = 0.01" in message
    certified = _number_after(message, ", and epsilon = ")
    # the certified ε at the stated δ: certified there, and (within the search's 1e-4) no less
    assert flip_delta(certified, Q, K, N) <= edited.delta
    assert flip_delta(certified / (1 + 2e-4), Q, K, N) > edited.delta


def test_stated_below_the_certificate_by_float_noise_enters_at_the_certificate() -> None:
    certified = flip_delta(1.0, Q, K, N)
    noisy = flip(delta=certified * (1 - 1e-12))
    entered, basis = rd.rederive(noisy, where="r") or (noisy, "")
    assert entered.guarantee == ApproxDP(1.0, certified) and basis.startswith("re-derived")
    assert "below what its parameters certify by floating-point noise" in entered.notes
    total = compose(noisy)
    assert total.delta == certified  # the larger, never the stated one
    # beyond the tolerance: refused
    refused = flip(delta=certified * (1 - 10 * rd.RELATIVE_TOLERANCE))
    with pytest.raises(InvalidParameterError, match="below what its parameters certify"):
        compose(refused)


def test_a_weaker_claim_enters_as_stated_and_the_stated_pair_is_what_composes() -> None:
    weaker = flip(epsilon=1.5, delta=1e-5)  # implied by the certificate at (1, ~1e-6)
    (entered, _) = rd.rederive(weaker, where="r") or (None, "")
    assert entered == weaker
    total = compose(weaker, weaker)
    assert total.parameters["basic"] == {"epsilon": 3.0, "delta": 2e-5}


def test_the_neighbouring_relation_is_part_of_the_certificate() -> None:
    other = flip(neighbouring="add-remove")
    with pytest.raises(InvalidParameterError, match="certificate is for 'replace-one'"):
        compose(other)
    assert compose(flip(neighbouring="replace-one: one user's value changes")).delta > 0


def test_a_composed_report_is_recomposed_from_its_components() -> None:
    total = compose(flip(), flip())
    again = compose(total, flip(), same_users=True)
    bases = [c["basis"] for c in again.parameters["components"]]
    assert bases[0] == (
        f"recomposed from its 1 component ({total.method}), each re-derived"
    ) and bases[1].startswith("re-derived: flip_delta with q=")
    lowered = dataclasses.replace(total, guarantee=ApproxDP(total.epsilon * 0.9, total.delta))
    with pytest.raises(InvalidParameterError, match=r"reports\[0\] .*below what its 1 component"):
        compose(lowered)
    edited = json.loads(json.dumps(total.to_dict()))
    edited["parameters"]["components"][0]["delta"] = 1e-9
    with pytest.raises(InvalidParameterError, match=r"#1 component 1 .*states \(1, 1e-09\)"):
        reports_from_json([edited])
    # a component no certificate re-derives: refused, unless taken as stated; and then
    # its (epsilon, delta) alone do not support the total its FLIP pair gave: refused too
    edited["parameters"]["components"][0].update(method="gaussian", delta=total.delta / 2)
    with pytest.raises(InvalidParameterError, match="accept_stated=True"):
        reports_from_json([edited])
    with pytest.raises(InvalidParameterError, match="below what its 1 component certify"):
        reports_from_json([edited], accept_stated=True)
    claims = compose(*[PrivacyReport(ApproxDP(0.5, 1e-7), "gaussian", BoundKind.UPPER, N)] * 2)
    with pytest.raises(InvalidParameterError, match="accept_stated=True"):
        reports_from_json([claims.to_dict()])
    (read,) = reports_from_json([claims.to_dict()], accept_stated=True)
    assert read.guarantee == claims.guarantee
    assert read.parameters["components"][0]["basis"] == "stated"


def _level(epsilon: float, lam: float, delta: float | None = None) -> PrivacyReport:
    shared = {"blanket_rate": 0.5, "items_per_user": 2, "variant": "paper", "message_domain": 5}
    certified = level_delta(
        epsilon, lam, message_domain=5, items=2, n=N, blanket_rate=0.5, variant="paper"
    )
    return PrivacyReport(
        ApproxDP(epsilon, certified if delta is None else delta),
        rd.SEGMENTED_METHODS["paper"],
        BoundKind.UPPER,
        N,
        neighbouring=rd.SEGMENTED_RELATION,
        parameters={"level": 0, "lambda": lam, **shared},
    )


def test_a_personalized_release_is_re_derived_level_by_level() -> None:
    levels = (_level(0.5, 0.3), _level(1.0, 0.6))
    total = compose(levels)
    assert total.epsilon <= 1.0 and total.delta == max(r.delta for r in levels)
    component = total.parameters["components"][0]
    assert component["parameters"]["level_lambdas"] == [0.3, 0.6]
    assert component["basis"].startswith("re-derived level by level (2 levels")
    edited = (levels[0], dataclasses.replace(levels[1], guarantee=ApproxDP(0.2, levels[1].delta)))
    with pytest.raises(InvalidParameterError, match=r"reports\[0\] level 1 .*states \(0\.2, "):
        compose(edited)
    # the weakest level's stated pair itself must cover its levels
    weakest = compose(levels).parameters["components"][0]
    lowered = PrivacyReport(
        ApproxDP(0.5, weakest["delta"]),
        weakest["method"],
        BoundKind.UPPER,
        N,
        neighbouring=rd.SEGMENTED_RELATION,
        parameters=weakest["parameters"],
    )
    with pytest.raises(InvalidParameterError, match="whose weakest level is \\(1, "):
        compose(lowered)


def test_per_user_epsilon_comes_from_the_laplace_scales() -> None:
    from shuffledp.protocols.per_user import PerUserHistograms

    report = PerUserHistograms(1.0, 0.3, 0.25, clusters=2).privacy_report(40)
    params = dict(report.parameters)
    # recomputed here in exact arithmetic: Δ = 2c (moved items), ε = Δ/b_w + Δ/b_t
    exact = (
        Fraction(2)
        * Fraction(0.25)
        * (1 / Fraction(params["laplace_scale_w"]) + 1 / Fraction(params["laplace_scale_t"]))
    )
    assert abs(exact - Fraction(report.epsilon)) <= Fraction(1, 10**12)
    halved = dict(params, laplace_scale_t=params["laplace_scale_t"] / 2)
    edited = dataclasses.replace(report, parameters=halved)
    with pytest.raises(InvalidParameterError) as info:
        compose(edited)
    shown = _number_after(str(info.value), "give epsilon = ")
    sensitivity = Fraction(2) * Fraction(0.25)
    expected = sensitivity / Fraction(halved["laplace_scale_w"]) + sensitivity / Fraction(
        halved["laplace_scale_t"]
    )
    assert shown == pytest.approx(float(expected), rel=1e-5)  # printed to 6 digits


def test_correlated_parameters_that_disagree_are_refused() -> None:
    noise = CorrelatedNoise.from_a(0.5, 10.0, 0.9)
    report = PrivacyReport(
        ApproxDP(1.0, correlated_delta(1.0, noise)),
        rd.CORRELATED_METHOD,
        BoundKind.UPPER,
        N,
        neighbouring="replace-one: two datasets of the same size that differ in one user's value",
        parameters={
            "a": noise.a,
            "alpha": noise.alpha,
            "flood_r": 10.0,
            "flood_q": 0.9,
            "min_honest": N,
            "neighbours": "replacement",
        },
    )
    assert compose(report).delta == report.delta
    bad = dataclasses.replace(report, parameters={**report.parameters, "a": 0.4})
    with pytest.raises(InvalidParameterError, match=r"a=0\.4 and alpha=.*disagree"):
        compose(bad)


def test_a_service_release_charges_its_message_bounds() -> None:
    try:
        import numpy as np

        from shuffledp.service.release import build_release
        from shuffledp.service.store import AggregateTotals
        from shuffledp.service.task import create_task
    except ImportError:  # pragma: no cover - the service extra
        pytest.skip("the service extra is not installed")
    task, _ = create_task("flip", ["A", "B", "C"], 1.0, 1e-6, N)
    totals = AggregateTotals(
        counts=np.full(3, 700, dtype=np.int64),
        n_users=N,
        n_messages=2100,
        n_batches=1,
        smallest_batch_users=N,
        pending_batches=0,
    )
    document = build_release(task, totals)
    (report,) = reports_from_json([document])
    assert report.guarantee == ApproxDP(
        document["privacy"]["epsilon"], document["privacy"]["delta"]
    )
    params = document["privacy"]["parameters"]
    bare = flip_delta(1.0, params["q"], params["fake_users"], N)
    # stated without the message bounds' cost: below the re-derived delta by less than the
    # tolerance, so it enters at the re-derived one, which holds the cost: (1 + e)·N·2·1e-30
    # rounded up, recomputed here in exact arithmetic with e > 2.718
    document["privacy"]["delta"] = bare
    (entered,) = reports_from_json([document])
    cost = (1 + Fraction(2718, 1000)) * N * 2 * Fraction(1, 10**30)
    assert Fraction(entered.delta) >= Fraction(bare) + cost
    assert "message bounds of 2,000 parties" in entered.notes
    # its privacy object alone does not say it was a service release: the stated delta
    # (which holds the cost) is what enters
    privacy = build_release(task, totals)["privacy"]
    (alone,) = reports_from_json([privacy])
    assert alone.delta == privacy["delta"] > bare


def test_populations_are_read_without_re_deriving() -> None:
    edited = flip(epsilon=0.01, delta=1e-6).to_dict()
    (population,) = populations_from_json([edited])
    assert population.n == N
    with pytest.raises(InvalidParameterError, match="below what its parameters certify"):
        reports_from_json([edited])


def test_a_release_composed_with_itself_evaluates_its_certificate_once() -> None:
    report = flip(epsilon=1.25)
    before = rd._cached_delta.cache_info()
    shuffledp.compose(report, report, report)
    after = rd._cached_delta.cache_info()
    assert after.misses - before.misses <= 1  # one evaluation, or none if cached already
    assert math.isfinite(report.delta)


def test_a_correlated_add_remove_report_needs_its_domain_size() -> None:
    """The add/remove certificate composes all d bins: only the whole release records d."""
    noise = CorrelatedNoise.from_a(0.9, 16.0, 0.98)
    size = {"domain_size": 3, "min_honest": 1000}
    report = PrivacyReport(
        ApproxDP(1.0, correlated_delta(1.0, noise, neighbours="add-remove", **size)),
        rd.CORRELATED_METHOD,
        BoundKind.UPPER,
        N,
        neighbouring="add-remove: one user present or absent",
        parameters={
            "a": noise.a,
            "alpha": noise.alpha,
            "flood_r": 16.0,
            "flood_q": 0.98,
            "min_honest": 1000,
            "neighbours": "add-remove",
        },
    )
    # in Python, without it: the caller's own claim, which the total says
    total = compose(report)
    assert total.parameters["components"][0]["basis"] == "stated"
    assert "enters at the (epsilon, delta) it states" in total.assumptions[0]
    # from a file: refused (give the whole release), unless taken as stated
    with pytest.raises(rd.MissingContextError, match="give the whole release"):
        reports_from_json([report.to_dict()])
    # the whole release records its domain: re-derived, and an edit is caught
    release = {"privacy": report.to_dict(), "n": N, "domain": ["A", "B", "C"], "parameters": {}}
    (read,) = reports_from_json([release])
    assert read == report
    # with the size in its parameters it needs no document
    recorded = dataclasses.replace(report, parameters={**report.parameters, "domain_size": 3})
    assert compose(recorded).parameters["components"][0]["basis"].startswith("re-derived")
    release["privacy"]["delta"] = report.delta / 10
    with pytest.raises(InvalidParameterError, match="d=3, min_honest=1000 gives delta"):
        reports_from_json([release])


def test_flip_fake_users_are_read_under_both_names_and_must_agree() -> None:
    """0.2's releases call FLIP's fake users ``k``; this version writes ``fake_users``."""
    old = flip()  # parameters {"q", "k"} as 0.2 wrote them
    new = flip(parameters={"q": Q, "fake_users": K, "calibration": "exact"})
    assert rd.flip_fake_users(rd.FLIP_METHOD, old.parameters) == K
    assert rd.flip_fake_users(rd.FLIP_METHOD, new.parameters) == K
    (old_report, old_basis) = rd.rederive(old, where="old") or (None, "")
    (new_report, new_basis) = rd.rederive(new, where="new") or (None, "")
    assert old_report is not None and new_report is not None
    assert old_report.guarantee == new_report.guarantee and old_basis == new_basis
    both = {"q": Q, "fake_users": K, "k": K + 1}
    with pytest.raises(InvalidParameterError, match=f"fake_users {K} and k {K + 1}: they name"):
        rd.flip_fake_users(rd.FLIP_METHOD, both)


def test_krr_domain_size_is_read_under_both_names_and_must_agree() -> None:
    """0.2's releases call k-RR's domain size ``k``; this version writes ``domain_size``."""
    assert rd.krr_domain_size(rd.KRR_METHOD, {"epsilon0": 2.0, "k": 4}) == 4
    assert rd.krr_domain_size(rd.KRR_METHOD, {"epsilon0": 2.0, "domain_size": 4}) == 4
    old = rd.certificate_for(rd.KRR_METHOD, 3000, {"epsilon0": 2.0, "k": 4})
    new = rd.certificate_for(rd.KRR_METHOD, 3000, {"epsilon0": 2.0, "domain_size": 4})
    assert old is not None and new is not None and old.key == new.key
    assert old.delta_at(0.5) == new.delta_at(0.5) == krr_delta(0.5, 2.0, 4, 3000)
    with pytest.raises(InvalidParameterError, match="domain_size 4 and k 5: they name"):
        rd.krr_domain_size(rd.KRR_METHOD, {"epsilon0": 2.0, "domain_size": 4, "k": 5})
    with pytest.raises(InvalidParameterError, match="domain_size must be an integer >= 2"):
        rd.krr_domain_size(rd.KRR_METHOD, {"epsilon0": 2.0, "domain_size": 1})
