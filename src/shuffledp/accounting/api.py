"""One entry point per question: δ at ε, ε at δ, and the local parameter for a target.

>>> from shuffledp.accounting import delta, amplified_epsilon, calibrate
>>> delta(0.5, n=10_000, epsilon0=2.0).delta                      # best generic bound
>>> amplified_epsilon(1e-6, n=10_000, epsilon0=2.0, mechanism="krr", k=10)
>>> calibrate(1.0, 1e-6, n=10_000, mechanism="krr", k=10).value  # the largest ε₀

Every answer is an :class:`AccountingResult` that records the method, the
inputs and what kind of number it is (upper, exact, lower or reproduction),
and whether it is *certified*: a guarantee a user may rely on, i.e. an upper
bound (or exact value) inside its theorem's proven range. Lower bounds and
reproductions are never certified, and only certified numbers calibrate.

Group: the questions users ask (``api``, ``methods``, ``calibration``,
``segmented_parameters``, ``per_user_epsilons``); may import every other group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from scipy.optimize import brentq

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.accounting.calibration import (
    calibrate_flip_q,
    largest_passing,
    settle_epsilon,
    settle_largest,
)
from shuffledp.accounting.methods import BEST, METHODS, Mechanism, Method, methods_for
from shuffledp.accounting.numerics.search import smallest_passing_integer
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


def _delta_for(method: Method, mech: Mechanism, epsilon: float) -> AccountingResult:
    # The public δ(ε): sums refined in full (no deciding target).
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
) -> float:
    """Return the ε where a non-increasing δ(ε) crosses ``target``, on the safe side.

    The caller has checked ``raw_delta(eps_max) <= target``. Brackets the
    crossing inside (0, eps_max] by growing or halving from ``start`` (clamped
    to eps_max), refines with Brent's method on ln δ (δ = 0 counts as far below
    any target, so targets down to the smallest double work), then bisects to
    a relative ``precision`` and returns a point whose δ was evaluated: at most the
    target (``round_down=False``, for upper bounds on δ; never above eps_max)
    or above it (``round_down=True``, for lower bounds).
    """
    memo: dict[float, float] = {}

    def delta_at(eps: float) -> float:
        if eps not in memo:
            memo[eps] = raw_delta(eps)
        return memo[eps]

    def passes(eps: float) -> bool:
        return delta_at(eps) <= target

    hi = min(max(start, 1e-9), eps_max)
    if passes(hi):
        lo = hi / 2.0
        while passes(lo):
            hi, lo = lo, lo / 2.0
            if lo < 1e-12:
                return lo if round_down else hi
    else:
        lo, growth = hi, 1.02
        while True:
            hi = min(eps_max, growth * lo)
            if passes(hi):
                break
            if hi >= eps_max:
                raise InvalidParameterError(
                    f"no epsilon up to {eps_max:g} reaches delta={target:g}"
                )
            lo, growth = hi, min(2.0, growth * growth)
    # Invariant from here: δ(lo) > target >= δ(hi), lo < hi <= eps_max.
    log_target = math.log(target)

    def gap(eps: float) -> float:
        value = delta_at(eps)
        return (math.log(value) if value > 0.0 else -800.0) - log_target

    try:
        root = brentq(gap, lo, hi, xtol=1e-14, rtol=precision / 5.0, maxiter=100)
    except (ValueError, RuntimeError):  # pragma: no cover - the bisection below still works
        root = math.sqrt(lo * hi)
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


def _public_delta(method: Method, mech: Mechanism) -> Callable[[float], float]:
    """The δ(ε) that :func:`delta` reports for this method (no target: sums refined in full)."""

    def value(eps: float) -> float:
        return method.evaluate(eps, mech).value

    return value


#: Relative precision of ε(δ): the reported ε is at most this far above the crossing.
_EPSILON_PRECISION = 1e-6


def _epsilon_for(method: Method, mech: Mechanism, target: float) -> AccountingResult:
    """ε(δ) for one method, settled on the public δ(ε) (see below).

    Upper bounds and reproductions: the smallest ε found (to a relative 1e-6)
    at which the method's own δ(ε), as :func:`delta` reports it, is at most the
    target; the row's δ is that value. A cheaper mode (deciding sums, a curve
    built near the answer) only proposes the candidate: the answer is settled
    on the public δ (:func:`shuffledp.accounting.calibration.settle_epsilon`).
    Lower bounds: the largest ε found at which the lower bound still exceeds
    the target (so the true ε(δ) is above it); the row's δ is the lower bound there.
    """
    eps_max = 50.0
    if mech.epsilon0 is not None and method.bound is not BoundKind.REPRODUCTION:
        # Method.evaluate gives δ = 0 at ε ≥ ε₀ for upper and lower bounds alike:
        # an upper bound's ε(δ) never exceeds ε₀, and ε₀ is the truth when nothing
        # smaller reaches δ.
        eps_max = min(eps_max, mech.epsilon0)
    probe = method.evaluate(eps_max, mech)
    if not math.isnan(probe.value) and method.bound is BoundKind.LOWER:
        # At ε ≥ ε₀ every lower bound is 0 whatever its range: its range shows below ε₀.
        # (A value above the target there is no failure: it says ε(δ) > ε₀/2.)
        inside = method.evaluate(eps_max / 2.0, mech)
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
    public = _public_delta(method, mech)
    start: float | None = None
    if method.hint is not None:
        # A cheap bound near this one brackets the crossing tightly; any number
        # it produced will do as a starting point.
        hinted = _epsilon_for(METHODS[method.hint], mech, target)
        start = hinted.epsilon
    deciding = lambda e: method.evaluate(e, mech, target=target).value  # noqa: E731
    if start is None:
        start = 1.0
        if method.curve_fn is not None and method.bound is BoundKind.UPPER:
            # No hint: a coarse search (refinement stops once each comparison
            # is decided) tells where to build the curve.
            start = _solve_epsilon(
                deciding, target, eps_max, round_down=False, start=start, precision=0.05
            )
    candidate: float | None = None
    slope: float | None = None
    if method.curve_fn is not None and method.bound is BoundKind.UPPER:
        # Build the sum's blocks once near the answer and read ε off that curve
        # (certified at every ε); rebuild where it crossed until the two agree.
        e0 = mech.epsilon0
        for _ in range(_CURVE_REBUILDS):
            curve = method.curve_fn(start, mech)

            def on_curve(e: float, curve: Callable[[float], float] = curve) -> float:
                return 0.0 if e0 is not None and e >= e0 else curve(e)

            if on_curve(eps_max) > target:
                break
            rough = _solve_epsilon(
                on_curve, target, eps_max, round_down=False, start=start, precision=1e-3
            )
            if abs(rough / start - 1.0) <= _CURVE_AGREEMENT:
                candidate = _solve_epsilon(
                    on_curve,
                    target,
                    eps_max,
                    round_down=False,
                    start=rough,
                    precision=_EPSILON_PRECISION,
                )
                slope = _log_slope(on_curve, candidate)
                break
            start = rough
    if method.bound is BoundKind.LOWER:
        eps = _solve_epsilon(
            public, target, eps_max, round_down=True, start=start, precision=_EPSILON_PRECISION
        )
        value = method.evaluate(eps, mech)
        if math.isnan(value.value):
            return _result(method, mech, None, None, False, value.reason)
        if not value.value > target:
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
    if candidate is None:
        # Without a deciding mode this is the public δ already (Method.evaluate).
        candidate = _solve_epsilon(
            deciding,
            target,
            eps_max,
            round_down=False,
            start=start,
            precision=_EPSILON_PRECISION,
        )
    try:
        eps, _ = settle_epsilon(
            public, target, candidate, eps_max, precision=_EPSILON_PRECISION, slope=slope
        )
    except InvalidParameterError as exc:  # pragma: no cover - δ(eps_max) passed above
        return _result(method, mech, None, None, False, str(exc))
    value = method.evaluate(eps, mech)
    if math.isnan(value.value):  # pragma: no cover - settle_epsilon returns a passing ε
        return _result(method, mech, None, None, False, value.reason)
    return _result(method, mech, eps, value.value, value.certified, value.reason)


def _log_slope(curve: Callable[[float], float], eps: float) -> float | None:
    """D ln δ / d ln ε of a cheap curve at ε (a central difference), or None."""
    up, down = curve(eps * 1.001), curve(eps / 1.001)
    if up <= 0.0 or down <= 0.0:
        return None
    return (math.log(up) - math.log(down)) / (2.0 * math.log(1.001))


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

    def certified_delta(mech: Mechanism, *, public: bool = False) -> float:
        # Only upper bounds inside their range pass (Method.evaluate turns a
        # method's range errors into NaN, which never passes). The search
        # compares in the deciding mode; the answer settles on the public δ.
        value = chosen.evaluate(epsilon, mech, target=None if public else target)
        return value.value if value.certified and not math.isnan(value.value) else math.inf

    def answer(parameter_name: str, value: float, mech: Mechanism) -> CalibrationResult:
        # The reported δ is the public one (what `delta` says for this mechanism).
        result = _delta_for(chosen, mech, epsilon)
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

        try:
            # ε₀ to a relative 1e-5: finer changes nothing a user could measure,
            # and each step near the threshold needs the sum refined in full.
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
            raise InvalidParameterError("calibrating FLIP needs fake_users (k)")
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
