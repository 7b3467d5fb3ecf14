"""Releases read back: the reports and populations of the JSON documents the package writes.

:func:`reports_from_json` rebuilds reports from every release the package
writes (``run`` of each protocol, the analyzer service's releases, ``demo``,
``simulate``, ``account compose --json``, or their ``privacy`` objects), each
re-derived from the parameters it records before it is composed;
:func:`populations_from_json` reads what each release records about its users.
:mod:`shuffledp.accounting.composition.compose` re-exports both.

Group: composition (``shuffledp.accounting.composition``); may import the
numerical core, published bounds, certificates and ``shuffledp.privacy``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from numbers import Integral
from typing import Any

from shuffledp._validation import InvalidParameterError
from shuffledp._wording import Parameter, Worded
from shuffledp.accounting.composition.inputs import (
    _COMPOSABLE_BOUNDS,
    _CONTEXT_FIELDS,
    _SHARED_LEVEL_PARAMETERS,
    KRR_CERTIFICATE_METHOD,
    ONE_ROW_PER_USER,
    Population,
    _certificate_parameters,
    _number,
    weakest_level,
)
from shuffledp.accounting.composition.rederive import (
    FLIP_METHODS,
    krr_domain_size,
    message_bound_parties,
)
from shuffledp.accounting.composition.total import _CHECKED_BASIS, _STATED, _rederive_one
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.schemas import schema_id

__all__ = ["populations_from_json", "reports_from_json"]

_KNOWN_METHODS = (*FLIP_METHODS, KRR_CERTIFICATE_METHOD)
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
        if report.method == KRR_CERTIFICATE_METHOD:
            stated = krr_domain_size(report.method, report.parameters)
            if stated != size:
                raise InvalidParameterError(
                    f"{where} ({report.method}) has domain_size={stated!r} but a domain "
                    f"of {size} labels"
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
