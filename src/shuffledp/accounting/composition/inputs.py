"""What each release brings to a composition: its dominating pair, its users, its levels.

:func:`~shuffledp.accounting.composition.total.compose` takes reports; this
module says what it reads from each one:

* its **dominating pair** (:func:`dominating_pair`), from the parameters a
  known certificate records (FLIP's q and k, k-RR's ε₀ and k, and n);
* what it records about its **users** (:class:`Population`), compared to decide
  whether the releases are on the same people (:func:`_same_users`);
* a **personalized release** (one guarantee per level) as its weakest level
  (:func:`weakest_level`), which covers every user whatever their level;
* what its guarantee assumes and does not cover (``assumptions``,
  ``not_covered``), carried into the total.

Group: composition (``shuffledp.accounting.composition``); may import the
numerical core, published bounds, certificates and ``shuffledp.privacy``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from shuffledp._validation import (
    InvalidParameterError,
    check_epsilon,
    check_flip_probability,
)
from shuffledp._wording import Parameter, Worded
from shuffledp.accounting.composition.pld import (
    DominatingPair,
    flip_dominating_pair,
    krr_dominating_pair,
)
from shuffledp.accounting.composition.rederive import (
    FLIP_METHOD,
    FLIP_METHODS,
    KRR_METHOD,
    flip_fake_users,
    krr_domain_size,
    number_parameter,
)
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport

__all__ = [
    "FLIP_CERTIFICATE_METHOD",
    "KRR_CERTIFICATE_METHOD",
    "ONE_ROW_PER_USER",
    "Population",
    "dominating_pair",
    "weakest_level",
]

#: ``method`` of FLIP's privacy reports (:data:`shuffledp.protocols.flip.FLIP_PRIVACY_METHOD`).
FLIP_CERTIFICATE_METHOD = FLIP_METHOD
#: ``method`` of k-RR's privacy reports (:data:`shuffledp.protocols.krr.KRR_PRIVACY_METHOD`).
KRR_CERTIFICATE_METHOD = KRR_METHOD

_COMPOSABLE_BOUNDS = (BoundKind.UPPER, BoundKind.EXACT)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _parameter(report: PrivacyReport, name: str, *, integer: bool) -> Any:
    return number_parameter(report.method, report.parameters, name, integer=integer)


def _certificate_parameters(report: PrivacyReport) -> dict[str, Any] | None:
    """Validated parameters of a known certificate, or ``None`` for another method."""
    if report.method in FLIP_METHODS:
        q = check_flip_probability(_parameter(report, "q", integer=False))
        k = flip_fake_users(report.method, report.parameters)
        return {"q": q, "fake_users": k, "n": report.n}
    if report.method == KRR_CERTIFICATE_METHOD:
        epsilon0 = check_epsilon(_parameter(report, "epsilon0", integer=False), "epsilon0")
        return {"epsilon0": epsilon0, "k": krr_domain_size(report.method, report.parameters),
                "n": report.n}  # fmt: skip
    return None


def dominating_pair(
    report: PrivacyReport, *, reference_epsilons: tuple[float, ...] | None = None
) -> DominatingPair | None:
    """Return a pair dominating the mechanism behind ``report``, or ``None`` if unknown.

    * ``flip-exact`` (``flip-exact-fake-blanket`` in 0.2):
      :func:`shuffledp.accounting.composition.pld.flip_dominating_pair` with parameters
      ``q`` and ``fake_users`` (``k`` in releases of 0.2) and ``report.n``.
    * ``krr-blanket``: :func:`shuffledp.accounting.composition.pld.krr_dominating_pair` with
      parameters ``epsilon0`` and ``domain_size`` (``k`` in releases of 0.2) and
      ``report.n``; its blocks are refined at ε = 0, ε/4, ε/2 and ε (ε = ``report.epsilon``) unless
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
    if report.method in FLIP_METHODS:
        return flip_dominating_pair(**params)
    eps = report.epsilon
    refs = reference_epsilons or (0.0, eps / 4, eps / 2, eps)
    return krr_dominating_pair(**params, reference_epsilons=refs)
    return None


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
