"""Composition of several releases on the same users: the total (ε, δ).

A user who takes part in several releases (two histograms of the same people,
a daily release, …) loses privacy in each. :func:`compose` states one
guarantee for all of them:

* **PLD composition** (tight). Each report's certificate comes from a pair of
  output laws that *dominates* the mechanism for every dataset
  (:func:`dominating_pair`; see :mod:`shuffledp.accounting.pld`). The product
  of dominating pairs dominates the composition (Zhu, Dong & Wang,
  AISTATS 2022, Thm 10), and its privacy loss distribution is the convolution
  of the releases' PLDs (Meiser & Mohammadi, CCS 2018; Koskela, Jälkö &
  Honkela, AISTATS 2020), computed with Google's ``dp-accounting`` (extra
  ``pld``), rounded pessimistically. A report from another method enters
  through the pair that dominates every (ε, δ)-DP mechanism (Kairouz, Oh &
  Viswanath, ICML 2015), which still beats basic composition.
* **Basic composition** (Σεᵢ, Σδᵢ): valid for any mix of guarantees
  (Dwork & Roth 2014, Thm 3.16).

Both are computed; the tighter one at the target is reported, and ``method``
says which (``"pld-composition"`` or ``"basic-composition"``).

:func:`reports_from_json` rebuilds reports from the ``privacy`` objects that
``shuffledp run flip|krr`` writes, so that saved runs can be composed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from numbers import Integral, Real
from typing import Any

from shuffledp._optional import MissingExtraError
from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_flip_probability,
    check_int,
)
from shuffledp.accounting.pld import (
    ApproxDPPair,
    DominatingPair,
    PairAccountant,
    flip_dominating_pair,
    krr_dominating_pair,
)
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport

__all__ = [
    "BASIC_COMPOSITION_METHOD",
    "FLIP_CERTIFICATE_METHOD",
    "KRR_CERTIFICATE_METHOD",
    "PLD_COMPOSITION_METHOD",
    "basic_composition",
    "compose",
    "dominating_pair",
    "reports_from_json",
]

#: ``method`` of FLIP's privacy reports (:data:`shuffledp.protocols.flip.FLIP_PRIVACY_METHOD`).
FLIP_CERTIFICATE_METHOD = "flip-exact-fake-blanket"
#: ``method`` of k-RR's privacy reports (:data:`shuffledp.protocols.krr.KRR_PRIVACY_METHOD`).
KRR_CERTIFICATE_METHOD = "krr-blanket"
#: ``method`` of a composed report when the PLD bound is the tighter one.
PLD_COMPOSITION_METHOD = "pld-composition"
#: ``method`` of a composed report when basic composition is the tighter one.
BASIC_COMPOSITION_METHOD = "basic-composition"

_COMPOSABLE_BOUNDS = (BoundKind.UPPER, BoundKind.EXACT)
#: Smallest ε stated: an (ε, δ) guarantee holds at every larger ε, and ApproxDP needs ε > 0.
_EPSILON_FLOOR = 1e-9


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _parameter(report: PrivacyReport, name: str, *, integer: bool) -> Any:
    value = report.parameters.get(name)
    number = _number(value)
    if number is None or (integer and not number.is_integer()):
        raise InvalidParameterError(
            f"a {report.method!r} report needs parameters[{name!r}] "
            f"({'an integer' if integer else 'a number'}), got {value!r}"
        )
    return int(number) if integer else number


def _certificate_parameters(report: PrivacyReport) -> dict[str, Any] | None:
    """Validated parameters of a known certificate, or ``None`` for another method."""
    if report.method == FLIP_CERTIFICATE_METHOD:
        q = check_flip_probability(_parameter(report, "q", integer=False))
        k = check_int(_parameter(report, "k", integer=True), "k", minimum=0)
        return {"q": q, "fake_users": k, "n": report.n}
    if report.method == KRR_CERTIFICATE_METHOD:
        epsilon0 = check_epsilon(_parameter(report, "epsilon0", integer=False), "epsilon0")
        k = check_int(_parameter(report, "k", integer=True), "k", minimum=2)
        return {"epsilon0": epsilon0, "k": k, "n": report.n}
    return None


def dominating_pair(
    report: PrivacyReport, *, reference_epsilons: tuple[float, ...] | None = None
) -> DominatingPair | None:
    """Return a pair dominating the mechanism behind ``report``, or ``None`` if unknown.

    * ``flip-exact-fake-blanket``: :func:`shuffledp.accounting.pld.flip_dominating_pair`
      with parameters ``q`` and ``k`` (fake users per user) and ``report.n``.
    * ``krr-blanket``: :func:`shuffledp.accounting.pld.krr_dominating_pair` with
      parameters ``epsilon0`` and ``k`` (domain size) and ``report.n``; its blocks
      are refined at ε = 0, ε/4, ε/2 and ε (ε = ``report.epsilon``) unless
      ``reference_epsilons`` says otherwise.

    The pair depends only on the mechanism's parameters, not on the report's
    (ε, δ), which are one point of its privacy curve.

    Raises:
        InvalidParameterError: If the report is of a known method but its
            parameters are missing or out of range.
    """
    if not isinstance(report, PrivacyReport):
        raise InvalidParameterError(f"report must be a PrivacyReport, got {type(report).__name__}")
    params = _certificate_parameters(report)
    if params is None:
        return None
    if report.method == FLIP_CERTIFICATE_METHOD:
        return flip_dominating_pair(**params)
    eps = report.epsilon
    refs = reference_epsilons or (0.0, eps / 4, eps / 2, eps)
    return krr_dominating_pair(**params, reference_epsilons=refs)
    return None


def basic_composition(reports: Iterable[PrivacyReport]) -> tuple[float, float]:
    """Return (Σεᵢ, Σδᵢ): basic composition (Dwork & Roth 2014, Thm 3.16), any mechanisms."""
    items = list(reports)
    return math.fsum(r.epsilon for r in items), math.fsum(r.delta for r in items)


def _check_reports(reports: tuple[Any, ...]) -> list[PrivacyReport]:
    if not reports:
        raise InvalidParameterError("compose needs at least one PrivacyReport, got none")
    for i, report in enumerate(reports):
        if not isinstance(report, PrivacyReport):
            raise InvalidParameterError(
                f"reports[{i}] must be a PrivacyReport, got {type(report).__name__}"
            )
        if report.bound not in _COMPOSABLE_BOUNDS:
            raise InvalidParameterError(
                f"reports[{i}] has bound={report.bound.value!r} (method {report.method!r}); "
                "only upper (or exact) guarantees compose into a guarantee"
            )
    relations = {r.neighbouring for r in reports}
    if len(relations) > 1:
        raise InvalidParameterError(
            f"reports use different neighbouring relations {sorted(relations)}; "
            "composition needs one relation"
        )
    return list(reports)


#: Context fields of PrivacyReport (what a guarantee assumes and does not cover),
#: carried through when this version of PrivacyReport has them.
_CONTEXT_FIELDS = tuple(
    f.name for f in dataclasses.fields(PrivacyReport) if f.name in ("assumptions", "not_covered")
)


def _context(reports: Iterable[PrivacyReport]) -> dict[str, tuple[str, ...]]:
    """Union (in order, without repeats) of the reports' context fields."""
    out: dict[str, tuple[str, ...]] = {}
    for name in _CONTEXT_FIELDS:
        items: list[str] = []
        for report in reports:
            items.extend(x for x in getattr(report, name) if x not in items)
        out[name] = tuple(items)
    return out


def _key(report: PrivacyReport) -> tuple[Any, ...]:
    return (
        report.method,
        report.n,
        report.epsilon,
        report.delta,
        tuple(sorted((str(k), repr(v)) for k, v in report.parameters.items())),
    )


def _pld_accountant(
    reports: list[PrivacyReport], discretization: float
) -> tuple[PairAccountant, list[str]]:
    """Compose the reports' dominating pairs; identical reports are self-composed."""
    groups: dict[tuple[Any, ...], list[PrivacyReport]] = {}
    for report in reports:
        groups.setdefault(_key(report), []).append(report)
    total: PairAccountant | None = None
    kinds: list[str] = []
    for members in groups.values():
        report = members[0]
        pair = dominating_pair(report)
        if pair is None:
            pair = ApproxDPPair(report.epsilon, report.delta)
            kinds.append(f"{len(members)} x {report.method} via its (epsilon, delta) only")
        else:
            kinds.append(f"{len(members)} x {report.method} via its dominating pair")
        acc = pair.accountant(discretization).compose(len(members))
        total = acc if total is None else total.compose_with(acc)
    assert total is not None
    return total, kinds


def compose(
    *reports: PrivacyReport,
    delta: float | None = None,
    epsilon: float | None = None,
    discretization: float = 1e-4,
) -> PrivacyReport:
    """Return one guarantee for several releases on the same users.

    By default the target is δ = Σδᵢ, so the composed guarantee compares like
    with like against basic composition (Σεᵢ, Σδᵢ), and the answer is the
    smallest ε either method certifies there. With ``delta`` the target δ is
    that; with ``epsilon`` the answer is the smallest δ at that ε. Both the PLD
    and the basic bound are computed; the tighter one is returned, with
    ``method`` ``"pld-composition"`` or ``"basic-composition"`` and the other
    recorded in ``parameters``.

    The releases may have different numbers of users: each dominating pair uses
    its own report's n, and a user absent from a release loses nothing in it.
    The composed report's ``n`` is the largest of them; ``parameters["components"]``
    lists each distinct release (method, ε, δ, n, parameters) with its
    ``count``. What the releases assume and do not cover (``assumptions``,
    ``not_covered``) is carried over, all of it. Releases must be chosen in
    advance (their parameters not picked from earlier outputs).

    Args:
        *reports: The releases' reports (``upper`` or ``exact`` bounds); pass a
            report several times for repeated releases.
        delta: Target δ in (0, 1) (default Σδᵢ).
        epsilon: Target ε > 0 instead of a target δ.
        discretization: Width of the privacy-loss grid (smaller: tighter, slower).

    Returns:
        A :class:`PrivacyReport` with ``bound`` ``upper``.

    Raises:
        InvalidParameterError: No report, a non-report, a lower or reproduction
            bound, mixed neighbouring relations, both targets given, a target
            out of range, or no finite guarantee at the target.
    """
    items = _check_reports(reports)
    if delta is not None and epsilon is not None:
        raise InvalidParameterError(
            f"give at most one of delta and epsilon, got delta={delta!r}, epsilon={epsilon!r}"
        )
    if not (_number(discretization) is not None and 0.0 < float(discretization) <= 0.1):
        raise InvalidParameterError(f"discretization must be in (0, 0.1], got {discretization!r}")
    basic_eps, basic_delta = basic_composition(items)
    if epsilon is not None:
        target_eps = check_epsilon(epsilon)
        target_delta = None
    else:
        target_eps = None
        if delta is None:
            if not basic_delta < 1.0:
                raise InvalidParameterError(
                    f"the default target delta (the sum of the reports' deltas, {basic_delta:g}) "
                    "is not below 1; give delta"
                )
            if basic_delta == 0.0:
                raise InvalidParameterError(
                    "every report has delta = 0, so the default target delta is 0; give delta"
                )
            target_delta = basic_delta
        else:
            target_delta = check_delta(delta)

    pld_value: float | None = None
    kinds: list[str] = []
    pld_note = ""
    try:
        acc, kinds = _pld_accountant(items, float(discretization))
    except MissingExtraError as exc:
        pld_note = f"PLD composition not computed: {exc}"
    else:
        if target_delta is not None:
            pld_value = acc.epsilon(target_delta)
        else:
            assert target_eps is not None
            pld_value = acc.delta(target_eps)

    if target_delta is not None:
        basic_value = basic_eps if target_delta >= basic_delta else math.inf
        use_pld = pld_value is not None and pld_value < basic_value
        final_eps = pld_value if use_pld else basic_value
        assert final_eps is not None
        if not math.isfinite(final_eps):
            raise InvalidParameterError(
                f"no finite epsilon at delta={target_delta:g}: the PLD's infinite-loss mass "
                f"exceeds it and basic composition needs delta >= {basic_delta:g}"
            )
        guarantee = ApproxDP(max(final_eps, _EPSILON_FLOOR), target_delta)
    else:
        assert target_eps is not None
        basic_value = basic_delta if target_eps >= basic_eps else 1.0
        use_pld = pld_value is not None and pld_value < basic_value
        final_delta = pld_value if use_pld else basic_value
        assert final_delta is not None
        if not final_delta < 1.0:
            raise InvalidParameterError(
                f"no guarantee with delta < 1 at epsilon={target_eps:g} (basic composition "
                f"needs epsilon >= {basic_eps:g})"
            )
        guarantee = ApproxDP(target_eps, final_delta)

    method = PLD_COMPOSITION_METHOD if use_pld else BASIC_COMPOSITION_METHOD
    components: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in items:
        key = _key(r)
        if key in seen:
            seen[key]["count"] += 1
            continue
        seen[key] = {
            "count": 1,
            "method": r.method,
            "epsilon": r.epsilon,
            "delta": r.delta,
            "n": r.n,
            "parameters": dict(r.parameters),
        }
        components.append(seen[key])
    parameters: dict[str, Any] = {
        "releases": len(items),
        "target": "delta" if target_delta is not None else "epsilon",
        "discretization": float(discretization),
        "basic": {"epsilon": basic_eps, "delta": basic_delta},
        "pld": (
            None
            if pld_value is None
            else (
                {"epsilon": pld_value, "delta": target_delta}
                if target_delta is not None
                else {"epsilon": target_eps, "delta": pld_value}
            )
        ),
        "components": components,
    }
    notes = [
        f"composition of {len(items)} releases; "
        + (
            "PLD of the product of dominating pairs (dp-accounting, pessimistic rounding) "
            "is tighter than basic composition"
            if use_pld
            else "basic composition (sum of epsilons and deltas) is the tighter bound"
        ),
    ]
    if kinds:
        notes.append("PLD components: " + "; ".join(kinds))
    if pld_note:
        notes.append(pld_note)
    if len({r.n for r in items}) > 1:
        notes.append(f"releases have different n {sorted({r.n for r in items})}; n is the largest")
    return PrivacyReport(
        guarantee=guarantee,
        method=method,
        bound=BoundKind.UPPER,
        n=max(r.n for r in items),
        neighbouring=items[0].neighbouring,
        lower_bound_delta=None,
        parameters=parameters,
        notes=". ".join(notes),
        **_context(items),
    )


_KNOWN_METHODS = (FLIP_CERTIFICATE_METHOD, KRR_CERTIFICATE_METHOD)


def reports_from_json(objs: Iterable[Mapping[str, Any]]) -> list[PrivacyReport]:
    """Rebuild :class:`PrivacyReport` objects from their JSON form.

    Each object is a report's :meth:`PrivacyReport.to_dict` (the ``privacy``
    object of ``shuffledp run flip|krr --output``), or a whole run output, whose
    ``privacy`` member is then used. Extra keys (``target_delta``,
    ``calibration``, …) are ignored.

    Raises:
        InvalidParameterError: Naming the object's position, if it is not a
            mapping; its ``bound`` is not ``"upper"`` or ``"exact"`` (a lower bound
            or a reproduced formula is not a guarantee); it has no valid
            (``epsilon``, ``delta``) — for an unknown method these are all there
            is to compose; ``n`` is not a positive integer; or a known method
            lacks the parameters its dominating pair needs.
    """
    items: list[Any] = [objs] if isinstance(objs, Mapping) else list(objs)
    out: list[PrivacyReport] = []
    for i, raw in enumerate(items):
        where = f"privacy object #{i + 1}"
        if not isinstance(raw, Mapping):
            raise InvalidParameterError(f"{where} must be a JSON object, got {type(raw).__name__}")
        obj: Mapping[str, Any] = raw
        inner = obj.get("privacy")
        if isinstance(inner, Mapping):
            obj = inner
        method = obj.get("method")
        if not isinstance(method, str) or not method:
            raise InvalidParameterError(f"{where} needs a 'method' string, got {method!r}")
        bound = obj.get("bound")
        if bound not in [b.value for b in _COMPOSABLE_BOUNDS]:
            raise InvalidParameterError(
                f"{where} ({method}) has bound={bound!r}; only 'upper' (or 'exact') "
                "guarantees compose: a lower bound or a reproduced formula is not a guarantee"
            )
        eps, dlt = _number(obj.get("epsilon")), _number(obj.get("delta"))
        if eps is None or dlt is None or eps <= 0 or not (0.0 <= dlt < 1.0):
            known = method in _KNOWN_METHODS
            raise InvalidParameterError(
                f"{where} ({method}) has no usable (epsilon, delta): got "
                f"epsilon={obj.get('epsilon')!r}, delta={obj.get('delta')!r} "
                "(need epsilon > 0 and 0 <= delta < 1)"
                + (
                    ""
                    if known
                    else "; its method is unknown, so (epsilon, delta) is all that could compose"
                )
            )
        n = obj.get("n")
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
            raise InvalidParameterError(f"{where} ({method}) needs n >= 1 (an integer), got {n!r}")
        parameters = obj.get("parameters", {})
        if parameters is None:
            parameters = {}
        if not isinstance(parameters, Mapping):
            raise InvalidParameterError(
                f"{where} ({method}) has parameters={parameters!r}; expected an object"
            )
        lower = obj.get("lower_bound_delta")
        neighbouring = obj.get("neighbouring", "replace-one")
        notes = obj.get("notes", "")
        context: dict[str, tuple[str, ...]] = {}
        for name in _CONTEXT_FIELDS:
            value = obj.get(name, [])
            if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
                raise InvalidParameterError(
                    f"{where} ({method}) has {name}={value!r}; expected a list of strings"
                )
            context[name] = tuple(value)
        report = PrivacyReport(
            guarantee=ApproxDP(eps, dlt),
            method=method,
            bound=BoundKind(bound),
            n=int(n),
            neighbouring=str(neighbouring),
            lower_bound_delta=_number(lower),
            parameters=dict(parameters),
            notes=notes if isinstance(notes, str) else str(notes),
            **context,
        )
        try:
            _certificate_parameters(report)
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"{where}: {exc}") from None
        out.append(report)
    if not out:
        raise InvalidParameterError("no privacy objects given")
    return out
