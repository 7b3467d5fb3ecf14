"""What every set-valued baseline shares: the input matrix, the estimate, the interface.

Users hold sets of s items from a public domain of d items, given as an
n × s integer matrix (:func:`shuffledp.data.movies.fixed_size_items`): row u
lists user u's distinct items, then :data:`~shuffledp.data.movies.PAD` in
empty slots. The target is w_j, the fraction of users holding item j
(Σ_j w_j = mean set size ≤ s), as in §5 of Wang et al., "Segmented private
data aggregation in the multi-message shuffle model".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shuffledp._rng import SeedLike
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.data.movies import PAD
from shuffledp.privacy import PrivacyReport

__all__ = [
    "PAD",
    "ExecutionPath",
    "SetFrequencyEstimate",
    "SetFrequencyMechanism",
    "check_item_matrix",
    "check_shape",
    "check_user_levels",
    "default_delta",
    "item_counts",
    "sampling_error",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
ExecutionPath = Literal["message", "count"]


def check_shape(domain_size: int, items_per_user: int) -> tuple[int, int]:
    """Return (d, s) after checking 2 ≤ d and 1 ≤ s ≤ d."""
    d = check_int(domain_size, "domain_size", minimum=2)
    s = check_int(items_per_user, "items_per_user", minimum=1, maximum=d)
    return d, s


def default_delta(n: int) -> float:
    """δ = 0.01/n, the segmented paper's choice (§6), n the number of all users."""
    return 0.01 / check_int(n, "n", minimum=1)


def check_item_matrix(
    user_items: ArrayLike,
    *,
    domain_size: int,
    items_per_user: int,
    padding: bool,
    n: int | None = None,
) -> IntArray:
    """Return the users' n × s item matrix as int64 after checking it.

    Empty slots may hold ``PAD`` (−1, :func:`shuffledp.data.movies.fixed_size_items`)
    or, with padding, the padding symbol d (:func:`shuffledp.data.sets.to_slots`,
    the segmented protocol's convention); both come back as ``PAD``.

    Args:
        user_items: Row u: user u's distinct items in [0, d), then empty slots.
        domain_size: d.
        items_per_user: s, the number of columns.
        padding: Whether ``PAD`` slots are allowed (the mechanism was built for them).
        n: The number of users the guarantee was calibrated for, if it depends on it.

    Raises:
        DataError: On a wrong shape or user count, an item outside the domain,
            a repeated item in a row, or a ``PAD`` slot without padding.
    """
    arr = np.asarray(user_items)
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.integer):
        raise DataError(
            f"user_items must be an n x s integer matrix, got dtype {arr.dtype} and shape "
            f"{arr.shape}"
        )
    if arr.shape[1] != items_per_user:
        raise DataError(
            f"user_items has {arr.shape[1]} columns; the mechanism was built for "
            f"s={items_per_user} items per user"
        )
    if n is not None and arr.shape[0] != n:
        raise DataError(f"the mechanism was calibrated for n={n} users but got {arr.shape[0]} rows")
    if arr.shape[0] == 0:
        raise DataError("user_items has no rows")
    items = arr.astype(np.int64, copy=True)
    if padding:
        items[items == domain_size] = PAD
    bad = (items != PAD) & ((items < 0) | (items >= domain_size))
    if np.any(bad):
        value = int(items[bad][0])
        raise DataError(f"item {value} is outside the domain [0, {domain_size}) (PAD is {PAD})")
    pads = items == PAD
    if not padding and np.any(pads):
        raise DataError(
            "some users hold fewer than s items (PAD slots); build the mechanism with "
            "padding=True for such data"
        )
    ordered = np.sort(items, axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != PAD)
    if np.any(repeated):
        row = int(np.flatnonzero(repeated.any(axis=1))[0])
        raise DataError(f"user {row} lists an item twice: {items[row].tolist()}")
    return items


def check_user_levels(
    user_levels: ArrayLike | None, n: int, levels: int | None = None
) -> IntArray | None:
    """Return each user's level index (0 … K − 1) as int64, or ``None`` when not given.

    With ``levels=None`` only the shape and the sign are checked.
    """
    if user_levels is None:
        return None
    arr = np.asarray(user_levels)
    if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"user_levels must be {n} integer level indices, got shape {arr.shape}")
    top = levels if levels is not None else np.iinfo(np.int64).max
    if arr.size and (arr.min() < 0 or arr.max() >= top):
        bound = "" if levels is None else f", {levels})"
        raise DataError(
            f"user_levels must lie in [0{bound or ', ...)'}, got {arr.min()}..{arr.max()}"
        )
    return arr.astype(np.int64, copy=False)


def item_counts(items: IntArray, size: int, pad_symbol: int | None = None) -> IntArray:
    """Number of users holding each item; ``PAD`` slots go to ``pad_symbol`` (or nowhere)."""
    flat = items.ravel()
    if pad_symbol is None:
        flat = flat[flat != PAD]
    else:
        flat = np.where(flat == PAD, pad_symbol, flat)
    return np.bincount(flat, minlength=size).astype(np.int64)


def sampling_error(frequencies: FloatArray | None, n: int, items_per_user: int) -> float:
    """Σ_j w_j(1 − w_j)/n: the error of the users' own frequencies around i.i.d. ones.

    Without frequencies, the bound s/n of §5.2 (Σ_j w_j ≤ s).
    """
    if frequencies is None:
        return items_per_user / n
    return float(np.sum(frequencies * (1.0 - frequencies))) / n


@dataclass(frozen=True)
class SetFrequencyEstimate:
    """Estimated item frequencies with per-item standard errors.

    Attributes:
        frequencies: ŵ_j for each item j < d (unbiased; may leave [0, 1]).
        stderr: Standard error of each ŵ_j from the mechanism's randomness given
            the users' sets (plugged-in frequencies where the variance depends
            on them).
        n: Number of users.
        messages: Number of messages the users sent.
        mechanism: The baseline's name.
        path: ``"message"`` (real messages) or ``"count"`` (the statistic drawn directly).
        statistic: The analyzer's input (hits or message counts per output symbol).
        parts: Per-level estimates of a combination (SepMM); empty otherwise.
        weights: The combination's weights per level (SepMM); empty otherwise.
    """

    frequencies: FloatArray
    stderr: FloatArray
    n: int
    messages: int
    mechanism: str
    path: ExecutionPath
    statistic: IntArray
    parts: tuple[SetFrequencyEstimate, ...] = ()
    weights: tuple[float, ...] = field(default=())

    def squared_error(self, true_frequencies: ArrayLike) -> float:
        """Σ_j (ŵ_j − w_j)², the paper's error metric (§6)."""
        truth = np.asarray(true_frequencies, dtype=np.float64)
        if truth.shape != self.frequencies.shape:
            raise InvalidParameterError(
                f"true_frequencies must have {len(self.frequencies)} entries, got {truth.shape}"
            )
        return float(np.sum((self.frequencies - truth) ** 2))

    def as_histogram(self, domain: Sequence[str]) -> HistogramEstimate:
        """The estimate as counts of users per item (n·ŵ_j), with labels."""
        return HistogramEstimate(
            domain=list(domain),
            counts=self.frequencies * self.n,
            stderr=self.stderr * self.n,
            n=self.n,
            estimator=self.mechanism,
            unbiased=True,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "mechanism": self.mechanism,
            "n": self.n,
            "messages": self.messages,
            "path": self.path,
            "frequencies": [float(f) for f in self.frequencies],
            "stderr": [float(s) for s in self.stderr],
            "weights": list(self.weights),
        }


@runtime_checkable
class SetFrequencyMechanism(Protocol):
    """A calibrated baseline for set-valued frequency estimation.

    Built by the module's ``calibrate_*`` function, which certifies its
    guarantee; :meth:`privacy_reports` states it, one report per privacy level
    the mechanism serves.
    """

    @property
    def name(self) -> str:
        """The baseline's name, as in the experiment's tables."""

    @property
    def n(self) -> int:
        """Number of users (the guarantee of a shuffle baseline depends on it)."""

    @property
    def domain_size(self) -> int:
        """d, the items of the public domain."""

    @property
    def items_per_user(self) -> int:
        """s, the slots per user."""

    def privacy_reports(self) -> tuple[PrivacyReport, ...]:
        """The certified guarantee of each level, in level order (one for a single level)."""

    def run(
        self,
        user_items: ArrayLike,
        *,
        user_levels: ArrayLike | None = None,
        seed: SeedLike = None,
        path: ExecutionPath = "message",
    ) -> SetFrequencyEstimate:
        """Randomize every user, shuffle where the model has a shuffler, and estimate.

        Single-level baselines protect every user at their one level and only
        check ``user_levels``' shape; SepMM needs it.
        """

    def expected_error(
        self, frequencies: ArrayLike | None = None, *, include_sampling: bool = False
    ) -> float:
        """E Σ_j (ŵ_j − w_j)² in closed form.

        With ``include_sampling=False``, w is the users' own frequencies (the
        mechanism's noise only); with ``True``, w is the population frequency
        of i.i.d. users and Σ_j w_j(1 − w_j)/n per estimate is added (the s/n
        of §5.2 when ``frequencies`` is ``None``).
        """

    def to_dict(self) -> dict[str, Any]:
        """Parameters and guarantee, JSON-serialisable."""
