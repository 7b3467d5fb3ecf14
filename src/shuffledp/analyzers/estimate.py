"""The result type of every histogram analyzer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import check_probability

if TYPE_CHECKING:
    import pandas

__all__ = ["DEFAULT_LEVEL", "FRAME_COLUMNS", "HistogramEstimate", "normal_quantile"]

FloatArray = NDArray[np.float64]

#: Default confidence level of :meth:`HistogramEstimate.interval` and ``to_frame``.
DEFAULT_LEVEL = 0.95
#: The columns of :meth:`HistogramEstimate.to_frame`, in order.
FRAME_COLUMNS = ("label", "count", "frequency", "stderr", "frequency_stderr", "lower", "upper")


def normal_quantile(level: float) -> float:
    """The two-sided standard normal quantile z with P(|Z| ≤ z) = ``level`` (1.96 at 0.95).

    Raises:
        InvalidParameterError: If ``level`` is not in (0, 1).
    """
    level = check_probability(level, "level")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


@dataclass(frozen=True)
class HistogramEstimate:
    """Estimated counts with per-bin standard errors.

    Attributes:
        domain: The label of each bin.
        counts: Estimated number of users per bin (may be negative or
            non-integer for unbiased estimators).
        stderr: Standard error of each count; ``None`` for biased estimators
            without one.
        n: Number of users.
        estimator: Name of the estimator.
        unbiased: Whether E[counts] equals the true histogram.
    """

    domain: Sequence[str]
    counts: FloatArray
    stderr: FloatArray | None
    n: int
    estimator: str
    unbiased: bool

    def __post_init__(self) -> None:
        if len(self.domain) != len(self.counts):
            raise ValueError("domain and counts must have the same length")
        if self.stderr is not None and len(self.stderr) != len(self.counts):
            raise ValueError("stderr and counts must have the same length")

    @property
    def frequencies(self) -> FloatArray:
        """Estimated fraction of users per bin (counts / n)."""
        return self.counts / self.n

    @property
    def frequency_stderr(self) -> FloatArray | None:
        """Standard error of each frequency."""
        return None if self.stderr is None else self.stderr / self.n

    def interval(self, level: float = DEFAULT_LEVEL) -> tuple[FloatArray, FloatArray] | None:
        """Normal-approximation intervals ``counts ± z·stderr`` (z: :func:`normal_quantile`).

        For an unbiased estimator each interval covers the true count with
        probability about ``level`` (the error is a sum of many small
        independent terms; the approximation is poor for a bin with very few
        expected messages). For a biased estimator with standard errors it
        covers E[count], not the true count: the bias is not in it.

        Args:
            level: Confidence level in (0, 1), default 0.95.

        Returns:
            ``(lower, upper)`` arrays of counts, or ``None`` when the estimator
            has no standard errors (``stderr is None``).

        Raises:
            InvalidParameterError: If ``level`` is not in (0, 1).
        """
        z = normal_quantile(level)
        if self.stderr is None:
            return None
        half = z * np.asarray(self.stderr, dtype=np.float64)
        return self.counts - half, self.counts + half

    def to_frame(self, *, level: float = DEFAULT_LEVEL) -> pandas.DataFrame:
        """Return one row per bin as a pandas DataFrame (needs pandas: the ``pandas`` extra).

        Columns (:data:`FRAME_COLUMNS`): ``label``, ``count``, ``frequency``,
        ``stderr`` (of the count), ``frequency_stderr``, and ``lower`` and
        ``upper``, the bounds of :meth:`interval` at ``level`` (in counts). An
        estimator without standard errors (a biased one such as k-RR's
        ``clip`` or ``simplex``) has ``None`` in the last four columns.
        ``frame.attrs`` holds ``estimator``, ``unbiased``, ``n``, ``level``
        and ``interval``, a sentence saying what the interval covers.

        Example:
            >>> est = HistogramEstimate(["a", "b"], np.array([60.0, 40.0]),
            ...                         np.array([5.0, 5.0]), 100, "inversion", True)
            >>> est.to_frame()[["label", "count", "lower"]].round(2).values.tolist()
            [['a', 60.0, 50.2], ['b', 40.0, 30.2]]

        Args:
            level: Confidence level of ``lower`` and ``upper``, in (0, 1), default 0.95.

        Raises:
            MissingExtraError: If pandas is not installed.
            InvalidParameterError: If ``level`` is not in (0, 1).
        """
        from shuffledp._optional import require

        bounds = self.interval(level)
        pd = require("pandas", extra="pandas")
        d = len(self.counts)
        freq_se = self.frequency_stderr

        def column(values: FloatArray | None) -> Any:
            if values is None:
                return pd.Series([None] * d, dtype=object)
            return np.asarray(values, dtype=np.float64)

        frame = pd.DataFrame(
            {
                "label": [str(label) for label in self.domain],
                "count": np.asarray(self.counts, dtype=np.float64),
                "frequency": np.asarray(self.frequencies, dtype=np.float64),
                "stderr": column(self.stderr),
                "frequency_stderr": column(freq_se),
                "lower": column(None if bounds is None else bounds[0]),
                "upper": column(None if bounds is None else bounds[1]),
            }
        )
        frame.attrs.update(
            estimator=self.estimator,
            unbiased=self.unbiased,
            n=self.n,
            level=float(level),
            interval=_interval_meaning(level, self.unbiased, self.stderr is not None),
        )
        return frame

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary (lists of floats)."""
        freq_se = self.frequency_stderr
        return {
            "estimator": self.estimator,
            "unbiased": self.unbiased,
            "counts": [float(c) for c in self.counts],
            "frequencies": [float(f) for f in self.frequencies],
            "stderr": None if self.stderr is None else [float(s) for s in self.stderr],
            "frequency_stderr": None if freq_se is None else [float(s) for s in freq_se],
        }

    def linf_error(self, true_counts: NDArray[np.integer] | FloatArray) -> float:
        """Return max_j |counts_j − true_j| (the paper's ℓ∞ error, in counts)."""
        return float(np.max(np.abs(self.counts - np.asarray(true_counts, dtype=np.float64))))


def _interval_meaning(level: float, unbiased: bool, has_stderr: bool) -> str:
    """What ``lower``/``upper`` of :meth:`HistogramEstimate.to_frame` cover, in words."""
    percent = f"{100 * level:g}%"
    if not has_stderr:
        return "none: this estimator has no standard errors (lower and upper are None)"
    if unbiased:
        return (
            f"count ± {normal_quantile(level):.4g}·stderr, a {percent} normal-approximation "
            "interval for the true count"
        )
    return (
        f"count ± {normal_quantile(level):.4g}·stderr, a {percent} normal-approximation "
        "interval for the estimator's expectation, not the true count: the estimator is "
        "biased and its bias is not in the interval"
    )
