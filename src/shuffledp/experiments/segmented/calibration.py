"""The experiment's accounting: λ_k for every (n, s, m) under both accountings, the blanket gap.

``_calibrate_points`` finds λ_k for consecutive blanket rates (warm-started
along m) with the exact accountant and with Eq. 7, and records what the exact
accountant certifies for Eq. 7's λ_k (with Lemma 3's per-slot δ′ beside the
exact one, and a concrete pair's δ where it is not certified);
``_blanket_gap`` sets the m certifying λ = 1 against the least m that
:func:`whole_set_lower_delta` allows. ``_run_jobs`` runs both kinds of job in
worker processes.

Imports nothing else of this package (jobs are plain tuples, so it needs no
configuration).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import Future, as_completed
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln
from scipy.stats import binom

from shuffledp._pools import worker_pool
from shuffledp._progress import progress_bar
from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.accounting.certificates.segmented import (
    blanket_tries,
    check_variant,
    group_delta,
    item_delta,
    level_lower_bound,
    lower_bound_slots,
)
from shuffledp.accounting.numerics.search import smallest_passing
from shuffledp.accounting.numerics.two_counts import TwoCountPair, two_count_delta
from shuffledp.accounting.reproductions.segmented_eq7 import paper_report_probability
from shuffledp.accounting.segmented_parameters import calibrate_levels_along
from shuffledp.baselines.mm_shuffle import calibrate_blanket_rate

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class _Point:
    """λ_k at one (n, s, m) under both accountings, and what the exact accountant says of Eq. 7.

    ``paper_lower_delta``: where Eq. 7's λ_k is not certified, δ of a concrete
    dataset pair in the real protocol (:func:`level_lower_bound`; ``None``
    where it is certified or no pair exists). ``on_grid``: ``False`` for the
    integer m added for the λ figure only (they run no simulation).
    """

    n: int
    items: int
    blanket_rate: float
    variant: str
    exact: tuple[float, ...]
    paper: tuple[float, ...] = ()
    paper_certified_delta: tuple[float, ...] = ()
    paper_slot_exact: tuple[float, ...] = ()
    paper_slot_lemma3: tuple[float, ...] = ()
    paper_lower_delta: tuple[float | None, ...] = ()
    seconds: float = 0.0
    on_grid: bool = True


#: (n, s, d′, blanket rates, levels, δ, variant, padding, on the grid).
_CalJob = tuple[int, int, int, tuple[float, ...], tuple[float, ...], float, str, bool, bool]


def _calibrate_points(job: _CalJob) -> list[_Point]:
    """λ_k for consecutive blanket rates (warm-started along m), one job of the pool."""
    n, s, d_msg, rates, levels, delta, variant_name, padding, on_grid = job
    variant = check_variant(variant_name)
    along = calibrate_levels_along(
        rates, levels, delta, message_domain=d_msg, items=s, n=n, variant=variant
    )
    out = []
    start = time.perf_counter()
    for m, exact in along:
        if variant != "paper":
            out.append(
                _Point(
                    n,
                    s,
                    m,
                    variant,
                    tuple(exact),
                    seconds=time.perf_counter() - start,
                    on_grid=on_grid,
                )
            )
            start = time.perf_counter()  # the next rate's λ are computed from here
            continue
        potential, gamma = blanket_tries(n, m)
        paper, certified, slot_exact, slot_lemma3 = [], [], [], []
        lower: list[float | None] = []
        for eps in levels:
            lam = paper_report_probability(
                eps, delta, message_domain=d_msg, items=s, n=n, blanket_rate=m
            )
            paper.append(lam)
            item_eps = eps / s
            if lam <= 0:
                slot_exact.append(0.0)
                slot_lemma3.append(0.0)
                certified.append(0.0)
                lower.append(None)
                continue
            # Eq. 7's own pair (n⌈m⌉ − 1 blanket tries) against the exact view (n⌈m⌉).
            exact_slot = item_delta(
                item_eps,
                lam,
                message_domain=d_msg,
                potential_blanket=potential,
                blanket_probability=gamma,
            )
            slot_exact.append(exact_slot)
            slot_lemma3.append(_lemma3_slot_delta(item_eps, lam, d_msg, potential - 1, gamma))
            certified.append(group_delta(exact_slot, item_eps, s))
            # Not certified: is it shown not private? δ of a concrete pair in the real view.
            lower.append(
                level_lower_bound(
                    eps,
                    lam,
                    message_domain=d_msg,
                    items=s,
                    n=n,
                    blanket_rate=m,
                    padding=padding,
                )
                if certified[-1] > delta
                else None
            )
        out.append(
            _Point(
                n,
                s,
                m,
                variant,
                tuple(exact),
                tuple(paper),
                tuple(certified),
                tuple(slot_exact),
                tuple(slot_lemma3),
                tuple(lower),
                time.perf_counter() - start,
                on_grid,
            )
        )
        start = time.perf_counter()
    return out


def _lemma3_slot_delta(epsilon: float, lam: float, d: int, blanket: int, gamma: float) -> float:
    """Lemma 3's pair as Eq. 7 evaluates it (the pair of :func:`paper_report_probability`).

    The counts of x₀ and x₁ only: ``blanket`` tries landing on the two items
    with probability 2γ/d′, the victim on x₀ with probability λ and nowhere
    otherwise. Built here rather than through
    :func:`shuffledp.accounting.reproductions.poisson_lemma3.poisson_delta_lemma3`, which refuses
    q = d′λ < 1 (outside Lemma 3's stated range) where Eq. 7 still evaluates it.
    """
    rate = min(1.0, 2.0 * gamma / d)
    pair = TwoCountPair(
        blanket=max(0, blanket),
        rate=rate,
        w1=lam,
        w2=0.0,
        w0=1.0 - lam,
        rate_complement=1.0 - rate,
    )
    return two_count_delta(pair, epsilon)


def whole_set_lower_delta(
    epsilon: float,
    *,
    n: int,
    blanket_rate: float,
    message_domain: int,
    items: int,
    padding: bool = False,
) -> float:
    """δ(ε) of a concrete dataset pair for Alg. 2 with λ = 1 (MM's shape): a lower bound.

    The victim's t slots change to disjoint items and no other user holds
    those 2t items (t = s when the domain has room, see
    :func:`~shuffledp.accounting.certificates.segmented.lower_bound_slots`; below read s
    as t); the view is reduced to (A, B), the messages on
    the first and on the second set (post-processing, so this pair's δ is a
    lower bound on the mechanism's). Blanket messages land on the 2s items
    with probability 2γs/d′ each, so their number T is Bin(n⌈m⌉, 2γs/d′), the
    same under both datasets; given T, A = s + Bin(T, ½) under the first
    dataset and Bin(T, ½) under the second. The ratio of the two laws of A is
    C(T, a − s)/C(T, a), increasing in a, so each conditional hockey-stick
    divergence is P[X ≥ a* − s] − e^ε·P[X ≥ a*] (X ~ Bin(T, ½), a* the first a
    whose ratio exceeds e^ε), and δ = Σ_T P[T]·(that) — the same number as
    :func:`~shuffledp.accounting.certificates.segmented.level_lower_bound`'s grid (the
    (A, B) ↔ (T, A) map is a bijection), at any size. T outside ±14σ is
    dropped (only lowers δ); the result is rounded down by 1e-6 relative.

    Raises:
        InvalidParameterError: If the domain has no room for such a pair (t = 0).
    """
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InvalidParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    potential, gamma = blanket_tries(n, blanket_rate)
    d = check_int(message_domain, "message_domain", minimum=2)
    s = lower_bound_slots(d, items, padding=padding)
    if s < 1:
        raise InvalidParameterError(
            f"no whole-set lower-bound pair exists for items={items} in a message domain of {d}"
            + (" with padding" if padding else " without padding")
        )
    p = min(1.0, 2.0 * gamma * s / d)
    mean = potential * p
    sd = math.sqrt(potential * p * (1.0 - p))
    lo = max(0, math.floor(mean - 14.0 * sd - 10.0))
    hi = min(potential, math.ceil(mean + 14.0 * sd + 10.0))
    t = np.arange(lo, hi + 1, dtype=np.float64)
    weight = binom.pmf(t, potential, p)

    def log_ratio(a: FloatArray) -> FloatArray:
        # log C(T, a − s)/C(T, a) for s ≤ a ≤ T.
        out: FloatArray = (
            gammaln(a + 1) - gammaln(a - s + 1) + gammaln(t - a + 1) - gammaln(t - a + s + 1)
        )
        return out

    left = np.full_like(t, s - 1.0)  # ratio 0 (the first law has no mass below s)
    right = t + 1.0  # ratio ∞ (the second law has no mass above T)
    while np.any(right - left > 1):
        open_ = right - left > 1
        mid = np.floor((left + right) / 2.0)
        inside = np.clip(mid, s, np.maximum(t, s))
        ratio = np.where(mid > t, np.inf, log_ratio(inside))
        above = open_ & (ratio > epsilon)
        right = np.where(above, mid, right)
        left = np.where(open_ & ~above, mid, left)
    h = binom.sf(right - s - 1, t, 0.5) - math.exp(epsilon) * binom.sf(right - 1, t, 0.5)
    return float(np.sum(weight * np.clip(h, 0.0, None))) * (1.0 - 1e-6)


_GapJob = tuple[int, int, int, bool, float, float]


def _blanket_gap(job: _GapJob) -> dict[str, Any]:
    """The m certifying λ = 1 at (E, δ) against the least m the whole-set lower bound allows."""
    n, s, d_msg, padding, eps, delta = job
    m_cert, cert_delta = calibrate_blanket_rate(
        eps, delta, message_domain=d_msg, items=s, n=n, blanket="alg2"
    )

    def lower(m: float) -> float:
        return whole_set_lower_delta(
            eps, n=n, blanket_rate=m, message_domain=d_msg, items=s, padding=padding
        )

    # The m where the lower bound crosses δ (treated as falling in m), to 0.1%.
    try:
        m_low = smallest_passing(lambda m: lower(m) <= delta, 1e-4, m_cert, rtol=1e-3)
    except ValueError:  # pragma: no cover - a lower bound never exceeds the certificate
        m_low = math.nan
    return {
        "n": n,
        "items_per_user": s,
        "epsilon": eps,
        "m_certified": m_cert,
        "certified_delta": cert_delta,
        "lower_bound_at_m_certified": lower(m_cert),
        "m_lower_bound": m_low,
        "ratio": m_cert / m_low if m_low and math.isfinite(m_low) else math.nan,
    }


def _run_jobs(
    cal_jobs: list[_CalJob], gap_jobs: list[_GapJob], workers: int
) -> tuple[list[_Point], list[dict[str, Any]]]:
    """Run the calibration and blanket-gap jobs, in a pool when ``workers > 1``, with a bar."""
    points: list[_Point] = []
    gaps: list[dict[str, Any]] = []
    total = len(cal_jobs) + len(gap_jobs)
    with progress_bar(total=total, desc="calibrating", unit="job") as bar:
        if workers <= 1:
            for cal in cal_jobs:
                points.extend(_calibrate_points(cal))
                bar.update(1)
            for gap in gap_jobs:
                gaps.append(_blanket_gap(gap))
                bar.update(1)
            return points, gaps
        with worker_pool(workers) as pool:
            futures: dict[Future[Any], str] = {}
            for cal in cal_jobs:
                futures[pool.submit(_calibrate_points, cal)] = "cal"
            for gap in gap_jobs:
                futures[pool.submit(_blanket_gap, gap)] = "gap"
            for future in as_completed(futures):
                if futures[future] == "cal":
                    points.extend(future.result())
                else:
                    gaps.append(future.result())
                bar.update(1)
    return points, gaps


def _chunks(grid: tuple[float, ...], size: int) -> list[tuple[float, ...]]:
    return [grid[i : i + size] for i in range(0, len(grid), size)]


def _missing_integers(grid: tuple[float, ...]) -> tuple[float, ...]:
    """The integer m within [min(grid), max(grid)] that the grid does not hold."""
    low, high = math.ceil(min(grid)), math.floor(max(grid))
    return tuple(float(k) for k in range(low, high + 1) if float(k) not in grid)
