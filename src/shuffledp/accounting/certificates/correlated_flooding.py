"""The correlated calibration's searches: the cheapest flooding NB(r, q) a δ function passes.

The δ comes as a function of the noise (the exact certificate's unchecked kernel,
or the single-bin proxy that seeds the add/remove search), so these searches know
nothing of what it certifies:
:func:`shuffledp.accounting.certificates.correlated.cheapest_flooding` checks its
inputs once and runs them on its kernels. Every flooding returned was evaluated by
the function and passed. It imports only the correlated noise's type.

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core, published
bounds and other certificates, never reproductions, composition or the questions layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from shuffledp.accounting.certificates.correlated_noise import CorrelatedNoise

__all__ = ["MAX_FLOOD_MEAN", "cheapest_for", "smallest_flooding_shape"]

#: The largest flooding mean E[W] per bin a calibration considers: the accountant holds
#: W's pmf on a window a few times that long.
MAX_FLOOD_MEAN = 1e7


def smallest_flooding_shape(
    delta_at: Callable[[float], float], target: float, start: float, rtol: float
) -> float | None:
    """The smallest r (to ``rtol``) with delta_at(r) ≤ ``target``; None if none below 1e7.

    At fixed q, δ does not increase with r (more flooding is independent noise added
    to both counts), and ln δ is close to linear in r once the flooding dominates, so
    the crossing is bracketed by doubling (or halving) from ``start`` and narrowed by
    false position on (r, ln δ) (Illinois variant, kept inside the bracket's inner
    90%). Only evaluated points are returned: the bracket's passing end.
    """

    def gap(r: float) -> float:
        value = delta_at(r)
        if not value > 0.0:
            return -math.inf
        return math.log(value) - math.log(target)

    hi = max(start, 1e-3)
    g_hi = gap(hi)
    lo, g_lo = 0.0, math.inf
    while g_hi > 0.0:
        lo, g_lo = hi, g_hi
        hi *= 2.0
        if hi > 1e7:
            return None
        g_hi = gap(hi)
    if lo == 0.0:
        lo = hi / 2.0
        g_lo = gap(lo)
        while lo > 1e-6 and g_lo <= 0.0:
            hi, g_hi = lo, g_lo
            lo /= 2.0
            g_lo = gap(lo)
        if g_lo <= 0.0:
            return lo
    side = 0
    while hi - lo > rtol * hi:
        if math.isfinite(g_lo) and math.isfinite(g_hi) and g_lo > g_hi:
            mid = hi - g_hi * (hi - lo) / (g_hi - g_lo)
        else:
            mid = 0.5 * (lo + hi)
        width = hi - lo
        mid = min(max(mid, lo + 0.05 * width), hi - 0.05 * width)
        g_mid = gap(mid)
        if g_mid <= 0.0:
            hi, g_hi = mid, g_mid
            if side == -1:
                g_lo /= 2.0  # Illinois: halve the end that stayed
            side = -1
        else:
            lo, g_lo = mid, g_mid
            if side == 1:
                g_hi /= 2.0
            side = 1
    return hi


#: 1 − q on the calibration's grid, from the flattest flooding to the most spread.
_Q_GRID = 1.0 - np.geomspace(0.5, 2e-4, 14)


def _cheapest_over_q(
    cost_of_q: Callable[[float], tuple[float, float] | None],
) -> tuple[float, float, float] | None:
    """(E[W], q, r) of the cheapest flooding over q: the grid, then a golden-section search.

    The grid is scanned from the flattest q up and stops two points after costs start
    rising (beyond the optimum the windows, and the time, grow like 1/(1 − q));
    golden-section steps on logit(q) then refine around the best point. Only the cost
    matters here: every candidate was certified by ``cost_of_q``.
    """
    found: list[tuple[float, float]] = []
    best_index, rising = -1, 0
    for q in _Q_GRID:
        at = cost_of_q(float(q))
        cost = math.inf if at is None else at[0]
        found.append((cost, float(q)))
        if best_index < 0 or cost < found[best_index][0]:
            best_index, rising = len(found) - 1, 0
        elif math.isfinite(found[best_index][0]):
            rising += 1
            if rising >= 2:
                break
    if not math.isfinite(found[best_index][0]):
        return None
    left = found[max(best_index - 1, 0)][1]
    right = found[min(best_index + 1, len(found) - 1)][1]
    x_lo, x_hi = math.log(left / (1 - left)), math.log(right / (1 - right))
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    candidates: dict[float, tuple[float, float]] = {}

    def cost_at(x: float) -> float:
        q = 1.0 / (1.0 + math.exp(-x))
        at = cost_of_q(q)
        if at is None:
            return math.inf
        candidates[q] = at
        return at[0]

    for cost, q in found:
        at = cost_of_q(q) if math.isfinite(cost) else None
        if at is not None:
            candidates[q] = at
    c = x_hi - ratio * (x_hi - x_lo)
    d = x_lo + ratio * (x_hi - x_lo)
    f_c, f_d = cost_at(c), cost_at(d)
    for _ in range(10):
        if f_c < f_d:
            x_hi, d, f_d = d, c, f_c
            c = x_hi - ratio * (x_hi - x_lo)
            f_c = cost_at(c)
        else:
            x_lo, c, f_c = c, d, f_d
            d = x_lo + ratio * (x_hi - x_lo)
            f_d = cost_at(d)
    mean, q, r = min((v[0], q, v[1]) for q, v in candidates.items())
    return mean, q, r


def cheapest_for(
    kernel: Callable[[CorrelatedNoise], float],
    epsilon: float,
    target: float,
    alpha: float,
    rtol: float,
) -> CorrelatedNoise | None:
    """The cheapest flooding whose ``kernel`` δ at ε is at most ``target`` (None if none)."""
    memo: dict[float, tuple[float, float] | None] = {}

    def at(q: float) -> tuple[float, float] | None:
        """(E[W], r) of the smallest passing r at this q."""
        if q not in memo:
            start = math.log((1.0 - alpha) / target) / -math.log1p(-q)

            def delta_at(r: float) -> float:
                if r * q / (1.0 - q) > MAX_FLOOD_MEAN:
                    return math.inf  # beyond what the accountant's window affords
                return kernel(CorrelatedNoise(alpha, r, q))

            r = smallest_flooding_shape(delta_at, target, start, rtol)
            memo[q] = None if r is None else (r * q / (1.0 - q), r)
        return memo[q]

    best = _cheapest_over_q(at)
    if best is None:
        return None
    _, q, r = best
    return CorrelatedNoise(alpha, r, q)
