"""The ε′ part's computations, run in worker processes, and the amplification ceiling.

``_EpsilonJob`` is one (c, grouping) job and ``_epsilon_job`` runs it: ε′
(:func:`~shuffledp.accounting.per_user_epsilons.per_user_epsilons`) on the
sample and the paper's App. C number
(:func:`~shuffledp.accounting.reproductions.per_user_appendix_c.paper_per_user_epsilon`,
a reproduction) on its sub-sample. ``_map_jobs`` runs the jobs in a pool
whose workers use one BLAS/OpenMP thread (``_one_thread``, which the main
process uses too); ``_epsilon_stats`` summarizes one job's ε′ and
``_best_amplification`` is the best generic bound for n identical users (the
ceiling at ρ = 0).

Imports only :mod:`.config` of this package.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._pools import worker_pool
from shuffledp._progress import progress_bar
from shuffledp.accounting.api import amplified_epsilon
from shuffledp.accounting.per_user_epsilons import per_user_epsilons
from shuffledp.accounting.published.generic_bounds import fmt2021_closed_epsilon
from shuffledp.accounting.reproductions.per_user_appendix_c import paper_per_user_epsilon
from shuffledp.experiments.per_user.config import PAPER_MAX_GROUP, PerUserExperimentConfig
from shuffledp.randomizers.laplace import Neighbouring

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class _EpsilonJob:
    c: float
    grouping: str
    histograms: FloatArray
    groups: IntArray
    users: IntArray
    paper_users: IntArray
    epsilon: float
    epsilon1: float
    delta: float
    neighbouring: Neighbouring


def _epsilon_job(job: _EpsilonJob) -> dict[str, Any]:
    """ε′ (per_user_epsilons) on the sample and the paper's App. C number on the sub-sample."""
    eps = per_user_epsilons(
        job.histograms,
        job.groups,
        epsilon=job.epsilon,
        epsilon1=job.epsilon1,
        c=job.c,
        delta=job.delta,
        neighbouring=job.neighbouring,
        users=job.users,
    )
    paper: dict[int, tuple[float, str]] = {}
    sizes = dict(zip(*np.unique(job.groups, return_counts=True), strict=True))
    eps2 = job.epsilon - job.epsilon1
    for user in job.paper_users.tolist():
        size = int(sizes[job.groups[user]])
        if size <= PAPER_MAX_GROUP:
            value = paper_per_user_epsilon(
                job.histograms,
                job.groups,
                int(user),
                epsilon=job.epsilon,
                epsilon1=job.epsilon1,
                c=job.c,
                delta=job.delta,
            )
            paper[int(user)] = (value, "computed")
        elif not fmt2021_closed_epsilon(eps2, size, job.delta).certified:
            # Every Q ⊆ G has ε₀ ≥ ε₂ and |Q| ≤ |G|: the closed form's range condition
            # ε₀ ≤ ln(|Q|/(16 ln(2/δ))) fails for all of them, so App. C gives ε₁ + ε₂.
            paper[int(user)] = (job.epsilon, "no Q in the closed form's range")
        else:
            paper[int(user)] = (math.nan, f"skipped: group of {size} > {PAPER_MAX_GROUP}")
    return {"c": job.c, "grouping": job.grouping, "result": eps, "paper": paper}


#: The worker's thread limit (kept alive for the worker's lifetime).
_THREAD_LIMIT: list[Any] = []


def _one_thread() -> Any:
    """Limit BLAS and OpenMP to one thread; return the limiter (or ``None`` without threadpoolctl).

    k-means on a few thousand points and the ε′ jobs (many small evaluations)
    spend more time synchronising threads than computing; the cores are used
    by processes instead. Only libraries already loaded are limited.
    """
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - scikit-learn depends on it
        return None
    return threadpool_limits(1)


def _init_worker() -> None:
    _THREAD_LIMIT.append(_one_thread())


def _map_jobs(
    function: Callable[[_EpsilonJob], dict[str, Any]], jobs: list[_EpsilonJob], workers: int
) -> list[dict[str, Any]]:
    """Run the jobs in order, in a process pool when ``workers > 1``, with a progress bar."""
    results: list[dict[str, Any]] = []
    with progress_bar(total=len(jobs), desc="epsilon' (c, grouping)", unit="job") as bar:
        if workers <= 1 or len(jobs) <= 1:
            for job in jobs:
                results.append(function(job))
                bar.update(1)
            return results
        with worker_pool(min(workers, len(jobs)), initializer=_init_worker) as pool:
            futures = [pool.submit(function, job) for job in jobs]
            for future in futures:
                results.append(future.result())
                bar.update(1)
    return results


def _best_amplification(delta: float, n: int, epsilon0: float) -> float:
    """min(ε₀, vr2024, fmt2021-numeric) at δ for n ε₀-LDP reports (per_user_epsilons' table)."""
    best = epsilon0
    if n < 2:
        return best
    for method in ("vr2024", "fmt2021-numeric"):
        row = amplified_epsilon(delta, n=n, mechanism="generic", method=method, epsilon0=epsilon0)
        if row.certified and row.epsilon is not None:
            best = min(best, row.epsilon)
    return best


def _epsilon_stats(values: FloatArray, eps: Any, config: PerUserExperimentConfig) -> dict[str, Any]:
    qs = np.quantile(values, [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0])
    names = ("min", "q10", "q25", "median", "q75", "q90", "max")
    return {
        "quantiles": dict(zip(names, qs.tolist(), strict=True)),
        "mean": float(values.mean()),
        "fraction_amplified": float(np.mean(values < config.epsilon - 1e-9)),
        "fraction_at_most_epsilon": float(np.mean(values <= config.epsilon + 1e-9)),
        "median_users_in_ball": float(np.median(eps.users_in_ball)),
        "median_ball_radius": float(np.median(eps.radius)),
        "median_local_epsilon": float(np.median(eps.local_epsilon)),
    }
