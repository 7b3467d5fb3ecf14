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

Where the public δ costs more than everything else in a search (a sum refined
to six digits at millions of users), :func:`settle_crossing` returns the same
kind of answer — an evaluated point that passes with an evaluated point that
fails within the precision — in as few public evaluations as straight-line
predictions in (ln ε, ln δ) allow: usually two or three.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from shuffledp._validation import InvalidParameterError

__all__ = [
    "largest_passing",
    "largest_passing_below",
    "settle_crossing",
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


#: A secant through two points nearer than this many bracket widths is not trusted
#: (their δ's own last digits could turn its slope around) unless their ln δ differ
#: by at least _SECANT_RISE (far more than those digits).
_SECANT_SPAN = 8.0
_SECANT_RISE = 1e-4
#: Farthest a prediction may jump from the point it starts from, in ln ε.
_LONGEST_JUMP = 2.0
#: Steps of :func:`settle_crossing` that may follow predictions; only bisection after them.
_PREDICTED_STEPS = 40


def settle_crossing(
    delta_at: Callable[[float], float],
    target: float,
    epsilon: float,
    epsilon_max: float,
    *,
    precision: float = 1e-6,
    slope: float | None = None,
    round_down: bool = False,
) -> tuple[float, float]:
    """Return (ε, δ(ε)) at the target's crossing, in few evaluations of a costly δ(ε).

    What it returns is what :func:`settle_epsilon` returns: starting at a
    search's candidate ``epsilon``, it brackets the crossing between two
    evaluated points within a relative ``precision`` of each other, one on each
    side of the target, and returns one of them with its δ. With
    ``round_down=False`` (upper bounds) that is the upper end, whose δ is at
    most the target; with ``round_down=True`` (lower bounds) the lower end,
    whose δ exceeds the target (so the true ε(δ) lies above it). Only
    evaluated points are returned and no monotonicity is assumed for safety.

    What differs is how the points are chosen, for a δ whose evaluation costs
    more than everything else (the public certificate of a sum refined to six
    digits): each step predicts the crossing from a straight line in
    (ln ε, ln δ) — through the evaluated point nearest the target, with the
    slope of a secant through it and the next nearest point at least eight
    bracket widths away or 1e-4 apart in ln δ (nearer ones are not trusted),
    else the last such slope, else ``slope`` — and evaluates the end of a
    bracket of width ``precision`` around the prediction that is still
    missing: first the end to be returned (0.4 of a width beyond the
    prediction, 0.2 after a secant's, and within one width of a known other
    end), then its partner one width back. With good predictions that is two
    evaluations after the candidate's. A prediction that misses twice in a
    row, or none at all, gives way to growing steps (no bracket yet) or
    bisection on ln ε.

    Args:
        delta_at: The δ(ε) to settle on (``inf`` or NaN where nothing is certified).
        target: The δ to meet.
        epsilon: The search's candidate (> 0).
        epsilon_max: The largest ε to consider; δ(epsilon_max) must be at most the target.
        precision: Relative width of the final bracket.
        slope: d ln δ / d ln ε near the candidate (< 0), if known.
        round_down: Return the lower end (δ above the target) instead of the upper one.

    Raises:
        InvalidParameterError: If no ε up to ``epsilon_max`` has δ at most the target.
    """
    memo: dict[float, float] = {}
    log_target = math.log(target)

    def value(eps: float) -> float:
        if eps not in memo:
            found = delta_at(eps)
            memo[eps] = math.inf if math.isnan(found) else found
        return memo[eps]

    width = math.log1p(precision)
    lo: float | None = None  # the largest point known to fail (δ above the target)
    hi: float | None = None  # the smallest point known to pass
    known_slope = slope if slope is not None and slope < 0.0 else None

    def visit(eps: float) -> bool:
        nonlocal lo, hi
        passed = value(eps) <= target
        if passed and (hi is None or eps < hi):
            hi = eps
        if not passed and (lo is None or eps > lo):
            lo = eps
        return passed

    def predict() -> tuple[float, bool] | None:
        """Where (in ln ε) the line through the point nearest the target meets it.

        And whether the line's slope is a secant through this δ's own points
        (a sharp prediction) rather than ``slope`` (a rough one).
        """
        nonlocal known_slope
        usable = sorted(
            (
                (math.log(e), math.log(v) - log_target)
                for e, v in memo.items()
                if 0.0 < v < math.inf
            ),
            key=lambda point: abs(point[1]),
        )
        if not usable:
            return None
        u0, g0 = usable[0]
        sharp = False
        for u1, g1 in usable[1:]:
            if abs(u1 - u0) >= _SECANT_SPAN * width or abs(g1 - g0) >= _SECANT_RISE:
                secant = (g1 - g0) / (u1 - u0)
                if secant < 0.0:
                    known_slope, sharp = secant, True
                break
        if known_slope is None:
            return None
        return u0 + max(-_LONGEST_JUMP, min(_LONGEST_JUMP, -g0 / known_slope)), sharp

    def aim() -> tuple[float, bool] | None:
        """The next point a prediction asks for, and whether it should pass."""
        predicted = predict()
        if predicted is None:
            return None
        root, sharp = predicted
        keep = lo if round_down else hi
        inside = width * (1.0 - 1e-6)  # just inside one bracket width
        # The end to return is in place once it lies within 3/4 of a width beyond the
        # prediction (its partner, one width back, then falls on the other side).
        # Otherwise it is aimed 0.4 of a width beyond the prediction (0.2 after a sharp
        # prediction: the answer then lies nearer the crossing); when the
        # prediction lies within a width of the known other end, no farther than one
        # width from that end, so that, if it lands on its side, the bracket is closed.
        beyond = width / 5.0 if sharp else 0.4 * width
        if not round_down and (keep is None or math.log(keep) > root + 0.75 * width):
            wanted, should_pass = root + beyond, True
            if lo is not None and root <= math.log(lo) + width:
                wanted = min(wanted, math.log(lo) + inside)
        elif round_down and (keep is None or math.log(keep) < root - 0.75 * width):
            wanted, should_pass = root - beyond, False
            if hi is not None and root >= math.log(hi) - width:
                wanted = max(wanted, math.log(hi) - inside)
        else:  # the end to return is in place: its partner
            assert keep is not None
            wanted = math.log(keep) + (inside if round_down else -inside)
            should_pass = round_down
        point = min(math.exp(wanted), epsilon_max)
        if (lo is not None and point <= lo) or (hi is not None and point >= hi):
            return None  # the prediction contradicts what is known
        return point, should_pass

    visit(min(max(epsilon, 1e-300), epsilon_max))
    step, misses, steps = precision, 0, 0
    while lo is None or hi is None or hi / lo > 1.0 + precision:
        steps += 1
        aimed = aim() if misses < 2 and steps <= _PREDICTED_STEPS else None
        if aimed is not None:
            point, should_pass = aimed
            misses = 0 if visit(point) == should_pass else misses + 1
            continue
        misses = 0
        if lo is not None and hi is not None:
            visit(math.sqrt(lo * hi))
        elif hi is not None:
            down = hi / (1.0 + step)
            if down < 1e-12 * epsilon:
                return hi, value(hi)  # nothing above the target this far down
            visit(down)
            step *= 4.0
        else:
            assert lo is not None
            if lo >= epsilon_max:
                raise InvalidParameterError(
                    f"no epsilon up to {epsilon_max:g} reaches delta={target:g}"
                )
            visit(min(epsilon_max, lo * (1.0 + step)))
            step *= 4.0
    end = lo if round_down else hi
    return end, value(end)


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
