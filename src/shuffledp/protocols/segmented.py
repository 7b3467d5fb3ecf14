"""Segmented (personalized) privacy for set-valued data in the multi-message shuffle model.

Wang et al., "Segmented private data aggregation in the multi-message shuffle
model", arXiv 2407.19639: Alg. 1 (the framework) with Alg. 2 (set-valued data). Every user
chooses a level k (privacy E_k) and holds s item slots.

* Step 1, level aggregation (Alg. 1 lines 3–12): the server learns the level
  counts, exactly (``mode="exact"``: users send their level through the
  shuffler, as in the paper's experiments; the level histogram is released
  and no guarantee covers it) or with differential privacy (``mode="dp"``:
  k-RR over the K levels through the shuffle, :class:`~shuffledp.protocols.krr.KRRProtocol`
  with its exact accountant; the counts n̂_k carry their own (ε, δ)).
  See :func:`aggregate_levels` (in :mod:`shuffledp.protocols.segmented_levels`,
  re-exported here).
* Step 2 (Alg. 1 line 14, §5.2): λ_k and the blanket rate m from
  :func:`shuffledp.accounting.segmented_parameters.optimize_parameters`. A level's
  guarantee depends on the total n (the blanket is n⌈m⌉ tries), on m and on
  λ_k, never on the n_k; the n_k only weigh the error bound that picks m. So
  with DP counts the calibration uses n (public) split by n̂_k (integers by
  largest remainder, :attr:`LevelCounts.calibration_counts`): the certificate
  is exact for the real users, and n̂_k enter only the choice of m and the
  estimator.
* Step 3 (Alg. 2 lines 9–21): :class:`~shuffledp.randomizers.poisson.PoissonSetRandomizer`,
  the package's uniform shuffler (a CSPRNG permutation unless a seed is given)
  and the pooled estimator of :mod:`shuffledp.analyzers.segmented`.

Each level gets its own :class:`~shuffledp.privacy.PrivacyReport`: ε = E_k,
δ = the certified δ of that level (at most the target), method
``segmented-poisson-exact`` (variant ``paper``) or ``segmented-dummy-exact``.
The neighbouring relation is Thm 3's: one user's set changes, every user's
level stays fixed. The one report of the contract
(:meth:`SegmentedProtocol.privacy_report`) is the weakest level's,
(maxₖ E_k, maxₖ δ_k), which covers every user whatever their level.

:class:`SegmentedProtocol` is a :class:`~shuffledp.protocols.base.ShuffleProtocol`
whose users hold :class:`UserSets` (a set of s item slots and a level each),
whose count-level input is the slot counts a_{k,x} per (level, item)
(:func:`~shuffledp.randomizers.poisson.pair_histogram`), whose statistic is C_x
per message value and whose estimate is the pooled item frequencies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, overload

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SEEDED_NOT_COVERED, SeedLike, child_seeds
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp._wording import Parameter, Worded
from shuffledp.accounting.certificates.segmented import Variant
from shuffledp.accounting.segmented_parameters import SegmentedParameters, optimize_parameters
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.analyzers.segmented import pooled_estimate
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.protocols.base import DomainSpec, ExecutionPath, ShuffleProtocol, resolve_domain
from shuffledp.protocols.segmented_levels import (
    LEVEL_COUNT_MODES,
    LevelCountMode,
    LevelCounts,
    aggregate_levels,
    largest_remainder,
)
from shuffledp.randomizers.poisson import (
    PoissonSetRandomizer,
    check_items,
    check_levels,
    pair_histogram,
)

__all__ = [
    "LEVEL_COUNT_MODES",
    "SEGMENTED_PRIVACY_METHODS",
    "LevelCounts",
    "SegmentedProtocol",
    "SegmentedRun",
    "UserSets",
    "aggregate_levels",
    "largest_remainder",
    "run_segmented",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
#: ``method`` of each level's privacy report, by variant.
SEGMENTED_PRIVACY_METHODS = {
    "paper": "segmented-poisson-exact",
    "dummy": "segmented-dummy-exact",
}

#: The neighbouring relation of every level's report (Thm 3).
NEIGHBOURING = "replace-one-set (levels fixed)"

_LEVEL_DEPENDENCE = (
    "what the data messages reveal about a user's level: a user's level sets their report "
    "probability lambda_k, and the per-level guarantees hold with every user's level fixed "
    "(Thm 3's neighbouring relation), so they do not bound what the data step says about "
    "which level a user chose"
)


@dataclass(frozen=True)
class SegmentedRun:
    """The outcome of one execution of the segmented protocol.

    Attributes:
        protocol: ``"segmented"``.
        estimate: Estimated users per item (``counts`` = n·Ŵ_j) with standard errors.
        privacy: One report per level (ε = E_k), in level order.
        level_counts: Step 1's release.
        parameters: Step 2's parameters and their guarantees.
        path: ``"message"`` or ``"count"``.
        messages: Messages the users sent in step 3 (data and blanket).
        statistic: C_x, messages per value of the message domain [0, d′).
        notes: Data-independent statements for the release.
        assumptions: What the guarantees take for granted.
        not_covered: What the release shows that no guarantee covers.
    """

    protocol: str
    estimate: HistogramEstimate
    privacy: tuple[PrivacyReport, ...]
    level_counts: LevelCounts
    parameters: SegmentedParameters
    path: str
    messages: int
    statistic: IntArray
    notes: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    not_covered: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        """Number of users."""
        return self.estimate.n

    @property
    def messages_per_user(self) -> float:
        """Step 3's messages per user (the level step adds one more per user)."""
        return self.messages / self.n

    @property
    def frequencies(self) -> FloatArray:
        """Ŵ_j per item."""
        return self.estimate.frequencies


class UserSets(NamedTuple):
    """What the segmented protocol's users hold: s item slots and a privacy level each.

    The values of :class:`SegmentedProtocol` as a
    :class:`~shuffledp.protocols.base.ShuffleProtocol` (a plain pair
    ``(items, levels)`` is taken as well).

    Attributes:
        items: users × s item indices in [0, d′) (d: the padding symbol); see
            :func:`shuffledp.data.sets.encode_sets` and :func:`shuffledp.data.sets.load_sets`.
        levels: Each user's level index in [0, K) (:meth:`SegmentedProtocol.run`
            also takes the level values E_k).
    """

    items: NDArray[np.integer]
    levels: NDArray[np.integer]


def _level_counts_of(parameters: SegmentedParameters) -> LevelCounts:
    """The n_k the parameters were calibrated for, as exact level counts."""
    users = tuple(int(level.users) for level in parameters.levels)
    counts = np.asarray(users, dtype=np.float64)
    return LevelCounts(
        mode="exact",
        n=parameters.n,
        estimates=counts,
        used=counts,
        covariance=None,
        calibration_counts=users,
        report=None,
        messages=parameters.n,
    )


def _user_sets(values: Any, user_levels: Any) -> UserSets:
    """The users' sets and levels from :class:`UserSets` (or a pair), or from two arrays."""
    if isinstance(values, tuple):
        if user_levels is not None:
            raise InvalidParameterError(
                "the users' levels are given twice: in the sets (UserSets(items, levels)) and "
                "as user_levels"
            )
        if len(values) != 2:
            raise DataError(
                f"values must be UserSets(items, levels) (or a pair), got a tuple of {len(values)}"
            )
        return UserSets(values[0], values[1])
    if user_levels is None:
        raise DataError(
            "the users' levels are missing: give UserSets(items, levels), or the items and "
            "the levels as two arguments"
        )
    return UserSets(values, user_levels)


def _is_seed(value: object) -> bool:
    """Whether ``value`` is a seed (``SeedLike``), not the users' levels."""
    return value is None or isinstance(value, int | np.integer | np.random.Generator)


def _levels_and_seed(
    method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, SeedLike]:
    """(user_levels or ``None``, seed) from ``(seed)`` or ``(user_levels, seed)`` after the values.

    Raises:
        TypeError: On an unknown keyword, too many arguments, or one given twice.
    """
    name = f"SegmentedProtocol.{method}()"
    unknown = set(kwargs) - {"seed", "user_levels"}
    if unknown:
        raise TypeError(f"{name} got an unexpected keyword argument {sorted(unknown)[0]!r}")
    rest = list(args)
    user_levels = kwargs.get("user_levels")
    seed: SeedLike = kwargs.get("seed")
    if rest and not _is_seed(rest[0]):
        if "user_levels" in kwargs:
            raise TypeError(f"{name} got user_levels twice")
        user_levels = rest.pop(0)
    if len(rest) > 1:
        raise TypeError(f"{name} takes at most 3 positional arguments after self")
    if rest:
        if "seed" in kwargs:
            raise TypeError(f"{name} got seed twice")
        seed = rest[0]
    return user_levels, seed


def _estimate_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[LevelCounts | None, Sequence[str] | None]:
    """(level_counts, domain) from either form of :meth:`SegmentedProtocol.estimate`."""
    unknown = set(kwargs) - {"domain", "level_counts"}
    if unknown or len(args) > 2:
        what = f"keyword {sorted(unknown)[0]!r}" if unknown else f"{len(args) + 2} positional"
        raise TypeError(f"SegmentedProtocol.estimate() got an unexpected {what} argument")
    if args and isinstance(args[0], LevelCounts):  # estimate(statistic, level_counts, domain)
        if "level_counts" in kwargs:
            raise TypeError("SegmentedProtocol.estimate() got level_counts twice")
        if len(args) == 2 and "domain" in kwargs:
            raise TypeError("SegmentedProtocol.estimate() got domain twice")
        return args[0], args[1] if len(args) == 2 else kwargs.get("domain")
    if len(args) == 2:
        raise TypeError(
            "SegmentedProtocol.estimate() takes the domain as its one positional argument "
            "after the statistic (or the level counts and then the domain)"
        )
    if args and "domain" in kwargs:
        raise TypeError("SegmentedProtocol.estimate() got domain twice")
    domain = args[0] if args else kwargs.get("domain")
    return kwargs.get("level_counts"), domain


class SegmentedProtocol(
    ShuffleProtocol[UserSets, IntArray, IntArray, HistogramEstimate, SegmentedRun]
):
    """Alg. 2 with fixed parameters: randomizer, shuffle, pooled estimator and per-level reports.

    The :class:`~shuffledp.protocols.base.ShuffleProtocol` contract on
    set-valued data: the values are :class:`UserSets`; :meth:`histogram_of`
    gives the slot counts a_{k,x} per level and message value (K × d′), from
    which :meth:`sample_statistic` draws C_x exactly; :meth:`statistic_from_messages`
    counts C_x from a shuffled batch; :meth:`estimate` is the pooled
    estimator; :meth:`privacy_report` is the weakest level's guarantee and
    :meth:`privacy_reports` each level's.

    Args:
        parameters: From :func:`shuffledp.accounting.segmented_parameters.optimize_parameters`.
        labels: The item domain's labels (``None``: item indices only); d of them.
        level_counts: Step 1's release (:func:`aggregate_levels`), what
            :meth:`estimate` weighs the levels by when it is not given one;
            ``None``: the n_k the parameters were calibrated for, as exact counts.

    Raises:
        InvalidParameterError: If the labels do not match the parameters'
            domain, or ``level_counts`` their n and levels.
    """

    name: ClassVar[str] = "segmented"
    #: The calibrated parameters; calling them, as the contract's ``parameters()``,
    #: gives their dictionary (:meth:`SegmentedParameters.to_dict`).
    parameters: SegmentedParameters

    def __init__(
        self,
        parameters: SegmentedParameters,
        *,
        labels: Sequence[str] | None = None,
        level_counts: LevelCounts | None = None,
    ) -> None:
        self.parameters = parameters
        self.n = parameters.n
        self.domain_size = parameters.domain_size
        self.message_domain = parameters.message_domain
        self.padding = parameters.message_domain > parameters.domain_size
        self.items_per_user = parameters.items_per_user
        self.variant = parameters.variant
        self.levels = tuple(level.epsilon for level in parameters.levels)
        self.labels: tuple[str, ...] | None = None
        if labels is not None:
            size, self.labels = resolve_domain(list(labels), "labels")
            if size != parameters.domain_size:
                raise InvalidParameterError(
                    f"labels has {size} entries, the parameters' domain {parameters.domain_size}"
                )
        self.randomizer = PoissonSetRandomizer(
            parameters.report_probabilities,
            parameters.message_domain,
            parameters.items_per_user,
            parameters.blanket_rate,
            parameters.variant,
        )
        if level_counts is None:
            level_counts = _level_counts_of(parameters)
        elif level_counts.n != parameters.n or level_counts.used.size != len(self.levels):
            raise InvalidParameterError(
                f"level_counts is for {level_counts.n} users and {level_counts.used.size} "
                f"levels; the parameters for {parameters.n} and {len(self.levels)}"
            )
        self.level_counts = level_counts

    @classmethod
    def calibrated(
        cls,
        levels: Sequence[float] = (0.5, 1.0, 2.0),
        *,
        level_counts: Sequence[int] | LevelCounts,
        delta: float,
        domain: DomainSpec,
        items_per_user: int,
        variant: str = "paper",
        blanket_rate: float | None = None,
        padding: bool = False,
        blanket_grid: Sequence[float] | None = None,
        workers: int | None = None,
        with_paper: bool = True,
    ) -> SegmentedProtocol:
        """Return a protocol with λ_k and m from §5.2's search (Alg. 1 step 2).

        Args:
            levels: E_1 < … < E_K.
            level_counts: n_k (integers summing to n), or step 1's
                :class:`LevelCounts` (its ``calibration_counts`` are used, and
                the protocol keeps it for :meth:`estimate`).
            delta: Target δ of every level.
            domain: The item domain: its size d, or its labels in item order.
            items_per_user: s.
            variant: ``"paper"`` or ``"dummy"``.
            blanket_rate: A fixed m, or ``None`` to search the grid.
            padding: Whether the message domain has the padding symbol (d′ = d + 1).
            blanket_grid: Rates searched when ``blanket_rate`` is ``None``.
            workers: Processes for the search (default: one per core).
            with_paper: Also compute what the paper's Eq. 7 would choose.

        Raises:
            InvalidParameterError: On a bad parameter or when no λ > 0 is certified.
        """
        d, labels = resolve_domain(domain)
        counts = (
            level_counts.calibration_counts
            if isinstance(level_counts, LevelCounts)
            else tuple(level_counts)
        )
        if variant not in ("paper", "dummy"):
            raise InvalidParameterError(f"variant must be 'paper' or 'dummy', got {variant!r}")
        variant_checked: Variant = "paper" if variant == "paper" else "dummy"
        parameters = optimize_parameters(
            tuple(levels),
            counts,
            delta,
            domain_size=d,
            items_per_user=items_per_user,
            padding=padding,
            variant=variant_checked,
            blanket_rate=blanket_rate,
            blanket_grid=None if blanket_grid is None else tuple(blanket_grid),
            with_paper=with_paper,
            workers=workers,
        )
        return cls(
            parameters,
            labels=labels,
            level_counts=level_counts if isinstance(level_counts, LevelCounts) else None,
        )

    # -- the parts -------------------------------------------------------------------------

    def privacy_reports(self) -> tuple[PrivacyReport, ...]:
        """One certified (E_k, δ_k) per level (Thm 3's relation: levels fixed)."""
        p = self.parameters
        method = SEGMENTED_PRIVACY_METHODS[p.variant]
        reports = []
        for k, level in enumerate(p.levels):
            reports.append(
                PrivacyReport(
                    guarantee=ApproxDP(level.epsilon, level.delta),
                    method=method,
                    bound=BoundKind.UPPER,
                    n=p.n,
                    neighbouring=NEIGHBOURING,
                    lower_bound_delta=level.lower_bound_delta,
                    parameters={
                        "level": k,
                        "lambda": level.report_probability,
                        "blanket_rate": p.blanket_rate,
                        "items_per_user": p.items_per_user,
                        "variant": p.variant,
                        "message_domain": p.message_domain,
                        "item_epsilon": level.item_epsilon,
                        "item_delta": level.item_delta,
                    },
                    notes=(
                        "exact delta of one item slot against the n*ceil(m) blanket tries "
                        "(other users' data messages handed to the adversary, Lemma 2), "
                        "composed over the s slots of the user's set (group privacy with the "
                        "geometric sum kept exact); lower_bound_delta is the exact delta of a "
                        "concrete pair of datasets at this level"
                    ),
                )
            )
        return tuple(reports)

    def privacy_report(self) -> PrivacyReport:
        """The weakest level's guarantee, (maxₖ E_k, maxₖ δ_k): what every user has.

        A level-k user is (E_k, δ_k)-DP (:meth:`privacy_reports`, Thm 3's
        relation), hence (maxₖ E_k, maxₖ δ_k)-DP whatever their level: the
        report :func:`shuffledp.accounting.composition.inputs.weakest_level`
        makes of the levels, the one a segmented release enters a composition
        with. ``parameters`` keep every level's (E_k, δ_k) and λ_k.
        """
        from shuffledp.accounting.composition.inputs import weakest_level

        return weakest_level(self.privacy_reports())

    @overload
    def randomize(self, values: UserSets, seed: SeedLike = None) -> MessageBatch: ...

    @overload
    def randomize(
        self,
        values: NDArray[np.integer],
        user_levels: NDArray[np.integer],
        seed: SeedLike = None,
    ) -> MessageBatch: ...

    def randomize(
        self, values: UserSets | NDArray[np.integer], *args: Any, **kwargs: Any
    ) -> MessageBatch:
        """Alg. 2 lines 9–16 for every user (messages with senders, before the shuffle).

        Called as ``randomize(values, seed=None)`` with the users'
        :class:`UserSets`, or ``randomize(user_items, user_levels, seed=None)``
        (the form before the contract).

        Args:
            values: The users' :class:`UserSets`, or their items (users × s).
            args: ``seed``, or ``user_levels`` (level indices) and ``seed``.
            kwargs: ``seed`` and ``user_levels``.

        Raises:
            DataError: On malformed items or levels.
            TypeError: On arguments neither form takes.
        """
        user_levels, seed = _levels_and_seed("randomize", args, kwargs)
        sets = _user_sets(values, user_levels)
        return self.randomizer.randomize(sets.items, sets.levels, seed)

    def statistic_from_messages(self, shuffled: ShuffledBatch) -> IntArray:
        """Alg. 2 line 20: C_x, the messages per value of [0, d′).

        Raises:
            DataError: If a message is not one value of the message domain.
        """
        payload = np.asarray(shuffled.payload)
        if payload.ndim != 1:
            raise DataError(f"a message carries one value, got payload of shape {payload.shape}")
        if payload.size and (int(payload.min()) < 0 or int(payload.max()) >= self.message_domain):
            raise DataError(f"a message carries a value outside [0, {self.message_domain - 1}]")
        return np.bincount(payload, minlength=self.message_domain).astype(np.int64)

    def histogram_of(self, values: UserSets) -> IntArray:
        """a_{k,x}: the item slots of level-k users holding x (K × d′), the count path's input.

        Raises:
            DataError: On malformed items or level indices.
        """
        items, levels = _user_sets(values, None)
        check_items(items, self.message_domain, self.items_per_user)
        check_levels(levels, len(self.levels), items.shape[0])
        return pair_histogram(items, levels, len(self.levels), self.message_domain)

    @overload
    def sample_statistic(self, histogram: IntArray, seed: SeedLike = None) -> IntArray: ...

    @overload
    def sample_statistic(
        self,
        histogram: NDArray[np.integer],
        user_levels: NDArray[np.integer],
        seed: SeedLike = None,
    ) -> IntArray: ...

    def sample_statistic(
        self, histogram: NDArray[np.integer], *args: Any, **kwargs: Any
    ) -> IntArray:
        """C_x drawn directly from its exact law (the count-level path).

        Called as ``sample_statistic(histogram, seed=None)`` with a_{k,x}, the
        K × d′ slot counts (:meth:`histogram_of`), or
        ``sample_statistic(user_items, user_levels, seed=None)`` (the form
        before the contract).

        Args:
            histogram: a_{k,x}, or the users' items (users × s).
            args: ``seed``, or ``user_levels`` (level indices) and ``seed``.
            kwargs: ``seed`` and ``user_levels``.

        Raises:
            DataError: On malformed slot counts, items or levels.
            TypeError: On arguments neither form takes.
        """
        user_levels, seed = _levels_and_seed("sample_statistic", args, kwargs)
        if user_levels is None:
            pairs = histogram
        else:
            pairs = self.histogram_of(UserSets(histogram, user_levels))
        return self.randomizer.sample_counts(pairs, seed)

    def messages_in(self, statistic: IntArray) -> int:
        """Every message adds one to one C_x, so the counts sum to the messages."""
        return int(np.sum(statistic))

    @overload
    def estimate(
        self,
        statistic: IntArray,
        domain: Sequence[str] | None = None,
        *,
        level_counts: LevelCounts | None = None,
    ) -> HistogramEstimate: ...

    @overload
    def estimate(
        self,
        statistic: IntArray,
        level_counts: LevelCounts,
        domain: Sequence[str] | None = None,
    ) -> HistogramEstimate: ...

    def estimate(self, statistic: IntArray, *args: Any, **kwargs: Any) -> HistogramEstimate:
        """Alg. 2 line 21 (:func:`shuffledp.analyzers.segmented.pooled_estimate`).

        Called as ``estimate(statistic, domain=None, *, level_counts=None)``,
        or ``estimate(statistic, level_counts, domain=None)`` (the form before
        the contract).

        Args:
            statistic: C_x.
            args: ``domain``, or ``level_counts`` and ``domain``.
            kwargs: ``domain`` and ``level_counts``: step 1's release
                (:func:`aggregate_levels`), by default :attr:`level_counts`
                (what the protocol was built with).

        Raises:
            TypeError: On arguments neither form takes.
        """
        level_counts, domain = _estimate_arguments(args, kwargs)
        if level_counts is None:
            level_counts = self.level_counts
        labels = domain if domain is not None else self.labels
        return pooled_estimate(
            statistic,
            n=self.n,
            blanket_rate=self.parameters.blanket_rate,
            domain_size=self.domain_size,
            message_domain=self.message_domain,
            level_counts=level_counts.used,
            report_probabilities=self.parameters.report_probabilities,
            items_per_user=self.items_per_user,
            variant=self.variant,
            level_covariance=level_counts.covariance,
            domain=None if labels is None else list(labels),
        )

    def _check_input(
        self, user_items: NDArray[np.integer], user_levels: Any
    ) -> NDArray[np.integer]:
        check_items(user_items, self.message_domain, self.items_per_user)
        levels = np.asarray(user_levels)
        if levels.ndim == 1 and np.issubdtype(levels.dtype, np.floating):
            levels = self._level_indices(levels)
        check_levels(levels, len(self.levels), user_items.shape[0])
        if user_items.shape[0] != self.n:
            raise DataError(
                f"the protocol was calibrated for n={self.n} users but got {user_items.shape[0]}"
            )
        self._check_sets(user_items)
        return levels

    def _level_indices(self, values: FloatArray) -> IntArray:
        """Map level values (ε per user) to level indices."""
        table = np.asarray(self.levels)
        index = np.searchsorted(table, values)
        index = np.clip(index, 0, len(table) - 1)
        ok = np.isclose(table[index], values, rtol=1e-9, atol=0.0)
        if not ok.all():
            bad = values[~ok]
            raise DataError(
                f"{bad.size:,} user level(s) are not one of the levels "
                f"{', '.join(f'{x:g}' for x in self.levels)}, e.g. {float(bad[0]):g}"
            )
        return index.astype(np.int64)

    def _check_sets(self, user_items: NDArray[np.integer]) -> None:
        """A set lists each item once (only the padding symbol may repeat)."""
        if self.items_per_user < 2:
            return
        ordered = np.sort(user_items, axis=1)
        repeats = (ordered[:, 1:] == ordered[:, :-1]) & (
            ordered[:, 1:] < self.domain_size if self.padding else True
        )
        users = int(np.count_nonzero(repeats.any(axis=1)))
        if users:
            raise DataError(
                f"{users:,} user(s) list the same item in two slots; a set holds each item "
                "once (only the padding symbol may repeat)"
            )

    def run(
        self,
        values: UserSets | NDArray[np.integer],
        user_levels: NDArray[np.integer] | NDArray[np.floating] | None = None,
        *,
        path: ExecutionPath = "message",
        seed: SeedLike = None,
        level_estimate: LevelCounts | None = None,
    ) -> SegmentedRun:
        """Execute Alg. 2's step 3 (and step 1 unless its result is given).

        The contract's two paths (:class:`~shuffledp.protocols.base.ShuffleProtocol`):
        :meth:`randomize`, the uniform shuffle and :meth:`statistic_from_messages`,
        or :meth:`sample_statistic` on :meth:`histogram_of` the sets; then
        :meth:`estimate` with the level counts and every level's report.

        Args:
            values: The users' :class:`UserSets` (their items, users × s item
                indices in [0, d′), d being the padding symbol, see
                :func:`shuffledp.data.sets.encode_sets` and
                :func:`shuffledp.data.sets.load_sets`; and their levels), or
                the items alone with the levels as ``user_levels``.
            user_levels: Each user's level index in [0, K) (or level value
                E_k), when ``values`` are the items; levels in ``values`` may
                be level values too.
            path: ``"message"`` (real messages, real shuffle) or ``"count"``.
            seed: ``None`` for OS entropy and a cryptographically secure
                shuffle; an int for a reproducible run (seeded shuffle).
            level_estimate: Step 1's result (:func:`aggregate_levels`);
                ``None`` takes the exact level counts.

        Raises:
            DataError: On malformed input, a number of users other than the
                calibrated n, or exact level counts that differ from the levels given.
            InvalidParameterError: On a bad path, or levels given twice.
        """
        user_items, raw_levels = _user_sets(values, user_levels)
        levels = self._check_input(user_items, raw_levels)
        if level_estimate is None:
            level_estimate = aggregate_levels(levels, len(self.levels))
        if level_estimate.n != self.n or level_estimate.used.size != len(self.levels):
            raise DataError(
                f"level_estimate is for {level_estimate.n} users and "
                f"{level_estimate.used.size} levels; expected {self.n} and {len(self.levels)}"
            )
        if level_estimate.mode == "exact":
            actual = np.bincount(levels, minlength=len(self.levels))
            if not np.array_equal(actual, level_estimate.used):
                raise DataError(
                    "exact level counts differ from the users' levels: "
                    f"{level_estimate.used.astype(int).tolist()} vs {actual.tolist()}"
                )
        statistic, messages = self._draw_statistic(
            UserSets(user_items, levels), path=path, seed=seed
        )
        estimate = self.estimate(statistic, level_counts=level_estimate)
        not_covered = [_LEVEL_DEPENDENCE]
        if seed is not None:
            not_covered.append(SEEDED_NOT_COVERED)
        if level_estimate.mode == "exact":
            not_covered.insert(
                0,
                Worded(
                    "the level histogram (users per privacy level): released exactly by Alg. 1 "
                    "step 1 (levels shuffled without noise, as in the paper's experiments); use "
                    "{dp} to protect it",
                    dp=Parameter("level_counts", "dp"),
                ),
            )
        assumptions = [
            "the shuffler is trusted to hide who sent each message and in which order",
            "each user's set holds at most items_per_user items after sampling/padding, and "
            "each user has one level",
        ]
        reports = tuple(
            r.with_context(assumptions=assumptions, not_covered=not_covered)
            for r in self.privacy_reports()
        )
        return SegmentedRun(
            protocol=self.name,
            estimate=estimate,
            privacy=reports,
            level_counts=level_estimate,
            parameters=self.parameters,
            path=path,
            messages=messages,
            statistic=statistic,
            notes=(*self._estimand_notes(level_estimate), *level_estimate.notes),
            assumptions=tuple(assumptions),
            not_covered=tuple(not_covered),
        )

    def _estimand_notes(self, level_counts: LevelCounts) -> list[str]:
        lams = np.asarray(self.parameters.report_probabilities)
        active = lams[level_counts.used > 0]
        notes = [
            "frequencies are Alg. 2's pooled estimate (C_j - E[blanket"
            + (" and dummy" if self.variant == "dummy" else "")
            + " messages on j]) / sum_k n_k * lambda_k; counts = n * frequency; they sum to "
            f"about s={self.items_per_user} over the items, not to 1"
        ]
        if active.size and np.ptp(active) > 0:
            notes.append(
                "the estimate's expectation is sum_k n_k lambda_k w_jk / sum_k n_k lambda_k "
                "(w_jk: frequency of item j among level-k users): the population frequency only "
                "if the items do not depend on the level, otherwise weighted towards the levels "
                "with the larger lambda; messages carry no level, and no estimator linear in "
                "the message counts (nor any function of one item's count) is unbiased for "
                "every dataset when the levels' lambda differ"
            )
        notes.append(
            "standard errors are for the randomization given the users' sets, with each item's "
            "holders split across levels as the estimator assumes (in proportion to n_k)"
        )
        return notes


def run_segmented(
    user_items: NDArray[np.integer],
    user_levels: NDArray[np.integer],
    *,
    levels: Sequence[float],
    delta: float,
    domain: DomainSpec,
    variant: str = "paper",
    blanket_rate: float | None = None,
    padding: bool = False,
    level_counts: LevelCountMode = "exact",
    level_epsilon: float | None = None,
    level_delta: float | None = None,
    path: ExecutionPath = "message",
    seed: SeedLike = None,
    blanket_grid: Sequence[float] | None = None,
    workers: int | None = None,
) -> tuple[SegmentedProtocol, SegmentedRun]:
    """Alg. 1 end to end: level counts, parameters, data aggregation.

    Args:
        user_items: users × s item indices in [0, d′) (s is the number of columns).
        user_levels: Each user's level index in [0, K).
        levels: E_1 < … < E_K.
        delta: Target δ of every level's data guarantee.
        domain: The item domain (size d or labels).
        variant: ``"paper"`` or ``"dummy"``.
        blanket_rate: A fixed m, or ``None`` to search §5.2's grid.
        padding: Whether index d is the padding symbol (d′ = d + 1).
        level_counts: ``"exact"`` or ``"dp"`` (step 1, :func:`aggregate_levels`).
        level_epsilon: ε of the DP level step.
        level_delta: δ of the DP level step.
        path: ``"message"`` or ``"count"``.
        seed: Randomness (``None``: OS entropy and a cryptographic shuffle).
        blanket_grid: Rates searched when ``blanket_rate`` is ``None``.
        workers: Processes for the search.

    Returns:
        The calibrated protocol and the run.
    """
    items = np.asarray(user_items)
    if items.ndim != 2:
        raise DataError(f"user_items must be users x items_per_user, got shape {items.shape}")
    # Step 1 and step 3 draw from independent streams.
    level_seed, data_seed = child_seeds(seed, 2)
    step1 = aggregate_levels(
        np.asarray(user_levels),
        len(tuple(levels)),
        mode=level_counts,
        epsilon=level_epsilon,
        delta=level_delta,
        path=path,
        seed=level_seed,
    )
    protocol = SegmentedProtocol.calibrated(
        tuple(levels),
        level_counts=step1,
        delta=delta,
        domain=domain,
        items_per_user=int(items.shape[1]),
        variant=variant,
        blanket_rate=blanket_rate,
        padding=padding,
        blanket_grid=blanket_grid,
        workers=workers,
    )
    run = protocol.run(
        items,
        np.asarray(user_levels),
        path=path,
        seed=data_seed,
        level_estimate=step1,
    )
    return protocol, run
