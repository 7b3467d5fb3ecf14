"""The protocol interface every shuffle protocol implements.

A protocol wires a randomizer, the shuffler, an analyzer and an accountant. It
runs on two paths that must agree in distribution:

* message-level: real messages and a real shuffle (what a deployment runs);
* count-level: the analyzer's sufficient statistic drawn directly (what
  simulations at 1e7+ users use).

:class:`ShuffleProtocol` is the contract every protocol meets, typed by what
its users hold, the count-level path's input, the sufficient statistic, the
estimate and the run (each defaults to the one-value-per-user types, so a
plain ``ShuffleProtocol`` is one of those). :class:`SingleValueProtocol` is the
contract for one value per user over a public domain (FLIP, k-RR, correlated,
augmented): bin indices or labels in, a :class:`ProtocolRun` out. The
segmented protocol (a set of items and a level per user) and the per-user
histogram protocol (a histogram per user) meet the contract with their own
types (:mod:`shuffledp.protocols.segmented`, :mod:`shuffledp.protocols.per_user`).

What the protocols built from one calibration object share (FLIP, k-RR,
correlated, augmented) is here too: :class:`CalibratedProtocol` (the domain
and its labels, the count path, the report), :class:`CalibratedOnRun` (such a
protocol built with ``n=None``: calibrated for the number of users each run's
data hold), :func:`certified_report` (the calibration's privacy report),
:func:`check_target` and :func:`check_size` (the calibration's arguments) and
:func:`fixed_guarantee` (what hand-picked parameters certify at a given ε or δ).

The users' values come in as bin indices, as labels (a list, a numpy array, a
pandas Series, a pyarrow array) or as a column of a pandas DataFrame or a
pyarrow Table (:func:`prepare_values`).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, Self

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
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.protocols.values import (
    DomainSpec,
    PreparedValues,
    ValuesAre,
    check_indices,
    checked_histogram,
    prepare_values,
    resolve_domain,
    run_labels,
)
from shuffledp.shuffler.uniform import UniformShuffler

if TYPE_CHECKING:
    from typing_extensions import TypeVar
elif sys.version_info >= (3, 13):
    from typing import TypeVar
else:
    from typing import TypeVar as _TypeVar

    def TypeVar(name: str, *constraints: Any, default: Any = None, **options: Any) -> Any:  # noqa: N802
        """``typing.TypeVar`` without ``default`` (PEP 696, Python 3.13), read by type checkers."""
        return _TypeVar(name, *constraints, **options)


__all__ = [
    "CalibratedOnRun",
    "CalibratedParameters",
    "CalibratedProtocol",
    "CountSampler",
    "DomainSpec",
    "ExecutionPath",
    "PreparedValues",
    "ProtocolRun",
    "ShuffleProtocol",
    "SingleValueProtocol",
    "ValuesAre",
    "certified_report",
    "check_one_target",
    "check_size",
    "check_target",
    "fixed_guarantee",
    "prepare_values",
    "resolve_domain",
]

ExecutionPath = Literal["message", "count"]
IntArray = NDArray[np.int64]


def _check_path(path: object) -> ExecutionPath:
    if path not in ("message", "count"):
        raise InvalidParameterError(f"path must be 'message' or 'count', got {path!r}")
    return path


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
        release_notes: The rules applied to the input (``drop_missing``,
            ``normalize_labels``), without any count: what a release states.
        operator_notes: What encoding the input adjusted, with counts (values
            dropped as missing, ...): statistics of the private data, for the
            data owner; never release them.
        missing_dropped: Values dropped as missing (``drop_missing=True``);
            like ``operator_notes``, not for release.
    """

    protocol: str
    estimate: HistogramEstimate
    privacy: PrivacyReport
    path: ExecutionPath
    messages: int
    statistic: IntArray
    release_notes: tuple[str, ...] = ()
    operator_notes: tuple[str, ...] = ()
    missing_dropped: int = 0

    @property
    def messages_per_user(self) -> float:
        """Average number of messages per user."""
        return self.messages / self.estimate.n


#: What a protocol's users hold (one bin index each, a set and a level, a histogram).
ValuesT = TypeVar("ValuesT", default=IntArray)
#: The count-level path's input, made from the values by ``histogram_of``.
HistogramT = TypeVar("HistogramT", default=IntArray)
#: The analyzer's sufficient statistic.
StatisticT = TypeVar("StatisticT", default=IntArray)
#: What the analyzer makes of the statistic.
EstimateT = TypeVar("EstimateT", default=HistogramEstimate)
#: What ``run`` returns.
RunT = TypeVar("RunT", default=ProtocolRun)


class ShuffleProtocol(ABC, Generic[ValuesT, HistogramT, StatisticT, EstimateT, RunT]):
    """Randomizer + shuffler + analyzer + accountant: the contract every protocol meets.

    Two paths give the analyzer's sufficient statistic, and must agree in
    distribution: the message level (:meth:`randomize`, a uniform shuffle,
    :meth:`statistic_from_messages`) and the count level (:meth:`sample_statistic`
    on :meth:`histogram_of` the values); :meth:`estimate` turns either into the
    estimate, :meth:`privacy_report` states the guarantee of one execution and
    :meth:`run` does it all on the users' values, refusing a number of users
    other than the one the guarantee is for.

    The type parameters say what each protocol's data are: ``ValuesT`` what
    the users hold, ``HistogramT`` the count-level path's input,
    ``StatisticT`` the sufficient statistic, ``EstimateT`` the estimate and
    ``RunT`` the run. Every one defaults to the one-value-per-user protocols'
    type (bin indices, users per bin, messages per bin,
    :class:`~shuffledp.analyzers.estimate.HistogramEstimate`, :class:`ProtocolRun`),
    so a plain ``ShuffleProtocol`` is one of those; :class:`SingleValueProtocol`
    adds what they share (labels, frames, ``run_counts``).

    Subclasses set ``name``, ``n`` (the number of users the privacy guarantee
    was calibrated for), ``domain_size`` and ``labels`` (the public domain's bin
    labels, or ``None`` when the protocol was built from a size only).
    """

    name: ClassVar[str]
    n: int
    domain_size: int
    labels: tuple[str, ...] | None = None

    @abstractmethod
    def randomize(self, values: ValuesT, seed: SeedLike = None) -> MessageBatch:
        """Run every user's randomizer; return the messages before the uniform shuffle.

        A protocol whose shuffler does more than permute (augmented: sampling
        and dummies; per-user: grouping) does it here too, so that the uniform
        shuffle of :meth:`run` is what remains.
        """

    @abstractmethod
    def statistic_from_messages(self, shuffled: ShuffledBatch) -> StatisticT:
        """Reduce a shuffled batch to the analyzer's sufficient statistic."""

    @abstractmethod
    def histogram_of(self, values: ValuesT) -> HistogramT:
        """Return what the count-level path draws from, for these users' values."""

    @abstractmethod
    def sample_statistic(self, histogram: HistogramT, seed: SeedLike = None) -> StatisticT:
        """Draw the sufficient statistic directly from the count-level input (its exact law)."""

    @abstractmethod
    def estimate(self, statistic: StatisticT, domain: Sequence[str] | None = None) -> EstimateT:
        """Turn the sufficient statistic into the estimate."""

    @abstractmethod
    def privacy_report(self) -> PrivacyReport:
        """Return the privacy guarantee of one execution."""

    @abstractmethod
    def messages_in(self, statistic: StatisticT) -> int:
        """Return the number of messages a statistic was computed from."""

    def parameters(self) -> dict[str, Any]:
        """Return the protocol's parameters (for reports)."""
        return {}

    @abstractmethod
    def run(
        self, values: ValuesT, *, path: ExecutionPath = "message", seed: SeedLike = None
    ) -> RunT:
        """Execute the protocol on the users' values (exactly ``n`` users).

        Args:
            values: What the users hold.
            path: ``"message"`` (real messages, the uniform shuffle) or ``"count"``.
            seed: ``None`` for OS entropy and a cryptographically secure
                shuffle; an int for a reproducible run (seeded shuffle).

        Raises:
            DataError: If the number of users differs from ``n``.
        """

    def _draw_statistic(
        self, values: ValuesT, *, path: ExecutionPath, seed: SeedLike
    ) -> tuple[StatisticT, int]:
        """The statistic of one run and the messages it counts, on either path.

        The message path runs :meth:`randomize`, the uniform shuffler and
        :meth:`statistic_from_messages`; the count path :meth:`sample_statistic`
        on :meth:`histogram_of` the values, from the same stream as the
        randomizers (one child of ``seed`` for them, another for the shuffle).
        """
        path = _check_path(path)
        # Independent streams for the randomizers and the shuffle (None: OS entropy for
        # the randomizers, the cryptographic shuffle).
        randomize_seed, shuffle_seed = child_seeds(seed, 2)
        if path == "count":
            statistic = self.sample_statistic(self.histogram_of(values), make_rng(randomize_seed))
            return statistic, self.messages_in(statistic)
        batch = self.randomize(values, make_rng(randomize_seed))
        shuffled = UniformShuffler().shuffle(batch, seed=shuffle_seed)
        return self.statistic_from_messages(shuffled), len(batch)


class SingleValueProtocol(
    ShuffleProtocol[IntArray, IntArray, IntArray, HistogramEstimate, ProtocolRun]
):
    """A protocol whose users hold one value each, a bin of a public domain.

    FLIP, k-RR, correlated and augmented: the values are bin indices (or
    labels, encoded against the domain), the count-level input is the users
    per bin, the statistic counts messages, the estimate is a
    :class:`~shuffledp.analyzers.estimate.HistogramEstimate` and a run a
    :class:`ProtocolRun`.
    """

    def histogram_of(self, values: IntArray) -> IntArray:
        """Users per bin (the count-level path's input).

        Raises:
            DataError: If a value is not a bin index of the domain.
        """
        indices = check_indices(np.asarray(values), self.domain_size)
        return np.bincount(indices, minlength=self.domain_size).astype(np.int64)

    def run(
        self,
        values: Any,
        *,
        column: Hashable | None = None,
        path: ExecutionPath = "message",
        seed: SeedLike = None,
        domain: Iterable[Any] | None = None,
        drop_missing: bool = False,
        normalize_labels: bool = False,
        values_are: ValuesAre | None = None,
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
                integer labels). A pandas DataFrame or a pyarrow Table gives its
                ``column`` (or its only column).
            column: With a frame, the column holding each user's value.
            path: ``"message"`` (real messages, real shuffle) or ``"count"``.
            seed: ``None`` for OS entropy and a cryptographically secure shuffle;
                an int for a reproducible run (seeded shuffle).
            domain: Bin labels, in bin order; defaults to the labels the protocol
                was built with. Needed when ``values`` are labels.
            drop_missing: Drop missing values (``None``, NaN, nulls) instead of
                refusing them. The report then says that n counts only users
                with a value (``privacy.not_covered``) and the run's
                ``release_notes`` state the rule; how many were dropped is
                :attr:`ProtocolRun.missing_dropped`, for the data owner only.
            normalize_labels: Match labels ignoring case and surrounding spaces
                (``"Android "`` counts in the bin ``"android"``); stated in the
                run's ``release_notes``. Two domain labels that differ only so
                are an error.
            values_are: ``"indices"`` or ``"labels"`` to say what ``values``
                hold; ``None`` (default) tells by type as above, and refuses
                integers when the domain's labels are integers too.

        Raises:
            DataError: If the number of users differs from the calibrated ``n``
                (the guarantee depends on it: build the protocol with
                ``n=None`` to calibrate for the data), a value is outside the
                domain or missing (without ``drop_missing``), or labels are
                given without a domain.
            InvalidParameterError: On a bad option or ``column``.
        """
        path = _check_path(path)
        labels = run_labels(self.labels, self.domain_size, domain)
        prepared = prepare_values(
            values,
            labels=labels,
            domain_size=self.domain_size,
            column=column,
            drop_missing=drop_missing,
            normalize_labels=normalize_labels,
            values_are=values_are,
        )
        return self.run_prepared(prepared, labels, path=path, seed=seed)

    def run_prepared(
        self,
        prepared: PreparedValues,
        labels: Sequence[str] | None,
        *,
        path: ExecutionPath = "message",
        seed: SeedLike = None,
    ) -> ProtocolRun:
        """Execute the protocol on values already prepared by :func:`prepare_values`.

        Raises:
            DataError: If the number of users differs from the calibrated ``n``.
        """
        path = _check_path(path)
        arr = prepared.indices
        if arr.shape[0] != self.n:
            raise DataError(
                f"the protocol was calibrated for n={self.n} users but got {arr.shape[0]} "
                "values; the guarantee holds for n users only: calibrate for these data "
                "(build the protocol with n=None to calibrate for the users each run's data hold)"
            )
        label_list = None if labels is None else list(labels)
        if path == "count":
            histogram = np.bincount(arr, minlength=self.domain_size).astype(np.int64)
            del arr
            return self._run_count_path(histogram, label_list, seed, prepared)
        # Independent streams for the randomizers and the shuffle (None: OS entropy for
        # the randomizers, the cryptographic shuffle).
        randomize_seed, shuffle_seed = child_seeds(seed, 2)
        batch = self.randomize(arr, make_rng(randomize_seed))
        shuffled = UniformShuffler().shuffle(batch, seed=shuffle_seed)
        statistic = self.statistic_from_messages(shuffled)
        return self._finish(statistic, label_list, path, len(batch), seed, prepared)

    def run_counts(
        self,
        histogram: Any,
        *,
        seed: SeedLike = None,
        domain: Iterable[Any] | None = None,
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
        labels = run_labels(self.labels, self.domain_size, domain)
        counts, total = checked_histogram(histogram, self.domain_size)
        if total != self.n:
            raise DataError(
                f"the protocol was calibrated for n={self.n} users but the histogram counts {total}"
            )
        return self._run_count_path(counts, labels, seed)

    def _run_count_path(
        self,
        histogram: IntArray,
        labels: list[str] | None,
        seed: SeedLike,
        prepared: PreparedValues | None = None,
    ) -> ProtocolRun:
        """The count-level path from the true histogram: the randomizers' stream of ``seed``."""
        randomize_seed, _ = child_seeds(seed, 2)  # the stream the message path's randomizers use
        statistic = self.sample_statistic(histogram, make_rng(randomize_seed))
        return self._finish(statistic, labels, "count", self.messages_in(statistic), seed, prepared)

    def _finish(
        self,
        statistic: IntArray,
        labels: list[str] | None,
        path: ExecutionPath,
        messages: int,
        seed: SeedLike,
        prepared: PreparedValues | None = None,
    ) -> ProtocolRun:
        privacy = self.privacy_report()
        if seed is not None:  # a seeded run says so in its report
            privacy = privacy.with_context(not_covered=(SEEDED_NOT_COVERED,))
        if prepared is None:
            prepared = PreparedValues(np.empty(0, dtype=np.int64))
        if prepared.not_covered:
            privacy = privacy.with_context(not_covered=prepared.not_covered)
        return ProtocolRun(
            protocol=self.name,
            estimate=self.estimate(statistic, labels),
            privacy=privacy,
            path=path,
            messages=messages,
            statistic=statistic,
            release_notes=prepared.release_notes,
            operator_notes=prepared.operator_notes,
            missing_dropped=prepared.missing_dropped,
        )


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


class CalibratedProtocol(SingleValueProtocol, Generic[CalibrationT, RandomizerT]):
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

    def __init__(self, calibration: CalibrationT, *, labels: Iterable[Any] | None = None) -> None:
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
        cls,
        domain: DomainSpec,
        n: int | None,
        calibrate: Callable[[int, int], CalibrationT],
        **options: Any,
    ) -> Self | CalibratedOnRun[Self]:
        """Build the protocol on a public domain: ``calibrate(n, d)``, then its labels.

        Args:
            domain: The public domain: its size d, or its labels in bin order.
            n: Number of users, or ``None`` to calibrate for the users each
                run's data hold (a :class:`CalibratedOnRun`).
            calibrate: The calibration for n users and a domain of d bins.
            options: The subclass's other constructor arguments.
        """
        size, labels = resolve_domain(domain)
        if n is None:
            return CalibratedOnRun(
                lambda users: cls(calibrate(users, size), labels=labels, **options),
                name=cls.name,
                domain_size=size,
                labels=labels,
            )
        return cls(calibrate(n, size), labels=labels, **options)

    def sample_statistic(self, histogram: IntArray, seed: SeedLike = None) -> IntArray:
        """The statistic drawn from its exact law given the true histogram (count-level path)."""
        return self.randomizer.sample_counts(histogram, seed)

    def privacy_report(self) -> PrivacyReport:
        """The certified (ε, δ) of the calibration."""
        return self.calibration.privacy_report()

    def messages_in(self, statistic: IntArray) -> int:
        """Every message adds one to one count, so the counts sum to the messages."""
        return int(np.sum(statistic))


ProtocolT = TypeVar("ProtocolT", bound=SingleValueProtocol)


class CalibratedOnRun(Generic[ProtocolT]):
    """A protocol calibrated for the number of users in the data each run is given.

    What ``calibrated(n=None, ...)`` and ``from_parameters(n=None, ...)`` of
    FLIP, k-RR, correlated and augmented return: the public domain and the
    target (ε, δ) (or the hand-picked parameters) are fixed, and n is left to
    the data. Each :meth:`run` prepares the values (missing ones dropped if
    asked), counts the users n, builds the protocol for exactly n users with
    :meth:`for_users` (the same calibration as ``calibrated(n, ...)``) and runs
    it: the run's report is the guarantee certified at that n, for the target
    (ε, δ) the caller asked for. No certificate is carried over from one n to
    another.

    n itself is part of the release (``estimate.n``), as with a protocol built
    for a given n; with ``drop_missing`` it counts only the users with a value,
    which the report states.

    Args:
        build: The protocol for n users (its calibration at n).
        name: The protocol's name.
        domain_size: d.
        labels: The public domain's labels (``None``: bin indices only).
    """

    def __init__(
        self,
        build: Callable[[int], ProtocolT],
        *,
        name: str,
        domain_size: int,
        labels: tuple[str, ...] | None,
    ) -> None:
        self._build = build
        self._last: ProtocolT | None = None
        self.name = name
        self.domain_size = domain_size
        self.labels = labels

    #: What depends on n: asked of this object, they say how to get them.
    _NEEDS_N: ClassVar[frozenset[str]] = frozenset(
        {"n", "calibration", "privacy_report", "randomizer", "analyzer", "parameters"}
    )

    def __getattr__(self, name: str) -> Any:
        if name in CalibratedOnRun._NEEDS_N:
            raise AttributeError(
                f"{name} depends on n, which this {self.name} protocol takes from the data "
                f"each run is given: read it from a run (run.privacy) or build the protocol "
                f"for n users with for_users(n).{name}"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"CalibratedOnRun({self.name}, domain_size={self.domain_size}, n from the data)"

    def for_users(self, n: int) -> ProtocolT:
        """Return the protocol calibrated for ``n`` users (the last one built is kept).

        Raises:
            InvalidParameterError: If n is not a positive integer, or the
                calibration fails at n (e.g. no parameter meets the target).
        """
        n = check_int(n, "n", minimum=1)
        if self._last is None or self._last.n != n:
            self._last = self._build(n)
        return self._last

    def run(
        self,
        values: Any,
        *,
        column: Hashable | None = None,
        path: ExecutionPath = "message",
        seed: SeedLike = None,
        domain: Iterable[Any] | None = None,
        drop_missing: bool = False,
        normalize_labels: bool = False,
        values_are: ValuesAre | None = None,
    ) -> ProtocolRun:
        """Calibrate for the users in ``values``, then run: see :meth:`ShuffleProtocol.run`.

        The values are prepared first (encoded, missing ones dropped with
        ``drop_missing``); n is the number of users left, and the report is
        the certificate at that n.
        """
        path = _check_path(path)
        labels = run_labels(self.labels, self.domain_size, domain)
        prepared = prepare_values(
            values,
            labels=labels,
            domain_size=self.domain_size,
            column=column,
            drop_missing=drop_missing,
            normalize_labels=normalize_labels,
            values_are=values_are,
        )
        protocol = self.for_users(len(prepared.indices))
        return protocol.run_prepared(prepared, labels, path=path, seed=seed)

    def run_counts(
        self,
        histogram: Any,
        *,
        seed: SeedLike = None,
        domain: Iterable[Any] | None = None,
    ) -> ProtocolRun:
        """Calibrate for the users the histogram counts, then run the count-level path.

        See :meth:`ShuffleProtocol.run_counts`; n is the histogram's total.

        Raises:
            InvalidParameterError: If ``histogram`` is not ``domain_size``
                non-negative integer counts, or counts no user.
        """
        counts, total = checked_histogram(histogram, self.domain_size)
        if total < 1:
            raise InvalidParameterError(
                f"histogram must count at least one user, got a total of {total}"
            )
        return self.for_users(total).run_counts(counts, seed=seed, domain=domain)


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
    epsilon, delta = check_one_target(epsilon, delta)
    if epsilon is not None:
        certified = delta_at(epsilon)
        return epsilon, certified, certified
    assert delta is not None  # check_one_target: exactly one is given
    epsilon, certified = epsilon_at(delta)
    return epsilon, delta, certified


def check_one_target(
    epsilon: float | None, delta: float | None
) -> tuple[float | None, float | None]:
    """Return (ε, δ) after checking that exactly one is given, and in range.

    What :func:`fixed_guarantee` checks before computing anything (and what
    ``from_parameters(n=None, ...)`` checks before the data come).

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
        return check_epsilon(epsilon), None
    return None, check_delta(delta)
