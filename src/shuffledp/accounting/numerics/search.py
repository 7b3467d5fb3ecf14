"""Searches that round the safe way: bisection on a certificate, settled on the public δ.

Group: the numerical core (``shuffledp.accounting.numerics``); imports nothing
from the accountant.

Every search here bisects a monotone certificate and returns the end of the
final bracket on which the certificate was evaluated and passed, so rounding is
always on the safe side: the returned parameter is one the accountant has
actually certified, never an interpolated guess.

Settling on the public value. Several certificates have a cheaper mode that
a search uses to decide comparisons (it stops refining its sums once the
comparison with the target is decided) or a δ(·) curve built once near the
answer. Each is a certified upper bound, but not the same number the package
reports for that ε when asked directly (:func:`shuffledp.accounting.delta`),
which refines its sums in full. A search therefore ends by *settling*: it
evaluates the public δ at its candidate and moves the candidate to the safe
side until the public δ passes (:func:`settle_epsilon`,
:func:`settle_largest`, :func:`settle_smallest`). The reported pair then
satisfies the package's own δ(ε) ≤ target exactly, with no tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from shuffledp._validation import InvalidParameterError

__all__ = [
    "largest_passing",
    "largest_passing_below",
    "settle_epsilon",
    "settle_largest",
    "settle_smallest",
    "smallest_passing",
    "smallest_passing_integer",
]


def smallest_passing(
    passes: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    rtol: float = 1e-6,
    max_iter: int = 200,
) -> float:
    """Return (within ``rtol``) the smallest x in (lo, hi] with ``passes(x)``.

    ``passes`` must be monotone: False below some threshold, True above. The
    search runs on a log scale, and the returned x always satisfies ``passes``.

    Args:
        passes: Monotone predicate.
        lo: A value expected to fail (the bracket's lower end), > 0.
        hi: A value that must pass.
        rtol: Stop when hi/lo − 1 < rtol.
        max_iter: Cap on the number of bisection steps.

    Raises:
        ValueError: If ``hi`` does not pass.
    """
    if not passes(hi):
        raise ValueError(f"the upper end of the search bracket ({hi:g}) does not pass")
    if passes(lo):
        return lo
    for _ in range(max_iter):
        if hi / lo - 1.0 < rtol:
            break
        mid = math.sqrt(lo * hi)
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def smallest_passing_integer(
    passes: Callable[[int], bool], *, start: int = 0, limit: int = 2**62
) -> int:
    """Return the smallest integer n ≥ ``start`` with ``passes(n)``.

    ``passes`` must be monotone (False below some n, True from it on). Doubling
    from ``start`` finds a passing n (at most ``limit``), bisection the first.

    Raises:
        ValueError: If no integer up to ``limit`` passes.
    """
    if passes(start):
        return start
    lo, hi = start, min(max(start + 1, 2 * start), limit)
    while not passes(hi):
        if hi >= limit:
            raise ValueError(f"no integer from {start} up to {limit} passes")
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def largest_passing(
    passes: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    tolerance: float = 1e-7,
) -> float:
    """Return (to relative ``tolerance``) the largest x in [lo, hi] with ``passes(x)``.

    ``passes`` must be monotone: True below some threshold, False above. The
    returned x always satisfies ``passes`` (it is ``hi`` when ``hi`` passes).

    Raises:
        ValueError: If ``lo`` does not pass.
    """
    if not passes(lo):
        raise ValueError(f"the lower end of the search bracket ({lo:g}) does not pass")
    if passes(hi):
        return hi
    return _bisect_largest(passes, lo, hi, tolerance)


def _bisect_largest(
    passes: Callable[[float], bool], lo: float, hi: float, tolerance: float
) -> float:
    """Bisect [lo, hi] (``lo`` passes, ``hi`` fails) to relative ``tolerance``; return ``lo``."""
    while hi - lo > tolerance * hi:
        mid = 0.5 * (lo + hi)
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo


def largest_passing_below(
    passes: Callable[[float], bool],
    hi: float,
    *,
    rtol: float,
    lo: float = 0.0,
    floor: float = 1e-9,
) -> float:
    """Return (to relative ``rtol``) the largest x in (0, ``hi``) with ``passes(x)``, or 0.0.

    ``passes`` must be monotone: True below some threshold, False above, and
    ``hi`` must fail. Without a passing ``lo`` (0.0), probes ``hi``/4, ``hi``/16, …
    down to ``floor`` for one; then bisects on a log scale. The returned x
    always satisfies ``passes`` (0.0 when nothing above ``floor`` does).

    Args:
        passes: Monotone predicate.
        hi: A value that fails (the bracket's upper end).
        rtol: Stop when hi/lo − 1 ≤ rtol.
        lo: A value known to pass, or 0.0 when none is known.
        floor: The smallest probe tried when ``lo`` is 0.0.
    """
    if lo == 0.0:
        probe = hi / 4.0
        while probe > floor:
            if passes(probe):
                lo = probe
                break
            hi, probe = probe, probe / 4.0
        if lo == 0.0:
            return 0.0
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo


#: ln δ used for δ = 0 in the interpolating steps (below the smallest positive double).
_LOG_ZERO = -800.0


def _log_gap(value: float, target: float) -> float:
    return (math.log(value) if value > 0.0 else _LOG_ZERO) - math.log(target)


def settle_epsilon(
    delta_at: Callable[[float], float],
    target: float,
    epsilon: float,
    epsilon_max: float,
    *,
    precision: float = 1e-6,
    slope: float | None = None,
) -> tuple[float, float]:
    """Return (ε, δ(ε)) with δ(ε) ≤ ``target``, starting from a search's candidate ``epsilon``.

    ``delta_at`` is the public certificate (the number the package reports
    for that ε); it is evaluated at every point returned, so the pair holds
    exactly. Starting at the candidate, the search steps up (while δ is above
    the target) or down (while it passes) in growing steps until the crossing
    is bracketed, then narrows the bracket by false position on (ln ε, ln δ)
    (Illinois variant, safeguarded to the bracket's inner 80%) until its ends
    are within a relative ``precision``, and returns the end that passes. No
    monotonicity is assumed for safety (a certificate refined differently at
    each ε need not be monotone to the last digit): only the returned end's δ
    matters, and it was evaluated.

    Args:
        delta_at: The public δ(ε) (``inf`` or NaN where nothing is certified).
        target: The δ to meet.
        epsilon: The search's candidate (> 0).
        epsilon_max: The largest ε to consider; δ(epsilon_max) must pass.
        precision: Relative width of the final bracket.
        slope: d ln δ / d ln ε near the candidate (≤ 0), if known, for a better
            first step.

    Raises:
        InvalidParameterError: If no ε up to ``epsilon_max`` passes.
    """
    memo: dict[float, float] = {}

    def value(eps: float) -> float:
        if eps not in memo:
            found = delta_at(eps)
            memo[eps] = math.inf if math.isnan(found) else found
        return memo[eps]

    def passes(eps: float) -> bool:
        return value(eps) <= target

    eps = min(max(epsilon, 1e-300), epsilon_max)
    step = precision
    if slope is not None and slope < 0.0 and math.isfinite(value(eps)):
        # One Newton step on ln δ(ln ε) says how far the crossing is; go 10% beyond.
        guess = abs(_log_gap(value(eps), target) / slope) * 1.1
        step = max(precision, min(guess, 1.0))
    if passes(eps):
        hi = eps
        while True:
            candidate = hi / (1.0 + step)
            if candidate < 1e-12 * epsilon:
                return hi, value(hi)
            if not passes(candidate):
                lo = candidate
                break
            hi, step = candidate, step * 4.0
    else:
        lo = eps
        while True:
            candidate = min(epsilon_max, lo * (1.0 + step))
            if passes(candidate):
                hi = candidate
                break
            if candidate >= epsilon_max:
                raise InvalidParameterError(
                    f"no epsilon up to {epsilon_max:g} reaches delta={target:g}"
                )
            lo, step = candidate, step * 4.0
    # Invariant: lo fails, hi passes, lo < hi.
    f_lo, f_hi = _log_gap(value(lo), target), _log_gap(value(hi), target)
    side = 0
    while hi / lo > 1.0 + precision:
        x_lo, x_hi = math.log(lo), math.log(hi)
        if math.isfinite(f_lo) and f_lo > f_hi:
            x = x_hi - f_hi * (x_hi - x_lo) / (f_hi - f_lo)
            x = min(max(x, x_lo + 0.1 * (x_hi - x_lo)), x_hi - 0.1 * (x_hi - x_lo))
        else:
            x = 0.5 * (x_lo + x_hi)
        mid = math.exp(x)
        if not lo < mid < hi:
            break
        if passes(mid):
            hi, f_hi = mid, _log_gap(value(mid), target)
            if side == 1:
                f_lo /= 2.0
            side = 1
        else:
            lo, f_lo = mid, _log_gap(value(mid), target)
            if side == -1:
                f_hi /= 2.0
            side = -1
    return hi, value(hi)


def settle_largest(
    passes: Callable[[float], bool],
    value: float,
    floor: float,
    *,
    tolerance: float,
) -> float:
    """Return the largest x ≤ ``value`` (to ``tolerance``) that the public check ``passes``.

    ``value`` passed a cheaper (deciding) check; this moves it down, in growing
    steps and then by bisection, until the public certificate passes too.

    Raises:
        ValueError: If nothing down to ``floor`` passes.
    """
    if passes(value):
        return value
    hi, step = value, tolerance
    while True:
        lo = max(floor, value * (1.0 - step))
        if passes(lo):
            break
        if lo <= floor:
            raise ValueError(f"no value down to {floor:g} passes the certificate")
        hi, step = lo, min(1.0, step * 4.0)
    return _bisect_largest(passes, lo, hi, tolerance)


def settle_smallest(
    passes: Callable[[float], bool],
    value: float,
    ceiling: float,
    *,
    rtol: float,
) -> float:
    """Return the smallest x ≥ ``value`` (to ``rtol``) that the public check ``passes``.

    The mirror of :func:`settle_largest`, for parameters where more is safer.

    Raises:
        ValueError: If nothing up to ``ceiling`` passes.
    """
    if passes(value):
        return value
    lo, step = value, rtol
    while True:
        hi = min(ceiling, value * (1.0 + step))
        if passes(hi):
            break
        if hi >= ceiling:
            raise ValueError(f"no value up to {ceiling:g} passes the certificate")
        lo, step = hi, step * 4.0
    return smallest_passing(passes, lo, hi, rtol=rtol)
