"""FLIP's spec: the flip probability q and the fake users per real user.

FLIP (Cheu & Zhilyaev, "Differentially Private Histograms in the Shuffle
Model from Fake Users", IEEE S&P 2022, arXiv 2104.02739), Alg. 1: every user
sends its one-hot vector of d bits, each flipped with probability q, and
``fake_users`` fake users per real user send d bits that are each 1 with
probability q. The certificate (:mod:`shuffledp.accounting.certificates.flip`)
is the exact δ(ε) of the shuffled counts at n users.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from shuffledp._validation import (
    InvalidParameterError,
    check_flip_probability,
    check_int,
)
from shuffledp.specs.base import Calibrated, ProtocolSpec, SpecError

if TYPE_CHECKING:
    from shuffledp.accounting.methods import Mechanism
    from shuffledp.protocols.flip import FlipProtocol
    from shuffledp.randomizers.bitflip import FlipRandomizer

__all__ = ["FLIP_CALIBRATIONS", "FlipSpec", "flip_max_messages"]

#: How FLIP's q can be chosen: the exact accountant, or the paper's closed form (certified exactly).
FLIP_CALIBRATIONS: tuple[str, ...] = ("exact", "paper")


def flip_max_messages(domain_size: int, q: float, fake_users: int) -> int:
    """The most messages a FLIP client sends, but with probability 1e-30.

    A FLIP user sends Ber(1 − q) + Bin(d − 1, q) + Bin(k·d, q) messages (the
    count's law does not depend on the value), at most 1 + Bin((k + 1)·d − 1, q);
    the bound is the smallest c with P[1 + Bin((k + 1)·d − 1, q) > c] ≤ 1e-30.
    """
    from scipy.stats import binom

    # (message_bounds imports the correlated and augmented certificates: not at import time)
    from shuffledp.accounting.certificates.message_bounds import MESSAGE_TAIL_PROBABILITY

    trials = (fake_users + 1) * domain_size - 1
    mean = trials * q
    top = min(trials, int(mean + 60.0 * math.sqrt(mean + 1.0) + 200.0))
    for extra in range(int(mean), top + 1):
        if float(binom.sf(extra, trials, q)) <= MESSAGE_TAIL_PROBABILITY:
            return 1 + extra
    return 1 + top


@dataclass(frozen=True)
class FlipSpec(ProtocolSpec):
    """FLIP's public parameters.

    Attributes:
        q: The flip probability, in (0, 1/2).
        fake_users: Fake users per real user (the paper's k), an integer ≥ 0.
        calibration: How q was chosen: ``"exact"`` or ``"paper"``.
    """

    name: ClassVar[str] = "flip"
    #: What ``calibrate``'s ``calibration`` option accepts (``fixed`` and ``pure`` are
    #: results, not requests).
    calibrations: ClassVar[tuple[str, ...]] = ("exact", "paper")
    fields: ClassVar[tuple[str, ...]] = ("q", "fake_users", "calibration")
    real_fields: ClassVar[tuple[str, ...]] = ("q",)

    q: float
    fake_users: int
    calibration: str = "exact"

    def __post_init__(self) -> None:
        check_flip_probability(self.q, "q")
        check_int(self.fake_users, "fake_users", minimum=0)
        if self.calibration not in FLIP_CALIBRATIONS:
            raise SpecError(
                f"flip calibration must be one of {', '.join(FLIP_CALIBRATIONS)}, "
                f"got {self.calibration!r}"
            )

    @classmethod
    def calibrated(
        cls,
        n: int,
        labels: Sequence[str],
        epsilon: float,
        delta: float,
        *,
        fake_users: int | None = None,
        calibration: Literal["exact", "paper"] = "exact",
    ) -> Calibrated[FlipSpec, FlipProtocol]:
        """The q (and k) the certified accountant chooses for (ε, δ) at n users (Alg. 2).

        Args:
            n: Number of users.
            labels: The public domain's labels, in bin order.
            epsilon: Target ε.
            delta: Target δ.
            fake_users: k (default: :func:`~shuffledp.protocols.flip.calibrate_flip`'s).
            calibration: ``"exact"`` (the smallest q the exact accountant
                certifies) or ``"paper"`` (Claim III.1's q, certified exactly).

        Returns:
            The spec and :meth:`FlipProtocol.calibrated
            <shuffledp.protocols.flip.FlipProtocol.calibrated>` for n users over
            ``labels``, whose calibration chose it.

        Raises:
            InvalidParameterError: On a bad parameter, or a target no q meets.
        """
        from shuffledp.protocols.flip import FlipProtocol

        if calibration not in FLIP_CALIBRATIONS:
            raise InvalidParameterError(
                f"calibration must be 'exact' or 'paper', got {calibration!r}"
            )
        flip = FlipProtocol.calibrated(
            n, list(labels), epsilon, delta, fake_users=fake_users, calibration=calibration
        )
        cal = flip.calibration
        spec = cls(q=cal.q, fake_users=cal.fake_users, calibration=cal.method)
        return Calibrated(spec, flip)

    def mechanism(self, n: int, domain_size: int) -> Mechanism:
        """The accountant's description of these parameters at n users over d bins.

        ``shuffledp.accounting`` evaluates every method registered for it
        (``compare``, ``delta(..., method=...)``) on the same parameters.
        """
        from shuffledp.accounting.methods import Mechanism

        return Mechanism(
            kind="flip", n=n, q=self.q, fake_users=self.fake_users, domain_size=domain_size
        )

    def randomizer(self, domain_size: int) -> FlipRandomizer:
        """Alg. 1's client: flipped bits and the fake users' bits."""
        from shuffledp.randomizers.bitflip import FlipRandomizer

        return FlipRandomizer(domain_size, self.q, self.fake_users)

    def fewest_messages_per_submission(self) -> int:
        """0: a user whose bits all come out 0 sends nothing."""
        return 0

    def max_messages(self, domain_size: int) -> int:
        """:func:`flip_max_messages` of the spec."""
        return flip_max_messages(domain_size, self.q, self.fake_users)

    @classmethod
    def capped_parties_when_calibrated(
        cls, min_batch_users: int, options: Mapping[str, Any]
    ) -> int:
        """Every client of a batch, whatever the options."""
        return check_int(min_batch_users, "min_batch_users", minimum=1)

    def protocol(
        self, n: int, labels: Sequence[str], epsilon: float, target_delta: float
    ) -> FlipProtocol:
        """FLIP with these parameters for n users, certified at ε (the target δ is not used)."""
        from shuffledp.protocols.flip import FlipProtocol

        return FlipProtocol.from_parameters(
            q=self.q, fake_users=self.fake_users, n=n, domain=list(labels), epsilon=epsilon
        )
