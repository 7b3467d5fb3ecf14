"""The protocol interface every shuffle protocol implements.

A protocol wires a randomizer, the shuffler, an analyzer and an accountant. It
runs on two paths that must agree in distribution:

* message-level: real messages and a real shuffle (what a deployment runs);
* count-level: the analyzer's sufficient statistic drawn directly (what
  simulations at 1e7+ users use).

What the protocols built from one calibration object share (FLIP, k-RR,
correlated, augmented) is here too: :class:`CalibratedProtocol` (the domain
and its labels, the count path, the report), :func:`certified_report` (the
calibration's privacy report), :func:`check_target` and :func:`check_size`
(the calibration's arguments) and :func:`fixed_guarantee` (what hand-picked
parameters certify at a given ε or δ).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SEEDED_NOT_COVERED, SeedLike, child_seeds, make_rng
from shuffledp._validation import (
    DataError,
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.data.checks import check_values
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.shuffler.uniform import UniformShuffler

__all__ = [
    "CalibratedParameters",
    "CalibratedProtocol",
    "CountSampler",
    "DomainSpec",
    "ExecutionPath",
    "ProtocolRun",
    "ShuffleProtocol",
    "certified_report",
    "check_size",
    "check_target",
    "fixed_guarantee",
    "resolve_domain",
]

ExecutionPath = Literal["message", "count"]
IntArray = NDArray[np.int64]

#: A domain given as its size d (values are bin indices 0..d−1) or as its labels, in bin order
#: (integer labels stand for their decimal text).
DomainSpec = int | Sequence[str | int]


def resolve_domain(domain: DomainSpec, name: str = "domain") -> tuple[int, tuple[str, ...] | None]:
    """Return (d, labels) for a domain given as a size or as labels.

    The domain is public: every client needs it to randomize, so it must come
    from the analyst's declaration, never from the private data. Integer labels
    stand for their decimal text (``[1, 2, 10]`` is ``("1", "2", "10")``).

    Raises:
        InvalidParameterError: If the size is not an integer ≥ 2 or the labels
            are not distinct strings (at least two).
    """
    if isinstance(domain, (int, np.integer)) and not isinstance(domain, bool):
        return check_int(domain, name, minimum=2), None
    if isinstance(domain, (str, bytes)) or not isinstance(domain, Sequence):
        raise InvalidParameterError(
            f"{name} must be the number of bins or a sequence of bin labels, got {domain!r}"
        )
    from shuffledp.data.domains import check_domain

    labels = tuple(check_domain(domain, name))
    return len(labels), labels


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
    was calibrated for), ``domain_size`` and ``labels`` (the public domain's bin
    labels, or ``None`` when the protocol was built from a size only).
    """

    name: ClassVar[str]
    n: int
    domain_size: int
    labels: tuple[str, ...] | None = None

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
        values: Any,
        *,
        path: ExecutionPath = "message",
        seed: SeedLike = None,
        domain: Sequence[str] | None = None,
    ) -> ProtocolRun:
        """Execute the protocol on one value per user.

        Args:
            values: Each user's value, exactly ``n`` users. A numpy integer array
                or a list of Python ints holds **bin indices**: position ``i`` of
                the domain, ``0 <= i < domain_size``, not the labels (with labels
                ``["1", "2", "3"]``, index 0 is label ``"1"``). Anything else holds
                **labels**, encoded against the public domain: a list of strings,
                a numpy string array, a pandas Series or a pyarrow array, of text
                or of integers (an integer is matched to the label that is its
                decimal text, so a pandas column of integers needs a domain of
                integer labels).
            path: ``"message"`` (real messages, real shuffle) or ``"count"``.
            seed: ``None`` for OS entropy and a cryptographically secure shuffle;
                an int for a reproducible run (seeded shuffle).
            domain: Bin labels, in bin order; defaults to the labels the protocol
                was built with. Needed when ``values`` are labels.

        Raises:
            DataError: If the number of users differs from the calibrated ``n``
                (the guarantee depends on it), a value is outside the domain, or
                labels are given without a domain.
        """
        labels = self._run_labels(domain)
        arr = self._as_indices(values, labels)
        if arr.shape[0] != self.n:
            raise DataError(
                f"the protocol was calibrated for n={self.n} users but got {arr.shape[0]} values"
            )
        if path == "count":
            histogram = np.bincount(arr, minlength=self.domain_size).astype(np.int64)
            del arr
            return self._run_count_path(histogram, labels, seed)
        if path != "message":
            raise InvalidParameterError(f"path must be 'message' or 'count', got {path!r}")
        # Independent streams for the randomizers and the shuffle (None: OS entropy for
        # the randomizers, the cryptographic shuffle).
        randomize_seed, shuffle_seed = child_seeds(seed, 2)
        batch = self.randomize(arr, make_rng(randomize_seed))
        shuffled = UniformShuffler().shuffle(batch, seed=shuffle_seed)
        statistic = self.statistic_from_messages(shuffled)
        return self._finish(statistic, labels, path, len(batch), seed)

    def run_counts(
        self,
        histogram: Any,
        *,
        seed: SeedLike = None,
        domain: Sequence[str] | None = None,
    ) -> ProtocolRun:
        """Execute the count-level path from the true histogram (users per bin).

        The same draw as ``run(values, path="count", seed=seed)`` on any values
        with this histogram (the same seed gives the same release), without one
        value per user in memory: what ``shuffledp run ... --path count`` uses
        with :func:`shuffledp.data.ingest.load_histogram`.

        Args:
            histogram: Non-negative integer counts, one per bin (``domain_size``
                of them), summing to the calibrated ``n``.
            seed: As in :meth:`run`.
            domain: As in :meth:`run`.

        Raises:
            InvalidParameterError: If ``histogram`` is not ``domain_size``
                non-negative integers.
            DataError: If its total differs from the calibrated ``n``.
        """
        labels = self._run_labels(domain)
        counts = np.asarray(histogram)
        if (
            counts.ndim != 1
            or counts.shape[0] != self.domain_size
            or not np.issubdtype(counts.dtype, np.integer)
            or (counts.size and int(counts.min()) < 0)
        ):
            raise InvalidParameterError(
                f"histogram must hold {self.domain_size} non-negative integer counts (one per "
                f"bin), got {counts.dtype} of shape {counts.shape}"
            )
        total = sum(counts.tolist())  # Python integers: a numpy sum wraps around silently
        if total != self.n:
            raise DataError(
                f"the protocol was calibrated for n={self.n} users but the histogram counts {total}"
            )
        return self._run_count_path(counts.astype(np.int64), labels, seed)

    def _run_count_path(
        self, histogram: IntArray, labels: list[str] | None, seed: SeedLike
    ) -> ProtocolRun:
        """The count-level path from the true histogram: the randomizers' stream of ``seed``."""
        randomize_seed, _ = child_seeds(seed, 2)  # the stream the message path's randomizers use
        statistic = self.sample_statistic(histogram, make_rng(randomize_seed))
        return self._finish(statistic, labels, "count", self.messages_in(statistic), seed)

    def _finish(
        self,
        statistic: IntArray,
        labels: list[str] | None,
        path: ExecutionPath,
        messages: int,
        seed: SeedLike,
    ) -> ProtocolRun:
        privacy = self.privacy_report()
        if seed is not None:  # a seeded run says so in its report
            privacy = privacy.with_context(not_covered=(SEEDED_NOT_COVERED,))
        return ProtocolRun(
            protocol=self.name,
            estimate=self.estimate(statistic, labels),
            privacy=privacy,
            path=path,
            messages=messages,
            statistic=statistic,
        )

    def _run_labels(self, domain: Sequence[str] | None) -> list[str] | None:
        if domain is None:
            return None if self.labels is None else list(self.labels)
        size, labels = resolve_domain(list(domain))
        if size != self.domain_size:
            raise DataError(f"domain has {size} labels, expected {self.domain_size}")
        if self.labels is not None and labels != self.labels:
            raise DataError("domain differs from the labels the protocol was built with")
        return None if labels is None else list(labels)

    def _as_indices(self, values: Any, labels: list[str] | None) -> IntArray:
        if isinstance(values, np.ndarray) and np.issubdtype(values.dtype, np.integer):
            self._refuse_ambiguous_integers(labels)
            return self._check_indices(values)
        if (
            isinstance(values, list)
            and values
            and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values[:1000]
            )
        ):
            self._refuse_ambiguous_integers(labels)
            return self._check_indices(np.asarray(values))
        if labels is None:
            raise DataError(
                "values are labels, so the public domain is needed to encode them: pass "
                "domain=[...] (all labels, in bin order) or build the protocol with the labels"
            )
        from shuffledp.data.encoding import encode_values

        return encode_values(values, labels).indices

    @staticmethod
    def _refuse_ambiguous_integers(labels: list[str] | None) -> None:
        """Refuse integers when the domain's labels are integers other than 0, 1, …, d − 1.

        An integer array means bin indices; with labels like 1 … 10 the same
        numbers could be meant as labels, and reading them as positions would
        shift every value by one bin without a word.
        """
        from shuffledp.data.encoding import is_integer_label

        if labels is None or labels == [str(i) for i in range(len(labels))]:
            return
        if not all(is_integer_label(label) for label in labels):
            return  # integers as labels could not match them all: they can only be indices
        raise DataError(
            f"values are integers and the domain's labels are integers too "
            f"({labels[0]!r}, {labels[1]!r}, ...), which is ambiguous: an integer array holds "
            "bin indices (0 for the first label). Pass the values as labels (a pandas Series, "
            "a pyarrow array or text), or convert them to indices first"
        )

    def _check_indices(self, values: NDArray[Any]) -> IntArray:
        """Bin indices, with what an integer array means in the error when one is out of range."""
        try:
            return check_values(values, self.domain_size)
        except DataError as exc:
            raise DataError(
                f"{exc}; a numpy integer array (or a list of ints) holds bin indices, positions "
                f"0 to {self.domain_size - 1} of the domain, not labels: to give integer labels, "
                "pass them as a pandas Series or a pyarrow array (or as text)"
            ) from None


class CalibratedParameters(Protocol):
    """What a protocol's calibration states: n, d and the certified (ε, δ) with its lower bound."""

    @property
    def n(self) -> int:
        """Number of users the guarantee is calibrated for."""
        ...

    @property
    def domain_size(self) -> int:
        """d, the number of bins."""
        ...

    @property
    def epsilon(self) -> float:
        """ε of the guarantee."""
        ...

    @property
    def delta(self) -> float:
        """The certified δ at ε."""
        ...

    @property
    def delta_lower(self) -> float | None:
        """The exact δ of a concrete neighbouring pair (how tight ``delta`` is), if any."""
        ...

    def privacy_report(self) -> PrivacyReport:
        """The guarantee of one execution."""
        ...


class CountSampler(Protocol):
    """A randomizer that draws the analyzer's statistic from the true histogram."""

    def sample_counts(self, histogram: NDArray[np.integer], seed: SeedLike = None) -> IntArray:
        """The statistic drawn from its exact law (the count-level path)."""
        ...


CalibrationT = TypeVar("CalibrationT", bound=CalibratedParameters)
RandomizerT = TypeVar("RandomizerT", bound=CountSampler)


class CalibratedProtocol(ShuffleProtocol, Generic[CalibrationT, RandomizerT]):
    """A protocol built from one calibration object (FLIP, k-RR, correlated, augmented).

    The calibration fixes n, the domain size and the certified guarantee (its
    ``privacy_report``); the randomizer draws the statistic on the count path
    (its ``sample_counts``), and every message adds one to one count of the
    statistic. Subclasses build ``randomizer`` and implement ``randomize``,
    ``statistic_from_messages`` and ``estimate``.

    Args:
        calibration: The protocol's calibration.
        labels: The public domain's bin labels (``None``: bin indices only).

    Raises:
        InvalidParameterError: If ``labels`` are not d distinct labels.
    """

    #: What the calibration's domain counts, in the error for labels of another size.
    domain_unit: ClassVar[str] = "bins"

    calibration: CalibrationT
    randomizer: RandomizerT

    def __init__(self, calibration: CalibrationT, *, labels: Sequence[str] | None = None) -> None:
        self.calibration = calibration
        self.n = calibration.n
        self.domain_size = calibration.domain_size
        if labels is not None:
            size, self.labels = resolve_domain(labels, "labels")
            if size != calibration.domain_size:
                raise InvalidParameterError(
                    f"labels has {size} entries, the calibration {calibration.domain_size} "
                    f"{self.domain_unit}"
                )

    @classmethod
    def _on_domain(
        cls, domain: DomainSpec, calibrate: Callable[[int], CalibrationT], **options: Any
    ) -> Self:
        """Build the protocol on a public domain: ``calibrate(d)``, then its labels.

        Args:
            domain: The public domain: its size d, or its labels in bin order.
            calibrate: The calibration for a domain of d bins.
            options: The subclass's other constructor arguments.
        """
        size, labels = resolve_domain(domain)
        return cls(calibrate(size), labels=labels, **options)

    def sample_statistic(self, histogram: IntArray, seed: SeedLike = None) -> IntArray:
        """The statistic drawn from its exact law given the true histogram (count-level path)."""
        return self.randomizer.sample_counts(histogram, seed)

    def privacy_report(self) -> PrivacyReport:
        """The certified (ε, δ) of the calibration."""
        return self.calibration.privacy_report()

    def messages_in(self, statistic: IntArray) -> int:
        """Every message adds one to one count, so the counts sum to the messages."""
        return int(np.sum(statistic))


def certified_report(
    calibration: CalibratedParameters,
    method: str,
    *,
    parameters: dict[str, Any],
    notes: str,
    neighbouring: str | None = None,
    assumptions: tuple[str, ...] = (),
) -> PrivacyReport:
    """The upper bound a calibration certifies: (ε, δ) at its n users, with its lower bound.

    Args:
        calibration: The calibration (its ε, δ, ``delta_lower`` and n).
        method: The accountant's name.
        parameters: The parameters the report states.
        notes: How the bound was computed.
        neighbouring: The neighbouring relation (``None``: the report's default).
        assumptions: Statements the guarantee relies on.
    """
    context: dict[str, Any] = {} if neighbouring is None else {"neighbouring": neighbouring}
    return PrivacyReport(
        guarantee=ApproxDP(calibration.epsilon, calibration.delta),
        method=method,
        bound=BoundKind.UPPER,
        n=calibration.n,
        lower_bound_delta=calibration.delta_lower,
        parameters=parameters,
        notes=notes,
        assumptions=assumptions,
        **context,
    )


def check_size(n: int, domain_size: int) -> tuple[int, int]:
    """Return (n, d) after checking n ≥ 1 users and d ≥ 2 bins.

    Raises:
        InvalidParameterError: Otherwise.
    """
    return check_int(n, "n", minimum=1), check_int(domain_size, "domain_size", minimum=2)


def check_target(
    n: int, domain_size: int, epsilon: float, delta: float
) -> tuple[int, int, float, float]:
    """Return (n, d, ε, δ) of a calibration's target after checking them, in that order.

    Raises:
        InvalidParameterError: If one is out of range (the first one found).
    """
    n, d = check_size(n, domain_size)
    return n, d, check_epsilon(epsilon), check_delta(delta)


def fixed_guarantee(
    epsilon: float | None,
    delta: float | None,
    *,
    delta_at: Callable[[float], float],
    epsilon_at: Callable[[float], tuple[float, float]],
) -> tuple[float, float, float]:
    """What hand-picked parameters certify: the δ at ``epsilon``, or the ε at ``delta``.

    Args:
        epsilon: The ε to certify δ at, or ``None``.
        delta: The δ to find ε for, or ``None``.
        delta_at: The certified δ at an ε.
        epsilon_at: The ε at a target δ, with the certified δ there.

    Returns:
        (ε, target δ, certified δ); at a given ε the target is the certified δ.

    Raises:
        InvalidParameterError: Unless exactly one of ``epsilon`` and ``delta``
            is given, or if it is out of range.
    """
    if (epsilon is None) == (delta is None):
        raise InvalidParameterError(
            "give exactly one of epsilon (to get the certified delta there) or delta "
            f"(to get the epsilon it allows); got epsilon={epsilon!r}, delta={delta!r}"
        )
    if epsilon is not None:
        epsilon = check_epsilon(epsilon)
        certified = delta_at(epsilon)
        return epsilon, certified, certified
    target = check_delta(delta)
    epsilon, certified = epsilon_at(target)
    return epsilon, target, certified
