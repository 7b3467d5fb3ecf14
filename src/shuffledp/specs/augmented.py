"""The augmented protocol's spec: the shuffler's sampling rate and its dummy law.

Each user sends its value alone (one plain message); the shuffler keeps each
message with probability β and adds, to every bin, dummies drawn from SAGeo
(an asymmetric two-sided geometric shifted by ν), its pure-ε case S1Geo
(ν = 0, q_l = 0) or SBin (Bin(M, 1/2)) — the augmented shuffle of the
near-central papers. The certificate
(:mod:`shuffledp.accounting.certificates.augmented`) is δ(ε) of one bin's
count and does not depend on n.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike
from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.accounting.certificates.augmented import (
    VARIANTS,
    DummyLaw,
    SAGeoLaw,
    SBinLaw,
    check_beta,
)
from shuffledp.specs.base import Calibrated, ProtocolSpec, SpecError

if TYPE_CHECKING:
    from shuffledp.accounting.certificates.augmented import Variant
    from shuffledp.messages import MessageBatch
    from shuffledp.protocols.augmented import (
        AugmentedCalibration,
        AugmentedProtocol,
        Calibration,
    )

__all__ = ["AUGMENTED_CALIBRATIONS", "AugmentedSpec", "PlainValueRandomizer"]

#: How an augmented law can be chosen.
AUGMENTED_CALIBRATIONS: tuple[str, ...] = ("exact", "paper", "pure", "fixed")


class PlainValueRandomizer:
    """An augmented client: one message carrying the value, no noise (the shuffler adds it).

    Args:
        domain_size: d.
    """

    def __init__(self, domain_size: int) -> None:
        from shuffledp.randomizers.augmented import AugmentedClient

        self._client = AugmentedClient(domain_size)

    def randomize(self, values: NDArray[np.integer], seed: SeedLike = None) -> MessageBatch:
        """Every user's one message, its value (``seed`` is not used: nothing is random)."""
        return self._client.randomize(values)


@dataclass(frozen=True)
class AugmentedSpec(ProtocolSpec):
    """The augmented protocol's public parameters.

    Attributes:
        variant: The dummy law: ``"sageo"``, ``"s1geo"`` or ``"sbin"``.
        beta: The probability that the shuffler keeps each real message, in (0, 1].
        nu: SAGeo and S1Geo: the shift ν (``None`` for SBin).
        q_left: SAGeo and S1Geo: q_l.
        q_right: SAGeo and S1Geo: q_r.
        trials: SBin: M (``None`` otherwise).
        calibration: ``"exact"``, ``"paper"``, ``"pure"`` (S1Geo) or ``"fixed"``.
    """

    name: ClassVar[str] = "augmented"
    #: What ``calibrate``'s ``calibration`` option accepts (``fixed`` and ``pure`` are
    #: results, not requests).
    calibrations: ClassVar[tuple[str, ...]] = ("exact", "paper")
    fields: ClassVar[tuple[str, ...]] = (
        "variant",
        "beta",
        "nu",
        "q_left",
        "q_right",
        "trials",
        "calibration",
    )
    real_fields: ClassVar[tuple[str, ...]] = ("beta", "q_left", "q_right")
    optional_fields: ClassVar[tuple[str, ...]] = ("nu", "q_left", "q_right", "trials")

    variant: str
    beta: float
    nu: int | None = None
    q_left: float | None = None
    q_right: float | None = None
    trials: int | None = None
    calibration: str = "exact"

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise SpecError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        check_beta(self.beta)
        geometric = (self.nu, self.q_left, self.q_right)
        if self.variant == "sbin":
            if self.trials is None:
                raise SpecError("an sbin law needs the parameter trials")
            if geometric != (None, None, None):
                raise SpecError("an sbin law has no parameters nu, q_left or q_right")
        else:
            if None in geometric:
                raise SpecError(
                    f"an {self.variant} law needs the parameters nu, q_left and q_right"
                )
            if self.trials is not None:
                raise SpecError(f"an {self.variant} law has no parameter trials")
        if self.calibration not in AUGMENTED_CALIBRATIONS:
            raise SpecError(
                f"augmented calibration must be one of {', '.join(AUGMENTED_CALIBRATIONS)}, "
                f"got {self.calibration!r}"
            )
        self.dummy_law()  # checks the law's parameters

    def dummy_law(self) -> DummyLaw:
        """The dummy law (SAGeo for ``sageo`` and ``s1geo``, SBin)."""
        if self.variant == "sbin":
            assert self.trials is not None
            return SBinLaw(self.trials)
        assert self.nu is not None and self.q_left is not None and self.q_right is not None
        return SAGeoLaw(self.nu, self.q_left, self.q_right)

    @classmethod
    def calibrated(
        cls,
        n: int,
        labels: Sequence[str],
        epsilon: float,
        delta: float,
        *,
        variant: str = "sageo",
        beta: float | None = None,
        nu: int | None = None,
        trials: int | None = None,
        calibration: str = "exact",
    ) -> Calibrated[AugmentedSpec, AugmentedProtocol]:
        """The law the exact accountant chooses for (ε, δ) (or certifies, given ν or M).

        Args:
            n: Number of users.
            labels: The public domain's labels, in bin order.
            epsilon: Target ε.
            delta: Target δ.
            variant: ``"sageo"``, ``"s1geo"`` or ``"sbin"``.
            beta: The shuffler's sampling rate (default 1; S1Geo fixes its own).
            nu: A fixed SAGeo shift to certify.
            trials: A fixed SBin M to certify.
            calibration: ``"exact"`` or ``"paper"`` (SAGeo's closed-form ν,
                certified exactly).

        Returns:
            The spec and :meth:`AugmentedProtocol.calibrated
            <shuffledp.protocols.augmented.AugmentedProtocol.calibrated>` for n
            users over ``labels``, whose calibration chose it.

        Raises:
            InvalidParameterError: On a bad parameter, a parameter the variant
                does not take, or a target the law (or the given ν or M) misses.
        """
        from shuffledp.protocols.augmented import AugmentedProtocol

        augmented = AugmentedProtocol.calibrated(
            n,
            list(labels),
            epsilon,
            delta,
            variant=cast("Variant", variant),  # both checked by calibrate_augmented
            beta=beta,
            nu=nu,
            trials=trials,
            calibration=cast("Calibration", calibration),
        )
        cal = augmented.calibration
        spec = cls(
            variant=cal.variant,
            beta=cal.beta,
            nu=cal.nu,
            q_left=cal.q_left,
            q_right=cal.q_right,
            trials=cal.trials,
            calibration=cal.method,
        )
        return Calibrated(spec, augmented)

    def randomizer(self, domain_size: int) -> PlainValueRandomizer:
        """The client sends its value: :class:`PlainValueRandomizer`."""
        return PlainValueRandomizer(domain_size)

    def fewest_messages_per_user(self) -> int:
        """1 at β = 1; 0 below it (the shuffler may drop a user's one message)."""
        return 1 if self.beta == 1.0 else 0

    def max_messages(self, domain_size: int) -> int:
        """Exactly one message per client."""
        return 1

    @classmethod
    def capped_parties_when_calibrated(
        cls, min_batch_users: int, options: Mapping[str, Any]
    ) -> int:
        """One (the shuffler's draw) unless ``options`` ask for the SBin law."""
        check_int(min_batch_users, "min_batch_users", minimum=1)
        return 0 if options.get("variant", "sageo") == "sbin" else 1

    def max_dummies_per_batch(self, domain_size: int) -> int:
        """The most dummies the shuffler adds to a batch, but with probability 1e-30."""
        from shuffledp.accounting.certificates.message_bounds import max_dummies_per_batch

        return max_dummies_per_batch(domain_size, self.dummy_law())

    def batch_assumption(self, min_batch_users: int, smallest: int) -> str:
        """None on the batch's users: the shuffler's fresh dummies carry the guarantee."""
        return (
            f"the guarantee does not depend on how many users a batch holds (the smallest "
            f"holds {smallest} submissions; the shuffler cuts none below {min_batch_users}, "
            "min_batch_users): it rests on the dummies the shuffler draws afresh for every "
            "batch, so submissions an adversary makes itself do not weaken it"
        )

    def shuffler_assumption(self) -> str:
        """The shuffler draws, seals and hides the dummies (the augmented trust model)."""
        return (
            "the shuffler draws each batch's dummies (and keeps each message with probability "
            "beta) with the operating system's cryptographic generator, seals every dummy to "
            "the analyzer's key exactly as the clients seal their messages, shuffles them "
            "with the real messages, records nothing that tells them apart, and does not "
            "reveal who sent which message or in which order"
        )

    def capped_parties_description(self, parties: int) -> str:
        """The shuffler's one draw of a batch's dummies."""
        return "the dummy draw"

    def check_task(
        self,
        *,
        domain_size: int,
        epsilon: float,
        min_batch_users: int,
        max_messages_per_submission: int,
    ) -> None:
        """SAGeo's β is at least 1 − e^{−ε/2} at the task's ε; a client sends one message."""
        try:
            check_beta(self.beta, epsilon if self.variant == "sageo" else None)
        except InvalidParameterError as exc:
            raise SpecError(str(exc)) from None
        if max_messages_per_submission != 1:
            raise SpecError(
                "an augmented client sends exactly one message: max_messages_per_submission "
                f"must be 1, got {max_messages_per_submission}"
            )

    def calibration_at(
        self, n: int, domain_size: int, epsilon: float, target_delta: float
    ) -> AugmentedCalibration:
        """The law as a calibration for ``n`` users, certified at ε.

        δ is :func:`~shuffledp.accounting.certificates.augmented.augmented_delta`
        of the law and β at ε (rounded up; it does not depend on n);
        ``delta_lower`` is the same pair rounded down when a dataset attains it
        (d ≥ 3, n = 1 or β = 1, as
        :func:`~shuffledp.protocols.augmented.calibrate_augmented` states it).
        """
        from shuffledp.accounting.certificates.augmented import augmented_delta
        from shuffledp.analyzers.augmented import augmented_count_stderr
        from shuffledp.central import discrete_laplace_std
        from shuffledp.protocols.augmented import AugmentedCalibration

        law = self.dummy_law()
        n = check_int(n, "n", minimum=1)
        beta = self.beta
        attained = domain_size >= 3 or n == 1 or beta == 1.0
        return AugmentedCalibration(
            n=n,
            domain_size=domain_size,
            epsilon=epsilon,
            target_delta=target_delta,
            variant=self.variant,
            beta=beta,
            nu=self.nu,
            q_left=self.q_left,
            q_right=self.q_right,
            trials=self.trials,
            delta=augmented_delta(epsilon, law, beta),
            delta_lower=(
                augmented_delta(epsilon, law, beta, rounding="down") if attained else None
            ),
            noise_mean=law.mean,
            noise_variance=law.variance,
            per_bin_std=float(augmented_count_stderr(law.variance, beta, n / domain_size)),
            dlap_std=discrete_laplace_std(epsilon),
            method=self.calibration,
        )

    def protocol(
        self, n: int, labels: Sequence[str], epsilon: float, target_delta: float
    ) -> AugmentedProtocol:
        """The protocol for n users: :meth:`calibration_at` with the labels."""
        from shuffledp.protocols.augmented import AugmentedProtocol

        labels = tuple(labels)
        return AugmentedProtocol(
            self.calibration_at(n, len(labels), epsilon, target_delta), labels=labels
        )
