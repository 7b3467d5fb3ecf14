"""Alg. 1 step 1 of the segmented protocol: the level counts the server learns.

Wang et al., "Segmented private data aggregation in the multi-message shuffle
model", arXiv 2407.19639, Alg. 1 lines 3–12. The users' privacy levels are
counted exactly (``mode="exact"``: each user sends their level through the
shuffler, as in the paper's experiments; the level histogram is released and
no guarantee covers it) or with differential privacy (``mode="dp"``: k-RR over
the K levels through the shuffle, :class:`~shuffledp.protocols.krr.KRRProtocol`
with its exact accountant; the counts n̂_k carry their own (ε, δ)), and split
into integers summing to n for the calibration (:func:`largest_remainder`).
:mod:`shuffledp.protocols.segmented` re-exports every name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike
from shuffledp._validation import (
    DataError,
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp._wording import Parameter, Worded
from shuffledp.privacy import PrivacyReport
from shuffledp.protocols.base import ExecutionPath
from shuffledp.protocols.krr import KRRProtocol
from shuffledp.randomizers.poisson import check_levels

__all__ = [
    "LEVEL_COUNT_MODES",
    "LevelCountMode",
    "LevelCounts",
    "aggregate_levels",
    "largest_remainder",
]

FloatArray = NDArray[np.float64]
LevelCountMode = Literal["exact", "dp"]

#: How step 1 releases the level counts.
LEVEL_COUNT_MODES: tuple[str, ...] = ("exact", "dp")


def largest_remainder(weights: Sequence[float] | FloatArray, total: int) -> tuple[int, ...]:
    """Split ``total`` into integers proportional to ``weights`` (largest remainder).

    The parts sum to ``total``; ties go to the earlier entry. All-zero weights
    split evenly.

    Raises:
        InvalidParameterError: If a weight is negative or not finite, or total < 0.
    """
    w = np.asarray(weights, dtype=np.float64)
    total = check_int(total, "total", minimum=0)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InvalidParameterError(f"weights must be finite numbers >= 0, got {w.tolist()}")
    if w.sum() <= 0:
        w = np.ones_like(w)
    exact = w / w.sum() * total
    base = np.floor(exact).astype(np.int64)
    left = total - int(base.sum())
    order = np.argsort(-(exact - base), kind="stable")
    base[order[:left]] += 1
    return tuple(int(x) for x in base)


@dataclass(frozen=True)
class LevelCounts:
    """Alg. 1 step 1: the level counts the server learns, and what they cost.

    Attributes:
        mode: ``"exact"`` or ``"dp"``.
        n: Number of users (public).
        estimates: n̂_k as released (exact counts, or k-RR's unbiased inversion).
        used: n̂_k as the estimator uses them (clipped at 0).
        covariance: Cov(n̂) (plug-in, for the standard errors); ``None`` when exact.
        calibration_counts: Integers summing to n, proportional to ``used``
            (what :func:`optimize_parameters` weighs the levels by).
        report: The level step's guarantee (``None`` when exact: not covered).
        messages: Messages the level step sent (one per user).
        notes: Statements for the release.
    """

    mode: str
    n: int
    estimates: FloatArray
    used: FloatArray
    covariance: FloatArray | None
    calibration_counts: tuple[int, ...]
    report: PrivacyReport | None
    messages: int
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # The run states "released exactly" on mode == "exact" alone: nothing else may pass.
        if self.mode not in ("exact", "dp"):
            raise InvalidParameterError(f"mode must be 'exact' or 'dp', got {self.mode!r}")
        if self.mode == "dp" and self.report is None:
            raise InvalidParameterError(
                "mode='dp' level counts need the level step's report (its guarantee)"
            )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "counts": [float(x) for x in self.estimates],
            "counts_used": [float(x) for x in self.used],
            "calibration_counts": list(self.calibration_counts),
        }
        if self.covariance is not None:
            out["stderr"] = [float(math.sqrt(max(v, 0.0))) for v in np.diag(self.covariance)]
        out["privacy"] = None if self.report is None else self.report.to_dict()
        return out


def _krr_count_covariance(used: FloatArray, keep: float, other: float) -> FloatArray:
    """Cov of k-RR's inverted counts: Σ_k n_k[diag(p_k) − p_k p_kᵀ]/(a − b)².

    p_k = b + (a − b)e_k is the report law of a level-k user.
    """
    k = used.size
    cov = np.zeros((k, k))
    for level in range(k):
        p = np.full(k, other)
        p[level] = keep
        cov += used[level] * (np.diag(p) - np.outer(p, p))
    return cov / (keep - other) ** 2


def aggregate_levels(
    user_levels: NDArray[np.integer],
    n_levels: int,
    *,
    mode: LevelCountMode = "exact",
    epsilon: float | None = None,
    delta: float | None = None,
    path: ExecutionPath = "message",
    seed: SeedLike = None,
    krr: KRRProtocol | None = None,
) -> LevelCounts:
    """Alg. 1 step 1: the server's level counts, exact or by k-RR through the shuffle.

    Args:
        user_levels: Each user's level index in [0, K).
        n_levels: K.
        mode: ``"exact"`` (each user sends its level; the shuffled multiset is
            the level histogram, released and not covered by any guarantee) or
            ``"dp"`` (each user sends a k-RR report of its level; the inverted
            counts are (ε, δ)-DP by :class:`~shuffledp.protocols.krr.KRRProtocol`'s
            exact accountant, and clipped at 0 before use).
        epsilon: ε of the level step (``"dp"`` only).
        delta: δ of the level step (``"dp"`` only).
        path: ``"message"`` or ``"count"`` for the k-RR step.
        seed: Randomness.
        krr: A k-RR protocol already calibrated for (n, K, ε, δ), to reuse
            across repeated simulations (``"dp"`` only; checked against them).

    Raises:
        InvalidParameterError: On a bad mode or parameter (``"dp"`` needs ε, δ and K ≥ 2).
        DataError: On malformed levels.
    """
    k = check_int(n_levels, "n_levels", minimum=1)
    arr = np.asarray(user_levels)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError("user_levels must be a non-empty one-dimensional array")
    check_levels(arr, k, arr.shape[0])
    n = int(arr.shape[0])
    if mode == "exact":
        if epsilon is not None or delta is not None:
            raise InvalidParameterError(
                "level epsilon/delta apply to the 'dp' level counts only; with 'exact' counts "
                "the level histogram is released as it is"
            )
        counts = np.bincount(arr, minlength=k).astype(np.float64)
        return LevelCounts(
            mode="exact",
            n=n,
            estimates=counts,
            used=counts,
            covariance=None,
            calibration_counts=tuple(int(c) for c in counts),
            report=None,
            messages=n,
        )
    if mode != "dp":
        raise InvalidParameterError(f"level count mode must be 'exact' or 'dp', got {mode!r}")
    if epsilon is None or delta is None:
        raise InvalidParameterError(
            Worded(
                "DP level counts need the level step's epsilon and delta ({epsilon}, {delta}); "
                "got epsilon={got_epsilon}, delta={got_delta}",
                epsilon=Parameter("level_epsilon"),
                delta=Parameter("level_delta"),
                got_epsilon=repr(epsilon),
                got_delta=repr(delta),
            )
        )
    if k < 2:
        raise InvalidParameterError(
            "DP level counts need at least two levels: with one level the count is n, "
            "which is public"
        )
    epsilon = check_epsilon(epsilon, "level epsilon")
    delta = check_delta(delta, "level delta")
    if krr is None:
        protocol = KRRProtocol.calibrated(n, k, epsilon, delta, estimator="inversion")
    else:
        cal = krr.calibration
        if (cal.n, cal.domain_size, cal.epsilon, cal.target_delta) != (n, k, epsilon, delta):
            raise InvalidParameterError(
                f"krr was calibrated for n={cal.n}, K={cal.domain_size}, epsilon={cal.epsilon:g}, "
                f"delta={cal.target_delta:g}; this step needs n={n}, K={k}, "
                f"epsilon={epsilon:g}, delta={delta:g}"
            )
        protocol = krr
    level_run = protocol.run(arr.astype(np.int64), path=path, seed=seed)
    raw = np.asarray(level_run.estimate.counts, dtype=np.float64)
    used = np.clip(raw, 0.0, None)
    keep = protocol.randomizer.keep_probability
    other = protocol.randomizer.other_probability
    report = level_run.privacy
    report = PrivacyReport(
        guarantee=report.guarantee,
        method=report.method,
        bound=report.bound,
        n=report.n,
        lower_bound_delta=report.lower_bound_delta,
        parameters=dict(report.parameters),
        notes=(
            "the level step (Alg. 1 step 1): k-RR over the levels through the shuffle; covers "
            "the released level counts. " + report.notes
        ),
    )
    notes = [
        "level counts estimated by k-RR over the levels (matrix inversion), clipped at 0; the "
        "estimator divides by sum_k n_hat_k * lambda_k, a ratio that is unbiased only up to "
        "O(1/n) terms",
        "lambda_k were calibrated for the public total n (the guarantee depends on n, m and "
        "lambda_k only); n_hat_k weighed the error bound that chose m",
        *protocol.calibration.notes,
    ]
    return LevelCounts(
        mode="dp",
        n=n,
        estimates=raw,
        used=used,
        covariance=_krr_count_covariance(used, keep, other),
        calibration_counts=largest_remainder(used, n),
        report=report,
        messages=level_run.messages,
        notes=tuple(notes),
    )
