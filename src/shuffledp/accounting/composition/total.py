"""The total guarantee of several releases: PLD composition or basic, whichever is tighter.

:func:`compose` checks its inputs (bound kinds, one neighbouring relation,
the same users: :mod:`~shuffledp.accounting.composition.inputs`), re-derives
each one from the parameters it records
(:func:`~shuffledp.accounting.composition.rederive.rederive`; a composed
report by composing its components again), and states the tighter of

* the PLD of the product of the inputs' dominating pairs (Zhu, Dong & Wang,
  AISTATS 2022, Thm 10), computed with ``dp-accounting`` and rounded
  pessimistically; an input without a pair enters through the pair that
  dominates every (ε, δ)-DP mechanism (Kairouz, Oh & Viswanath, ICML 2015);
* basic composition (Σεᵢ, Σδᵢ) (Dwork & Roth 2014, Thm 3.16).

:mod:`shuffledp.accounting.composition.compose` is the public entry point and
re-exports what is here.

Group: composition (``shuffledp.accounting.composition``); may import the
numerical core, published bounds, certificates and ``shuffledp.privacy``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral
from typing import Any

from shuffledp._optional import MissingExtraError
from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon
from shuffledp._wording import Parameter, Worded, plural
from shuffledp.accounting.composition.inputs import (
    _COMPOSABLE_BOUNDS,
    Population,
    _context,
    _number,
    _same_users,
    dominating_pair,
    weakest_level,
)
from shuffledp.accounting.composition.pld import ApproxDPPair, PairAccountant
from shuffledp.accounting.composition.rederive import (
    RELATIVE_TOLERANCE,
    MissingContextError,
    rederive,
)
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport

__all__ = [
    "BASIC_COMPOSITION_METHOD",
    "PLD_COMPOSITION_METHOD",
    "basic_composition",
    "compose",
]

#: ``method`` of a composed report when the PLD bound is the tighter one.
PLD_COMPOSITION_METHOD = "pld-composition"
#: ``method`` of a composed report when basic composition is the tighter one.
BASIC_COMPOSITION_METHOD = "basic-composition"

#: Smallest ε stated: an (ε, δ) guarantee holds at every larger ε, and ApproxDP needs ε > 0.
_EPSILON_FLOOR = 1e-9


def basic_composition(reports: Iterable[PrivacyReport]) -> tuple[float, float]:
    """Return (Σεᵢ, Σδᵢ): basic composition (Dwork & Roth 2014, Thm 3.16), any mechanisms."""
    items = list(reports)
    return math.fsum(r.epsilon for r in items), math.fsum(r.delta for r in items)


def _as_report(item: Any, i: int) -> PrivacyReport:
    if isinstance(item, tuple | list) and item and all(isinstance(r, PrivacyReport) for r in item):
        return weakest_level(item)
    if not isinstance(item, PrivacyReport):
        raise InvalidParameterError(
            f"reports[{i}] must be a PrivacyReport (or a personalized release's tuple of "
            f"them), got {type(item).__name__}"
        )
    return item


#: Relations named before a colon that explains them (``"replace-one: two datasets ..."``).
_NAMED_RELATIONS = ("replace-one", "add-remove")


def _relation(report: PrivacyReport) -> str:
    """The report's neighbouring relation, without the explanation some reports add."""
    name = report.neighbouring.split(":", 1)[0].strip()
    return name if name in _NAMED_RELATIONS else report.neighbouring


def _check_reports(reports: tuple[Any, ...]) -> list[PrivacyReport]:
    if not reports:
        raise InvalidParameterError("compose needs at least one PrivacyReport, got none")
    items = [_as_report(item, i) for i, item in enumerate(reports)]
    for i, report in enumerate(items):
        if report.bound not in _COMPOSABLE_BOUNDS:
            raise InvalidParameterError(
                f"reports[{i}] has bound={report.bound.value!r} (method {report.method!r}); "
                "only upper (or exact) guarantees compose into a guarantee"
            )
    relations: dict[str, list[str]] = {}
    for report in items:
        relations.setdefault(_relation(report), []).append(report.method)
    if len(relations) > 1:
        shown = "; ".join(
            f"{relation!r} ({', '.join(dict.fromkeys(methods))})"
            for relation, methods in relations.items()
        )
        raise InvalidParameterError(
            f"the releases protect different neighbouring relations: {shown}; a total "
            "guarantee needs one relation, so compose the releases of each relation "
            "separately (or, for a release offering another relation such as run correlated "
            "--neighbours, make it the others' relation)"
        )
    return items


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
    *reports: PrivacyReport | Sequence[PrivacyReport],
    delta: float | None = None,
    epsilon: float | None = None,
    discretization: float = 1e-4,
    same_users: bool = False,
    populations: Sequence[Population] | None = None,
) -> PrivacyReport:
    """Return one guarantee for several releases on the same users.

    By default the target is δ = Σδᵢ, so the composed guarantee compares like
    with like against basic composition (Σεᵢ, Σδᵢ), and the answer is the
    smallest ε either method certifies there. With ``delta`` the target δ is
    that; with ``epsilon`` the answer is the smallest δ at that ε. Both the PLD
    and the basic bound are computed; the tighter one is returned, with
    ``method`` ``"pld-composition"`` or ``"basic-composition"`` and the other
    recorded in ``parameters``.

    When every release has δ = 0 and no target is given, the answer is pure
    DP at δ = 0: (Σεᵢ, 0).

    **The same users.** The releases are composed as releases on the same users.
    They are taken to be so when their n (and, from ``populations``, their
    domain, user column and input) agree; when any of these differ, the
    releases may be on different people and composing them is an error unless
    ``same_users=True`` asserts that they cover the same people (one release on
    a subset of the other's users, say). Each dominating pair then uses its own
    report's n, a user absent from a release loses nothing in it, and the
    composed report's ``n`` is the largest. Its ``assumptions`` say which of the
    two it was, and ``parameters["same_users"]`` records the ``basis``
    (``"recorded"`` or ``"asserted"``), the fields ``compared`` and ``not_recorded``
    and the ``differences``.

    **Re-derived.** Each input of a method with a certificate here (every
    protocol's, a personalized release's levels, a composed report's
    components) is checked against what its parameters certify
    (:func:`~shuffledp.accounting.composition.rederive.rederive`): it enters at
    its stated guarantee when the certificate implies it, at the certificate's
    within floating-point noise, and is refused otherwise. A report of another
    method is the caller's own claim: it enters at its stated (ε, δ), and the
    composed report's ``assumptions`` say so. A report returned by
    :func:`reports_from_json` enters as that function re-derived it.

    ``parameters["components"]`` lists each distinct release (method, ε, δ, n,
    parameters) with its ``count`` and its ``basis`` (how it was re-derived, or
    ``"stated"``). What the releases assume and do not cover
    (``assumptions``, ``not_covered``) is carried over, all of it. Releases must
    be chosen in advance (their parameters not picked from earlier outputs).

    Args:
        *reports: The releases' reports (``upper`` or ``exact`` bounds); pass a
            report several times for repeated releases. A personalized release's
            reports (one per level, e.g. ``SegmentedRun.privacy``) passed as one
            tuple enter at their weakest level (:func:`weakest_level`).
        delta: Target δ in (0, 1) (default Σδᵢ).
        epsilon: Target ε > 0 instead of a target δ.
        discretization: Width of the privacy-loss grid (smaller: tighter, slower).
        same_users: Assert that the releases cover the same people even though
            what they record (n, domain, user column, input) differs.
        populations: What each release records about its users, in the order
            of ``reports`` (:func:`populations_from_json`); default: their n only.

    Returns:
        A :class:`PrivacyReport` with ``bound`` ``upper``.

    Raises:
        InvalidParameterError: No report, a non-report, a lower or reproduction
            bound, mixed neighbouring relations, releases that differ in what
            they record about their users without ``same_users``, both targets
            given, a target out of range, a report whose stated guarantee is
            below what its parameters certify (or whose parameters are missing
            or disagree), or no finite guarantee at the target.
    """
    items = _check_reports(reports)
    if not isinstance(same_users, bool):
        raise InvalidParameterError(f"same_users must be True or False, got {same_users!r}")
    users_record, users_statement = _same_users(items, populations, same_users)
    if delta is not None and epsilon is not None:
        raise InvalidParameterError(
            f"give at most one of delta and epsilon, got delta={delta!r}, epsilon={epsilon!r}"
        )
    if not (_number(discretization) is not None and 0.0 < float(discretization) <= 0.1):
        raise InvalidParameterError(f"discretization must be in (0, 0.1], got {discretization!r}")
    entered, bases = _rederive_all(items, [f"reports[{i}]" for i in range(len(items))])
    return _compose_entered(
        entered,
        bases,
        delta=delta,
        epsilon=epsilon,
        discretization=float(discretization),
        users=(users_record, users_statement),
    )


#: ``basis`` of a component taken at its stated guarantee.
_STATED = "stated"
#: Attribute by which :func:`reports_from_json` marks a report it re-derived (with what the
#: whole release told it: a service release's message bounds, its domain's size) and how:
#: :func:`compose` then takes that basis instead of re-deriving the report without its
#: document. A report built from it (``dataclasses.replace``) is not marked.
_CHECKED_BASIS = "_shuffledp_rederived_basis"


def _rederive_one(
    report: PrivacyReport,
    where: str,
    *,
    parties: int = 0,
    domain_size: int | None = None,
    accept_stated: bool = True,
) -> tuple[PrivacyReport, str]:
    """One input: re-derived (or recomposed), or taken as stated when nothing re-derives it.

    Returns the report to compose and its basis: ``"re-derived: ..."``,
    ``"recomposed: ..."`` or :data:`_STATED` (no certificate here for its method).

    Raises:
        InvalidParameterError: As :func:`~shuffledp.accounting.composition.rederive.rederive`,
            or, unless ``accept_stated``, if nothing re-derives the report.
    """
    if report.method in _COMPOSED_METHODS and "components" in report.parameters:
        return _recompose(report, where, accept_stated=accept_stated)
    try:
        found = rederive(report, where=where, parties=parties, domain_size=domain_size)
    except MissingContextError:
        if not accept_stated:
            raise
        return report, _STATED  # e.g. a report passed in Python without its domain size
    if found is not None:
        return found
    if not accept_stated:
        raise InvalidParameterError(
            Worded(
                "{where} states {stated}, but no certificate here re-derives a {method} "
                "guarantee from its parameters, so that number cannot be checked: compose "
                "the releases the package writes (run, analyzer publish, demo, simulate, "
                "account compose), or, to take this guarantee as your own claim, give "
                "{accept} (the total's assumptions then say so)",
                where=where,
                stated=f"({report.epsilon:g}, {report.delta:.6g})",
                method=repr(report.method),
                accept=Parameter("accept_stated", True),
            )
        )
    return report, _STATED


def _rederive_all(
    items: list[PrivacyReport], wheres: list[str]
) -> tuple[list[PrivacyReport], list[str]]:
    """Every input re-derived once (identical inputs share the work)."""
    done: dict[tuple[Any, ...], tuple[PrivacyReport, str]] = {}
    entered: list[PrivacyReport] = []
    bases: list[str] = []
    for report, where in zip(items, wheres, strict=True):
        key = _key(report)
        checked = getattr(report, _CHECKED_BASIS, None)
        if isinstance(checked, str):
            done[key] = report, checked  # as reports_from_json re-derived it
        elif key not in done:
            done[key] = _rederive_one(report, where)
        entered.append(done[key][0])
        bases.append(done[key][1])
    return entered, bases


def _stated_statement(items: list[PrivacyReport], bases: list[str]) -> str | None:
    """What the total assumes about inputs taken at their stated guarantee, or ``None``."""
    stated = [r for r, basis in zip(items, bases, strict=True) if basis == _STATED]
    if not stated:
        return None
    methods = ", ".join(dict.fromkeys(repr(r.method) for r in stated))
    return (
        f"{plural(len(stated), 'release')} of the {len(items)} ({methods}) "
        f"{'enters' if len(stated) == 1 else 'enter'} at the (epsilon, delta) "
        f"{'it states' if len(stated) == 1 else 'they state'}: no certificate here "
        "re-derives such a guarantee from the parameters it records, so the total is only as "
        "good as that claim (the caller's own)"
    )


def _compose_entered(
    items: list[PrivacyReport],
    bases: list[str],
    *,
    delta: float | None,
    epsilon: float | None,
    discretization: float,
    users: tuple[dict[str, Any], str],
) -> PrivacyReport:
    """The composition of checked, re-derived inputs (:func:`compose`'s second half)."""
    users_record, users_statement = users
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
            target_delta = basic_delta
        else:
            target_delta = check_delta(delta)

    pld_value: float | None = None
    kinds: list[str] = []
    pld_note = ""
    if target_delta == 0.0:
        # Pure DP throughout: (Σεᵢ, 0) is the composition at δ = 0 (no PLD needed).
        pld_note = "every release has delta = 0: pure composition, the sum of the epsilons"
    else:
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
    for r, basis in zip(items, bases, strict=True):
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
            "basis": basis,
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
        "same_users": users_record,
    }
    notes = [
        f"composition of {plural(len(items), 'release')}; "
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
    context = _context(items)
    if len(items) > 1 and "assumptions" in context:
        context["assumptions"] = (users_statement, *context["assumptions"])
    stated = _stated_statement(items, bases)
    if stated is not None and "assumptions" in context:
        head = 1 if len(items) > 1 else 0
        assumptions = context["assumptions"]
        context["assumptions"] = (*assumptions[:head], stated, *assumptions[head:])
    return PrivacyReport(
        guarantee=guarantee,
        method=method,
        bound=BoundKind.UPPER,
        n=max(r.n for r in items),
        neighbouring=items[0].neighbouring,
        lower_bound_delta=None,
        parameters=parameters,
        notes=". ".join(notes),
        **context,
    )


#: Methods of a composed report, recomposed from its components when read back.
_COMPOSED_METHODS = (PLD_COMPOSITION_METHOD, BASIC_COMPOSITION_METHOD)


def _component_reports(report: PrivacyReport, where: str) -> list[tuple[PrivacyReport, int]]:
    """The releases a composed report records (``parameters["components"]``), with their counts."""
    params = report.parameters
    components = params.get("components")
    if not isinstance(components, list) or not components:
        raise InvalidParameterError(
            f"{where} ({report.method}) needs parameters['components'], the list of the "
            f"releases it composed, to be recomposed; got {components!r}"
        )
    out: list[tuple[PrivacyReport, int]] = []
    for j, component in enumerate(components):
        here = f"{where} component {j + 1}"
        if not isinstance(component, Mapping):
            raise InvalidParameterError(f"{here} is not an object: {component!r}")
        count, n = component.get("count"), component.get("n")
        method, parameters = component.get("method"), component.get("parameters", {})
        eps, dlt = _number(component.get("epsilon")), _number(component.get("delta"))
        if isinstance(count, bool) or not isinstance(count, Integral) or count < 1:
            raise InvalidParameterError(f"{here} needs count >= 1 (an integer), got {count!r}")
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
            raise InvalidParameterError(f"{here} needs n >= 1 (an integer), got {n!r}")
        if not isinstance(method, str) or not method:
            raise InvalidParameterError(f"{here} needs a 'method' string, got {method!r}")
        if not isinstance(parameters, Mapping):
            raise InvalidParameterError(f"{here} has parameters={parameters!r}; expected an object")
        if eps is None or dlt is None or eps <= 0 or not (0.0 <= dlt < 1.0):
            raise InvalidParameterError(
                f"{here} ({method}) has no usable (epsilon, delta): got "
                f"epsilon={component.get('epsilon')!r}, delta={component.get('delta')!r}"
            )
        member = PrivacyReport(
            guarantee=ApproxDP(eps, dlt),
            method=method,
            bound=BoundKind.UPPER,
            n=int(n),
            neighbouring=report.neighbouring,
            parameters=dict(parameters),
        )
        out.append((member, int(count)))
    releases = params.get("releases")
    total = sum(count for _, count in out)
    if releases is not None and releases != total:
        raise InvalidParameterError(
            f"{where} ({report.method}) records {releases!r} releases but its components "
            f"count {total}"
        )
    return out


def _recompose(
    report: PrivacyReport, where: str, *, accept_stated: bool
) -> tuple[PrivacyReport, str]:
    """A composed report: its components re-derived and composed again at its stated target.

    The stated pair is kept when the recomposition implies it (its ε at the
    stated δ, or its δ at the stated ε, is at most the stated one), taken at
    the recomposition's value within :data:`RELATIVE_TOLERANCE`, and refused otherwise.
    """
    components = _component_reports(report, where)
    entered: list[PrivacyReport] = []
    bases: list[str] = []
    taken_as_stated: list[int] = []
    for j, (component, count) in enumerate(components):
        member, basis = _rederive_one(
            component, f"{where} component {j + 1}", accept_stated=accept_stated
        )
        entered.extend([member] * count)
        bases.extend([basis] * count)
        if basis == _STATED:
            taken_as_stated.append(j + 1)
    params = report.parameters
    target = params.get("target", "delta")
    if target not in ("delta", "epsilon"):
        raise InvalidParameterError(
            f"{where} ({report.method}) has parameters['target']={target!r}; expected "
            "'delta' or 'epsilon'"
        )
    discretization = _number(params.get("discretization", 1e-4))
    if discretization is None or not 0.0 < discretization <= 0.1:
        raise InvalidParameterError(
            f"{where} ({report.method}) has parameters['discretization']="
            f"{params.get('discretization')!r}; expected a number in (0, 0.1]"
        )
    stated = report.guarantee
    at_epsilon = target == "epsilon"
    try:
        again = _compose_entered(
            entered,
            bases,
            delta=None if at_epsilon or stated.delta == 0.0 else stated.delta,
            epsilon=stated.epsilon if at_epsilon else None,
            discretization=discretization,
            users=({}, ""),
        )
    except InvalidParameterError as exc:
        raise InvalidParameterError(
            f"{where} ({report.method}) states ({stated.epsilon:g}, {stated.delta:.6g}), but "
            f"its components, recomposed, give no guarantee there: {exc}"
        ) from None
    certified, claimed = (
        (again.delta, stated.delta) if at_epsilon else (again.epsilon, stated.epsilon)
    )
    if certified <= claimed:
        guarantee = stated
    elif certified <= claimed * (1.0 + RELATIVE_TOLERANCE):
        guarantee = (
            ApproxDP(stated.epsilon, certified) if at_epsilon else ApproxDP(certified, stated.delta)
        )
    else:
        found = (
            f"delta = {again.delta:.3g} at epsilon = {stated.epsilon:g}"
            if at_epsilon
            else f"epsilon = {again.epsilon:.6g} at delta = {stated.delta:.6g}"
        )
        raise InvalidParameterError(
            f"{where} ({report.method}) states ({stated.epsilon:g}, {stated.delta:.6g}), below "
            f"what its {plural(len(components), 'component')} certify: recomposed "
            f"({again.method}) they give {found}; a guarantee below its components' is not "
            "composed (was the document edited?)"
        )
    basis = f"recomposed from its {plural(len(components), 'component')} ({again.method}), " + (
        "each re-derived"
        if not taken_as_stated
        else f"component(s) {taken_as_stated} taken at their stated guarantee"
    )
    notes = []
    if guarantee != stated:
        notes.append(
            f"its stated ({stated.epsilon!r}, {stated.delta!r}) was below its recomposition "
            f"by floating-point noise; it enters at ({guarantee.epsilon!r}, {guarantee.delta!r})"
        )
    if guarantee == stated and not notes:
        return report, basis
    text = "; ".join([report.notes, *notes] if report.notes else notes)
    return dataclasses.replace(report, guarantee=guarantee, notes=text), basis
