"""k-RR's spec: the local ε₀ and the analyzer's estimator.

k-randomized response (each user reports its value with probability
e^ε₀ / (e^ε₀ + d − 1), else a uniform other value), shuffled, with the
estimators of Biswas et al. (matrix inversion, clipping, simplex projection).
The certificate (:mod:`shuffledp.accounting.certificates.krr`) is δ(ε) of the
shuffled reports at n users.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from shuffledp._validation import check_epsilon, check_int
from shuffledp.specs.base import Calibrated, ProtocolSpec, SpecError

if TYPE_CHECKING:
    from shuffledp.accounting.methods import Mechanism
    from shuffledp.analyzers.krr_estimators import KRREstimator
    from shuffledp.protocols.krr import KRRProtocol
    from shuffledp.randomizers.krr import KRRRandomizer

__all__ = ["KRR_ESTIMATORS", "KRRSpec"]

#: The analyzer's estimators of k-RR counts.
KRR_ESTIMATORS: tuple[str, ...] = ("inversion", "raw", "clip", "simplex")


@dataclass(frozen=True)
class KRRSpec(ProtocolSpec):
    """k-RR's public parameters.

    Attributes:
        epsilon0: The local ε₀ of every report.
        estimator: The analyzer's estimator (``inversion``, ``raw``, ``clip``, ``simplex``).
        calibration: How ε₀ was chosen.
    """

    name: ClassVar[str] = "krr"
    #: What ``calibrate``'s ``calibration`` option accepts (``fixed`` and ``pure`` are
    #: results, not requests).
    calibrations: ClassVar[tuple[str, ...]] = ()
    fields: ClassVar[tuple[str, ...]] = ("epsilon0", "estimator", "calibration")
    real_fields: ClassVar[tuple[str, ...]] = ("epsilon0",)

    epsilon0: float
    estimator: str = "inversion"
    calibration: str = "exact"

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon0, "epsilon0")
        if self.estimator not in KRR_ESTIMATORS:
            raise SpecError(
                f"estimator must be one of {', '.join(KRR_ESTIMATORS)}, got {self.estimator!r}"
            )
        if not isinstance(self.calibration, str):
            raise SpecError(f"calibration must be a string, got {self.calibration!r}")

    @classmethod
    def calibrated(
        cls,
        n: int,
        labels: Sequence[str],
        epsilon: float,
        delta: float,
        *,
        estimator: str = "inversion",
        epsilon0: float | None = None,
    ) -> Calibrated[KRRSpec, KRRProtocol]:
        """The largest ε₀ the certified accountant allows for (ε, δ) at n users.

        Args:
            n: Number of users.
            labels: The public domain's labels, in bin order.
            epsilon: Target ε.
            delta: Target δ.
            estimator: The analyzer's estimator (one of :data:`KRR_ESTIMATORS`).
            epsilon0: A fixed ε₀ to certify instead of calibrating (its
                calibration is then ``fixed``).

        Returns:
            The spec and :meth:`KRRProtocol.calibrated
            <shuffledp.protocols.krr.KRRProtocol.calibrated>` for n users over
            ``labels``, whose calibration chose it.

        Raises:
            InvalidParameterError: On a bad parameter (``estimator`` before any
                calibration), or a target no ε₀ (or not the given one) meets.
        """
        from shuffledp.protocols.krr import KRRProtocol

        if estimator not in KRR_ESTIMATORS:
            raise SpecError(
                f"estimator must be one of {', '.join(KRR_ESTIMATORS)}, got {estimator!r}"
            )
        krr = KRRProtocol.calibrated(
            n,
            list(labels),
            epsilon,
            delta,
            epsilon0=epsilon0,
            estimator=cast("KRREstimator", estimator),
        )
        spec = cls(
            epsilon0=krr.calibration.epsilon0,
            estimator=estimator,
            calibration=krr.calibration.method,
        )
        return Calibrated(spec, krr)

    def mechanism(self, n: int, domain_size: int) -> Mechanism:
        """The accountant's description of these parameters at n users over d bins.

        (The accountant's k-RR takes the domain size as ``k``.)
        """
        from shuffledp.accounting.methods import Mechanism

        return Mechanism(kind="krr", n=n, epsilon0=self.epsilon0, domain_size=domain_size)

    def randomizer(self, domain_size: int) -> KRRRandomizer:
        """The k-RR client."""
        from shuffledp.randomizers.krr import KRRRandomizer

        return KRRRandomizer(domain_size, self.epsilon0)

    def max_messages(self, domain_size: int) -> int:
        """Exactly one message per client."""
        return 1

    @classmethod
    def capped_parties_when_calibrated(
        cls, min_batch_users: int, options: Mapping[str, Any]
    ) -> int:
        """None, whatever the options."""
        check_int(min_batch_users, "min_batch_users", minimum=1)
        return 0

    def protocol(
        self, n: int, labels: Sequence[str], epsilon: float, target_delta: float
    ) -> KRRProtocol:
        """k-RR with this ε₀ for n users, certified at ε (the target δ is not used)."""
        from shuffledp.protocols.krr import KRRProtocol

        krr: KRRProtocol = KRRProtocol.from_parameters(  # type: ignore[call-overload]
            epsilon0=self.epsilon0,
            n=n,
            domain=list(labels),
            epsilon=epsilon,
            estimator=self.estimator,
        )
        return krr
