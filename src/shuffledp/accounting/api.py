"""One entry point per question: δ at ε, ε at δ, and the local parameter for a target.

>>> from shuffledp.accounting import delta, amplified_epsilon, calibrate
>>> delta(0.5, n=10_000, epsilon0=2.0).delta                      # best generic bound
>>> amplified_epsilon(1e-6, n=10_000, epsilon0=2.0, mechanism="krr", domain_size=10)
>>> calibrate(1.0, 1e-6, n=10_000, mechanism="krr", domain_size=10).value  # the largest ε₀

Every answer is an :class:`AccountingResult` that records the method, the
inputs and what kind of number it is (upper, exact, lower or reproduction),
and whether it is *certified*: a guarantee a user may rely on, i.e. an upper
bound (or exact value) inside its theorem's proven range. Lower bounds and
reproductions are never certified, and only certified numbers calibrate.

Group: the questions users ask (``api``, ``methods``, ``calibration``,
``segmented_parameters``, ``per_user_epsilons``); may import every other group.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scipy.optimize import brentq

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.accounting.calibration import (
    calibrate_flip_q,
    largest_passing,
    settle_epsilon,
    settle_largest,
)
from shuffledp.accounting.methods import BEST, METHODS, Mechanism, Method, methods_for
from shuffledp.accounting.numerics.gaussian_guess import (
    gaussian_delta_guess,
    gaussian_epsilon_guess,
    gaussian_guess_is_sharp,
    polished_epsilon_guess,
)
from shuffledp.accounting.numerics.search import settle_crossing, smallest_passing_integer
from shuffledp.accounting.numerics.symmetric_memo import kept_values
from shuffledp.accounting.published.generic_bounds import Bound
from shuffledp.privacy import BoundKind

__all__ = [
    "AccountingResult",
    "CalibrationResult",
    "amplified_epsilon",
    "calibrate",
    "compare",
    "delta",
]


@dataclass(frozen=True)
class AccountingResult:
    """One accountant's answer.

    Attributes:
        method: Method name (see :data:`shuffledp.accounting.methods.METHODS`).
        epsilon: ε of the statement (``None`` when the method gives nothing).
        delta: δ of the statement (``None`` when the method gives nothing).
        bound: What the number is: a guarantee for every dataset (``upper``), the
            true value (``exact``), a value some existing dataset attains
            (``lower``, rounded down), or a published formula, or a bound outside
            its theorem's range, that is not a guarantee (``reproduction``).
        certified: Whether the number is a guarantee a user may rely on: an
            ``upper`` (or ``exact``) value inside its theorem's proven range.
            Always ``False`` for ``lower`` and ``reproduction`` rows and for rows
            without a number; only certified numbers are used to calibrate.
        source: Citation.
        inputs: The mechanism's parameters.
        note: Why there is no number or it is not certified, or what it means.
    """

    method: str
    epsilon: float | None
    delta: float | None
    bound: BoundKind
    certified: bool
    source: str
    inputs: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "method": self.method,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "bound": self.bound.value,
            "certified": self.certified,
            "source": self.source,
            "inputs": dict(self.inputs),
            "note": self.note,
        }


@dataclass(frozen=True)
class CalibrationResult:
    """The least noisy local parameter a method certifies for a target (ε, δ).

    Attributes:
        parameter: Which parameter was calibrated (``epsilon0``, ``q``,
            ``report_probability`` or ``blanket_messages``).
        value: Its value.
        result: The certified statement at the target ε for that value.
    """

    parameter: str
    value: float
    result: AccountingResult

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {"parameter": self.parameter, "value": self.value, **self.result.to_dict()}


#: Curves a search for ε builds at most, each where the previous one crossed the target.
_CURVE_REBUILDS = 6
#: A curve built within this relative distance of where it crosses the target is kept.
_CURVE_AGREEMENT = 0.02

#: Largest local ε₀ the calibration searches.
_EPSILON0_MAX = 20.0


def _method(name: str, mech: Mechanism) -> Method:
    if name == "best":
        name = BEST[mech.kind]
    if name not in METHODS:
        raise InvalidParameterError(
            f"unknown method {name!r}; choose from best, {', '.join(METHODS)}"
        )
    method = METHODS[name]
    if mech.kind not in method.mechanisms:
        raise InvalidParameterError(
            f"method {name!r} does not apply to the {mech.kind} mechanism; "
            f"choose from {', '.join(m.name for m in methods_for(mech.kind))}"
        )
    return method


#: Kinds of number a user may rely on as a guarantee.
_GUARANTEES = (BoundKind.UPPER, BoundKind.EXACT)


def _result(
    method: Method,
    mech: Mechanism,
    eps: float | None,
    dlt: float | None,
    in_range: bool,
    note: str,
) -> AccountingResult:
    """One row. ``in_range``: the method's theorem covers these parameters (``Bound.certified``).

    A number outside its theorem's range is only a formula's value
    (``reproduction``); a missing number keeps the method's kind. A row is
    certified only when it is a guarantee: an upper (or exact) value in range.
    """
    produced = eps is not None and dlt is not None
    bound = method.bound if in_range or not produced else BoundKind.REPRODUCTION
    certified = produced and in_range and bound in _GUARANTEES
    if produced and bound is BoundKind.LOWER and not note:
        note = f"{method.note}; a lower bound, not a guarantee"
    return AccountingResult(
        method=method.name,
        epsilon=eps,
        delta=dlt,
        bound=bound,
        certified=certified,
        source=method.source,
        inputs=mech.inputs(),
        note=note or method.note,
    )


def _delta_for(
    method: Method, mech: Mechanism, epsilon: float, value: Bound | None = None
) -> AccountingResult:
    # The public δ(ε): sums refined in full (no deciding target); ``value`` when known.
    if value is None:
        value = method.evaluate(epsilon, mech)
    if math.isnan(value.value):
        return _result(method, mech, epsilon, None, False, value.reason)
    return _result(method, mech, epsilon, value.value, value.certified, value.reason)


def delta(
    epsilon: float, *, n: int, mechanism: str = "generic", method: str = "best", **params: Any
) -> AccountingResult:
    """Return δ(ε) for a shuffled mechanism.

    Args:
        epsilon: ε > 0.
        n: Number of users.
        mechanism: ``generic``, ``krr``, ``flip`` or ``poisson``.
        method: A method name, or ``best`` for the tightest certified upper bound.
        **params: The mechanism's parameters (see :class:`Mechanism`).
    """
    epsilon = check_epsilon(epsilon)
    mech = Mechanism(kind=mechanism, n=n, **params)
    return _delta_for(_method(method, mech), mech, epsilon)


def _solve_epsilon(
    raw_delta: Callable[[float], float],
    target: float,
    eps_max: float,
    *,
    round_down: bool,
    start: float = 1.0,
    precision: float = 1e-5,
    seen: dict[float, float] | None = None,
    estimate: bool = False,
) -> float:
    """Return the ε where a non-increasing δ(ε) crosses ``target``, on the safe side.

    The caller has checked ``raw_delta(eps_max) <= target``. Brackets the
    crossing inside (0, eps_max] by growing or halving from ``start`` (clamped
    to eps_max), refines with Brent's method on ln δ (δ = 0 counts as far below
    any target, so targets down to the smallest double work), then bisects to
    a relative ``precision`` and returns a point whose δ was evaluated: at most the
    target (``round_down=False``, for upper bounds on δ; never above eps_max)
    or above it (``round_down=True``, for lower bounds). ``seen``, when given,
    collects every (ε, δ) evaluated. With ``estimate``, Brent's estimate of the
    crossing is returned as it is (to about ``precision``, on either side): a
    proposal for a search that settles elsewhere.
    """
    memo: dict[float, float] = {} if seen is None else seen

    def delta_at(eps: float) -> float:
        if eps not in memo:
            memo[eps] = raw_delta(eps)
        return memo[eps]

    def passes(eps: float) -> bool:
        return delta_at(eps) <= target

    def line_root(side: list[float]) -> float | None:
        # Where the line through the last two of these points (ln ε, ln δ) meets the
        # target (for an estimate only: the bracketing steps then jump there).
        if not estimate or len(side) < 2:
            return None
        e1, e2 = side[-2], side[-1]
        v1, v2 = memo[e1], memo[e2]
        if not (0.0 < v1 < math.inf and 0.0 < v2 < math.inf) or v1 == v2 or e1 == e2:
            return None
        slope = math.log(v2 / v1) / math.log(e2 / e1)
        jump = math.log(target / v2) / slope if slope < 0.0 else math.inf
        return e2 * math.exp(jump) if abs(jump) < 5.0 else None

    hi = min(max(start, 1e-9), eps_max)
    if passes(hi):
        lo, passing = hi / 2.0, [hi]
        while passes(lo):
            passing.append(lo)
            root = line_root(passing)
            hi, lo = lo, lo / 2.0 if root is None else min(lo / 1.02, root / 1.05)
            if lo < 1e-12:
                return lo if round_down else hi
    else:
        lo, growth, failing = hi, 1.02, [hi]
        while True:
            root = line_root(failing)
            step = growth * lo if root is None else max(lo * 1.02, root * 1.05)
            hi = min(eps_max, step)
            if passes(hi):
                break
            failing.append(hi)
            if hi >= eps_max:
                raise InvalidParameterError(
                    f"no epsilon up to {eps_max:g} reaches delta={target:g}"
                )
            lo, growth = hi, min(2.0, growth * growth)
    # Invariant from here: δ(lo) > target >= δ(hi), lo < hi <= eps_max.
    log_target = math.log(target)
    if estimate:
        # A passing end with δ = 0 (ε₀, say) gives Brent nothing to interpolate: first
        # find a passing point with δ > 0, along the line through the two nearest
        # failing points, or nine tenths of the way to the passing end when that line
        # meets the target beyond it.
        for _ in range(8):
            if delta_at(hi) > 0.0:
                break
            above = [(e, v) for e, v in sorted(memo.items()) if e <= lo and target < v < math.inf]
            if len(above) < 2:
                break
            (e1, v1), (e2, v2) = above[-2:]
            slope = math.log(v2 / v1) / math.log(e2 / e1)
            jump = (log_target - math.log(v2)) / slope if slope < 0.0 else math.inf
            inside = math.log(lo / e2) < jump < math.log(hi / e2)
            point = e2 * math.exp(jump) if inside else lo * (hi / lo) ** 0.9
            if passes(point):
                hi = point
            else:
                lo = point

    def gap(eps: float) -> float:
        value = delta_at(eps)
        return (math.log(value) if value > 0.0 else -800.0) - log_target

    try:
        root = brentq(gap, lo, hi, xtol=1e-14, rtol=precision / 5.0, maxiter=100)
    except (ValueError, RuntimeError):  # pragma: no cover - the bisection below still works
        root = math.sqrt(lo * hi)
    if estimate:
        return float(root)
    for candidate in (root * (1.0 + 0.4 * precision), root * (1.0 + 10.0 * precision)):
        if lo < candidate < hi and passes(candidate):
            hi = candidate
            break
    for candidate in (root * (1.0 - 0.4 * precision), root * (1.0 - 10.0 * precision)):
        if lo < candidate < hi and not passes(candidate):
            lo = candidate
            break
    while hi / lo > 1.0 + precision:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return lo if round_down else hi


class _PublicDelta:
    """The public δ(ε) of one method for one mechanism, each ε evaluated once.

    What :func:`delta` reports (sums refined in full, no deciding target);
    calling it again at an ε already asked hands back the same :class:`Bound`.
    """

    def __init__(self, method: Method, mech: Mechanism) -> None:
        self.method = method
        self.mech = mech
        self.bounds: dict[float, Bound] = {}

    def bound(self, epsilon: float) -> Bound:
        """The method's :class:`Bound` at ``epsilon``."""
        found = self.bounds.get(epsilon)
        if found is None:
            found = self.bounds[epsilon] = self.method.evaluate(epsilon, self.mech)
        return found

    def __call__(self, epsilon: float) -> float:
        return self.bound(epsilon).value


#: Relative precision of ε(δ): the reported ε is at most this far above the crossing.
_EPSILON_PRECISION = 1e-6
#: Relative precision of the cheap search that proposes where the public δ crosses:
#: finer than the distance between the two crossings (the cheap sums' tolerance
#: divided by the slope of ln δ in ln ε), so no closer than needed.
_PROPOSAL_PRECISION = 1e-4
#: Relative precision of a hint's ε: a starting point only.
_HINT_PRECISION = 1e-3
#: Span in ln ε over which a cheap δ's slope is read: wide enough that its own last
#: digits (a looser sum, refined differently at each ε) do not move the slope.
_SLOPE_SPAN = 0.02
#: ... or across points whose ln δ differ by this much (far more than those digits).
_SLOPE_RISE = 0.05


def _epsilon_for(method: Method, mech: Mechanism, target: float) -> AccountingResult:
    """ε(δ) for one method, settled on the public δ(ε) (see below).

    Upper bounds and reproductions: the smallest ε found (to a relative 1e-6)
    at which the method's own δ(ε), as :func:`delta` reports it, is at most the
    target; the row's δ is that value. Lower bounds: the largest ε found (to
    a relative 1e-6) at which the lower bound, as :func:`delta` reports it,
    still exceeds the target (so the true ε(δ) is above it); the row's δ is
    the lower bound there.

    Where the public δ is cheap (closed forms, FLIP), the search bisects it
    directly. Where it is a sum refined to six digits, a cheaper function
    proposes the crossing first — for one pair over m·r ≥ 10⁵ blanket
    messages its Gaussian guess polished on its own lines
    (:func:`~shuffledp.accounting.numerics.gaussian_guess.polished_epsilon_guess`),
    else the deciding mode (a looser certified sum) or a certified δ(·) curve
    built near the answer — and the answer is settled on the public δ in a
    few evaluations, two after a polished guess
    (:func:`shuffledp.accounting.numerics.search.settle_crossing`). Inside one
    question each public value is computed once and the symmetric binomial's
    tails are kept (:func:`~shuffledp.accounting.numerics.symmetric_memo.kept_values`:
    the very same numbers, computed once).
    """
    with kept_values():
        return _settled_epsilon(method, mech, target)


def _settled_epsilon(method: Method, mech: Mechanism, target: float) -> AccountingResult:
    eps_max = 50.0
    if mech.epsilon0 is not None and method.bound is not BoundKind.REPRODUCTION:
        # Method.evaluate gives δ = 0 at ε ≥ ε₀ for upper and lower bounds alike:
        # an upper bound's ε(δ) never exceeds ε₀, and ε₀ is the truth when nothing
        # smaller reaches δ.
        eps_max = min(eps_max, mech.epsilon0)
    public = _PublicDelta(method, mech)
    probe = public.bound(eps_max)
    if not math.isnan(probe.value) and method.bound is BoundKind.LOWER:
        # At ε ≥ ε₀ every lower bound is 0 whatever its range: its range shows below ε₀.
        # (A value above the target there is no failure: it says ε(δ) > ε₀/2.)
        inside = public.bound(eps_max / 2.0)
        if math.isnan(inside.value):
            probe = inside
    if math.isnan(probe.value):
        return _result(method, mech, None, None, False, probe.reason)
    if probe.value > target:
        return _result(
            method,
            mech,
            None,
            None,
            False,
            f"no epsilon up to {eps_max:g} reaches delta={target:g}",
        )
    lower = method.bound is BoundKind.LOWER
    start = _start(method, mech, target)
    if method.deciding_fn is None and method.curve_fn is None:
        # A cheap public δ: bisect it directly.
        eps = _solve_epsilon(
            public,
            target,
            eps_max,
            round_down=lower,
            start=1.0 if start is None else start.epsilon,
            precision=_EPSILON_PRECISION,
        )
        if not lower:
            eps, _ = settle_epsilon(public, target, eps, eps_max, precision=_EPSILON_PRECISION)
    else:
        candidate, slope = _proposal(method, mech, target, eps_max, start)
        # Half a bracket beyond the proposal, on the side to be returned: if the
        # proposal is the crossing, the next evaluation (its partner) ends the search.
        aim = math.sqrt(1.0 + _EPSILON_PRECISION)
        try:
            eps, _ = settle_crossing(
                public,
                target,
                candidate / aim if lower else min(candidate * aim, eps_max),
                eps_max,
                precision=_EPSILON_PRECISION,
                slope=slope,
                round_down=lower,
            )
        except InvalidParameterError as exc:  # pragma: no cover - δ(eps_max) passed above
            return _result(method, mech, None, None, False, str(exc))
    value = public.bound(eps)
    if math.isnan(value.value):  # pragma: no cover - the searches return an evaluated ε
        return _result(method, mech, None, None, False, value.reason)
    if lower and not value.value > target:
        # The lower bound is at most the target down to ε → 0: it says only ε ≥ 0.
        return _result(
            method,
            mech,
            None,
            None,
            False,
            f"this lower bound stays at or below delta={target:g} for every epsilon > 0; "
            "it says nothing about epsilon here",
        )
    return _result(method, mech, eps, value.value, value.certified, value.reason)


class _Start(NamedTuple):
    """Where a search for ε(δ) starts.

    Attributes:
        epsilon: The starting ε.
        slope: d ln δ/d ln ε there, if known.
        sharp: Whether it is the guess of the method's own pair where that
            has m·r ≥ 10⁵: the Gaussian approximation polished on the pair's
            own lines, within about 1e-7 of the public crossing (no deciding
            sum places it better; the first public evaluation, half a
            precision beyond it, then usually ends the search with its partner).
    """

    epsilon: float
    slope: float | None = None
    sharp: bool = False


def _start(method: Method, mech: Mechanism, target: float) -> _Start | None:
    """Where a search for the method's ε(δ) starts, and d ln δ/d ln ε there if known.

    The method's own guess (an approximation with no guarantee), else its
    hint's (a cheap bound near it): the hint's guess, or where the hint's
    deciding mode (or δ) crosses the target to a relative 1e-3. Only a starting
    point: ``None`` when there is none.
    """
    for source in (method, None if method.hint is None else METHODS[method.hint]):
        if source is not None and source.guess_pair is not None:
            try:
                pair = source.guess_pair(mech)
            except InvalidParameterError:
                continue
            guess = gaussian_epsilon_guess(pair, target)
            if guess is not None:
                # Sharp only for a bound that is the pair's own δ (not a mixture near it),
                # and then polished on the pair's own lines.
                own = source is method and method.curve_fn is None
                if own and gaussian_guess_is_sharp(pair):
                    return _Start(polished_epsilon_guess(pair, target, *guess), guess[1], True)
                return _Start(guess[0], guess[1], False)
    if method.hint is None:
        return None
    hinted = METHODS[method.hint]
    eps_max = 50.0
    if mech.epsilon0 is not None and hinted.bound is not BoundKind.REPRODUCTION:
        eps_max = min(eps_max, mech.epsilon0)

    def rough(eps: float) -> float:
        value = hinted.evaluate(eps, mech, target=target).value
        return math.inf if math.isnan(value) else value

    if rough(eps_max) > target:
        return None
    try:
        found = _solve_epsilon(
            rough,
            target,
            eps_max,
            round_down=hinted.bound is BoundKind.LOWER,
            precision=_HINT_PRECISION,
        )
    except InvalidParameterError:  # pragma: no cover - rough(eps_max) passed
        return None
    return _Start(found)


#: A guess whose deciding δ is within this (in ln δ) of the target is as near the
#: public crossing as the deciding sum can tell (its tolerance is 0.2%).
_TRUSTED_GAP = 2e-3


def _proposal(
    method: Method,
    mech: Mechanism,
    target: float,
    eps_max: float,
    start: _Start | None,
) -> tuple[float, float | None]:
    """Where a cheaper function than the public δ crosses the target, and its log-slope there.

    A certified δ(·) curve built near the answer (rebuilt where it crossed until
    the two agree) when the method has one; else its deciding mode (a looser
    certified sum), searched from the start (a guess it agrees with is kept).
    """
    lower = method.bound is BoundKind.LOWER
    seen: dict[float, float] = {}

    def deciding(eps: float) -> float:
        if eps not in seen:
            value = method.evaluate(eps, mech, target=target).value
            seen[eps] = math.inf if math.isnan(value) else value
        return seen[eps]

    guess, guess_slope = (None, None) if start is None else (start.epsilon, start.slope)
    if method.curve_fn is not None and not lower:
        if guess is None:
            # No start: a coarse search (refinement stops once each comparison is
            # decided) tells where to build the curve.
            guess = _solve_epsilon(
                deciding, target, eps_max, round_down=False, start=1.0, precision=0.05
            )
        e0 = mech.epsilon0
        for _ in range(_CURVE_REBUILDS):
            curve = method.curve_fn(guess, mech)

            def on_curve(e: float, curve: Callable[[float], float] = curve) -> float:
                return 0.0 if e0 is not None and e >= e0 else curve(e)

            if on_curve(eps_max) > target:
                break
            points: dict[float, float] = {}
            rough = _solve_epsilon(
                on_curve,
                target,
                eps_max,
                round_down=False,
                start=guess,
                precision=_PROPOSAL_PRECISION,
                seen=points,
                estimate=True,
            )
            if abs(rough / guess - 1.0) <= _CURVE_AGREEMENT:
                # The curve is smooth: the nearest evaluated points give its slope.
                return rough, _log_slope(points, rough, span=0.0)
            guess = rough
    if guess is not None:
        guess = min(guess, eps_max)
        if start is not None and start.sharp:
            return guess, guess_slope  # the deciding sums cannot tell better
        agreement = deciding(guess)
        if 0.0 < agreement < math.inf and abs(math.log(agreement / target)) <= _TRUSTED_GAP:
            return guess, guess_slope
        candidate, _ = settle_crossing(
            deciding,
            target,
            guess,
            eps_max,
            precision=_PROPOSAL_PRECISION,
            slope=guess_slope,
            round_down=lower,
        )
        return candidate, guess_slope or _log_slope(seen, candidate, span=_SLOPE_SPAN)
    candidate = _solve_epsilon(
        deciding,
        target,
        eps_max,
        round_down=lower,
        start=1.0,
        precision=_PROPOSAL_PRECISION,
        seen=seen,
        estimate=True,
    )
    slope = _log_slope(seen, candidate, span=_SLOPE_SPAN)
    if slope is None:
        # A looser sum refined differently at each ε: its slope is read across 2%.
        for side in (-1.0, 1.0):
            point = candidate * math.exp(side * _SLOPE_SPAN)
            if point <= eps_max:
                deciding(point)
        slope = _log_slope(seen, candidate, span=_SLOPE_SPAN)
    return candidate, slope


def _log_slope(seen: dict[float, float], epsilon: float, *, span: float) -> float | None:
    """The slope d ln δ / d ln ε near ``epsilon``, from evaluated points around it (< 0).

    The secant through the nearest pair of points on either side of ``epsilon``
    that lie at least ``span`` apart in ln ε or differ by at least 0.05 in ln δ
    (far more than a looser sum's own last digits); with points on one side
    only, through the nearest such pair there. ``None`` without one or for a
    slope that is not negative.
    """
    points = sorted(
        (math.log(e / epsilon), math.log(v)) for e, v in seen.items() if 0.0 < v < math.inf
    )
    below = [p for p in points if p[0] < 0.0][::-1]  # nearest first
    above = [p for p in points if p[0] > 0.0]
    pairs = [(a, b) for a in below for b in above] or list(itertools.pairwise(points))
    usable = [
        (b[0] - a[0], a, b)
        for a, b in pairs
        if b[0] - a[0] >= span or abs(b[1] - a[1]) >= _SLOPE_RISE
    ]
    if not usable:
        return None
    _, (u0, g0), (u1, g1) = min(usable)
    slope = (g1 - g0) / (u1 - u0)
    return slope if slope < 0.0 else None


def amplified_epsilon(
    delta: float, *, n: int, mechanism: str = "generic", method: str = "best", **params: Any
) -> AccountingResult:
    """Return the ε a method certifies at δ (bisection on its δ(ε), safe rounding).

    For a lower-bound method the result is a lower bound on the true ε(δ).
    """
    target = check_delta(delta)
    mech = Mechanism(kind=mechanism, n=n, **params)
    return _epsilon_for(_method(method, mech), mech, target)


def compare(
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    n: int,
    mechanism: str = "generic",
    each: Callable[[list[Method]], Iterable[Method]] | None = None,
    **params: Any,
) -> list[AccountingResult]:
    """Return one row per applicable method: δ at ``epsilon`` or ε at ``delta``.

    ``each`` wraps the list of methods as they are evaluated (e.g. a progress bar).
    """
    if (epsilon is None) == (delta is None):
        raise InvalidParameterError("give exactly one of epsilon or delta")
    mech = Mechanism(kind=mechanism, n=n, **params)
    eps = None if epsilon is None else check_epsilon(epsilon)
    target = None if delta is None else check_delta(delta)
    rows = []
    methods = methods_for(mech.kind)
    for method in methods if each is None else each(methods):
        # A method outside its own range gives a row saying so, never an error
        # for every row (Method.evaluate already turns its errors into NaN).
        try:
            if eps is not None:
                rows.append(_delta_for(method, mech, eps))
            else:
                assert target is not None
                rows.append(_epsilon_for(method, mech, target))
        except InvalidParameterError as exc:
            rows.append(_result(method, mech, eps, target, False, f"not computed: {exc}"))
    return rows


def _validate_fixed(kind: str, n: int, parameter: str | None, params: dict[str, Any]) -> None:
    """Check the mechanism's fixed parameters once, before any search can swallow the error."""
    searched = {"generic": "epsilon0", "krr": "epsilon0", "flip": "q"}.get(kind)
    if searched is not None and parameter not in (None, searched):
        raise InvalidParameterError(
            f"parameter must be None or {searched!r} for the {kind} mechanism "
            f"(report_probability and blanket_messages are the poisson mechanism's), "
            f"got {parameter!r}"
        )
    if kind in ("generic", "krr"):
        if "epsilon0" in params:
            raise InvalidParameterError(
                "calibrate searches epsilon0 for the generic and krr mechanisms; do not pass it"
            )
        Mechanism(kind=kind, n=n, epsilon0=1.0, **params)
    elif kind == "flip":
        if "q" in params:
            raise InvalidParameterError(
                "calibrate searches q for the flip mechanism; do not pass it"
            )
        if "fake_users" in params:
            Mechanism(kind=kind, n=n, q=0.25, **params)
    else:
        searched = parameter or "report_probability"
        if searched == "report_probability":
            Mechanism(kind=kind, n=n, **{**params, "report_probability": 1.0})
        elif searched == "blanket_messages":
            Mechanism(kind=kind, n=n, **{**params, "blanket_messages": 0})


def _smallest_passing_count(passes: Callable[[int], bool], *, start: int = 0) -> int:
    """The fewest blanket messages ≥ ``start`` that pass (monotone), up to 10^12."""
    try:
        return smallest_passing_integer(passes, start=start, limit=10**12)
    except ValueError:
        raise InvalidParameterError(
            "no number of blanket messages up to 1e12 meets the target"
        ) from None


#: Smallest local ε₀ the calibration considers.
_EPSILON0_MIN = 1e-6
#: Relative precision of a calibrated ε₀, and of the cheap search that proposes it.
_EPSILON0_PRECISION = 1e-5
_EPSILON0_PROPOSAL_PRECISION = 1e-4


def _largest_epsilon0(
    rough: Callable[[float], float],
    public: Callable[[float], float],
    gaussian: Callable[[float], float | None],
    target: float,
) -> float:
    """The largest ε₀ in [1e-6, 20] (to a relative 1e-5) whose public δ is at most ``target``.

    δ grows with ε₀, so the search runs on y = 1/ε₀ (δ falls with it) and ends
    as :func:`_settled_epsilon` does: an evaluated ε₀ whose public δ passes,
    with ε₀·(1 + 1e-5) evaluated and failing (or ε₀ = 20 passing). It starts
    where the Gaussian approximation (``gaussian``: its δ at each ε₀, or None)
    crosses the target, moved by the deciding sums (``rough``) when they
    disagree with it by more than their tolerance.

    Raises:
        ValueError: If even ε₀ = 1e-6 fails.
    """
    if public(_EPSILON0_MIN) > target:
        raise ValueError("no epsilon0 passes")
    if public(_EPSILON0_MAX) <= target:
        return _EPSILON0_MAX
    y_min, y_max = 1.0 / _EPSILON0_MAX, 1.0 / _EPSILON0_MIN

    def on_y(fn: Callable[[float], float]) -> Callable[[float], float]:
        return lambda y: math.inf if y < y_min else fn(1.0 / y)

    # The Gaussian approximation's crossing (bisection on ln ε₀), and its slope there.
    guessed: float | None = None
    lo, hi = _EPSILON0_MIN, _EPSILON0_MAX
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        value = gaussian(mid)
        if value is not None and value <= target:
            lo, guessed = mid, mid
        else:
            hi = mid
        if hi / lo - 1.0 <= 1e-9:
            break
    slope: float | None = None
    if guessed is not None:
        ends = [gaussian(guessed * math.exp(side * 1e-3)) for side in (-1.0, 1.0)]
        if all(v is not None and v > 0.0 for v in ends):
            below, above = ends
            assert below is not None and above is not None
            # d ln δ / d ln y = − d ln δ / d ln ε₀.
            slope = -(math.log(above) - math.log(below)) / 2e-3
            slope = slope if slope < 0.0 else None
    if guessed is None or slope is None:
        found = largest_passing(
            lambda e0: rough(e0) <= target,
            _EPSILON0_MIN,
            _EPSILON0_MAX,
            tolerance=_EPSILON0_PROPOSAL_PRECISION,
        )
        candidate = 1.0 / found
    else:
        candidate = 1.0 / guessed
        agreement = rough(guessed)
        if not (0.0 < agreement < math.inf and abs(math.log(agreement / target)) <= _TRUSTED_GAP):
            candidate, _ = settle_crossing(
                on_y(rough),
                target,
                candidate,
                y_max,
                precision=_EPSILON0_PROPOSAL_PRECISION,
                slope=slope,
            )
    y, _ = settle_crossing(
        on_y(public),
        target,
        min(candidate * math.sqrt(1.0 + _EPSILON0_PRECISION), y_max),
        y_max,
        precision=_EPSILON0_PRECISION,
        slope=slope,
    )
    return 1.0 / y


def calibrate(
    epsilon: float,
    delta: float,
    *,
    n: int,
    mechanism: str = "generic",
    method: str = "best",
    parameter: str | None = None,
    **params: Any,
) -> CalibrationResult:
    """Return the least noisy local parameter that ``method`` certifies for (ε, δ).

    * generic, krr: the largest ε₀ (searched in (0, 20]);
    * flip: the smallest flip probability q (exact FLIP accountant);
    * poisson: the largest report probability λ for the given blanket messages
      (``parameter="report_probability"``, the default), or the fewest blanket
      messages for the given λ (``parameter="blanket_messages"``).

    The search bisects a bound that is monotone in the parameter and returns
    the end of the final bracket where the bound was evaluated and passed.

    Raises:
        InvalidParameterError: If the method is not an upper bound, or no value
            of the parameter meets the target.
    """
    epsilon = check_epsilon(epsilon)
    target = check_delta(delta)
    kind = mechanism
    if kind not in BEST:
        raise InvalidParameterError(f"mechanism must be one of {', '.join(BEST)}, got {kind!r}")
    name = BEST[kind] if method == "best" else method
    if name not in METHODS or kind not in METHODS[name].mechanisms:
        raise InvalidParameterError(f"method {method!r} does not apply to the {kind} mechanism")
    chosen = METHODS[name]
    if chosen.bound is not BoundKind.UPPER:
        raise InvalidParameterError(
            f"method {name!r} gives a {chosen.bound.value} value; calibration needs an upper bound"
        )
    _validate_fixed(kind, n, parameter, params)

    publics: dict[Mechanism, Bound] = {}  # each public δ computed once

    def public_bound(mech: Mechanism) -> Bound:
        found = publics.get(mech)
        if found is None:
            found = publics[mech] = chosen.evaluate(epsilon, mech)
        return found

    def certified_delta(mech: Mechanism, *, public: bool = False) -> float:
        # Only upper bounds inside their range pass (Method.evaluate turns a
        # method's range errors into NaN, which never passes). The search
        # compares in the deciding mode; the answer settles on the public δ.
        value = public_bound(mech) if public else chosen.evaluate(epsilon, mech, target=target)
        return value.value if value.certified and not math.isnan(value.value) else math.inf

    def answer(parameter_name: str, value: float, mech: Mechanism) -> CalibrationResult:
        # The reported δ is the public one (what `delta` says for this mechanism).
        result = _delta_for(chosen, mech, epsilon, public_bound(mech))
        if not (result.certified and result.delta is not None and result.delta <= target):
            raise RuntimeError(  # pragma: no cover - the searches settle on this very value
                f"internal error: calibrated {parameter_name}={value!r} gives {result.delta!r}"
            )
        return CalibrationResult(parameter_name, value, result)

    if kind in ("generic", "krr"):

        def mech_eps0(e0: float) -> Mechanism:
            return Mechanism(kind=kind, n=n, epsilon0=e0, **params)

        def passes_eps0(e0: float) -> bool:
            return certified_delta(mech_eps0(e0)) <= target

        def public_eps0(e0: float) -> bool:
            return certified_delta(mech_eps0(e0), public=True) <= target

        def gaussian_eps0(e0: float) -> float | None:
            assert chosen.guess_pair is not None
            try:
                return gaussian_delta_guess(chosen.guess_pair(mech_eps0(e0)), epsilon)
            except InvalidParameterError:
                return None

        try:
            # ε₀ to a relative 1e-5: finer changes nothing a user could measure,
            # and each step near the threshold needs the sum refined in full.
            if chosen.guess_pair is not None and chosen.curve_fn is None:
                value = _largest_epsilon0(
                    lambda e0: certified_delta(mech_eps0(e0)),
                    lambda e0: certified_delta(mech_eps0(e0), public=True),
                    gaussian_eps0,
                    target,
                )
            else:
                value = largest_passing(passes_eps0, 1e-6, _EPSILON0_MAX, tolerance=1e-5)
                value = settle_largest(public_eps0, value, 1e-6, tolerance=1e-5)
        except InvalidParameterError:
            raise
        except ValueError:
            raise InvalidParameterError(
                f"{name} certifies no epsilon0 > 0 for ({epsilon:g}, {target:g}) at n={n}"
            ) from None
        return answer("epsilon0", value, mech_eps0(value))
    if kind == "flip":
        if "fake_users" not in params:
            raise InvalidParameterError("calibrating FLIP needs fake_users")
        fake = check_int(params["fake_users"], "fake_users", minimum=0)
        extra = {key: v for key, v in params.items() if key != "fake_users"}
        # calibrate_flip_q bisects the public certificate (flip_delta) itself.
        q = calibrate_flip_q(epsilon, target, n, fake)
        return answer("q", q, Mechanism(kind="flip", n=n, q=q, fake_users=fake, **extra))
    parameter = parameter or "report_probability"
    if parameter == "report_probability":

        def mech_lambda(lam: float) -> Mechanism:
            return Mechanism(kind="poisson", n=n, **{**params, "report_probability": lam})

        def passes_lambda(lam: float) -> bool:
            return certified_delta(mech_lambda(lam)) <= target

        def public_lambda(lam: float) -> bool:
            return certified_delta(mech_lambda(lam), public=True) <= target

        try:
            # λ to a relative 1e-4: each step near the threshold needs the full sum.
            lam = largest_passing(passes_lambda, 1e-9, 1.0, tolerance=1e-4)
            lam = settle_largest(public_lambda, lam, 1e-9, tolerance=1e-4)
        except InvalidParameterError:
            raise
        except ValueError:
            raise InvalidParameterError(
                "no report probability meets the target with these blanket messages"
            ) from None
        return answer("report_probability", lam, mech_lambda(lam))
    if parameter == "blanket_messages":

        def mech_count(count: int) -> Mechanism:
            return Mechanism(kind="poisson", n=n, **{**params, "blanket_messages": count})

        def passes_count(count: int, *, public: bool = False) -> bool:
            return certified_delta(mech_count(count), public=public) <= target

        count = _smallest_passing_count(passes_count)
        if not passes_count(count, public=True):
            # The deciding answer's public δ is above the target: the smallest
            # count whose public δ passes lies above it.
            count = _smallest_passing_count(lambda c: passes_count(c, public=True), start=count)
        return answer("blanket_messages", float(count), mech_count(count))
    raise InvalidParameterError(
        f"parameter must be report_probability or blanket_messages, got {parameter!r}"
    )
