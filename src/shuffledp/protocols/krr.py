"""k-RR in the shuffle model (Biswas, Jung & Palamidessi, FPS 2023) with exact accounting.

Source: S. Biswas, K. Jung and C. Palamidessi, "Tight differential privacy guarantees
for the shuffle model with k-randomized response", FPS 2023, arXiv 2205.08858.

Each user sends one k-RR report (Def. 5); the shuffled histogram is analysed
raw or denoised by matrix inversion (App. B) and its projections. Privacy comes
from :func:`shuffledp.accounting.certificates.krr.krr_delta`, a certified δ(ε) for every
dataset, with :func:`shuffledp.accounting.certificates.krr.krr_delta_lower_bound` showing
how tight it is. Calibration picks the largest ε₀ that the certificate allows
for a target (ε, δ) and n.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, overload

import numpy as np

from shuffledp._rng import SeedLike
from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon
from shuffledp.accounting.api import amplified_epsilon, calibrate
from shuffledp.accounting.certificates.krr import (
    krr_delta,
    krr_delta_lower_bound,
    krr_probabilities,
)
from shuffledp.analyzers.error import expected_max_abs_normal
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.analyzers.krr_estimators import (
    ESTIMATORS,
    KRREstimator,
    estimate_krr,
    inversion_variance,
)
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
from shuffledp.randomizers.krr import KRRRandomizer

__all__ = [
    "KRR_PRIVACY_METHOD",
    "KRRCalibration",
    "KRRProtocol",
    "calibrate_krr",
    "krr_parameters",
]

#: Below this ratio ε₀/ε the shuffle adds (almost) nothing to the local guarantee.
_NO_AMPLIFICATION_RATIO = 1.01

#: Name of the accountant behind every k-RR privacy report.
KRR_PRIVACY_METHOD = "krr-blanket"


@dataclass(frozen=True)
class KRRCalibration:
    """k-RR parameters for a target (ε, δ) and what they buy.

    Attributes:
        n: Number of users.
        domain_size: k.
        epsilon: Target ε.
        target_delta: Target δ.
        epsilon0: Local ε₀ of each report.
        delta: Certified δ at ε (≤ target).
        delta_lower: Exact δ of a concrete neighbouring pair (a lower bound).
        stderr: Standard error of each inverted count at a uniform histogram.
        linf_error: Expected ℓ∞ error of the inverted counts (Gaussian approximation).
        method: ``"exact"`` (calibrated) or ``"fixed"`` (ε₀ given).
        notes: What the calibration found that the caller should know (e.g. no
            amplification at this n), for the run's report.
    """

    n: int
    domain_size: int
    epsilon: float
    target_delta: float
    epsilon0: float
    delta: float
    delta_lower: float
    stderr: float
    linf_error: float
    method: str
    notes: tuple[str, ...] = ()

    def privacy_report(self) -> PrivacyReport:
        """Return the certified guarantee of one execution."""
        return certified_report(
            self,
            KRR_PRIVACY_METHOD,
            parameters={"epsilon0": self.epsilon0, "domain_size": self.domain_size},
            notes=(
                "exact divergence of the k-RR blanket (uniform part of every other "
                "user's report), valid for every dataset; lower_bound_delta is the exact "
                "delta of a dataset attaining it up to the blanket's slack"
            ),
            assumptions=(TRUSTED_SHUFFLER,),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "method": self.method,
            "epsilon0": self.epsilon0,
            "domain_size": self.domain_size,
            "epsilon": self.epsilon,
            "target_delta": self.target_delta,
            "delta": self.delta,
            "delta_lower": self.delta_lower,
            "stderr": self.stderr,
            "linf_error": self.linf_error,
        }


def _utility(n: int, k: int, epsilon0: float) -> tuple[float, float]:
    a, b = krr_probabilities(epsilon0, k)
    se = math.sqrt(float(inversion_variance(n / k, n, a, b)))  # at a uniform histogram
    return se, expected_max_abs_normal(se, k)


def calibrate_krr(
    n: int,
    domain_size: int,
    epsilon: float,
    delta: float,
    *,
    epsilon0: float | None = None,
) -> KRRCalibration:
    """Choose ε₀ for a target (ε, δ), or certify a given ε₀.

    Args:
        n: Number of users.
        domain_size: k ≥ 2.
        epsilon: Target ε.
        delta: Target δ.
        epsilon0: Use this ε₀ instead of calibrating; its certified δ at ε must
            not exceed ``delta``.

    Raises:
        InvalidParameterError: If no ε₀ > 0 meets the target, or the given ε₀ does not.
    """
    n, k, epsilon, delta = check_target(n, domain_size, epsilon, delta)
    notes: list[str] = []
    if epsilon0 is None:
        # The accountant's calibration with the k-RR certificate (krr-blanket).
        e0 = calibrate(epsilon, delta, n=n, mechanism="krr", domain_size=k).value
        method = "exact"
        if e0 < _NO_AMPLIFICATION_RATIO * epsilon:
            notes.append(
                f"no amplification: at n={n} the largest certified epsilon0 is {e0:.6g}, "
                f"essentially the target epsilon={epsilon:g} (each report is already "
                "epsilon0-DP on its own)"
            )
    else:
        e0 = check_epsilon(epsilon0, "epsilon0")
        method = "fixed"
    # The public certificate (sums refined in full): the calibration settled on it.
    certified = krr_delta(epsilon, e0, k, n)
    if certified > delta:
        raise InvalidParameterError(
            f"epsilon0={e0:g} gives a certified delta of {certified:.3g} at epsilon={epsilon:g}, "
            f"above the target {delta:g}"
        )
    return _calibration(n, k, epsilon, delta, e0, certified, method, tuple(notes))


def _calibration(
    n: int,
    k: int,
    epsilon: float,
    target_delta: float,
    epsilon0: float,
    certified: float,
    method: str,
    notes: tuple[str, ...],
) -> KRRCalibration:
    se, linf = _utility(n, k, epsilon0)
    return KRRCalibration(
        n=n,
        domain_size=k,
        epsilon=epsilon,
        target_delta=target_delta,
        epsilon0=epsilon0,
        delta=certified,
        delta_lower=krr_delta_lower_bound(epsilon, epsilon0, k, n),
        stderr=se,
        linf_error=linf,
        method=method,
        notes=notes,
    )


def krr_parameters(
    *,
    epsilon0: float,
    n: int,
    domain_size: int,
    epsilon: float | None = None,
    delta: float | None = None,
) -> KRRCalibration:
    """Return what a hand-picked ε₀ gives: the certified δ at ``epsilon``, or ε at ``delta``.

    The certificate is :func:`shuffledp.accounting.certificates.krr.krr_delta` (``krr-blanket``);
    at a given δ, ε is the smallest it certifies (bisection, rounded up).

    Raises:
        InvalidParameterError: On a bad parameter, or unless exactly one of
            ``epsilon`` and ``delta`` is given.
    """
    n, k = check_size(n, domain_size)
    e0 = check_epsilon(epsilon0, "epsilon0")

    def epsilon_at(target: float) -> tuple[float, float]:
        found = amplified_epsilon(
            target, n=n, mechanism="krr", method="krr-blanket", epsilon0=e0, domain_size=k
        ).epsilon
        at = e0 if found is None else min(found, e0)
        return at, krr_delta(at, e0, k, n)

    epsilon, target, certified = fixed_guarantee(
        epsilon, delta, delta_at=lambda e: krr_delta(e, e0, k, n), epsilon_at=epsilon_at
    )
    return _calibration(n, k, epsilon, target, e0, certified, "fixed", ())


def _check_estimator(estimator: str) -> None:
    if estimator not in ESTIMATORS:
        raise InvalidParameterError(
            f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}"
        )


class KRRProtocol(CalibratedProtocol[KRRCalibration, KRRRandomizer]):
    """Shuffled k-RR with a chosen estimator.

    One report per user: the count path draws the histogram of reports from
    its exact law.

    Args:
        calibration: From :func:`calibrate_krr`.
        estimator: ``inversion`` (default, unbiased, with standard errors),
            ``raw``, ``clip`` or ``simplex``.
    """

    name: ClassVar[str] = "krr"
    domain_unit: ClassVar[str] = "values"

    def __init__(
        self,
        calibration: KRRCalibration,
        *,
        estimator: KRREstimator = "inversion",
        labels: Iterable[Any] | None = None,
    ) -> None:
        _check_estimator(estimator)  # refused now, not after the users are randomized
        super().__init__(calibration, labels=labels)
        self.estimator = estimator
        self.randomizer = KRRRandomizer(calibration.domain_size, calibration.epsilon0)

    @overload
    @classmethod
    def calibrated(
        cls,
        n: int,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        epsilon0: float | None = None,
        estimator: KRREstimator = "inversion",
    ) -> KRRProtocol: ...

    @overload
    @classmethod
    def calibrated(
        cls,
        n: None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        epsilon0: float | None = None,
        estimator: KRREstimator = "inversion",
    ) -> CalibratedOnRun[KRRProtocol]: ...

    @classmethod
    def calibrated(
        cls,
        n: int | None,
        domain: DomainSpec,
        epsilon: float,
        delta: float,
        *,
        epsilon0: float | None = None,
        estimator: KRREstimator = "inversion",
    ) -> KRRProtocol | CalibratedOnRun[KRRProtocol]:
        """Return a protocol calibrated by :func:`calibrate_krr` for a target (ε, δ).

        Args:
            n: Number of users, or ``None`` to calibrate for the number of
                users in the data each run is given (a
                :class:`~shuffledp.protocols.base.CalibratedOnRun`; its runs
                report the certificate at that number).
            domain: The public domain: its size k, or its labels in bin order
                (then :meth:`run` also accepts the users' values as labels).
            epsilon: Target ε.
            delta: Target δ.
            epsilon0: A fixed ε₀ to certify instead of calibrating.
            estimator: See :class:`KRRProtocol`.
        """
        if n is None:  # what can be checked before the data come: now
            check_epsilon(epsilon)
            check_delta(delta)
            if epsilon0 is not None:
                check_epsilon(epsilon0, "epsilon0")
            _check_estimator(estimator)
        return cls._on_domain(
            domain,
            n,
            lambda users, k: calibrate_krr(users, k, epsilon, delta, epsilon0=epsilon0),
            estimator=estimator,
        )

    @overload
    @classmethod
    def from_parameters(
        cls,
        *,
        epsilon0: float,
        n: int,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
        estimator: KRREstimator = "inversion",
    ) -> KRRProtocol: ...

    @overload
    @classmethod
    def from_parameters(
        cls,
        *,
        epsilon0: float,
        n: None,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
        estimator: KRREstimator = "inversion",
    ) -> CalibratedOnRun[KRRProtocol]: ...

    @classmethod
    def from_parameters(
        cls,
        *,
        epsilon0: float,
        n: int | None,
        domain: DomainSpec,
        epsilon: float | None = None,
        delta: float | None = None,
        estimator: KRREstimator = "inversion",
    ) -> KRRProtocol | CalibratedOnRun[KRRProtocol]:
        """Return a protocol with a hand-picked ε₀, and the privacy it gives.

        Exactly one of ``epsilon`` (report the certified δ there) and ``delta``
        (report the smallest certified ε at that δ) is needed. With ``n=None``
        the guarantee is computed at the number of users each run's data hold.
        """
        if n is None:  # what can be checked before the data come: now
            check_epsilon(epsilon0, "epsilon0")
            check_one_target(epsilon, delta)
            _check_estimator(estimator)
        return cls._on_domain(
            domain,
            n,
            lambda users, k: krr_parameters(
                epsilon0=epsilon0, n=users, domain_size=k, epsilon=epsilon, delta=delta
            ),
            estimator=estimator,
        )

    def randomize(self, values: IntArray, seed: SeedLike = None) -> MessageBatch:
        """One k-RR report per user."""
        return self.randomizer.randomize(values, seed)

    def statistic_from_messages(self, shuffled: ShuffledBatch) -> IntArray:
        """The histogram of reports."""
        payload = np.asarray(shuffled.payload)
        if payload.size and (int(payload.min()) < 0 or int(payload.max()) >= self.domain_size):
            raise InvalidParameterError("a report is outside the domain")
        return np.bincount(payload, minlength=self.domain_size).astype(np.int64)

    def estimate(
        self, statistic: IntArray, domain: Sequence[str] | None = None
    ) -> HistogramEstimate:
        """Apply the chosen estimator."""
        return estimate_krr(
            statistic,
            self.randomizer.keep_probability,
            self.randomizer.other_probability,
            estimator=self.estimator,
            domain=domain,
        )

    def parameters(self) -> dict[str, Any]:
        """ε₀, the domain size and the estimator."""
        return {
            "epsilon0": self.calibration.epsilon0,
            "domain_size": self.domain_size,
            "estimator": self.estimator,
            "calibration": self.calibration.method,
        }
