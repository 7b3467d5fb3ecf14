"""FLIP: histograms from bitwise randomized response plus fake users.

Cheu & Zhilyaev, "Differentially private histograms in the shuffle model from
fake users", IEEE S&P 2022, arXiv 2104.02739: randomizer Alg. 1–2, analyzer Alg. 3, calibration
Claim III.1 / Thm III.3. Two calibrations of the flip probability q:

* ``"exact"``: the smallest q whose exact certified δ(ε)
  (:func:`shuffledp.accounting.certificates.flip.flip_delta`) meets the target;
* ``"paper"``: q from the paper's quadratic
  (:func:`shuffledp.accounting.reproductions.flip_paper.paper_flip_q`).

Both report the certified δ of the chosen q, never an uncertified figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, overload

from shuffledp._rng import SeedLike
from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_flip_probability,
    check_int,
)
from shuffledp.accounting.certificates.flip import (
    calibrate_flip_q,
    flip_delta,
    flip_delta_lower_bound,
    flip_epsilon,
    flip_local_epsilon,
)
from shuffledp.accounting.reproductions.flip_paper import (
    PAPER_MAX_DELTA,
    paper_error_bound,
    paper_flip_q,
    paper_min_fake_users,
)
from shuffledp.analyzers.error import expected_max_abs_normal
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.analyzers.flip_debias import FlipAnalyzer, flip_count_stderr
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import TRUSTED_SHUFFLER, PrivacyReport
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
from shuffledp.randomizers.bitflip import FlipRandomizer

__all__ = [
    "CALIBRATION_METHODS",
    "DEFAULT_FAKE_USERS",
    "FIXED_PARAMETERS",
    "FLIP_PRIVACY_METHOD",
    "FlipCalibration",
    "FlipProtocol",
    "calibrate_flip",
    "default_fake_users",
    "flip_parameters",
]

CalibrationMethod = Literal["exact", "paper"]
CALIBRATION_METHODS: tuple[str, ...] = ("exact", "paper")
#: ``method`` of a calibration whose q was chosen by hand (:meth:`FlipProtocol.from_parameters`).
FIXED_PARAMETERS = "fixed"

#: Name of the accountant behind every FLIP privacy report: the accounting method
#: ``flip-exact`` (releases of shuffledp 0.2 said ``flip-exact-fake-blanket``).
FLIP_PRIVACY_METHOD = "flip-exact"

#: Fake users per real user unless the caller chooses: with q ∝ 1/k the expected
#: number of messages barely depends on k, while the error factor (k + 1)/k and
#: the gap between the certificate (nk background reports) and the best dataset
#: (n(k + 1) − 1) shrink as k grows.
DEFAULT_FAKE_USERS = 100


def default_fake_users(n: int, epsilon: float, delta: float) -> int:
    """Return the k at which the paper's calibration can run: 100, or more when needed.

    The paper's quadratic has a root q < 1/2 only for k above
    :func:`paper_min_fake_users`; 16 times that keeps q(1 − q) ≤ 1/64, so the
    two calibrations can be compared at the same k. The exact calibration
    defaults to :data:`DEFAULT_FAKE_USERS` whatever n is.
    """
    if delta >= PAPER_MAX_DELTA:
        return DEFAULT_FAKE_USERS
    return max(DEFAULT_FAKE_USERS, 16 * paper_min_fake_users(epsilon, delta, n))


@dataclass(frozen=True)
class FlipCalibration:
    """FLIP parameters for a target (ε, δ) and what they buy.

    Attributes:
        method: ``"exact"`` or ``"paper"``.
        n: Number of users.
        domain_size: d.
        epsilon: Target ε.
        target_delta: Target δ.
        q: Flip probability.
        fake_users: k.
        delta: Certified δ at ``epsilon`` for this q (≤ ``target_delta``).
        delta_lower: Exact δ of a concrete neighbouring pair (how tight ``delta`` is).
        stderr: Standard error of every estimated count.
        linf_error: Expected ℓ∞ error of the counts (Gaussian approximation).
        expected_messages_per_user: E[messages sent per user].
        local_epsilon: ε of one user's unshuffled report, 2·ln((1 − q)/q).
        notes: What the calibration chose on the caller's behalf (e.g. a k
            raised above the default), for the run's report.
    """

    method: str
    n: int
    domain_size: int
    epsilon: float
    target_delta: float
    q: float
    fake_users: int
    delta: float
    delta_lower: float
    stderr: float
    linf_error: float
    expected_messages_per_user: float
    local_epsilon: float
    notes: tuple[str, ...] = ()

    def privacy_report(self) -> PrivacyReport:
        """Return the certified guarantee of one execution."""
        return certified_report(
            self,
            FLIP_PRIVACY_METHOD,
            parameters={"q": self.q, "fake_users": self.fake_users, "calibration": self.method},
            notes=(
                "exact hockey-stick divergence of the two bin counts a moving user "
                "touches, with only the n*k fake reports as background (valid for "
                "every dataset); lower_bound_delta is the exact delta of a dataset "
                "whose other users hold a third value"
            ),
            assumptions=(TRUSTED_SHUFFLER,),
        )

    def release_parameters(self) -> dict[str, Any]:
        """q, the fake users per user, how q was chosen and the local ε: a release's parameters."""
        return {
            "q": self.q,
            "fake_users": self.fake_users,
            "calibration": self.method,
            "local_epsilon": self.local_epsilon,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "method": self.method,
            "q": self.q,
            "fake_users": self.fake_users,
            "epsilon": self.epsilon,
            "target_delta": self.target_delta,
            "delta": self.delta,
            "delta_lower": self.delta_lower,
            "linf_error": self.linf_error,
            "stderr": self.stderr,
            "expected_messages_per_user": self.expected_messages_per_user,
            "local_epsilon": self.local_epsilon,
            "paper_error_bound_90": paper_error_bound(self.q, self.fake_users, self.n),
        }


def calibrate_flip(
    n: int,
    domain_size: int,
    epsilon: float,
    delta: float,
    *,
    fake_users: int | None = None,
    method: CalibrationMethod = "exact",
) -> FlipCalibration:
    """Choose FLIP's flip probability q for a target (ε, δ).

    Args:
        n: Number of users.
        domain_size: d ≥ 2.
        epsilon: Target ε > 0.
        delta: Target δ in (0, 1) (below 1/32 for the paper's method).
        fake_users: k; when ``None``, :data:`DEFAULT_FAKE_USERS` for the exact
            method and :func:`default_fake_users` for the paper's (which needs
            a larger k at small n; the calibration's ``notes`` say so).
        method: ``"exact"`` (smallest q the exact accountant certifies) or
            ``"paper"`` (Claim III.1's quadratic).

    Raises:
        InvalidParameterError: On a bad parameter, or if the paper's q were not
            certified by the exact accountant (never observed; guarded anyway).
    """
    n, d, epsilon, delta = check_target(n, domain_size, epsilon, delta)
    _check_method(method)
    notes: list[str] = []
    if fake_users is not None:
        k = check_int(fake_users, "fake_users", minimum=0)
    elif method == "paper":
        k = default_fake_users(n, epsilon, delta)
        if k != DEFAULT_FAKE_USERS:
            notes.append(
                f"fake users per user k raised from the default {DEFAULT_FAKE_USERS} to {k}: "
                "the paper's quadratic (Claim III.1) has no root q < 1/2 below "
                f"k = {paper_min_fake_users(epsilon, delta, n)} at these (n, epsilon, delta)"
            )
    else:
        k = DEFAULT_FAKE_USERS
    if method == "paper":
        q = paper_flip_q(epsilon, delta, n, k)
    else:
        q = calibrate_flip_q(epsilon, delta, n, k)
    certified = flip_delta(epsilon, q, k, n)
    if certified > delta:
        raise InvalidParameterError(
            f"the {method} calibration gives q={q:.6g}, whose certified delta "
            f"{certified:.3g} exceeds the target {delta:g}"
        )
    return _calibration(method, n, d, epsilon, delta, q, k, certified, tuple(notes))


def _check_method(method: str) -> None:
    if method not in CALIBRATION_METHODS:
        raise InvalidParameterError(f"calibration must be 'exact' or 'paper', got {method!r}")


def _calibration(
    method: str,
    n: int,
    d: int,
    epsilon: float,
    target_delta: float,
    q: float,
    k: int,
    certified: float,
    notes: tuple[str, ...],
) -> FlipCalibration:
    se = flip_count_stderr(n, q, k)
    return FlipCalibration(
        method=method,
        n=n,
        domain_size=d,
        epsilon=epsilon,
        target_delta=target_delta,
        q=q,
        fake_users=k,
        delta=certified,
        delta_lower=flip_delta_lower_bound(epsilon, q, k, n, d),
        stderr=se,
        linf_error=expected_max_abs_normal(se, d),
        expected_messages_per_user=FlipRandomizer(d, q, k).expected_messages_per_user,
        local_epsilon=flip_local_epsilon(q),
        notes=notes,
    )


def flip_parameters(
    *,
    q: float,
    fake_users: int,
    n: int,
    domain_size: int,
    epsilon: float | None = None,
    delta: float | None = None,
) -> FlipCalibration:
    """Return what hand-picked FLIP parameters give: δ at ``epsilon``, or ε at ``delta``.

    The guarantee comes from the exact certificate
    (:func:`shuffledp.accounting.certificates.flip.flip_delta`); at a given δ the ε is the
    smallest that certificate reaches (:func:`shuffledp.accounting.certificates.flip.flip_epsilon`).

    Raises:
        InvalidParameterError: On a bad parameter, or unless exactly one of
            ``epsilon`` and ``delta`` is given.
    """
    n, d = check_size(n, domain_size)
    k = check_int(fake_users, "fake_users", minimum=0)
    q = check_flip_probability(q)

    def epsilon_at(target: float) -> tuple[float, float]:
        found = flip_epsilon(target, q, k, n)
        return found, flip_delta(found, q, k, n)

    epsilon, target, certified = fixed_guarantee(
        epsilon, delta, delta_at=lambda e: flip_delta(e, q, k, n), epsilon_at=epsilon_at
    )
    if not certified < 1.0:
        raise InvalidParameterError(
            f"q={q:g} with k={k} fake users certifies nothing useful at epsilon={epsilon:g} "
            f"for n={n} (delta = 1); choose a larger q or epsilon"
        )
    return _calibration(FIXED_PARAMETERS, n, d, epsilon, target, q, k, certified, ())


class FlipProtocol(CalibratedProtocol[FlipCalibration, FlipRandomizer]):
    """P_FLIP = (R_FLIP, A_FLIP) with its exact privacy report.

    The count path draws the messages per bin from their exact binomial law;
    every message sets exactly one bin.

    Args:
        calibration: Parameters from :func:`calibrate_flip` or :func:`flip_parameters`.
        labels: The public domain's bin labels (``None``: bin indices only).
    """

    name: ClassVar[str] = "flip"

    def __init__(
        self, calibration: FlipCalibration, *, labels: Iterable[Any] | None = None
    ) -> None:
        super().__init__(calibration, labels=labels)
        self.randomizer = FlipRandomizer(
            calibration.domain_size, calibration.q, calibration.fake_users
        )
        self.analyzer = FlipAnalyzer(
            calibration.n, calibration.domain_size, calibration.q, calibration.fake_users
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
        fake_users: int | None = None,
        calibration: CalibrationMethod = "exact",
    ) -> FlipProtocol: ...

    @overload
    @classmethod
    def calibrated(
        cls,
        n: None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        fake_users: int | None = None,
        calibration: CalibrationMethod = "exact",
    ) -> CalibratedOnRun[FlipProtocol]: ...

    @classmethod
    def calibrated(
        cls,
        n: int | None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        fake_users: int | None = None,
        calibration: CalibrationMethod = "exact",
    ) -> FlipProtocol | CalibratedOnRun[FlipProtocol]:
        """Return a protocol calibrated by :func:`calibrate_flip` for a target (ε, δ).

        Args:
            n: Number of users, or ``None`` to calibrate for the number of
                users in the data each run is given (a
                :class:`~shuffledp.protocols.base.CalibratedOnRun`; its runs
                report the certificate at that number).
            domain: The public domain: its size d, or its labels in bin order
                (then :meth:`run` also accepts the users' values as labels).
            epsilon: Target ε.
            delta: Target δ.
            fake_users: k (see :func:`calibrate_flip`).
            calibration: ``"exact"`` or ``"paper"``.
        """
        if n is None:  # what can be checked before the data come: now
            check_epsilon(epsilon)
            check_delta(delta)
            if fake_users is not None:
                check_int(fake_users, "fake_users", minimum=0)
            _check_method(calibration)
        return cls._on_domain(
            domain,
            n,
            lambda users, d: calibrate_flip(
                users, d, epsilon, delta, fake_users=fake_users, method=calibration
            ),
        )

    @overload
    @classmethod
    def from_parameters(
        cls,
        *,
        q: float,
        fake_users: int,
        n: int,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
    ) -> FlipProtocol: ...

    @overload
    @classmethod
    def from_parameters(
        cls,
        *,
        q: float,
        fake_users: int,
        n: None,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
    ) -> CalibratedOnRun[FlipProtocol]: ...

    @classmethod
    def from_parameters(
        cls,
        *,
        q: float,
        fake_users: int,
        n: int | None,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
    ) -> FlipProtocol | CalibratedOnRun[FlipProtocol]:
        """Return a protocol with a hand-picked flip probability, and the privacy it gives.

        Exactly one of ``epsilon`` (report the certified δ there) and ``delta``
        (report the smallest certified ε at that δ) is needed; the result's
        :meth:`privacy_report` states it. With ``n=None`` the guarantee is
        computed at the number of users each run's data hold.

        >>> FlipProtocol.from_parameters(q=0.001, fake_users=100, n=10_000,
        ...                               domain=["a", "b", "c"], delta=1e-6).privacy_report()
        """
        if n is None:  # what can be checked before the data come: now
            check_flip_probability(q)
            check_int(fake_users, "fake_users", minimum=0)
            check_one_target(epsilon, delta)
        return cls._on_domain(
            domain,
            n,
            lambda users, d: flip_parameters(
                q=q, fake_users=fake_users, n=users, domain_size=d, epsilon=epsilon, delta=delta
            ),
        )

    def randomize(self, values: IntArray, seed: SeedLike = None) -> MessageBatch:
        """Alg. 1 for every user (sparse sampling)."""
        return self.randomizer.randomize(values, seed)

    def statistic_from_messages(self, shuffled: ShuffledBatch) -> IntArray:
        """Messages per bin."""
        return self.analyzer.count_messages(shuffled.payload)

    def estimate(
        self, statistic: IntArray, domain: Sequence[str] | None = None
    ) -> HistogramEstimate:
        """Alg. 3 (in counts)."""
        return self.analyzer.estimate(statistic, domain)

    def parameters(self) -> dict[str, Any]:
        """q, the fake users per user, the calibration method and the local ε."""
        return self.calibration.release_parameters()
