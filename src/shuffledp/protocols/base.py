"""The protocol interface every shuffle protocol implements.

A protocol wires a randomizer, the shuffler, an analyzer and an accountant. It
runs on two paths that must agree in distribution:

* message-level: real messages and a real shuffle (what a deployment runs);
* count-level: the analyzer's sufficient statistic drawn directly (what
  simulations at 1e7+ users use).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import PrivacyReport
from shuffledp.randomizers.bitflip import check_values
from shuffledp.shuffler.uniform import UniformShuffler

__all__ = ["ExecutionPath", "ProtocolRun", "ShuffleProtocol"]

ExecutionPath = Literal["message", "count"]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class ProtocolRun:
    """The outcome of one execution of a protocol.

    Attributes:
        protocol: Protocol name.
        estimate: The analyzer's estimate.
        privacy: The guarantee the execution satisfies.
        path: ``"message"`` or ``"count"``.
        messages: Number of messages the users sent.
        statistic: The analyzer's input (e.g. message counts per bin).
    """

    protocol: str
    estimate: HistogramEstimate
    privacy: PrivacyReport
    path: ExecutionPath
    messages: int
    statistic: IntArray

    @property
    def messages_per_user(self) -> float:
        """Average number of messages per user."""
        return self.messages / self.estimate.n


class ShuffleProtocol(ABC):
    """Randomizer + shuffler + analyzer + accountant for histogram estimation.

    Subclasses set ``name``, ``n`` (the number of users the privacy guarantee
    was calibrated for) and ``domain_size``.
    """

    name: ClassVar[str]
    n: int
    domain_size: int

    @abstractmethod
    def randomize(self, values: IntArray, seed: SeedLike = None) -> MessageBatch:
        """Run every user's randomizer; return the messages before shuffling."""

    @abstractmethod
    def statistic_from_messages(self, shuffled: ShuffledBatch) -> IntArray:
        """Reduce a shuffled batch to the analyzer's sufficient statistic."""

    @abstractmethod
    def sample_statistic(self, histogram: IntArray, seed: SeedLike = None) -> IntArray:
        """Draw the sufficient statistic directly from the true histogram."""

    @abstractmethod
    def estimate(
        self, statistic: IntArray, domain: Sequence[str] | None = None
    ) -> HistogramEstimate:
        """Turn the sufficient statistic into a histogram estimate."""

    @abstractmethod
    def privacy_report(self) -> PrivacyReport:
        """Return the privacy guarantee of one execution."""

    @abstractmethod
    def messages_in(self, statistic: IntArray) -> int:
        """Return the number of messages a statistic was computed from."""

    def parameters(self) -> dict[str, Any]:
        """Return the protocol's parameters (for reports)."""
        return {}

    def run(
        self,
        values: NDArray[np.integer],
        *,
        path: ExecutionPath = "message",
        seed: SeedLike = None,
        domain: Sequence[str] | None = None,
    ) -> ProtocolRun:
        """Execute the protocol on one bin index per user.

        Args:
            values: Each user's bin index in ``[0, domain_size)``; exactly ``n`` users.
            path: ``"message"`` (real messages, real shuffle) or ``"count"``.
            seed: ``None`` for OS entropy and a cryptographically secure shuffle;
                an int for a reproducible run (seeded shuffle).
            domain: Bin labels for the estimate.

        Raises:
            DataError: If the number of users differs from the calibrated ``n``
                (the guarantee depends on it) or a value is outside the domain.
        """
        arr = check_values(values, self.domain_size)
        if arr.shape[0] != self.n:
            raise DataError(
                f"the protocol was calibrated for n={self.n} users but got {arr.shape[0]} values"
            )
        if domain is not None and len(domain) != self.domain_size:
            raise DataError(f"domain has {len(domain)} labels, expected {self.domain_size}")
        rng = make_rng(seed)
        if path == "message":
            batch = self.randomize(arr, rng)
            shuffled = UniformShuffler().shuffle(batch, seed=None if seed is None else rng)
            statistic = self.statistic_from_messages(shuffled)
            messages = len(batch)
        elif path == "count":
            histogram = np.bincount(arr, minlength=self.domain_size).astype(np.int64)
            statistic = self.sample_statistic(histogram, rng)
            messages = self.messages_in(statistic)
        else:
            raise InvalidParameterError(f"path must be 'message' or 'count', got {path!r}")
        return ProtocolRun(
            protocol=self.name,
            estimate=self.estimate(statistic, domain),
            privacy=self.privacy_report(),
            path=path,
            messages=messages,
            statistic=statistic,
        )
