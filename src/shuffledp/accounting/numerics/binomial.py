"""Truncated binomial pmfs with a certified bound on the mass left out.

The accountants sum over the support of sums of binomial variables. Summing
over all of {0, …, m} is wasteful for m ~ 1e9, so each pmf is kept on a window
around its mean whose half-width comes from Bernstein's inequality; the mass
outside is bounded by that inequality (no numerical tail evaluation is
trusted), and callers add the bound to δ.

Probabilities inside the window are computed with Loader's saddle-point
expansion (C. Loader, "Fast and accurate computation of binomial
probabilities", 2000), accurate to about 1e-14 relative error for every m the
package meets; scipy's binomial pmf was measured at 1.6e-11 relative error for
m = 1e8, p = 0.2, too coarse for the rounding allowance in
:mod:`shuffledp.accounting.numerics.hockey_stick`.

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DEFAULT_TAIL",
    "Window",
    "binomial_pmf",
    "binomial_window",
    "binomial_windows",
    "convolve",
    "plus_bernoulli",
    "reflected",
]

#: Probability left out on each side of a window (a rigorous Bernstein bound).
DEFAULT_TAIL = 1e-20

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: Below this, Stirling's remainder comes from exact factorials; above, from its series.
_STIRLING_SERIES_FROM = 16
_STIRLING_TABLE = np.array(
    [0.0]
    + [
        math.log(math.factorial(k)) - (k + 0.5) * math.log(k) + k - _HALF_LOG_2PI
        for k in range(1, _STIRLING_SERIES_FROM)
    ]
)


def _stirling_remainder(k: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return ln k! − ln(√(2πk)·(k/e)^k) for integers k ≥ 1 (entry 0 is unused).

    Elementwise: each entry is the same double whatever else shares the array.
    """
    small = k < _STIRLING_SERIES_FROM
    if np.any(small):
        out = np.empty_like(k)
        out[small] = _STIRLING_TABLE[k[small].astype(np.int64)]
        big = k[~small]
        out[~small] = _stirling_series(big)
        return out
    return _stirling_series(k)


def _stirling_series(big: NDArray[np.float64]) -> NDArray[np.float64]:
    """(1/12 − k⁻²(1/360 − k⁻²(1/1260 − k⁻²(1/1680 − k⁻²/1188))))/k, in place on one buffer.

    The operations and their order are those of the written formula, so each
    entry is the double that formula gives.
    """
    inv2 = big * big
    np.divide(1.0, inv2, out=inv2)
    acc = inv2 / 1188.0
    np.subtract(1.0 / 1680.0, acc, out=acc)
    np.multiply(inv2, acc, out=acc)
    np.subtract(1.0 / 1260.0, acc, out=acc)
    np.multiply(inv2, acc, out=acc)
    np.subtract(1.0 / 360.0, acc, out=acc)
    np.multiply(inv2, acc, out=acc)
    np.subtract(1.0 / 12.0, acc, out=acc)
    np.divide(acc, big, out=acc)
    return acc


def _deviance(x: NDArray[np.float64], mean: NDArray[np.float64] | float) -> NDArray[np.float64]:
    """Return x·ln(x/mean) + mean − x without cancellation (Loader's bd0), for x > 0.

    Near the mean (|x − mean| < 0.1(x + mean)) the series
    v(x − mean) + Σ_j 2x·v^{2j+1}/(2j + 1) with v = (x − mean)/(x + mean) is
    summed until, for every entry, the last term is at most 1e-17 of the sum;
    each further term would then be below half a unit of that entry's sum
    (|v| < 0.1), so the entry no longer changes and the result is elementwise:
    the same double whatever else shares the array.
    """
    mean_arr = np.broadcast_to(np.asarray(mean, dtype=np.float64), x.shape)
    diff = x - mean_arr
    both = x + mean_arr
    near = np.abs(diff) < 0.1 * both
    every = bool(np.all(near))
    if every:
        out = np.empty_like(x)
    else:
        out = x * np.log(x / mean_arr) + mean_arr - x
    if every or np.any(near):
        if every:
            xn, diff_n, both_n = x, diff, both
        else:
            xn, diff_n, both_n = x[near], diff[near], both[near]
        v = diff_n / both_n
        v2 = v * v
        term = 2.0 * xn * v
        total = v * diff_n
        size = np.empty_like(term)
        bound = np.empty_like(term)
        # |term|/|total| after j terms is about |v|^(2j − 1): no entry passes the test
        # before then, so it is first made there (stopping later changes nothing).
        largest = float(np.max(np.abs(v))) if len(v) else 0.0
        first = 1
        if 0.0 < largest < 0.1:
            first = max(1, int((17.0 / -math.log10(largest) + 1.0) / 2.0) - 1)
        for j in range(1, 40):
            np.multiply(term, v2, out=term)
            np.divide(term, 2 * j + 1, out=size)
            np.add(total, size, out=total)
            if j < first:
                continue
            np.abs(term, out=size)
            np.abs(total, out=bound)
            np.multiply(1e-17, bound, out=bound)
            if np.all(np.less_equal(size, bound)):
                break
        if every:
            return total
        out[near] = total
    return out


#: Below this many points, :func:`binomial_pmf` with one number of trials takes both
#: deviances in one call (the calls' overhead dominates); above, one call each.
_SHORT = 4096


def binomial_pmf(
    x: NDArray[np.float64],
    m: int | NDArray[np.float64],
    p: float,
    complement: float | None = None,
) -> NDArray[np.float64]:
    """Return P[Bin(m, p) = x] elementwise, for 0 ≤ p ≤ 1 (x and m broadcast; 0 outside [0, m]).

    Loader's form: exp(S(m) − S(x) − S(m−x) − D(x, mp) − D(m−x, m(1−p)))·√(m/(2πx(m−x))),
    with S the Stirling remainder and D the deviance, both free of cancellation.
    Each entry is the same double whatever else shares the array (and whether
    ``m`` is one number or an array of it).

    Args:
        x: Points.
        m: Trials.
        p: Success probability.
        complement: 1 − p, when the caller knows it more precisely than ``1.0 − p``
            (p near 1: computing 1 − p from a rounded p loses relative precision).
    """
    q = 1.0 - p if complement is None else complement
    xs, ms = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(m, dtype=np.float64))
    xs, ms = xs.astype(np.float64), ms.astype(np.float64)
    out = np.zeros(xs.shape)
    valid = (xs >= 0) & (xs <= ms)
    # Degenerate laws, exactly: Bin(m, 0) is a point mass at 0 and Bin(m, 1) at m
    # (the logarithms below are undefined there).
    if p <= 0.0:
        out[valid & (xs == 0)] = 1.0
        return out
    if q <= 0.0:
        out[valid & (xs == ms)] = 1.0
        return out
    zero = valid & (xs == 0)
    full = valid & (xs == ms) & (ms > 0)
    if np.any(zero):
        out[zero] = np.exp(ms[zero] * (math.log1p(-p) if complement is None else math.log(q)))
    if np.any(full):
        out[full] = np.exp(ms[full] * (math.log(p) if p <= 0.5 else math.log1p(-q)))
    inner = valid & ~zero & ~full
    every = xs.ndim == 1 and bool(np.all(inner))
    if every or np.any(inner):
        one_m = np.ndim(m) == 0 and xs.ndim == 1
        xi = xs if every else xs[inner]
        if one_m:
            # One number of trials: its remainder once, the means as numbers (the same
            # doubles, elementwise, as with m repeated).
            mi: NDArray[np.float64] | np.float64 = np.float64(ms[0]) if len(ms) else np.float64(0)
            rest = mi - xi
            k = len(xi)
            remainders = _stirling_remainder(np.concatenate([xi, rest]))
            if k < _SHORT:  # one pass over both: fewer calls
                means = np.empty(2 * k)
                means[:k] = mi * p
                means[k:] = mi * q
                both = _deviance(np.concatenate([xi, rest]), means)
                deviance_x, deviance_rest = both[:k], both[k:]
            else:  # two passes over arrays half as long: faster once they are long
                deviance_x, deviance_rest = _deviance(xi, mi * p), _deviance(rest, mi * q)
            log_c = (
                _stirling_remainder(np.array([mi]))[0]
                - remainders[:k]
                - remainders[k:]
                - deviance_x
                - deviance_rest
            )
        else:
            mi = ms if every else ms[inner]
            rest = mi - xi
            k = len(xi)
            # Each piece elementwise, the three remainders and the two deviances in one pass each.
            remainders = _stirling_remainder(np.concatenate([mi, xi, rest]))
            deviances = _deviance(np.concatenate([xi, rest]), np.concatenate([mi * p, mi * q]))
            log_c = (
                remainders[:k]
                - remainders[k : 2 * k]
                - remainders[2 * k :]
                - deviances[:k]
                - deviances[k:]
            )
        np.exp(log_c, out=log_c)
        values: NDArray[np.float64] = log_c * np.sqrt(mi / (2.0 * math.pi * xi * rest))
        if every:
            return values
        out[inner] = values
    return out


#: Relative error of Loader's formula itself (Stirling remainders, deviance series, exp).
_LOADER_RELATIVE_ERROR = 2e-13
_UNIT_ROUNDOFF = 2.0**-53


@dataclass(frozen=True)
class Window:
    """A pmf on the integers ``lo, lo+1, …, lo+len(pmf)-1``.

    Attributes:
        lo: Smallest integer of the window.
        pmf: Probabilities of the window's points.
        dropped: Upper bound on the probability of the points outside the window.
        rel_error: Upper bound on the relative floating-point error of each entry.
    """

    lo: int
    pmf: NDArray[np.float64]
    dropped: float
    rel_error: float = 0.0

    @property
    def hi(self) -> int:
        """Largest integer of the window."""
        return self.lo + len(self.pmf) - 1


def binomial_window(
    m: int, p: float, tail: float = DEFAULT_TAIL, complement: float | None = None
) -> Window:
    """Return Bin(m, p) restricted to a window holding all but at most 2·tail of its mass.

    The half-width t solves Bernstein's bound exp(−t²/(2(σ² + t/3))) = tail for
    sums of independent variables within 1 of their means, so each side of the
    window leaves out at most ``tail``; ``dropped`` records that bound.

    The relative error bound combines Loader's formula (~1e-14, bounded by
    2e-13) with the conditioning of the pmf in the means m·p and m·(1 − p): the
    log-pmf moves by at most |x − mp| times a mean's relative error. With p and
    1 − p each within 3 rounding units of the intended probabilities, each mean
    is within 4 units, so 8·u·max|x − mp| covers both.

    That assumption is the caller's: when p is near 1, pass ``complement`` =
    1 − p computed directly (``1.0 − p`` of a rounded p near 1 has a large
    relative error, and so would the pmf).

    Results are cached (the pmf array is read-only).

    Args:
        m: Number of trials, ≥ 0.
        p: Success probability in [0, 1].
        tail: Bound on the mass left out on each side.
        complement: 1 − p, computed directly by the caller (optional).
    """
    key = (int(m), float(p), float(tail), None if complement is None else float(complement))
    cached = _WINDOWS.get(key)
    if cached is None:
        cached = binomial_windows([int(m)], p, tail, complement)[0]
    return cached


class _WindowCache:
    """A bounded cache of windows, least recently used out first (read-only pmfs)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[tuple[int, float, float, float | None], Window] = OrderedDict()

    def get(self, key: tuple[int, float, float, float | None]) -> Window | None:
        window = self.items.get(key)
        if window is not None:
            self.items.move_to_end(key)
        return window

    def put(self, key: tuple[int, float, float, float | None], window: Window) -> None:
        self.items[key] = window
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)

    def cache_clear(self) -> None:
        """Forget every window (benchmarks time cold starts)."""
        self.items.clear()


_WINDOWS = _WindowCache(1024)
binomial_window.cache_clear = _WINDOWS.cache_clear  # type: ignore[attr-defined]


def binomial_windows(
    ms: list[int], p: float, tail: float = DEFAULT_TAIL, complement: float | None = None
) -> list[Window]:
    """:func:`binomial_window` for several numbers of trials, their pmfs in one evaluation.

    Windows already cached are reused; the others are computed together (one
    vectorized pass of Loader's formula) and cached.
    """
    p = float(p)
    q = 1.0 - p if complement is None else float(complement)
    comp = None if complement is None else float(complement)
    keys = [(int(m), p, float(tail), comp) for m in ms]
    missing = [key for key in dict.fromkeys(keys) if _WINDOWS.get(key) is None]
    plans = []
    for key in missing:
        m = key[0]
        if m == 0 or p == 0.0 or q == 0.0:
            point = np.ones(1)
            point.setflags(write=False)
            _WINDOWS.put(key, Window(m if q == 0.0 else 0, point, 0.0))
            continue
        mean = m * p
        var = m * p * q
        log_inv_tail = math.log(1.0 / tail)
        half = log_inv_tail / 3.0 + math.sqrt((log_inv_tail / 3.0) ** 2 + 2.0 * var * log_inv_tail)
        lo = max(0, math.floor(mean - half))
        hi = min(m, math.ceil(mean + half))
        dropped = (tail if lo > 0 else 0.0) + (tail if hi < m else 0.0)
        spread = max(abs(lo - mean), abs(hi - mean))
        rel_error = _LOADER_RELATIVE_ERROR + 8.0 * _UNIT_ROUNDOFF * spread
        plans.append((key, lo, hi, dropped, rel_error))
    if plans:
        sizes = [hi - lo + 1 for _, lo, hi, _, _ in plans]
        x = np.concatenate([np.arange(lo, hi + 1, dtype=np.float64) for _, lo, hi, _, _ in plans])
        if len(plans) == 1:  # one number of trials (the same doubles as the array form)
            pmf_all = binomial_pmf(x, plans[0][0][0], p, complement)
        else:
            trials = np.repeat(np.array([key[0] for key, *_ in plans], dtype=np.float64), sizes)
            pmf_all = binomial_pmf(x, trials, p, complement)
        offset = 0
        for (key, lo, _hi, dropped, rel_error), size in zip(plans, sizes, strict=True):
            pmf = pmf_all[offset : offset + size].copy()
            pmf.setflags(write=False)  # cached: shared between callers
            _WINDOWS.put(key, Window(lo, pmf, dropped, rel_error))
            offset += size
    out = []
    for key in keys:
        window = _WINDOWS.get(key)
        assert window is not None
        out.append(window)
    return out


def reflected(window: Window, m: int) -> Window:
    """Return the window of m − X given the window of X (e.g. Bin(m, 1−p) from Bin(m, p))."""
    return Window(m - window.hi, window.pmf[::-1].copy(), window.dropped, window.rel_error)


def convolve(a: Window, b: Window) -> Window:
    """Return the window of X + Y for independent X ~ ``a`` and Y ~ ``b``.

    The mass outside the result is at most the sum of the two dropped masses;
    each entry is a sum of at most min(len) positive products, so its relative
    error grows by the two inputs' errors plus one rounding per term.
    """
    terms = min(len(a.pmf), len(b.pmf))
    rel = a.rel_error + b.rel_error + (terms + 1) * _UNIT_ROUNDOFF
    if len(a.pmf) == 1 or len(b.pmf) == 1:
        pmf = a.pmf[0] * b.pmf if len(a.pmf) == 1 else a.pmf * b.pmf[0]
    else:
        pmf = np.convolve(a.pmf, b.pmf)
    return Window(a.lo + b.lo, pmf, a.dropped + b.dropped, rel)


def plus_bernoulli(window: Window, p_one: float, p_zero: float | None = None) -> Window:
    """Return the window of X + Z for Z ~ Bernoulli(``p_one``) independent of X.

    Args:
        window: X's window.
        p_one: P[Z = 1].
        p_zero: P[Z = 0]; defaults to ``1.0 − p_one``, which loses relative
            precision when p_one is near 1 (pass it computed directly then).

    Each entry is at most two products and a sum: with p_one and p_zero within
    3 rounding units of the intended probabilities, 8 units cover the new error.
    """
    zero = 1.0 - p_one if p_zero is None else p_zero
    pmf = np.zeros(len(window.pmf) + 1)
    pmf[:-1] += zero * window.pmf
    pmf[1:] += p_one * window.pmf
    return Window(window.lo, pmf, window.dropped, window.rel_error + 8.0 * _UNIT_ROUNDOFF)
