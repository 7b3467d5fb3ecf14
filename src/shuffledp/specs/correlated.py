"""The correlated protocol's spec: every bin's noise and the users it is split over.

Each user sends its value as (x, +1) and, per bin j, noise shares: NB(1/m, α)
messages (j, +1), NB(1/m, α) messages (j, −1) and NB(r/m, q) pairs of both
(the flooding, which cancels in N⁺ − N⁻). Summed over m = ``min_honest``
users the shares are DLap(a) (α = e^{−a}) plus the flooding in every bin, the
noise the certificate (:mod:`shuffledp.accounting.certificates.correlated`,
and :mod:`~shuffledp.accounting.certificates.correlated_add_remove` under the
usual add/remove relation) is computed for. The message format is 2·bin +
(1 if the sign is −1): 2d distinct messages.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from shuffledp._validation import check_int
from shuffledp.accounting.certificates.correlated_noise import (
    NEIGHBOURS,
    CorrelatedNoise,
    Neighbours,
)
from shuffledp.specs.base import Calibrated, ProtocolSpec, SpecError

if TYPE_CHECKING:
    from shuffledp.protocols.correlated import (
        CorrelatedCalibration,
        CorrelatedProtocol,
        MinHonest,
    )
    from shuffledp.randomizers.correlated import CorrelatedRandomizer

__all__ = ["CorrelatedSpec"]


@dataclass(frozen=True)
class CorrelatedSpec(ProtocolSpec):
    """The correlated protocol's public parameters.

    Attributes:
        alpha: α = e^{−a}: every bin's two one-sided Geo(α) counts, whose
            difference is DLap(a).
        flood_r: The flooding NB(r, q)'s shape r per bin, at ``min_honest`` users.
        flood_q: The flooding's q.
        min_honest: m, the users whose shares the guarantee counts on (each
            share is NB(1/m, ·)); a task's ``min_batch_users``.
        neighbours: ``"replacement"`` or ``"add-remove"`` (the usual relation:
            the absent user sends nothing).
        slack: The accuracy slack of the calibration (``None`` if not calibrated with one).
        calibration: ``"exact"``.
    """

    name: ClassVar[str] = "correlated"
    #: What ``calibrate``'s ``calibration`` option accepts (``fixed`` and ``pure`` are
    #: results, not requests).
    calibrations: ClassVar[tuple[str, ...]] = ("exact",)
    fields: ClassVar[tuple[str, ...]] = (
        "alpha",
        "flood_r",
        "flood_q",
        "min_honest",
        "neighbours",
        "slack",
        "calibration",
    )
    real_fields: ClassVar[tuple[str, ...]] = ("alpha", "flood_r", "flood_q", "slack")

    alpha: float
    flood_r: float
    flood_q: float
    min_honest: int
    neighbours: Neighbours = "replacement"
    slack: float | None = None
    calibration: str = "exact"

    def __post_init__(self) -> None:
        self.noise()  # checks α, r and q
        check_int(self.min_honest, "min_honest", minimum=1)
        if self.neighbours not in NEIGHBOURS:
            raise SpecError(f"neighbours must be one of {NEIGHBOURS}, got {self.neighbours!r}")
        if self.slack is not None and not (
            isinstance(self.slack, float | int)
            and not isinstance(self.slack, bool)
            and math.isfinite(self.slack)
            and self.slack > 0
        ):
            raise SpecError(f"slack must be a positive number or null, got {self.slack!r}")
        if not isinstance(self.calibration, str):
            raise SpecError(f"calibration must be a string, got {self.calibration!r}")

    def noise(self) -> CorrelatedNoise:
        """Every bin's noise at ``min_honest`` users: (α, r, q)."""
        return CorrelatedNoise(self.alpha, self.flood_r, self.flood_q)

    @classmethod
    def calibrated(
        cls,
        n: int,
        labels: Sequence[str],
        epsilon: float,
        delta: float,
        *,
        slack: float | None = None,
        neighbours: Neighbours = "replacement",
        calibration: str = "exact",
        min_honest: MinHonest = None,
    ) -> Calibrated[CorrelatedSpec, CorrelatedProtocol]:
        """The cheapest certified noise for (ε, δ), split over m = ``min_honest`` users' shares.

        Args:
            n: Number of users.
            labels: The public domain's labels, in bin order.
            epsilon: Target ε.
            delta: Target δ.
            slack: The accuracy slack (default
                :data:`~shuffledp.protocols.correlated.DEFAULT_SLACK`).
            neighbours: ``"replacement"`` or ``"add-remove"``.
            calibration: ``"exact"`` (the only one).
            min_honest: m: a count of users, a fraction of n in (0, 1], or
                ``None`` for all n (a task's ``min_batch_users``); at least 1 (a task
                holds at least 2: :meth:`check_task`).

        Returns:
            The spec and :meth:`CorrelatedProtocol.calibrated
            <shuffledp.protocols.correlated.CorrelatedProtocol.calibrated>` for n
            users over ``labels``, whose calibration chose it.

        Raises:
            InvalidParameterError: On a bad parameter or a target no noise meets.
        """
        from shuffledp.protocols.correlated import (
            DEFAULT_SLACK,
            CorrelatedProtocol,
        )

        if calibration != "exact":
            raise SpecError(
                f"the correlated protocol is calibrated by the exact accountant only; got "
                f"calibration {calibration!r}"
            )
        correlated = CorrelatedProtocol.calibrated(
            n,
            list(labels),
            epsilon,
            delta,
            slack=DEFAULT_SLACK if slack is None else slack,
            min_honest=min_honest,
            neighbours=neighbours,
        )
        cal = correlated.calibration
        spec = cls(
            alpha=cal.alpha,
            flood_r=cal.flood_r,
            flood_q=cal.flood_q,
            min_honest=cal.min_honest,
            neighbours=neighbours,
            slack=cal.slack,
            calibration=cal.method,
        )
        return Calibrated(spec, correlated)

    def message_domain_size(self, domain_size: int) -> int:
        """2d: a message is a (bin, sign) pair."""
        return 2 * domain_size

    def randomizer(self, domain_size: int) -> CorrelatedRandomizer:
        """The value message and the user's NB(·/m) shares."""
        from shuffledp.randomizers.correlated import CorrelatedRandomizer

        return CorrelatedRandomizer(domain_size, self.noise(), self.min_honest)

    def max_messages(self, domain_size: int) -> int:
        """:func:`~shuffledp.accounting.certificates.message_bounds.correlated_max_messages`."""
        from shuffledp.accounting.certificates.message_bounds import correlated_max_messages

        return correlated_max_messages(domain_size, self.noise(), self.min_honest)

    @classmethod
    def capped_parties_when_calibrated(
        cls, min_batch_users: int, options: Mapping[str, Any]
    ) -> int:
        """Every client of a batch, whatever the options."""
        return check_int(min_batch_users, "min_batch_users", minimum=1)

    def batch_assumption(self, min_batch_users: int, smallest: int) -> str:
        """At least m = ``min_batch_users`` users of each batch send all their noise shares."""
        m = min_batch_users
        return (
            f"each batch holds at least {m} users who follow the protocol and send all their "
            f"noise shares (min_batch_users, the calibration's min_honest): each user's shares "
            f"are NB(1/{m}, .) per bin and message kind, so {m} such users' shares add up to "
            f"the noise the guarantee is certified for, and the guarantee is certified for "
            f"exactly {m} such users; a batch's size counts every submission (the smallest "
            f"batch holds {smallest}), and submissions an adversary makes itself, or users "
            "who collude with the analyzer, count towards it but their noise shares protect "
            "nobody; with fewer than that many honest users in a batch the guarantee does not "
            "hold; honest users beyond the minimum only add noise (post-processing)"
        )

    def shuffler_assumption(self) -> str:
        """The shuffler is trusted, and hides each submission's message count too."""
        return (
            "the shuffler is trusted: it does not reveal who sent which message, in which "
            "order or how many messages each submission held (a correlated submission's "
            "message count tells how much noise its user drew: not its value, but together "
            "with the released counts it is not covered by the guarantee), and it does not "
            "collude with the analyzer (who could then take each user's value message apart "
            "from its noise shares)"
        )

    def check_task(
        self,
        *,
        domain_size: int,
        epsilon: float,
        min_batch_users: int,
        max_messages_per_submission: int,
    ) -> None:
        """A task's ``min_batch_users`` is the m its users' shares are split over."""
        if self.min_honest != min_batch_users:
            raise SpecError(
                "a correlated task's parameters.min_honest must equal its min_batch_users "
                f"({min_batch_users}), got {self.min_honest!r}"
            )

    def calibration_at(
        self, n: int, domain_size: int, epsilon: float, target_delta: float
    ) -> CorrelatedCalibration:
        """The noise as a calibration for ``n`` ≥ m users, certified at ε.

        The certificate does not depend on n (it holds whenever at least m
        users send their shares); n only sets the estimate's standard error,
        √(2(n/m)α)/(1 − α) with all n users' noise. δ is
        :func:`~shuffledp.accounting.certificates.correlated.correlated_delta`
        rounded up (``delta_lower``: the same sum rounded down).
        """
        from shuffledp.accounting.certificates.correlated import correlated_delta
        from shuffledp.protocols.correlated import CorrelatedCalibration

        noise, m = self.noise(), self.min_honest
        neighbours = self.neighbours
        return CorrelatedCalibration(
            method=self.calibration,
            n=check_int(n, "n", minimum=m),
            domain_size=domain_size,
            epsilon=epsilon,
            target_delta=target_delta,
            neighbours=neighbours,
            min_honest=m,
            slack=self.slack,
            noise=noise,
            delta=correlated_delta(
                epsilon,
                noise,
                neighbours=neighbours,
                domain_size=domain_size,
                min_honest=m,
            ),
            delta_lower=correlated_delta(
                epsilon,
                noise,
                neighbours=neighbours,
                domain_size=domain_size,
                min_honest=m,
                rounding="down",
            ),
            notes=(
                f"min_honest = min_batch_users = {m}: every user's noise shares are NB(1/{m}, "
                f"alpha) of (j, +1), NB(1/{m}, alpha) of (j, -1) and NB(r/{m}, q) of both, "
                "per bin",
            ),
        )

    def protocol(
        self, n: int, labels: Sequence[str], epsilon: float, target_delta: float
    ) -> CorrelatedProtocol:
        """The protocol for n ≥ m users: :meth:`calibration_at` with the labels."""
        from shuffledp.protocols.correlated import CorrelatedProtocol

        labels = tuple(labels)
        return CorrelatedProtocol(
            self.calibration_at(n, len(labels), epsilon, target_delta), labels=labels
        )
