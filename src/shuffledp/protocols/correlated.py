"""The correlated protocol: signed messages whose flooding cancels in the estimate.

Ghazi, Kumar, Manurangsi & Pagh, "Private counting from anonymous messages:
near-optimal accuracy with vanishing communication overhead" (ICML 2020,
arXiv 2106.04247); Ghazi, Kumar, Manurangsi, Pagh & Sinha, "Differentially
private aggregation in the shuffle model: almost central accuracy in almost a
single message" (ICML 2021, arXiv 2109.13158).

Every user sends (x, +1) and, per bin, noise shares of (j, +1) and (j, −1)
messages (:mod:`shuffledp.randomizers.correlated`). With m honest users the
analyzer sees, per bin, N⁺ = h + A + W and N⁻ = A′ + W with A, A′ ~ Geo(α),
W ~ NB(r, q) (more users: more noise, post-processing), and estimates
ĥ_j = N⁺_j − N⁻_j = h_j + DLap(a): the flooding W cancels, so the error is that of
the central discrete Laplace DLap(a), unbiased, with standard deviation
√(2α)/(1 − α) at m users and √(2(n/m)α)/(1 − α) when all n send noise (exact,
not estimated). The privacy of the view (N⁺_j, N⁻_j)_j is computed exactly by
:func:`shuffledp.accounting.certificates.correlated.correlated_delta`.

Calibration (:func:`calibrate_correlated`): α is the largest whose per-bin
standard deviation at m users is at most (1 + slack) times that of the central
DLap at the same ε (:func:`~shuffledp.accounting.certificates.correlated.largest_alpha`); the
budget the two-sided part leaves goes to the flooding, the cheapest NB(r, q)
the exact accountant certifies
(:func:`~shuffledp.accounting.certificates.correlated.cheapest_flooding`);
a few larger a are tried and the one with the fewest expected messages kept.
The reported δ is the certificate at the chosen noise, at most the target.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from numbers import Integral, Real
from typing import Any, ClassVar, overload

import numpy as np

from shuffledp._rng import SeedLike
from shuffledp._validation import (
    DataError,
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    Neighbours,
    _central_parameter,
    _cheapest_flooding,
    _correlated_delta,
    central_dlap_parameter,
    check_add_remove_size,
    check_neighbours,
    correlated_delta,
    correlated_epsilon,
    dlap_std,
    largest_alpha,
    window_floor,
)
from shuffledp.accounting.reproductions.correlated_paper import (
    PAPER_GAMMA,
    PaperCorrelatedRule,
    paper_correlated_noise,
    paper_flooding,
)
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import PrivacyReport
from shuffledp.protocols.base import (
    CalibratedOnRun,
    CalibratedProtocol,
    DomainSpec,
    IntArray,
    certified_report,
    check_one_target,
    check_size,
    check_target,
    fixed_guarantee,
)
from shuffledp.randomizers.correlated import CorrelatedRandomizer

__all__ = [
    "A_STEPS",
    "CORRELATED_ESTIMATOR",
    "CORRELATED_PRIVACY_METHOD",
    "DEFAULT_SLACK",
    "MAX_FLOOD_MEAN",
    "CorrelatedCalibration",
    "CorrelatedProtocol",
    "MinHonest",
    "calibrate_correlated",
    "correlated_parameters",
    "paper_correlated_calibration",
    "resolve_min_honest",
]

#: Name of the accountant behind every privacy report of the protocol.
CORRELATED_PRIVACY_METHOD = "correlated-exact"
#: Name of the estimator ĥ_j = N⁺_j − N⁻_j.
CORRELATED_ESTIMATOR = "correlated-difference"
#: Default accuracy slack: per-bin std at most 1.1 times the central discrete Laplace's.
DEFAULT_SLACK = 0.10
#: Larger a tried after the first, as shares of the gap between it and the central
#: parameter (ε/2 under replacement): a larger a has less error and leaves less budget
#: to the flooding, and at the central parameter no flooding certifies anything.
A_STEPS: tuple[float, ...] = (0.1, 0.2, 0.3)
#: Largest flooding mean E[W] per bin accepted: the exact accountant's window grows with
#: it (about 1 GB of memory at 5e6), and such a flooding sends 2e7·d/m messages per user.
MAX_FLOOD_MEAN = 1e7

#: ``min_honest``: a count of users (int), a fraction of n in (0, 1] (float), or None (n).
MinHonest = int | float | None

_RELATIONS = {
    "replacement": "replace-one: two datasets of the same size that differ in one user's value",
    "add-remove": (
        "add-remove: one user present or absent; an absent user sends nothing, neither "
        "its value nor its noise shares (the dataset with the user holds min_honest "
        "honest users)"
    ),
}


def resolve_min_honest(min_honest: MinHonest, n: int, name: str = "min_honest") -> int:
    """Return m, the number of users whose noise the guarantee counts on.

    Args:
        min_honest: ``None`` (all n users), an integer count from 1 to n, or a
            fraction f in (0, 1] of n (a float; m = ⌈f·n⌉ with f read as the
            decimal it prints as, so 0.9 of 100,000 is 90,000).
        n: Number of users.
        name: The parameter's name in error messages.

    Raises:
        InvalidParameterError: If ``min_honest`` is none of these.
    """
    n = check_int(n, "n", minimum=1)
    if min_honest is None:
        return n
    allowed = f"a count of users (an integer from 1 to n={n}) or a fraction of n in (0, 1]"
    if isinstance(min_honest, bool):
        raise InvalidParameterError(f"{name} must be {allowed}, got {min_honest!r}")
    if isinstance(min_honest, Integral):
        if not 1 <= int(min_honest) <= n:
            raise InvalidParameterError(f"{name} must be {allowed}, got {min_honest!r}")
        return int(min_honest)
    if isinstance(min_honest, Real) and math.isfinite(float(min_honest)):
        fraction = float(min_honest)
        if 0.0 < fraction <= 1.0:
            return max(1, math.ceil(Fraction(repr(fraction)) * n))
    raise InvalidParameterError(f"{name} must be {allowed}, got {min_honest!r}")


@dataclass(frozen=True)
class CorrelatedCalibration:
    """The correlated protocol's parameters for a target (ε, δ) and what they buy.

    Attributes:
        method: ``"exact"`` (:func:`calibrate_correlated`), ``"fixed"`` (hand-picked,
            :func:`correlated_parameters`) or ``"paper"`` (:func:`paper_correlated_calibration`).
        n: Number of users.
        domain_size: d.
        epsilon: ε of the guarantee.
        target_delta: The δ asked for (with hand-picked parameters at ε: the certificate).
        neighbours: ``"replacement"`` or ``"add-remove"``.
        min_honest: m, the users whose noise shares the guarantee counts on.
        slack: The accuracy slack of the calibration (``None`` when not calibrated).
        noise: The per-bin totals at m users: α = e^{−a} and the flooding NB(r, q).
        delta: Certified δ at ``epsilon``
            (:func:`~shuffledp.accounting.certificates.correlated.correlated_delta`).
        delta_lower: The same exact δ rounded down: the δ of a concrete neighbouring
            pair when exactly m users' shares are present (how tight ``delta`` is).
        notes: What the calibration chose on the caller's behalf.
    """

    method: str
    n: int
    domain_size: int
    epsilon: float
    target_delta: float
    neighbours: str
    min_honest: int
    slack: float | None
    noise: CorrelatedNoise
    delta: float
    delta_lower: float
    notes: tuple[str, ...] = ()

    @property
    def a(self) -> float:
        """The discrete Laplace parameter a = −ln α."""
        return self.noise.a

    @property
    def alpha(self) -> float:
        """α = e^{−a}."""
        return self.noise.alpha

    @property
    def flood_r(self) -> float:
        """The flooding's shape r (per bin, at m users)."""
        return self.noise.flood_r

    @property
    def flood_q(self) -> float:
        """The flooding's probability q."""
        return self.noise.flood_q

    @property
    def flood_mean(self) -> float:
        """E[W] = rq/(1 − q) per bin, at m users."""
        return self.noise.flood_mean

    @property
    def central_std(self) -> float:
        """Standard deviation of the central discrete Laplace at ε (DLap(ε/2) under replacement)."""
        return dlap_std(central_dlap_parameter(self.epsilon, check_neighbours(self.neighbours)))

    @property
    def per_bin_std(self) -> float:
        """Standard deviation of every estimated count with m users' noise: √(2α)/(1 − α)."""
        return self.noise.per_bin_std

    @property
    def per_bin_std_all_users(self) -> float:
        """Standard deviation of every estimated count when all n send noise: √(2(n/m)α)/(1 − α)."""
        return math.sqrt(2.0 * (self.n / self.min_honest) * self.alpha) / (1.0 - self.alpha)

    @property
    def std_ratio(self) -> float:
        """``per_bin_std`` over the central discrete Laplace's (≤ 1 + slack when calibrated)."""
        return self.per_bin_std / self.central_std

    @property
    def expected_messages_per_user(self) -> float:
        """E[messages per user] = 1 + d·(2α/(1 − α) + 2rq/(1 − q))/m."""
        return 1.0 + self.domain_size * self.noise.messages_per_bin / self.min_honest

    def assumption(self) -> str:
        """The statement the guarantee rests on: at least m users send their noise shares."""
        return (
            f"at least {self.min_honest} of the {self.n} users (min_honest) run the randomizer "
            "and send all their noise shares, which reach the shuffler; users who drop out or "
            "collude with the analyzer remove their shares, and with fewer than "
            f"{self.min_honest} honest users the guarantee does not hold"
        )

    def privacy_report(self) -> PrivacyReport:
        """Return the certified guarantee of one execution."""
        return certified_report(
            self,
            CORRELATED_PRIVACY_METHOD,
            neighbouring=_RELATIONS[self.neighbours],
            parameters={
                "a": self.a,
                "alpha": self.alpha,
                "flood_r": self.flood_r,
                "flood_q": self.flood_q,
                "min_honest": self.min_honest,
                "neighbours": self.neighbours,
                "domain_size": self.domain_size,
            },
            notes=(
                "exact hockey-stick divergence of the analyzer's view (N+_j, N-_j) per bin, "
                "N+ = h + Geo(alpha) + NB(r, q), N- = Geo(alpha) + the same NB(r, q) at "
                "min_honest users' noise (more noise is post-processing); under replacement "
                "the two bins a moving user changes are composed exactly; lower_bound_delta "
                "is the same sum rounded down (exactly min_honest users' noise present)"
            ),
            assumptions=(self.assumption(),),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary (``account correlated --json``)."""
        return {
            "method": self.method,
            "epsilon": self.epsilon,
            "target_delta": self.target_delta,
            "neighbours": self.neighbours,
            "min_honest": self.min_honest,
            "slack": self.slack,
            "a": self.a,
            "alpha": self.alpha,
            "flooding": {"r": self.flood_r, "q": self.flood_q, "mean": self.flood_mean},
            "delta": self.delta,
            "delta_lower": self.delta_lower,
            "per_bin_std": self.per_bin_std,
            "per_bin_std_all_users": self.per_bin_std_all_users,
            "central_std": self.central_std,
            "std_ratio": self.std_ratio,
            "messages_per_user": self.expected_messages_per_user,
        }


def _build(
    method: str,
    n: int,
    d: int,
    epsilon: float,
    target_delta: float,
    neighbours: Neighbours,
    m: int,
    slack: float | None,
    noise: CorrelatedNoise,
    certified: float,
    notes: tuple[str, ...],
) -> CorrelatedCalibration:
    return CorrelatedCalibration(
        method=method,
        n=n,
        domain_size=d,
        epsilon=epsilon,
        target_delta=target_delta,
        neighbours=neighbours,
        min_honest=m,
        slack=slack,
        noise=noise,
        delta=certified,
        delta_lower=correlated_delta(
            epsilon, noise, neighbours=neighbours, rounding="down", domain_size=d, min_honest=m
        ),
        notes=notes,
    )


def _check_flood_size(noise: CorrelatedNoise, what: str) -> None:
    if noise.flood_mean > MAX_FLOOD_MEAN:
        raise InvalidParameterError(
            f"{what} has a flooding mean E[W] = {noise.flood_mean:.4g} messages per bin, above "
            f"the {MAX_FLOOD_MEAN:g} the exact accountant handles (its memory grows with E[W]); "
            "choose a smaller r or q"
        )


def _min_honest_notes(min_honest: MinHonest, m: int, n: int) -> list[str]:
    if min_honest is None:
        return [
            f"min_honest not given: the guarantee counts on the noise shares of all n={n} "
            "users (a dropout or a user colluding with the analyzer voids it; set min_honest)"
        ]
    return [f"min_honest={min_honest!r}: the guarantee counts on {m} users' noise shares"]


@functools.lru_cache(maxsize=64)
def _cheapest_noise(
    epsilon: float, delta: float, slack: float, neighbours: Neighbours, d: int, m: int
) -> CorrelatedNoise:
    """The calibration's search (:func:`calibrate_correlated`), cached.

    Under replacement the certificate depends on neither n, d nor m (``d = m = 0``
    in the key), so every run at the same (ε, δ, slack) shares one search. Its
    inputs were checked once by :func:`calibrate_correlated`: each α tried runs the
    unchecked search.
    """
    size = None if neighbours == "replacement" else (d, m)
    central_a = _central_parameter(epsilon, neighbours)
    alpha0 = largest_alpha((1.0 + slack) * dlap_std(central_a))
    try:
        best = _cheapest_flooding(epsilon, delta, alpha0, size)
    except InvalidParameterError as exc:
        raise InvalidParameterError(
            f"slack={slack:g} leaves no flooding that reaches delta={delta:g} at "
            f"epsilon={epsilon:g} with a={-math.log(alpha0):.4g}; allow a larger slack "
            f"({exc})"
        ) from None
    a0 = best.a
    for step in A_STEPS:
        try:
            candidate = _cheapest_flooding(
                epsilon, delta, math.exp(-(a0 + step * (central_a - a0))), size
            )
        except InvalidParameterError:
            break
        if candidate.messages_per_bin >= best.messages_per_bin:
            break
        best = candidate
    return best


def calibrate_correlated(
    n: int,
    domain_size: int,
    epsilon: float,
    delta: float,
    *,
    slack: float = DEFAULT_SLACK,
    min_honest: MinHonest = None,
    neighbours: Neighbours = "replacement",
) -> CorrelatedCalibration:
    """Choose (a, r, q) for a target (ε, δ): near-central error, fewest messages.

    α = ``largest_alpha((1 + slack)·dlap_std(central_dlap_parameter(ε, neighbours)))``,
    so every estimated count's standard deviation at m users is at most
    (1 + slack) times the central discrete Laplace's; the flooding is the
    cheapest NB(r, q) the exact accountant certifies at that α
    (:func:`~shuffledp.accounting.certificates.correlated.cheapest_flooding`). Larger a (less
    error; :data:`A_STEPS` of the way to the central parameter, never reaching
    it) are tried while they lower the expected messages per user,
    1 + d·(2α/(1 − α) + 2rq/(1 − q))/m; the cheapest is kept. The search takes about
    0.07 s CPU at ε = 1, δ = 1e-6 and slack 0.1, and is cached in memory (under
    replacement it depends on neither n, d nor m); a tiny slack leaves little budget
    to the flooding and makes it slower (about 7 s at slack 0.001). Under add/remove
    the absent user's own shares are visible in all d bins, so the search also
    depends on d and m, and refuses an m too small to hide them.

    Args:
        n: Number of users.
        domain_size: d ≥ 2.
        epsilon: Target ε > 0.
        delta: Target δ in (0, 1).
        slack: Accuracy slack > 0 (default 0.10: at most 10% above the central std).
        min_honest: m (see :func:`resolve_min_honest`; default: all n users).
        neighbours: ``"replacement"`` (default) or ``"add-remove"``.

    Returns:
        The calibration; its ``delta`` is
        :func:`~shuffledp.accounting.certificates.correlated.correlated_delta` of the
        chosen noise at ε, at most ``delta``.

    Raises:
        InvalidParameterError: On a bad parameter, or if the slack leaves no
            budget for a flooding that reaches δ.
    """
    n, d, epsilon, delta = check_target(n, domain_size, epsilon, delta)
    slack = check_epsilon(slack, "slack")
    neighbours = check_neighbours(neighbours)
    m = resolve_min_honest(min_honest, n)
    size = check_add_remove_size(neighbours, d, m)
    central = dlap_std(_central_parameter(epsilon, neighbours))
    alpha0 = largest_alpha((1.0 + slack) * central)
    floor = window_floor(alpha0)
    if delta <= floor:
        raise InvalidParameterError(
            f"delta={delta:g} is not above what the certificate always charges at this "
            f"epsilon and slack: {floor:.3g} (the flooding mass its windows leave out); ask "
            "for a larger delta"
        )
    best = _cheapest_noise(epsilon, delta, slack, neighbours, d if size else 0, m if size else 0)
    certified = _correlated_delta(epsilon, best, size)  # correlated_delta, inputs checked above
    if not certified <= delta:  # cheapest_flooding only returns certified noise; guarded anyway
        raise InvalidParameterError(
            f"the calibrated noise has certified delta {certified:.3g} above the target {delta:g}"
        )
    notes = _min_honest_notes(min_honest, m, n)
    notes.append(
        f"a={best.a:.6g} (per-bin std {best.per_bin_std:.4g} at {m} users, "
        f"{best.per_bin_std / central:.4f} times the central discrete Laplace's, slack "
        f"{slack:g}); flooding NB(r={best.flood_r:.6g}, q={best.flood_q:.6g}), "
        + (
            "the cheapest the exact accountant certifies"
            if size is None
            else "certified by the exact add/remove accountant, the cheapest on its search's "
            "grid of q (the user's own shares make delta rise with r past a point)"
        )
    )
    return _build(
        "exact", n, d, epsilon, delta, neighbours, m, slack, best, certified, tuple(notes)
    )


def correlated_parameters(
    *,
    a: float,
    r: float,
    q: float,
    n: int,
    domain_size: int,
    epsilon: float | None = None,
    delta: float | None = None,
    min_honest: MinHonest = None,
    neighbours: Neighbours = "replacement",
) -> CorrelatedCalibration:
    """Return what hand-picked (a, r, q) give: the certified δ at ``epsilon``, or ε at ``delta``.

    Raises:
        InvalidParameterError: On a bad parameter, unless exactly one of
            ``epsilon`` and ``delta`` is given, or if the noise certifies nothing
            (δ = 1 at ε, or no ε up to 50 at δ).
    """
    n, d = check_size(n, domain_size)
    neighbours = check_neighbours(neighbours)
    m = resolve_min_honest(min_honest, n)
    noise = CorrelatedNoise.from_a(a, r, q)
    _check_flood_size(noise, f"a={a:g}, r={r:g}, q={q:g}")
    check_add_remove_size(neighbours, d, m)
    epsilon, target, certified = fixed_guarantee(
        epsilon,
        delta,
        delta_at=lambda e: correlated_delta(
            e, noise, neighbours=neighbours, domain_size=d, min_honest=m
        ),
        epsilon_at=lambda t: correlated_epsilon(
            t, noise, neighbours=neighbours, domain_size=d, min_honest=m
        ),
    )
    if not certified < 1.0:
        raise InvalidParameterError(
            f"a={a:g}, r={r:g}, q={q:g} certify nothing at epsilon={epsilon:g} (delta = 1); "
            "raise the flooding r or q"
        )
    notes = tuple(_min_honest_notes(min_honest, m, n))
    return _build("fixed", n, d, epsilon, target, neighbours, m, None, noise, certified, notes)


def paper_correlated_calibration(
    n: int,
    domain_size: int,
    epsilon: float,
    delta: float,
    *,
    gamma: float = PAPER_GAMMA,
    min_honest: MinHonest = None,
    neighbours: Neighbours = "replacement",
) -> tuple[CorrelatedCalibration, PaperCorrelatedRule]:
    """The papers' rule as a calibration, certified by the exact accountant.

    The rule is :func:`~shuffledp.accounting.reproductions.correlated_paper.paper_correlated_noise`.

    Returns the rule's noise as a calibration (method ``"paper"``) whose δ is
    the exact certificate at ε, and the rule itself (with the exact ε at δ).

    Raises:
        InvalidParameterError: On a bad parameter, or if the rule's noise is not
            certified at (ε, δ) by the exact accountant.
    """
    n, d = check_size(n, domain_size)
    neighbours = check_neighbours(neighbours)
    m = resolve_min_honest(min_honest, n)
    noise, _, _ = paper_flooding(epsilon, delta, gamma, neighbours=neighbours)
    _check_flood_size(noise, f"the papers' rule at epsilon={epsilon:g}, delta={delta:g}")
    check_add_remove_size(neighbours, d, m)
    rule = paper_correlated_noise(
        epsilon, delta, gamma, neighbours=neighbours, domain_size=d, min_honest=m
    )
    certified = rule.delta_at_epsilon
    if not certified <= rule.delta:
        raise InvalidParameterError(
            f"the papers' rule gives certified delta {certified:.3g} above the target "
            f"{rule.delta:g} at epsilon={rule.epsilon:g}"
        )
    calibration = _build(
        "paper", n, d, rule.epsilon, rule.delta, neighbours, m, None, rule.noise, certified, ()
    )
    return calibration, rule


def _check_before_data(min_honest: MinHonest, neighbours: Neighbours) -> None:
    """Check ``min_honest`` and ``neighbours`` as far as they can be without n."""
    check_neighbours(neighbours)
    if isinstance(min_honest, Integral) and not isinstance(min_honest, bool):
        check_int(min_honest, "min_honest", minimum=1)  # at most n: checked with the data
    elif min_honest is not None:
        resolve_min_honest(min_honest, 1)  # a fraction of n in (0, 1]


class CorrelatedProtocol(CalibratedProtocol[CorrelatedCalibration, CorrelatedRandomizer]):
    """Signed messages with correlated noise, with its exact privacy report.

    The count path draws (N⁺_j, N⁻_j) from their exact law; every message adds
    one to one of the 2d counts. The privacy report is certified at
    ``min_honest`` honest users.

    Args:
        calibration: From :func:`calibrate_correlated`, :func:`correlated_parameters`
            or :func:`paper_correlated_calibration`.
        labels: The public domain's bin labels (``None``: bin indices only).
    """

    name: ClassVar[str] = "correlated"

    def __init__(
        self, calibration: CorrelatedCalibration, *, labels: Iterable[Any] | None = None
    ) -> None:
        if not isinstance(calibration, CorrelatedCalibration):
            raise InvalidParameterError(
                f"calibration must be a CorrelatedCalibration, got {type(calibration).__name__}"
            )
        super().__init__(calibration, labels=labels)
        self.randomizer = CorrelatedRandomizer(
            calibration.domain_size, calibration.noise, calibration.min_honest
        )

    @overload
    @classmethod
    def calibrated(
        cls,
        n: int,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        slack: float = DEFAULT_SLACK,
        min_honest: MinHonest = None,
        neighbours: Neighbours = "replacement",
    ) -> CorrelatedProtocol: ...

    @overload
    @classmethod
    def calibrated(
        cls,
        n: None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        slack: float = DEFAULT_SLACK,
        min_honest: MinHonest = None,
        neighbours: Neighbours = "replacement",
    ) -> CalibratedOnRun[CorrelatedProtocol]: ...

    @classmethod
    def calibrated(
        cls,
        n: int | None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        slack: float = DEFAULT_SLACK,
        min_honest: MinHonest = None,
        neighbours: Neighbours = "replacement",
    ) -> CorrelatedProtocol | CalibratedOnRun[CorrelatedProtocol]:
        """Return a protocol calibrated by :func:`calibrate_correlated`.

        Args:
            n: Number of users, or ``None`` to calibrate for the number of
                users in the data each run is given (a
                :class:`~shuffledp.protocols.base.CalibratedOnRun`; its runs
                report the certificate at that number, ``min_honest`` resolved
                against it).
            domain: The public domain: its size d, or its labels in bin order.
            epsilon: Target ε.
            delta: Target δ.
            slack: Accuracy slack (per-bin std at most (1 + slack) × the central DLap's).
            min_honest: Users whose noise the guarantee counts on: a count, a
                fraction of n in (0, 1], or ``None`` for all n.
            neighbours: ``"replacement"`` or ``"add-remove"``.
        """
        if n is None:  # what can be checked before the data come: now
            check_epsilon(epsilon)
            check_delta(delta)
            check_epsilon(slack, "slack")
            _check_before_data(min_honest, neighbours)
        return cls._on_domain(
            domain,
            n,
            lambda users, d: calibrate_correlated(
                users, d, epsilon, delta, slack=slack, min_honest=min_honest, neighbours=neighbours
            ),
        )

    @overload
    @classmethod
    def from_parameters(
        cls,
        *,
        a: float,
        r: float,
        q: float,
        n: int,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
        min_honest: MinHonest = None,
        neighbours: Neighbours = "replacement",
    ) -> CorrelatedProtocol: ...

    @overload
    @classmethod
    def from_parameters(
        cls,
        *,
        a: float,
        r: float,
        q: float,
        n: None,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
        min_honest: MinHonest = None,
        neighbours: Neighbours = "replacement",
    ) -> CalibratedOnRun[CorrelatedProtocol]: ...

    @classmethod
    def from_parameters(
        cls,
        *,
        a: float,
        r: float,
        q: float,
        n: int | None,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
        min_honest: MinHonest = None,
        neighbours: Neighbours = "replacement",
    ) -> CorrelatedProtocol | CalibratedOnRun[CorrelatedProtocol]:
        """Return a protocol with hand-picked (a, r, q) and the privacy they give.

        Exactly one of ``epsilon`` (report the certified δ there) and ``delta``
        (report the smallest certified ε at that δ) is needed. With ``n=None``
        the guarantee is computed when a run's data give n.
        """
        if n is None:  # what can be checked before the data come: now
            CorrelatedNoise.from_a(a, r, q)
            check_one_target(epsilon, delta)
            _check_before_data(min_honest, neighbours)
        return cls._on_domain(
            domain,
            n,
            lambda users, d: correlated_parameters(
                a=a,
                r=r,
                q=q,
                n=users,
                domain_size=d,
                epsilon=epsilon,
                delta=delta,
                min_honest=min_honest,
                neighbours=neighbours,
            ),
        )

    def randomize(self, values: IntArray, seed: SeedLike = None) -> MessageBatch:
        """Every user's value message and noise shares (sparse cluster sampling)."""
        return self.randomizer.randomize(values, seed)

    def statistic_from_messages(self, shuffled: ShuffledBatch) -> IntArray:
        """(N⁺_j, N⁻_j): row 0 counts the (j, +1) messages, row 1 the (j, −1)."""
        return self.randomizer.message_counts(shuffled.payload)

    def estimate(
        self, statistic: IntArray, domain: Sequence[str] | None = None
    ) -> HistogramEstimate:
        """ĥ_j = N⁺_j − N⁻_j, unbiased, standard error √(2(n/m)α)/(1 − α) in every bin.

        Raises:
            DataError: If ``statistic`` is not a (2, d) array of counts.
        """
        stat = np.asarray(statistic)
        d = self.domain_size
        if stat.shape != (2, d) or not np.issubdtype(stat.dtype, np.integer):
            raise DataError(
                f"statistic must be a (2, {d}) integer array (N+ and N- per bin), "
                f"got shape {stat.shape}"
            )
        labels = list(domain) if domain is not None else [str(j) for j in range(d)]
        counts = (stat[0] - stat[1]).astype(np.float64)
        return HistogramEstimate(
            domain=labels,
            counts=counts,
            stderr=np.full(d, self.calibration.per_bin_std_all_users),
            n=self.n,
            estimator=CORRELATED_ESTIMATOR,
            unbiased=True,
        )

    def parameters(self) -> dict[str, Any]:
        """a, α, r, q, m, the neighbouring relation and the calibration method."""
        c = self.calibration
        return {
            "a": c.a,
            "alpha": c.alpha,
            "flood_r": c.flood_r,
            "flood_q": c.flood_q,
            "min_honest": c.min_honest,
            "neighbours": c.neighbours,
            "slack": c.slack,
            "calibration": c.method,
        }
