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

**Re-derived guarantees.** No stated (ε, δ) is taken on trust: every input
whose method has a certificate here is recomputed from the parameters it
records (:mod:`shuffledp.accounting.composition.rederive`; a composed report by
composing its components again), kept when the certificate implies it, taken
at the certificate's value within floating-point noise, and refused otherwise.
A method without a certificate here enters at its stated guarantee only as the
caller's own claim (a :class:`PrivacyReport` passed in Python, or a file read
with ``accept_stated=True``), which the total's assumptions state.

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
from shuffledp.accounting.composition.rederive import (
    FLIP_METHOD,
    KRR_METHOD,
    RELATIVE_TOLERANCE,
    MissingContextError,
    message_bound_parties,
    number_parameter,
    rederive,
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
FLIP_CERTIFICATE_METHOD = FLIP_METHOD
#: ``method`` of k-RR's privacy reports (:data:`shuffledp.protocols.krr.KRR_PRIVACY_METHOD`).
KRR_CERTIFICATE_METHOD = KRR_METHOD
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
    return number_parameter(report.method, report.parameters, name, integer=integer)


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
            **_level_certificate_parameters(items),
        },
        notes=(
            f"a personalized release of {len(items)} levels, entered at its weakest level "
            f"(the largest epsilon, {epsilon:g}, and the largest delta, {delta:.3g}), which "
            "covers every user whatever their level"
        ),
        **_context(items),
    )


#: What a segmented level's certificate needs besides its λ, the same for every level.
_SHARED_LEVEL_PARAMETERS = ("blanket_rate", "items_per_user", "variant", "message_domain")


def _level_certificate_parameters(items: list[PrivacyReport]) -> dict[str, Any]:
    """The levels' λ and shared certificate parameters, when every level records them.

    Kept in the weakest level's ``parameters`` so that its levels can be
    re-derived later (a composed report's components); empty otherwise.
    """
    params = [r.parameters for r in items]
    if not all("lambda" in p for p in params):
        return {}
    shared: dict[str, Any] = {}
    for name in _SHARED_LEVEL_PARAMETERS:
        values = [p.get(name) for p in params]
        if values[0] is None or any(v != values[0] for v in values):
            return {}
        shared[name] = values[0]
    return {"level_lambdas": [p["lambda"] for p in params], **shared}


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


_KNOWN_METHODS = (FLIP_CERTIFICATE_METHOD, KRR_CERTIFICATE_METHOD)
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


def _personalized_from_json(
    obj: Mapping[str, Any], where: str, method: str, release_parameters: Mapping[str, Any] | None
) -> PrivacyReport:
    """A personalized release (``run segmented``): one report per level, at its weakest level.

    Each level's report carries what its certificate needs (its λ and the
    release's blanket rate, items per user, variant and message domain, from the
    release's ``parameters``), so that :func:`weakest_level` keeps them for the
    re-derivation.
    """
    levels = obj["levels"]
    n = obj.get("n")
    context = _context_from_json(obj, where, method)
    shared: dict[str, Any] = {}
    if release_parameters is not None:
        shared = {
            name: release_parameters[name]
            for name in _SHARED_LEVEL_PARAMETERS
            if name in release_parameters
        }
    missing = [name for name in _SHARED_LEVEL_PARAMETERS if name not in shared]
    if missing:
        raise InvalidParameterError(
            f"{where} ({method}) is a personalized release whose levels' guarantees cannot be "
            f"re-derived without the release's parameters {', '.join(missing)}, which its "
            "privacy object alone does not record: give the whole release (what run segmented "
            "wrote)"
        )
    lambdas = release_parameters.get("lambda") if release_parameters is not None else None
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
        lam = level.get("lambda")
        if isinstance(lambdas, list) and (len(lambdas) != len(levels) or lambdas[k] != lam):
            raise InvalidParameterError(
                f"{where} ({method}) level {k} has lambda={lam!r}, but the release's "
                f"parameters.lambda is {lambdas!r}: which one was used?"
            )
        level_method = level.get("method", method)
        if level_method != method:
            raise InvalidParameterError(
                f"{where} ({method}) level {k} has method={level_method!r}, not the release's"
            )
        reports.append(
            PrivacyReport(
                guarantee=ApproxDP(eps, dlt),
                method=method,
                bound=BoundKind(bound),
                n=int(n),
                neighbouring=str(obj.get("neighbouring", "replace-one")),
                parameters={"lambda": lam, **shared},
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


def _release_parts(
    raw: Mapping[str, Any], where: str
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """The privacy object and, for a whole release, the release's ``parameters`` (or ``None``)."""
    inner = raw.get("privacy")
    if not isinstance(inner, Mapping):
        return raw, None  # a privacy object itself
    parameters = raw.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidParameterError(
            f"{where} has release parameters={parameters!r}; expected an object"
        )
    return inner, parameters if parameters is not None else {}


def _check_release_records(
    raw: Mapping[str, Any], report: PrivacyReport, release_parameters: Mapping[str, Any], where: str
) -> int:
    """What a whole release records twice must agree; return its message-bound parties.

    The certificate's n is the release's ``n`` (a service release: its
    ``service.min_batch_users``); a parameter in both the release's and the
    privacy object's ``parameters`` has one value; k-RR's k is the domain's
    size and a segmented release's message domain the domain's (plus the
    padding symbol).
    """
    service = raw.get("service")
    parties = 0
    if isinstance(service, Mapping):
        expected, what = service.get("min_batch_users"), "its service.min_batch_users"
        try:
            parties = message_bound_parties(
                str(raw.get("protocol")), expected, release_parameters.get("variant")
            )
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"{where} is a service release: {exc}") from None
    else:
        expected, what = raw.get("n"), "the release's n"
    if expected is not None and expected != report.n:
        raise InvalidParameterError(
            f"{where} ({report.method}) is certified for n={report.n!r} users, but {what} is "
            f"{expected!r}: which n do its parameters hold for?"
        )
    if not report.parameters.get("personalized"):
        for name, value in report.parameters.items():
            if name in release_parameters and release_parameters[name] != value:
                raise InvalidParameterError(
                    f"{where} ({report.method}) records {name}={value!r} in its privacy "
                    f"object but {name}={release_parameters[name]!r} in the release's "
                    "parameters: which one was used?"
                )
    domain = raw.get("domain")
    if isinstance(domain, list):
        size = len(domain)
        if report.method == KRR_CERTIFICATE_METHOD and report.parameters.get("k") != size:
            raise InvalidParameterError(
                f"{where} ({report.method}) has k={report.parameters.get('k')!r} but a domain "
                f"of {size} labels: k-RR's k is the domain's size"
            )
        if report.parameters.get("personalized") and "message_domain" in report.parameters:
            padding = release_parameters.get("padding") is True
            if report.parameters["message_domain"] != size + padding:
                raise InvalidParameterError(
                    f"{where} ({report.method}) has message_domain="
                    f"{report.parameters['message_domain']!r} but a domain of {size} labels "
                    f"{'plus the padding symbol' if padding else 'and no padding'}"
                )
    return parties


def _read_report(raw: Mapping[str, Any], where: str) -> tuple[PrivacyReport, int, int | None]:
    """The report a release or privacy object states (not yet re-derived).

    Also what its re-derivation needs from the rest of a whole release: the
    parties its message bounds charge and its domain's size (``None``: not recorded).
    """
    _check_document(raw, where)
    obj, release_parameters = _release_parts(raw, where)
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
        report = _personalized_from_json(obj, where, method, release_parameters)
    else:
        report = _single_from_json(obj, where, method)
    parties = 0
    if release_parameters is not None:
        parties = _check_release_records(raw, report, release_parameters, where)
    domain = raw.get("domain") if release_parameters is not None else None
    return report, parties, len(domain) if isinstance(domain, list) else None


def _single_from_json(obj: Mapping[str, Any], where: str, method: str) -> PrivacyReport:
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
        bound=BoundKind(obj.get("bound")),
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


def _report_from_json(raw: Mapping[str, Any], where: str, accept_stated: bool) -> PrivacyReport:
    report, parties, domain_size = _read_report(raw, where)
    entered, basis = _rederive_one(
        report, where, parties=parties, domain_size=domain_size, accept_stated=accept_stated
    )
    if basis != _STATED:
        object.__setattr__(entered, _CHECKED_BASIS, basis)
        return entered
    statement = Worded(
        "{where} ({method}) is taken at the (epsilon, delta) it states, {stated}, because "
        "the caller said so ({accept}): no certificate here re-derives it from the parameters "
        "it records",
        where=where,
        method=report.method,
        stated=f"({report.epsilon!r}, {report.delta!r})",
        accept=Parameter("accept_stated", True),
    )
    stated = entered.with_context(assumptions=[statement])
    object.__setattr__(stated, _CHECKED_BASIS, basis)
    return stated


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


def _names(items: list[Any], sources: Sequence[str] | None) -> list[str]:
    if sources is None:
        return [f"privacy object #{i + 1}" for i in range(len(items))]
    names = list(sources)
    if len(names) != len(items) or not all(isinstance(x, str) for x in names):
        raise InvalidParameterError(
            f"sources must name each of the {len(items)} objects (strings), got {sources!r}"
        )
    return names


def reports_from_json(
    objs: Iterable[Mapping[str, Any]] | Mapping[str, Any],
    *,
    accept_stated: bool = False,
    sources: Sequence[str] | None = None,
) -> list[PrivacyReport]:
    """Rebuild :class:`PrivacyReport` objects from the releases' JSON, each re-derived.

    Each object is a whole release the package wrote (``run`` of every protocol,
    ``analyzer publish``, ``demo``, ``simulate``, ``account compose --json``), whose
    ``privacy`` member is then used, or that ``privacy`` object itself (a
    report's :meth:`PrivacyReport.to_dict`). Extra keys (``target_delta``,
    ``calibration``, …) are ignored. A personalized release (``run segmented``:
    one guarantee per level) becomes its weakest level (:func:`weakest_level`).

    **Re-derived.** A stated guarantee read from a file is not taken on trust:
    it is recomputed from the parameters the document records with the
    certified accountant of its method
    (:func:`~shuffledp.accounting.composition.rederive.rederive`; a personalized
    release level by level; a service release with what its message bounds add;
    a composed one by composing its components again at its stated target).
    The stated pair is kept when the certificate implies it, replaced by the
    certificate's within floating-point noise (the notes say so), and refused
    otherwise. A whole release must also record the same n and parameters in its
    privacy object as in its other sections.

    Args:
        objs: The releases (or their privacy objects), or one of them.
        accept_stated: Take a guarantee no certificate here re-derives (a
            method of another library, a privacy object of an unknown method) at
            its stated (ε, δ), as the caller's own claim; the report's
            assumptions say so. Without it such an object is refused.
        sources: How errors and assumptions name each object (file names);
            default ``"privacy object #i"``.

    Raises:
        InvalidParameterError: Naming the object, if it is not a mapping; it is
            a document of the package that is not a release (an accounting
            table, a task); its ``bound`` is not ``"upper"`` or ``"exact"`` (a
            lower bound or a reproduced formula is not a guarantee); it has no
            valid (``epsilon``, ``delta``); ``n`` is not a positive integer; a
            known method lacks the parameters its certificate needs; what it
            records twice disagrees; its stated guarantee is below what its
            parameters certify (naming both); or, without ``accept_stated``, no
            certificate here re-derives it.
    """
    items = _objects(objs)
    if not isinstance(accept_stated, bool):
        raise InvalidParameterError(f"accept_stated must be True or False, got {accept_stated!r}")
    names = _names(items, sources)
    return [
        _report_from_json(raw, where, accept_stated)
        for raw, where in zip(items, names, strict=True)
    ]


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
    *,
    sources: Sequence[str] | None = None,
) -> list[Population]:
    """Return what each release records about its users, for :func:`compose`.

    From a whole release: its ``n`` (the users it covers), its ``domain`` (or a
    per-user release's ``classes``), the ``input`` section's user column and
    file, or the ``service`` section's task. A bare ``privacy`` object records
    only its ``n``.

    Reads what the releases record without re-deriving their guarantees
    (:func:`reports_from_json` does that); ``sources`` names the objects in
    errors, as there.

    Raises:
        InvalidParameterError: As :func:`reports_from_json`, but for the
            re-derivation and ``accept_stated``.
    """
    items = _objects(objs)
    names = _names(items, sources)
    reports = [_read_report(raw, where)[0] for raw, where in zip(items, names, strict=True)]
    return [_population_from_json(raw, r) for raw, r in zip(items, reports, strict=True)]
