"""Composition of several releases on the same users: the total (ε, δ).

A user who takes part in several releases (two histograms of the same people,
a daily release, …) loses privacy in each. :func:`compose` states one
guarantee for all of them:

* **PLD composition** (tight). Each report's certificate comes from a pair of
  output laws that *dominates* the mechanism for every dataset
  (:func:`dominating_pair`; see :mod:`shuffledp.accounting.composition.pld`). The product
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

:func:`reports_from_json` rebuilds reports from every release the package
writes (``run`` of each protocol, the analyzer service's releases, ``demo``,
``simulate``, ``account compose --json``, or their ``privacy`` objects), so
that saved releases can be composed; :func:`populations_from_json` reads what
each release records about its users.

**The same users.** Composition states a total for people who are in several
releases. Releases are taken to cover the same users only when they record the
same number of users ``n``, the same domain, the same user column and the same
input (file, or service task), as far as they record them
(:class:`Population`); releases that differ are an error unless the caller
asserts that they cover the same people (``same_users=True``, ``--same-users``).
The composed report states which of the two it was.

**A personalized release** (``run segmented``: one guarantee per privacy level)
enters at its weakest level, (maxₖ εₖ, maxₖ δₖ), which covers every user whatever
their level (:func:`weakest_level`).

Group: composition (``shuffledp.accounting.composition``); may import the
numerical core, published bounds, certificates and ``shuffledp.privacy``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
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
from shuffledp._wording import Parameter, Worded, plural
from shuffledp.accounting.composition.pld import (
    ApproxDPPair,
    DominatingPair,
    PairAccountant,
    flip_dominating_pair,
    krr_dominating_pair,
)
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.schemas import schema_id

__all__ = [
    "BASIC_COMPOSITION_METHOD",
    "FLIP_CERTIFICATE_METHOD",
    "KRR_CERTIFICATE_METHOD",
    "PLD_COMPOSITION_METHOD",
    "Population",
    "basic_composition",
    "compose",
    "dominating_pair",
    "populations_from_json",
    "reports_from_json",
    "weakest_level",
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

    * ``flip-exact-fake-blanket``: :func:`shuffledp.accounting.composition.pld.flip_dominating_pair`
      with parameters ``q`` and ``k`` (fake users per user) and ``report.n``.
    * ``krr-blanket``: :func:`shuffledp.accounting.composition.pld.krr_dominating_pair` with
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


def weakest_level(reports: Sequence[PrivacyReport]) -> PrivacyReport:
    """Return one report for a personalized release: its weakest level, (maxₖ εₖ, maxₖ δₖ).

    A personalized release (``run segmented``, :attr:`SegmentedRun.privacy`)
    states one (εₖ, δₖ) per privacy level, each for the users of that level.
    Every user, whatever their level, is then (maxₖ εₖ, maxₖ δₖ)-DP, which is
    what this report states; composing it with other releases gives a total
    that holds for every user. ``parameters`` keep every level's (εₖ, δₖ).

    Args:
        reports: The levels' reports: ``upper`` (or ``exact``) bounds of one
            method, one n and one neighbouring relation.

    Raises:
        InvalidParameterError: If there is no report, an item is not a
            :class:`PrivacyReport`, or the levels differ in method, bound kind, n
            or relation.
    """
    items = list(reports)
    if not items or not all(isinstance(r, PrivacyReport) for r in items):
        raise InvalidParameterError(
            "a personalized release needs one PrivacyReport per level, got "
            f"{[type(r).__name__ for r in items]}"
        )
    first = items[0]
    for name in ("method", "n", "neighbouring", "bound"):
        values = {str(getattr(r, name)) for r in items}
        if len(values) > 1:
            raise InvalidParameterError(
                f"the levels of a personalized release differ in {name} ({sorted(values)}); "
                "they must be the levels of one release"
            )
    epsilon = max(r.epsilon for r in items)
    delta = max(r.delta for r in items)
    return PrivacyReport(
        guarantee=ApproxDP(epsilon, delta),
        method=first.method,
        bound=first.bound,
        n=first.n,
        neighbouring=first.neighbouring,
        lower_bound_delta=None,
        parameters={
            "personalized": True,
            "level_epsilons": [r.epsilon for r in items],
            "level_deltas": [r.delta for r in items],
        },
        notes=(
            f"a personalized release of {len(items)} levels, entered at its weakest level "
            f"(the largest epsilon, {epsilon:g}, and the largest delta, {delta:.3g}), which "
            "covers every user whatever their level"
        ),
        **_context(items),
    )


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


@dataclass(frozen=True)
class Population:
    """What a release records about the users it covers.

    Compared by :func:`compose` to decide whether releases are on the same
    users. ``None`` means the release does not record it (then it is not compared).

    Attributes:
        n: The number of users the release covers (for a service release, every
            user of the batches it pools).
        domain: The public domain's labels (a per-user release: its classes).
        user_column: The column identifying users, or the text
            :data:`ONE_ROW_PER_USER` when each row was taken as a user.
        source: Where the users came from: the input file as given, or
            ``"task <id>"`` for a release of the analyzer service.
    """

    n: int
    domain: tuple[str, ...] | None = None
    user_column: str | None = None
    source: str | None = None

    def recorded(self) -> dict[str, Any]:
        """The fields this release records, by the name messages use."""
        fields = {
            "n": self.n,
            "domain": self.domain,
            "user column": self.user_column,
            "input": self.source,
        }
        return {name: value for name, value in fields.items() if value is not None}


#: :attr:`Population.user_column` of a release that took each row as a user.
ONE_ROW_PER_USER = "(none: each row a user)"


def _describe(name: str, values: list[Any]) -> str:
    distinct = list(dict.fromkeys(values))
    if name == "n":
        shown = ", ".join(f"{v:,}" for v in distinct)
    elif name == "domain":
        shown = ", ".join(
            f"{len(v)} labels [{', '.join(v[:3])}{', ...' if len(v) > 3 else ''}]" for v in distinct
        )
    else:
        shown = ", ".join(repr(v) for v in distinct)
    return f"{name} ({shown})"


def _same_users(
    items: list[PrivacyReport], populations: Sequence[Population] | None, same_users: bool
) -> tuple[dict[str, Any], str]:
    """Decide whether the releases are on the same users; return the record and statement."""
    if populations is None:
        pops = [Population(n=r.n) for r in items]
    else:
        pops = list(populations)
        if len(pops) != len(items) or not all(isinstance(p, Population) for p in pops):
            raise InvalidParameterError(
                f"populations must hold one Population per report ({len(items)}), got "
                f"{len(pops)} item(s)"
            )
    recorded = [p.recorded() for p in pops]
    names = [name for name in ("n", "domain", "user column", "input") if name in recorded[0]]
    compared = [name for name in names if all(name in r for r in recorded)]
    not_recorded = [
        name
        for name in ("n", "domain", "user column", "input")
        if name not in compared and any(name in r for r in recorded)
    ]
    differences = [
        _describe(name, [r[name] for r in recorded])
        for name in compared
        if len({repr(r[name]) for r in recorded}) > 1
    ]
    record: dict[str, Any] = {
        "basis": "asserted" if differences else "recorded",
        "compared": compared,
        "not_recorded": not_recorded,
        "differences": differences,
    }
    count = len(items)
    if differences and not same_users:
        raise InvalidParameterError(
            Worded(
                "the {count} releases differ in {differences}, so they may not cover the same "
                "people; if they do (e.g. one release is on a subset of the other's users), "
                "say so with {same}, and the total will state that assumption; releases on "
                "different people need no composition (each person keeps the guarantee of "
                "the release they are in)",
                count=count,
                differences=" and ".join(differences),
                same=Parameter("same_users", True),
            )
        )
    if differences:
        statement: str = Worded(
            "the {count} releases cover the same people, as the caller asserted ({same}), "
            "although they differ in {differences}: the total holds for a person in all of them",
            count=count,
            same=Parameter("same_users", True),
            differences=" and ".join(differences),
        )
    else:
        statement = (
            f"the {count} releases are taken to be on the same users: they record the same "
            + ", ".join(compared)
            + (
                f" ({', '.join(not_recorded)} not recorded by every release)"
                if not_recorded
                else ""
            )
        )
    return record, statement


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

    ``parameters["components"]`` lists each distinct release (method, ε, δ, n,
    parameters) with its ``count``. What the releases assume and do not cover
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
            given, a target out of range, or no finite guarantee at the target.
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


_KNOWN_METHODS = (FLIP_CERTIFICATE_METHOD, KRR_CERTIFICATE_METHOD)

_SCHEMA_PREFIX = "urn:shuffledp:schema:"
#: Documents whose ``privacy`` object is a release's guarantee (or a composed one).
_RELEASE_DOCUMENTS = (
    "release",
    "simulation",
    "demo",
    "segmented-release",
    "per-user-report",
    "augmented-release",
    "correlated-release",
    "account-compose",
)


def _document_name(obj: Mapping[str, Any]) -> str | None:
    """The schema name of a document the package wrote (``None``: no ``schema`` key)."""
    schema = obj.get("schema")
    if not isinstance(schema, str) or not schema.startswith(_SCHEMA_PREFIX):
        return None
    return schema[len(_SCHEMA_PREFIX) :].rsplit(":", 1)[0]


def _check_document(raw: Mapping[str, Any], where: str) -> None:
    """A ``schema`` key, when present, must name a release of this or an earlier version."""
    if "schema" not in raw:
        return  # a privacy object itself (PrivacyReport.to_dict)
    schema = raw["schema"]
    name = _document_name(raw)
    if name is None:
        raise InvalidParameterError(
            f"{where} has schema {schema!r}, which is not a shuffledp document's "
            f"({_SCHEMA_PREFIX}NAME:VERSION)"
        )
    if name not in _RELEASE_DOCUMENTS:
        raise InvalidParameterError(
            f"{where} is a {name!r} document ({schema}), not a release: compose "
            "takes what run, analyzer publish, demo, simulate or account compose --json wrote "
            "(or their privacy objects)"
        )
    version = schema.rsplit(":", 1)[1]
    known = int(schema_id(name).rsplit(":", 1)[1])
    if not (version.isdigit() and 1 <= int(version) <= known):
        raise InvalidParameterError(
            f"{where} is a {name!r} document of version {version!r} ({schema}); this "
            f"version of shuffledp reads versions 1 to {known}"
        )


def _context_from_json(obj: Mapping[str, Any], where: str, method: str) -> dict[str, Any]:
    context: dict[str, tuple[str, ...]] = {}
    for name in _CONTEXT_FIELDS:
        value = obj.get(name, [])
        if not isinstance(value, list | tuple) or not all(isinstance(x, str) for x in value):
            raise InvalidParameterError(
                f"{where} ({method}) has {name}={value!r}; expected a list of strings"
            )
        context[name] = tuple(value)
    return context


def _personalized_from_json(obj: Mapping[str, Any], where: str, method: str) -> PrivacyReport:
    """A personalized release (``run segmented``): one report per level, at its weakest level."""
    levels = obj["levels"]
    n = obj.get("n")
    context = _context_from_json(obj, where, method)
    reports = []
    for k, level in enumerate(levels):
        if not isinstance(level, Mapping):
            raise InvalidParameterError(f"{where} ({method}) level {k} is not an object")
        bound = level.get("bound", obj.get("bound"))
        if bound not in [b.value for b in _COMPOSABLE_BOUNDS]:
            raise InvalidParameterError(
                f"{where} ({method}) level {k} has bound={bound!r}; only 'upper' (or 'exact') "
                "guarantees compose"
            )
        eps, dlt = _number(level.get("epsilon")), _number(level.get("delta"))
        if eps is None or dlt is None or eps <= 0 or not (0.0 <= dlt < 1.0):
            raise InvalidParameterError(
                f"{where} ({method}) level {k} has no usable (epsilon, delta): got "
                f"epsilon={level.get('epsilon')!r}, delta={level.get('delta')!r}"
            )
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
            raise InvalidParameterError(f"{where} ({method}) needs n >= 1 (an integer), got {n!r}")
        reports.append(
            PrivacyReport(
                guarantee=ApproxDP(eps, dlt),
                method=method,
                bound=BoundKind(bound),
                n=int(n),
                neighbouring=str(obj.get("neighbouring", "replace-one")),
                **context,
            )
        )
    if not reports:
        raise InvalidParameterError(f"{where} ({method}) has an empty list of levels")
    report = weakest_level(reports)
    notes = [report.notes]
    level_counts = obj.get("level_counts")
    if isinstance(level_counts, Mapping) and isinstance(level_counts.get("privacy"), Mapping):
        step = level_counts["privacy"]
        notes.append(
            f"its level counts carry their own guarantee ({step.get('epsilon')!r}, "
            f"{step.get('delta')!r}) about users' levels, which this relation holds fixed: "
            "it is not part of the total"
        )
    return dataclasses.replace(report, notes="; ".join(notes))


def _report_from_json(raw: Mapping[str, Any], where: str) -> PrivacyReport:
    _check_document(raw, where)
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
    if "epsilon" not in obj and isinstance(obj.get("levels"), list):
        return _personalized_from_json(obj, where, method)
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
                else "; for a method without a dominating pair here, its (epsilon, delta) is "
                "all that composes, so give them (or the release's whole JSON)"
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
    notes = obj.get("notes", "")
    report = PrivacyReport(
        guarantee=ApproxDP(eps, dlt),
        method=method,
        bound=BoundKind(bound),
        n=int(n),
        neighbouring=str(obj.get("neighbouring", "replace-one")),
        lower_bound_delta=_number(lower),
        parameters=dict(parameters),
        notes=notes if isinstance(notes, str) else str(notes),
        **_context_from_json(obj, where, method),
    )
    try:
        _certificate_parameters(report)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{where}: {exc}") from None
    return report


def _objects(objs: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> list[Any]:
    items: list[Any] = [objs] if isinstance(objs, Mapping) else list(objs)
    if not items:
        raise InvalidParameterError("no privacy objects given")
    for i, raw in enumerate(items):
        if not isinstance(raw, Mapping):
            raise InvalidParameterError(
                f"privacy object #{i + 1} must be a JSON object, got {type(raw).__name__}"
            )
    return items


def reports_from_json(
    objs: Iterable[Mapping[str, Any]] | Mapping[str, Any],
) -> list[PrivacyReport]:
    """Rebuild :class:`PrivacyReport` objects from the releases' JSON.

    Each object is a whole release the package wrote (``run`` of every protocol,
    ``analyzer publish``, ``demo``, ``simulate``, ``account compose --json``), whose
    ``privacy`` member is then used, or that ``privacy`` object itself (a
    report's :meth:`PrivacyReport.to_dict`). Extra keys (``target_delta``,
    ``calibration``, …) are ignored. A personalized release (``run segmented``:
    one guarantee per level) becomes its weakest level (:func:`weakest_level`).

    Raises:
        InvalidParameterError: Naming the object's position, if it is not a
            mapping; it is a document of the package that is not a release (an
            accounting table, a task); its ``bound`` is not ``"upper"`` or
            ``"exact"`` (a lower bound or a reproduced formula is not a
            guarantee); it has no valid (``epsilon``, ``delta``); ``n`` is not a
            positive integer; or a known method lacks the parameters its
            dominating pair needs.
    """
    items = _objects(objs)
    return [_report_from_json(raw, f"privacy object #{i + 1}") for i, raw in enumerate(items)]


def _population_from_json(raw: Mapping[str, Any], report: PrivacyReport) -> Population:
    n = raw.get("n")
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
        n = report.n
    domain = raw.get("domain", raw.get("classes"))
    labels = (
        tuple(domain)
        if isinstance(domain, list) and all(isinstance(x, str) for x in domain)
        else None
    )
    user_column: str | None = None
    source: str | None = None
    where = raw.get("input")
    if isinstance(where, Mapping):
        column = where.get("user_column")
        user_column = column if isinstance(column, str) else ONE_ROW_PER_USER
        file = where.get("file")
        source = file if isinstance(file, str) else None
    service = raw.get("service")
    if isinstance(service, Mapping) and isinstance(service.get("task_id"), str):
        source = f"task {service['task_id']}"
    return Population(n=int(n), domain=labels, user_column=user_column, source=source)


def populations_from_json(
    objs: Iterable[Mapping[str, Any]] | Mapping[str, Any],
) -> list[Population]:
    """Return what each release records about its users, for :func:`compose`.

    From a whole release: its ``n`` (the users it covers), its ``domain`` (or a
    per-user release's ``classes``), the ``input`` section's user column and
    file, or the ``service`` section's task. A bare ``privacy`` object records
    only its ``n``.

    Raises:
        InvalidParameterError: As :func:`reports_from_json`.
    """
    items = _objects(objs)
    reports = reports_from_json(items)
    return [_population_from_json(raw, r) for raw, r in zip(items, reports, strict=True)]
