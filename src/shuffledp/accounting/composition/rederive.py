"""A release's guarantee re-derived from the parameters it records.

A release states an (ε, δ) and the parameters its certificate was computed
from. Composition never takes the stated pair on trust: :func:`rederive`
recomputes, with the certified accountant of the release's method, the δ its
parameters give at the stated ε, and

* keeps the stated pair when it is implied by the certificate (the certified
  δ at the stated ε is at most the stated δ; a pure certificate's ε is at most
  the stated ε): a weaker claim than the certificate's is still true;
* enters the release at the certificate's value (the larger one) when the
  stated pair misses it by no more than :data:`RELATIVE_TOLERANCE`, the
  floating-point noise of a recomputation, and says so in the report's notes;
* refuses it otherwise, naming the release, its stated pair, the certified δ
  at the stated ε and the certified ε at the stated δ (a guarantee below
  what its parameters certify was edited, or computed by a bug).

The certificates (:func:`certificate_for`), one per method the package writes:

* ``flip-exact`` (``flip-exact-fake-blanket`` in 0.2):
  :func:`~shuffledp.accounting.certificates.flip.flip_delta` (q, k, n);
* ``krr-blanket``: :func:`~shuffledp.accounting.certificates.krr.krr_delta` (ε₀, k, n);
* ``correlated-exact``:
  :func:`~shuffledp.accounting.certificates.correlated.correlated_delta` (α, r, q,
  and the relation ``neighbours`` names);
* ``augmented-exact-pair``:
  :func:`~shuffledp.accounting.certificates.augmented.augmented_delta` (SAGeo's ν,
  q_l, q_r or SBin's M, and β);
* ``segmented-poisson-exact`` and ``segmented-dummy-exact``:
  :func:`~shuffledp.accounting.certificates.segmented.level_delta` per level (λₖ,
  the blanket rate, items per user, message domain and n);
* ``per-user-laplace-local``: pure, ε = Σ Δ/b over the Laplace copies' scales b
  (:func:`~shuffledp.randomizers.laplace.hldp_epsilon`), δ = 0.

Each certificate is also for one neighbouring relation, which the report must
state. A release of the analyzer service adds to its certificate's δ what its
message bounds cost
(:func:`shuffledp.accounting.certificates.message_bounds.honest_cap_delta` for
the parties :func:`message_bound_parties` counts), exactly as the analyzer
does; its re-derivation adds it too. Methods without a certificate here
(another library's, a composed report) give ``None``: the caller decides
whether such a stated guarantee may enter (:mod:`.compose` refuses one read
from a file unless asked to take it as the caller's own claim).

Certified δ values are cached per certificate and ε, so composing a release
with itself, or reading it twice, evaluates its certificate once.

Group: composition (``shuffledp.accounting.composition``); may import the
numerical core, published bounds, certificates and ``shuffledp.privacy``. Two
imports come from elsewhere: ``shuffledp.randomizers.laplace`` (the per-user
copies' sensitivity, as ``certificates.per_user`` uses it), from outside the
accountant, and ``certificates.message_bounds`` (what a service release's
message bounds add to its δ).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

from shuffledp._validation import (
    InvalidParameterError,
    check_epsilon,
    check_flip_probability,
    check_int,
)
from shuffledp._wording import plural
from shuffledp.accounting.certificates.augmented import (
    VARIANTS as AUGMENTED_VARIANTS,
)
from shuffledp.accounting.certificates.augmented import (
    DummyLaw,
    SAGeoLaw,
    SBinLaw,
    augmented_delta,
)
from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    check_neighbours,
    correlated_delta,
)
from shuffledp.accounting.certificates.flip import flip_delta
from shuffledp.accounting.certificates.krr import krr_delta
from shuffledp.accounting.certificates.message_bounds import honest_cap_delta, with_cap_delta
from shuffledp.accounting.certificates.segmented import check_variant, level_delta
from shuffledp.accounting.numerics.search import smallest_passing
from shuffledp.privacy import ApproxDP, PrivacyReport
from shuffledp.randomizers.laplace import (
    check_neighbouring,
    hldp_epsilon,
    neighbouring_in_words,
    normalized_sensitivity,
)

__all__ = [
    "AUGMENTED_METHOD",
    "CORRELATED_METHOD",
    "FLIP_METHOD",
    "FLIP_METHODS",
    "FLIP_METHOD_0_2",
    "KRR_METHOD",
    "PER_USER_METHOD",
    "PER_USER_RELATION_PREFIX",
    "RELATIVE_TOLERANCE",
    "SEGMENTED_METHODS",
    "SEGMENTED_RELATION",
    "Certificate",
    "MissingContextError",
    "Rederived",
    "certificate_for",
    "check_stated",
    "message_bound_parties",
    "number_parameter",
    "rederive",
]

#: ``method`` of each protocol's privacy reports (each equal to its protocol's constant: a
#: test checks them against :mod:`shuffledp.protocols`, which this group may not import).
#: FLIP's and k-RR's are the accounting methods' names (``account delta --method``).
FLIP_METHOD = "flip-exact"
#: FLIP's certificate as releases of shuffledp 0.2 named it: read as :data:`FLIP_METHOD`.
FLIP_METHOD_0_2 = "flip-exact-fake-blanket"
#: Every name a FLIP report's certificate has had.
FLIP_METHODS = (FLIP_METHOD, FLIP_METHOD_0_2)
KRR_METHOD = "krr-blanket"
CORRELATED_METHOD = "correlated-exact"
AUGMENTED_METHOD = "augmented-exact-pair"
#: The segmented reports' methods, by variant (``protocols.segmented.SEGMENTED_PRIVACY_METHODS``).
SEGMENTED_METHODS = {"paper": "segmented-poisson-exact", "dummy": "segmented-dummy-exact"}
PER_USER_METHOD = "per-user-laplace-local"
#: The segmented reports' relation (``protocols.segmented.NEIGHBOURING``).
SEGMENTED_RELATION = "replace-one-set (levels fixed)"
#: What precedes the relation in words in a per-user report's ``neighbouring``.
PER_USER_RELATION_PREFIX = "c-neighbouring histograms (Def. 1 and 3): "

#: A stated value this far (relatively) below its certificate is taken for floating-point
#: noise of the recomputation: the release enters at the certificate's (larger) value.
#: Anything further below is refused.
RELATIVE_TOLERANCE = 1e-9

#: Largest ε the refusal's search for the certified ε at the stated δ looks at.
_EPSILON_SEARCH_MAX = 64.0


class MissingContextError(InvalidParameterError):
    """A known method's certificate needs what only the whole release records.

    (A correlated report under add/remove: the domain size.) A caller may take
    such a report at its stated guarantee as their own claim.
    """


def number_parameter(
    method: str, parameters: Mapping[str, Any], name: str, *, integer: bool
) -> Any:
    """Return ``parameters[name]``: a finite number (an integer if ``integer``).

    Raises:
        InvalidParameterError: Naming the method, the parameter and the value, if
            it is missing or not such a number.
    """
    value = parameters.get(name)
    number: float | None = None
    if not isinstance(value, bool) and isinstance(value, Real):
        number = float(value)
        if not math.isfinite(number):
            number = None
    if number is None or (integer and not number.is_integer()):
        raise InvalidParameterError(
            f"a {method!r} report needs parameters[{name!r}] "
            f"({'an integer' if integer else 'a number'}), got {value!r}"
        )
    return int(number) if integer else number


def _renamed_integer(method: str, parameters: Mapping[str, Any], name: str, old: str) -> Any:
    """A report's integer parameter ``name``, or ``old``, its name in shuffledp 0.2's releases.

    A report holding both must hold the same number under each.

    Raises:
        InvalidParameterError: If neither is an integer, or both are and differ.
    """
    if name not in parameters:
        return number_parameter(method, parameters, old, integer=True)
    value = number_parameter(method, parameters, name, integer=True)
    if old in parameters and parameters[old] != value:
        raise InvalidParameterError(
            f"a {method!r} report states {name} {value!r} and {old} {parameters[old]!r}: "
            "they name the same number"
        )
    return value


def flip_fake_users(method: str, parameters: Mapping[str, Any]) -> int:
    """A FLIP report's fake users per user: ``fake_users``, or ``k`` as 0.2 wrote it.

    Raises:
        InvalidParameterError: If neither is an integer ≥ 0, or both are and differ.
    """
    return check_int(
        _renamed_integer(method, parameters, "fake_users", "k"), "fake_users", minimum=0
    )


def krr_domain_size(method: str, parameters: Mapping[str, Any]) -> int:
    """A k-RR report's domain size: ``domain_size``, or ``k`` as 0.2 wrote it.

    Raises:
        InvalidParameterError: If neither is an integer ≥ 2, or both are and differ.
    """
    return check_int(
        _renamed_integer(method, parameters, "domain_size", "k"), "domain_size", minimum=2
    )


@dataclass(frozen=True)
class Certificate:
    """What a release's parameters certify: its δ at every ε, for one relation.

    Two certificates are equal when their ``key`` (the method and the
    parameters it was built from) is; the δ values are cached by it.

    Attributes:
        key: The method and the parameters the certificate was built from.
        source: What certifies, in words (the function and its parameters).
        relation: The neighbouring relation it is for (a report states it as
            is, or followed by ``":"`` and an explanation).
        delta_at: ε ↦ the certified δ (a service release's message-bound cost included).
        pure_epsilon: For a pure certificate, (ε, 0): its ε; ``delta_at`` is
            then 0 from it on and 1 below it.
    """

    key: tuple[Any, ...]
    source: str
    relation: str
    delta_at: Callable[[float], float] = field(compare=False, hash=False, repr=False)
    pure_epsilon: float | None = None

    def delta(self, epsilon: float) -> float:
        """The certified δ at ``epsilon`` (cached)."""
        return _cached_delta(self, float(epsilon))

    def covers(self, neighbouring: str) -> bool:
        """Whether a report stating ``neighbouring`` states this certificate's relation."""
        return neighbouring == self.relation or neighbouring.startswith(self.relation + ":")


@functools.lru_cache(maxsize=1024)
def _cached_delta(certificate: Certificate, epsilon: float) -> float:
    return float(certificate.delta_at(epsilon))


def message_bound_parties(protocol: str, min_batch_users: Any, variant: Any) -> int:
    """How many parties a service release's certificate counts on could exceed a message bound.

    The analyzer's own count (``shuffledp.service.task.capped_parties``, which
    needs the ``service`` extra; a test checks that the two agree): FLIP and
    correlated, the ``min_batch_users`` clients; augmented SAGeo and S1Geo, the
    shuffler's one dummy draw; k-RR and augmented SBin, none.

    Raises:
        InvalidParameterError: On a protocol the services do not run, or an
            augmented variant that is not one.
    """
    if protocol in ("flip", "correlated"):
        return check_int(min_batch_users, "min_batch_users", minimum=1)
    if protocol == "augmented":
        if variant not in AUGMENTED_VARIANTS:
            raise InvalidParameterError(
                f"an augmented service release needs parameters.variant, one of "
                f"{', '.join(AUGMENTED_VARIANTS)}; got {variant!r}"
            )
        return 0 if variant == "sbin" else 1
    if protocol == "krr":
        return 0
    raise InvalidParameterError(
        f"a service release's protocol must be flip, krr, correlated or augmented, got {protocol!r}"
    )


def _with_message_bounds(
    delta_at: Callable[[float], float], parties: int
) -> Callable[[float], float]:
    """``delta_at`` plus what the message bounds of ``parties`` cost, as the analyzer adds it."""
    if parties == 0:
        return delta_at
    return lambda e: with_cap_delta(delta_at(e), honest_cap_delta(e, parties))


def _flip(
    n: int, parameters: Mapping[str, Any]
) -> tuple[tuple[Any, ...], str, Callable[[float], float]]:
    q = check_flip_probability(number_parameter(FLIP_METHOD, parameters, "q", integer=False))
    k = flip_fake_users(FLIP_METHOD, parameters)
    return (
        (q, k, n),
        f"flip_delta with q={q:.6g}, k={k} fake users per user, n={n:,}",
        lambda e: flip_delta(e, q, k, n),
    )


def _krr(
    n: int, parameters: Mapping[str, Any]
) -> tuple[tuple[Any, ...], str, Callable[[float], float]]:
    epsilon0 = check_epsilon(
        number_parameter(KRR_METHOD, parameters, "epsilon0", integer=False), "epsilon0"
    )
    d = krr_domain_size(KRR_METHOD, parameters)
    return (
        (epsilon0, d, n),
        f"krr_delta with epsilon0={epsilon0:.6g}, k={d}, n={n:,}",
        lambda e: krr_delta(e, epsilon0, d, n),
    )


def _correlated(
    parameters: Mapping[str, Any], domain_size: int | None
) -> tuple[tuple[Any, ...], str, Callable[[float], float], str]:
    alpha = number_parameter(CORRELATED_METHOD, parameters, "alpha", integer=False)
    r = number_parameter(CORRELATED_METHOD, parameters, "flood_r", integer=False)
    q = number_parameter(CORRELATED_METHOD, parameters, "flood_q", integer=False)
    neighbours = check_neighbours(parameters.get("neighbours", "replacement"))
    noise = CorrelatedNoise(alpha, r, q)
    relation = "replace-one" if neighbours == "replacement" else "add-remove"
    if neighbours == "add-remove":
        # The usual add/remove relation composes all d bins at m honest users' noise.
        d = parameters.get("domain_size", domain_size)
        if d is None:
            raise MissingContextError(
                f"a {CORRELATED_METHOD!r} report under add-remove needs the domain size its "
                "certificate composes over (parameters['domain_size']), which a privacy "
                "object alone does not record: give the whole release"
            )
        m = number_parameter(CORRELATED_METHOD, parameters, "min_honest", integer=True)
        size = {"domain_size": d, "min_honest": m}
        return (
            (noise.alpha, noise.flood_r, noise.flood_q, neighbours, d, m),
            f"correlated_delta with alpha={noise.alpha:.6g}, flooding NB(r={r:.6g}, "
            f"q={q:.6g}), neighbours=add-remove, d={d}, min_honest={m}",
            lambda e: correlated_delta(e, noise, neighbours="add-remove", **size),
            relation,
        )
    if "a" in parameters:
        a = number_parameter(CORRELATED_METHOD, parameters, "a", integer=False)
        if not math.isclose(a, noise.a, rel_tol=1e-12):
            raise InvalidParameterError(
                f"a {CORRELATED_METHOD!r} report has parameters a={a!r} and alpha={alpha!r}, "
                f"which disagree (a = -ln(alpha) = {noise.a!r})"
            )
    return (
        (noise.alpha, noise.flood_r, noise.flood_q, neighbours),
        f"correlated_delta with alpha={noise.alpha:.6g}, flooding NB(r={r:.6g}, q={q:.6g}), "
        f"neighbours={neighbours}",
        lambda e: correlated_delta(e, noise, neighbours=neighbours),
        relation,
    )


def _augmented(
    parameters: Mapping[str, Any],
) -> tuple[tuple[Any, ...], str, Callable[[float], float]]:
    variant = parameters.get("variant")
    if variant not in AUGMENTED_VARIANTS:
        raise InvalidParameterError(
            f"a {AUGMENTED_METHOD!r} report needs parameters['variant'], one of "
            f"{', '.join(AUGMENTED_VARIANTS)}; got {variant!r}"
        )
    beta = number_parameter(AUGMENTED_METHOD, parameters, "beta", integer=False)
    law: DummyLaw
    if variant == "sbin":
        trials = number_parameter(AUGMENTED_METHOD, parameters, "trials", integer=True)
        law = SBinLaw(trials)
        shown = f"SBin dummies M={trials}"
    else:
        nu = number_parameter(AUGMENTED_METHOD, parameters, "nu", integer=True)
        q_left = number_parameter(AUGMENTED_METHOD, parameters, "q_left", integer=False)
        q_right = number_parameter(AUGMENTED_METHOD, parameters, "q_right", integer=False)
        law = SAGeoLaw(nu, q_left, q_right)
        shown = f"{variant} dummies nu={nu}, q_left={q_left:.6g}, q_right={q_right:.6g}"
    return (
        (law, beta),
        f"augmented_delta with {shown}, beta={beta:g}",
        lambda e: augmented_delta(e, law, beta),
    )


def _segmented(
    method: str, n: int, parameters: Mapping[str, Any], lam: float
) -> tuple[tuple[Any, ...], str, Callable[[float], float]]:
    variant = check_variant(str(parameters.get("variant")))
    if SEGMENTED_METHODS[variant] != method:
        raise InvalidParameterError(
            f"a {method!r} report has parameters['variant']={variant!r}, whose method is "
            f"{SEGMENTED_METHODS[variant]!r}"
        )
    blanket_rate = number_parameter(method, parameters, "blanket_rate", integer=False)
    items = check_int(
        number_parameter(method, parameters, "items_per_user", integer=True),
        "items_per_user",
        minimum=1,
    )
    domain = check_int(
        number_parameter(method, parameters, "message_domain", integer=True),
        "message_domain",
        minimum=2,
    )

    def delta_at(e: float) -> float:
        return level_delta(
            e,
            lam,
            message_domain=domain,
            items=items,
            n=n,
            blanket_rate=blanket_rate,
            variant=variant,
        )

    return (
        (lam, blanket_rate, items, domain, variant, n),
        f"level_delta with lambda={lam:.6g}, blanket rate m={blanket_rate:g}, {items} items per "
        f"user, message domain {domain}, variant {variant}, n={n:,}",
        delta_at,
    )


def _per_user(parameters: Mapping[str, Any]) -> tuple[tuple[Any, ...], str, float, str]:
    c = number_parameter(PER_USER_METHOD, parameters, "c", integer=False)
    reading = check_neighbouring(parameters.get("neighbouring"), "parameters['neighbouring']")
    sensitivity = normalized_sensitivity(c, reading)
    if "l1_sensitivity" in parameters:
        recorded = number_parameter(PER_USER_METHOD, parameters, "l1_sensitivity", integer=False)
        if recorded != sensitivity:
            raise InvalidParameterError(
                f"a {PER_USER_METHOD!r} report has l1_sensitivity={recorded!r}, but c={c!r} "
                f"under {reading} gives {sensitivity!r}"
            )
    copies = number_parameter(PER_USER_METHOD, parameters, "copies", integer=True)
    names: tuple[str, ...]
    if copies == 2:
        names = ("laplace_scale_w", "laplace_scale_t")
    elif copies == 1:
        names = ("laplace_scale",)
    else:
        raise InvalidParameterError(
            f"a {PER_USER_METHOD!r} report needs parameters['copies'] 1 or 2, got {copies!r}"
        )
    scales = [number_parameter(PER_USER_METHOD, parameters, name, integer=False) for name in names]
    epsilon = math.fsum(hldp_epsilon(b, c, reading) for b in scales)
    return (
        (c, reading, tuple(scales)),
        "the Laplace copies' scales "
        + ", ".join(f"{name}={b:.6g}" for name, b in zip(names, scales, strict=True))
        + f" at L1 sensitivity {sensitivity:g} (c={c:g}, {reading})",
        epsilon,
        PER_USER_RELATION_PREFIX + neighbouring_in_words(c, reading),
    )


def _pure_delta(certified: float, epsilon: float) -> float:
    """δ of a pure (ε_c, 0) certificate at ε: 0 from ε_c on; below it, 1 (always true)."""
    return 0.0 if epsilon >= certified else 1.0


def certificate_for(
    method: str,
    n: int,
    parameters: Mapping[str, Any],
    *,
    parties: int = 0,
    domain_size: int | None = None,
) -> Certificate | None:
    """The certificate of a report of ``method`` with these parameters, or ``None`` if unknown.

    A segmented report is one level's (its ``parameters['lambda']``); a
    personalized report (several levels) is re-derived level by level by
    :func:`rederive`.

    Args:
        method: The report's method.
        n: The number of users the report is certified for.
        parameters: The report's parameters (what its certificate was computed from).
        parties: For a release of the analyzer service, the parties whose
            message bounds it charges (:func:`message_bound_parties`); 0 otherwise.
        domain_size: The release's domain size d, when it records its domain
            (the correlated certificate under add/remove composes all d bins).

    Raises:
        InvalidParameterError: If the method is known but a parameter it needs
            is missing, out of range or inconsistent with another.
    """
    n = check_int(n, "n", minimum=1)
    parties = check_int(parties, "parties", minimum=0)
    relation = "replace-one"
    pure: float | None = None
    if method in FLIP_METHODS:
        method = FLIP_METHOD  # one key for both names: the same certificate
        key, source, delta_at = _flip(n, parameters)
    elif method == KRR_METHOD:
        key, source, delta_at = _krr(n, parameters)
    elif method == CORRELATED_METHOD:
        key, source, delta_at, relation = _correlated(parameters, domain_size)
    elif method == AUGMENTED_METHOD:
        key, source, delta_at = _augmented(parameters)
    elif method in SEGMENTED_METHODS.values():
        lam = number_parameter(method, parameters, "lambda", integer=False)
        key, source, delta_at = _segmented(method, n, parameters, lam)
        relation = SEGMENTED_RELATION
    elif method == PER_USER_METHOD:
        key, source, pure, relation = _per_user(parameters)
        delta_at = functools.partial(_pure_delta, pure)
    else:
        return None
    if parties:
        bounded = plural(parties, "party", "parties")
        source += f", plus the message bounds of {bounded} (honest_cap_delta)"
    return Certificate(
        key=(method, *key, parties),
        source=source,
        relation=relation,
        delta_at=_with_message_bounds(delta_at, parties),
        pure_epsilon=pure,
    )


@dataclass(frozen=True)
class Rederived:
    """A stated guarantee checked against its certificate.

    Attributes:
        stated: The (ε, δ) the report stated.
        guarantee: The (ε, δ) it enters composition with: ``stated``, or the
            certificate's value where the stated one missed it by floating-point noise.
        source: What certified it, in words.
    """

    stated: ApproxDP
    guarantee: ApproxDP
    source: str

    @property
    def adjusted(self) -> bool:
        """Whether the release enters at the certificate's value instead of its stated one."""
        return self.guarantee != self.stated

    def note(self) -> str:
        """What the re-derivation did, in words."""
        if not self.adjusted:
            return f"its stated (epsilon, delta) re-derived from its parameters ({self.source})"
        return (
            f"its stated ({self.stated.epsilon!r}, {self.stated.delta!r}) was below what its "
            f"parameters certify by floating-point noise (at most a relative "
            f"{RELATIVE_TOLERANCE:g}); it enters at the certified ({self.guarantee.epsilon!r}, "
            f"{self.guarantee.delta!r}) ({self.source})"
        )


def _certified_epsilon(certificate: Certificate, delta: float, above: float) -> float | None:
    """The smallest ε (rounded up, relative 1e-4) with certified δ ≤ ``delta``, ``None`` if > 64."""

    def passes(e: float) -> bool:
        return certificate.delta(e) <= delta

    lo, hi = above, min(max(2.0 * above, 0.125), _EPSILON_SEARCH_MAX)
    while not passes(hi):
        if hi >= _EPSILON_SEARCH_MAX:
            return None
        lo, hi = hi, min(2.0 * hi, _EPSILON_SEARCH_MAX)
    return smallest_passing(passes, lo, hi, rtol=1e-4)


def check_stated(
    stated: ApproxDP, certificate: Certificate, *, where: str, method: str
) -> Rederived:
    """Check a stated (ε, δ) against its certificate (module docstring).

    Raises:
        InvalidParameterError: Naming ``where``, the stated pair and what the
            parameters certify, if the stated pair is below the certificate by
            more than :data:`RELATIVE_TOLERANCE`.
    """
    epsilon, delta = stated.epsilon, stated.delta
    if certificate.pure_epsilon is not None:
        certified_epsilon = certificate.pure_epsilon
        if certified_epsilon <= epsilon:
            return Rederived(stated, stated, certificate.source)
        if certified_epsilon <= epsilon * (1.0 + RELATIVE_TOLERANCE):
            return Rederived(stated, ApproxDP(certified_epsilon, delta), certificate.source)
        raise InvalidParameterError(
            f"{where} ({method}) states ({epsilon:g}, {delta:.6g}), below what its parameters "
            f"certify: {certificate.source} give epsilon = {certified_epsilon:.6g} (with delta "
            "= 0); a guarantee below its parameters' certificate is not composed (was the "
            "document edited?)"
        )
    certified = certificate.delta(epsilon)
    if certified <= delta:
        return Rederived(stated, stated, certificate.source)
    if certified <= delta * (1.0 + RELATIVE_TOLERANCE):
        return Rederived(stated, ApproxDP(epsilon, certified), certificate.source)
    found = _certified_epsilon(certificate, delta, epsilon)
    at_delta = (
        f"epsilon = {found:.6g} at delta = {delta:.6g}"
        if found is not None
        else f"no epsilon up to {_EPSILON_SEARCH_MAX:g} at delta = {delta:.6g}"
    )
    raise InvalidParameterError(
        f"{where} ({method}) states ({epsilon:g}, {delta:.6g}), below what its parameters "
        f"certify: {certificate.source} gives delta = {certified:.3g} at epsilon = {epsilon:g}, "
        f"and {at_delta}; a guarantee below its parameters' certificate is not composed (was "
        "the document edited?)"
    )


def _check_relation(report: PrivacyReport, certificate: Certificate, where: str) -> None:
    if not certificate.covers(report.neighbouring):
        raise InvalidParameterError(
            f"{where} ({report.method}) states the neighbouring relation "
            f"{report.neighbouring!r}, but its certificate is for {certificate.relation!r}"
        )


def _level_parameters(report: PrivacyReport, where: str) -> list[tuple[float, float, float]]:
    """(εₖ, δₖ, λₖ) of a personalized report's levels."""
    params = report.parameters
    names = ("level_epsilons", "level_deltas", "level_lambdas")
    columns = [params.get(name) for name in names]
    if (
        not all(isinstance(c, list | tuple) for c in columns)
        or len({len(c) for c in columns if isinstance(c, list | tuple)}) != 1
    ):
        raise InvalidParameterError(
            f"{where} ({report.method}) is a personalized release whose levels cannot be "
            f"re-derived: it needs parameters {', '.join(names)} (one entry per level) and the "
            "levels' blanket_rate, items_per_user, variant and message_domain; got "
            f"{', '.join(f'{n}={c!r}' for n, c in zip(names, columns, strict=True))} (a "
            "composed document written before shuffledp re-derived its inputs does not "
            "record them: compose the original releases)"
        )
    rows = []
    for k, (e, d, lam) in enumerate(zip(*columns, strict=True)):
        values = {"epsilon": e, "delta": d, "lambda": lam}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
                raise InvalidParameterError(
                    f"{where} ({report.method}) level {k} has {name}={value!r}; expected a number"
                )
        rows.append((float(e), float(d), float(lam)))
    if not rows:
        raise InvalidParameterError(f"{where} ({report.method}) has no levels")
    return rows


def _rederive_levels(report: PrivacyReport, where: str) -> tuple[PrivacyReport, str]:
    """A personalized report: every level against its certificate, then the weakest level."""
    levels = _level_parameters(report, where)
    entered: list[ApproxDP] = []
    sources: list[str] = []
    notes: list[str] = []
    for k, (epsilon, delta, lam) in enumerate(levels):
        certificate = certificate_for(report.method, report.n, {**report.parameters, "lambda": lam})
        assert certificate is not None  # a segmented method
        _check_relation(report, certificate, where)
        checked = check_stated(
            ApproxDP(epsilon, delta), certificate, where=f"{where} level {k}", method=report.method
        )
        entered.append(checked.guarantee)
        sources.append(checked.source)
        if checked.adjusted:
            notes.append(f"level {k}: {checked.note()}")
    weakest = ApproxDP(max(g.epsilon for g in entered), max(g.delta for g in entered))
    stated = report.guarantee
    if weakest.epsilon <= stated.epsilon and weakest.delta <= stated.delta:
        guarantee = stated
    elif weakest.epsilon <= stated.epsilon * (1.0 + RELATIVE_TOLERANCE) and (
        weakest.delta <= stated.delta * (1.0 + RELATIVE_TOLERANCE)
    ):
        guarantee = ApproxDP(max(weakest.epsilon, stated.epsilon), max(weakest.delta, stated.delta))
    else:
        raise InvalidParameterError(
            f"{where} ({report.method}) states ({stated.epsilon:g}, {stated.delta:.6g}) for a "
            f"personalized release whose weakest level is ({weakest.epsilon:g}, "
            f"{weakest.delta:.6g}): a guarantee below its levels' is not composed (was the "
            "document edited?)"
        )
    basis = f"re-derived level by level ({len(levels)} levels: " + "; ".join(sources) + ")"
    if guarantee != stated:
        notes.append(
            f"entered at ({guarantee.epsilon!r}, {guarantee.delta!r}), its levels' weakest"
        )
    return _entered(report, guarantee, notes), basis


def _entered(report: PrivacyReport, guarantee: ApproxDP, notes: list[str]) -> PrivacyReport:
    if guarantee == report.guarantee and not notes:
        return report
    text = "; ".join([report.notes, *notes] if report.notes else notes)
    return dataclasses.replace(report, guarantee=guarantee, notes=text)


def rederive(
    report: PrivacyReport, *, where: str, parties: int = 0, domain_size: int | None = None
) -> tuple[PrivacyReport, str] | None:
    """Check a report's stated guarantee against its parameters' certificate.

    Args:
        report: The report (one release; a personalized one with its levels'
            parameters, as :func:`~shuffledp.accounting.composition.compose.weakest_level`
            records them).
        where: How errors name the report (``"privacy object #2"``, a file).
        parties: For a release of the analyzer service, the parties whose message
            bounds its δ charges (:func:`message_bound_parties`); 0 otherwise.
        domain_size: The release's domain size, when the document records its domain.

    Returns:
        ``None`` if no certificate here covers the report's method; otherwise
        the report to compose (the same report, or one entering at the
        certificate's value with a note saying why) and what certified it, in words.

    Raises:
        InvalidParameterError: If the method is known but its parameters are
            missing or inconsistent, it states another neighbouring relation than
            its certificate's, or its stated guarantee is below the certificate's
            (naming ``where``, the stated pair and what the parameters certify);
            :class:`MissingContextError` if the certificate needs what only the
            whole release records.
    """
    try:
        if report.parameters.get("personalized") is True:
            if report.method not in SEGMENTED_METHODS.values():
                return None
            return _rederive_levels(report, where)
        certificate = certificate_for(
            report.method, report.n, report.parameters, parties=parties, domain_size=domain_size
        )
    except InvalidParameterError as exc:
        if str(exc).startswith(where):
            raise
        raise type(exc)(f"{where}: {exc}") from None
    if certificate is None:
        return None
    _check_relation(report, certificate, where)
    try:
        checked = check_stated(report.guarantee, certificate, where=where, method=report.method)
    except InvalidParameterError as exc:
        if str(exc).startswith(where):
            raise
        raise InvalidParameterError(f"{where}: {exc}") from None
    notes = [checked.note()] if checked.adjusted else []
    return _entered(report, checked.guarantee, notes), f"re-derived: {checked.source}"
