"""One line of a two-count pair: its hockey-stick divergence and the certified rounding.

A two-count pair (:mod:`shuffledp.accounting.numerics.two_counts`) puts, on
each line x + y = s, the laws α·b_{s−1}(x−1) + γ·b_{s−1}(x) and
γ·b_{s−1}(x−1) + α·b_{s−1}(x), with b the pmf of Bin(s − 1, ½). Their ratio
increases with x, so P − e^ε Q is positive exactly on the line's top points
and each line's divergence is two symmetric binomial tails.
:func:`line_divergence_each` evaluates many lines at once, with the mass and
the evaluation charge :func:`certify` turns into an upper (or lower) bound.
:mod:`~shuffledp.accounting.numerics.two_counts` sums them over a pair's
lines (by certified blocks) and re-exports what is here.

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import check_rounding
from shuffledp.accounting.numerics.symmetric_memo import (
    symmetric_line_values,
    symmetric_points,
)

__all__ = ["Rounding", "certify", "line_divergence", "line_divergence_each"]

Rounding = Literal["up", "down"]

#: Bound on the relative error of scipy's regularized incomplete beta for the
#: symmetric binomial tails P[Bin(N, ½) ≥ j] used here, for N up to 1e9; above,
#: it grows with N (:func:`_tail_relative_error`). The worst errors measured
#: against exact integer sums: 3e-11 at N = 1e8, 9.4e-11 at 1e9, 3.7e-10 at
#: 1e10, 7.1e-10 at 1e11, 5.1e-9 at 1e12 and 2.0e-8 at 1e13.
_TAIL_RELATIVE_ERROR = 1e-9
_UNIT_ROUNDOFF = 2.0**-53
#: Smallest positive subnormal double: the absolute rounding error of a product or
#: sum that lands below the normal range is at most half of it.
_SUBNORMAL = 2.0**-1074
_SMALLEST_NORMAL = 2.2250738585072014e-308


def _tail_relative_error(trials: NDArray[np.float64]) -> NDArray[np.float64]:
    """τ(N): the tails' relative error bound, 1e-9·max(1, N/1e9) (measured: see above).

    Linear growth in N keeps at least a factor 10 over every error measured
    (the errors grow about as N^0.6).
    """
    return _TAIL_RELATIVE_ERROR * np.maximum(1.0, trials / 1e9)


def _exp_relative_error(epsilon: float) -> float:
    """Relative error bound of :func:`_exp_times`'s e^ε·x.

    Up to ε = 700 it is e^ε (one rounding) times x (one more); beyond, e^{ε + ln x},
    whose argument carries the roundings of ln x and of the sum, each at most a
    unit of |ε| + 745, so the result is off by up to twice that many units.
    """
    if epsilon <= 700.0:
        return 2.0 * _UNIT_ROUNDOFF
    return (2.0 * (epsilon + 745.0) + 2.0) * _UNIT_ROUNDOFF


#: Above this ε only the top point x = s of a line can have P > e^ε Q (for s < 1e12).
_TOP_ONLY = 30.0
#: Margin (in ε) of the widened region whose mass the allowance charges, beyond 3ρ:
#: covers the log-domain test (|ln α| + |ln γ| ≤ 1500 units) and the threshold formula.
_LOG_MARGIN = 1e-12


def _top_counts(
    a: NDArray[np.float64], g: NDArray[np.float64], s: NDArray[np.float64], epsilon: float
) -> NDArray[np.float64]:
    """Number of top points of each (live) line with P > e^ε Q.

    A point x has P > e^ε Q iff s − x < v = s(α − e^ε γ)/((1 + e^ε)(α − γ)),
    computed as s(α e^{−ε} − γ)/((1 + e^{−ε})(α − γ)) so nothing overflows.
    Above ε = 30 only x = s can qualify, since P/Q ≤ x/(s − x) + γ/α < e^ε
    elsewhere.
    """
    if epsilon > _TOP_ONLY:
        return np.ones_like(s)
    shrink = math.exp(-epsilon)
    v = s * (a * shrink - g) / ((1.0 + shrink) * (a - g))
    return np.clip(np.ceil(v), 1.0, s)


def _exp_times(epsilon: float, x: NDArray[np.float64]) -> NDArray[np.float64]:
    """e^ε·x elementwise without overflow in e^ε (0 where x = 0)."""
    if epsilon <= 700.0:
        return math.exp(epsilon) * x
    with np.errstate(divide="ignore", over="ignore"):
        out: NDArray[np.float64] = np.where(x > 0, np.exp(epsilon + np.log(x)), 0.0)
    return out


#: Relative error bound of a symmetric binomial pmf point from Loader's formula (p = 1/2
#: exactly, so the means carry no error: :mod:`shuffledp.accounting.numerics.binomial`).
_POINT_RELATIVE_ERROR = 2e-13
#: Below this a pmf point or tail that underflowed to 0 may still be positive.
_UNDERFLOW = 1e-300


def _largest_point(
    trials: NDArray[np.float64],
    low: NDArray[np.float64],
    high: NDArray[np.float64],
    *,
    known: NDArray[np.float64],
) -> NDArray[np.float64]:
    """The largest P[Bin(trials, ½) = x] over integers x in [low, high] (low ≤ high), per entry.

    The pmf is unimodal with its largest value at ⌊trials/2⌋ (and ⌈trials/2⌉):
    the largest over an interval is at that mode when the interval holds it,
    else at the end nearer to it. ``known`` holds P[Bin(trials, ½) = low], used
    where that x is ``low``.
    """
    mode = np.floor(trials / 2.0)
    nearest = np.clip(mode, low, high)
    values = known.copy()
    inside = nearest != low
    if np.any(inside):
        values[inside] = symmetric_points(nearest[inside], trials[inside])
    return values


def _candidates(
    alpha: NDArray[np.float64], gamma: NDArray[np.float64], lines: NDArray[np.float64]
) -> tuple[
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.intp],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
    NDArray[np.float64],
]:
    """The lines (flattened) and those that may be live: where, their α, γ, s and ln(α/γ).

    A line is live (its top point has P > e^ε Q) iff α > e^ε γ: tested on the
    logarithms, ``inf`` where γ = 0.
    """
    alpha_b, gamma_b, s_b = np.broadcast_arrays(
        np.asarray(alpha, dtype=np.float64),
        np.asarray(gamma, dtype=np.float64),
        np.asarray(lines, dtype=np.float64),
    )
    alpha, gamma, s = alpha_b.ravel(), gamma_b.ravel(), s_b.ravel()
    with np.errstate(divide="ignore", invalid="ignore"):
        candidates = (s >= 1) & (alpha > gamma)
        index = np.flatnonzero(candidates)
        a, g, sl = alpha[candidates], gamma[candidates], s[candidates]
        log_ratio = np.where(g > 0, np.log(a) - np.log(g), np.inf)
    return alpha, gamma, s, index, a, g, sl, log_ratio


def _top_values(
    a: NDArray[np.float64],
    g: NDArray[np.float64],
    scaled_g: NDArray[np.float64],
    expm1_eps: float,
    tail_2: NDArray[np.float64],
    point: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """(α − e^ε γ)·b, (α + γ)(e^ε − 1)·T₂ and the line's divergence, their difference (≥ 0)."""
    first = (a - scaled_g) * point
    # (e^ε − 1)·T₂; for ε > 30 only the top point counts (T₂ = 0), so no inf·0 arises.
    with np.errstate(over="ignore", invalid="ignore"):
        second = np.where(tail_2 > 0, (a + g) * expm1_eps * tail_2, 0.0)
    return first, second, np.clip(first - second, 0.0, None)


def line_divergence_each(
    alpha: NDArray[np.float64],
    gamma: NDArray[np.float64],
    lines: NDArray[np.float64],
    epsilon: float,
    *,
    relative_error: float = 0.0,
    massless: NDArray[np.bool_] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Sum H_ε over lines x + y = s where P = α·b_{s−1}(x−1) + γ·b_{s−1}(x), Q swaps α and γ.

    On each line the ratio b_{s−1}(x−1)/b_{s−1}(x) = x/(s − x) increases with x,
    so P − e^ε Q is positive exactly for the top ``c`` points x > s − c, and with
    T₁ = P[Bin(s−1, ½) ≥ s − c], T₂ = P[Bin(s−1, ½) ≥ s − c + 1] and
    b = b_{s−1}(s − c) = T₁ − T₂ the line's contribution is

        (α − e^ε γ)·T₁ + (γ − e^ε α)·T₂ = (α − e^ε γ)·b − (α + γ)(e^ε − 1)·T₂.

    The right-hand form is what is evaluated: the left one subtracts two
    numbers of the order of P's mass on the region, which at small ε is orders
    of magnitude above δ, so the tails' relative error would be multiplied by
    that mass; on the right each term is of the order of δ.

    The same form bounds what the weights' errors can do. If α and γ are off
    by relative errors e_α, e_γ with |e| ≤ ρ, the divergence of the top c
    points moves by e_α·α(T₁ − e^ε T₂) + e_γ·γ(T₂ − e^ε T₁), at most
    ρ·E(c) with E(c) = (α + e^ε γ)·b_c + (α + γ)(e^ε − 1)·T₂(c). The true
    count c* lies between the model's counts at ε + κ and at ε − κ
    (κ = 3ρ + 1e-12; see :func:`certify`), and so does the computed one;
    T₂(c) grows with c and b_c is largest at the mode of Bin(s − 1, ½) or the
    nearer end, so one E over that range bounds both.

    Args:
        alpha: α per line (any shape, broadcast with ``gamma`` and ``lines``).
        gamma: γ per line (γ ≤ α).
        lines: s per line.
        epsilon: ε ≥ 0 (any size).
        relative_error: ρ, a bound on the relative error of every α and γ.
        massless: Lines (flattened) whose mass nothing will use: theirs may come
            out NaN, which saves a tail for each live one (the lower sides of
            blocks that only steer the refinement of an upper bound). Their
            divergences and charges are the same doubles either way.

    Returns:
        Per line (flattened): the divergence; P's mass on the widened region
        where the computed P > e^{ε − κ} Q; and a bound on how far the computed
        divergence can be from the true one through the weights' errors (ρ·E
        above) and the evaluation (tails, pmf points, arithmetic).
        :func:`certify` charges the last two.
    """
    alpha, gamma, s, index, a, g, sl, log_ratio = _candidates(alpha, gamma, lines)
    values = np.zeros(len(alpha))
    masses = np.zeros(len(alpha))
    charges = np.zeros(len(alpha))
    kappa = 3.0 * relative_error + _LOG_MARGIN
    wide_eps = max(0.0, epsilon - kappa)
    rho = relative_error * (1.0 + 2.0 * relative_error)  # of the true weights, from the model's
    wide = log_ratio > wide_eps
    # At ε within the margin of 0 a line whose computed α does not exceed γ may
    # still be (barely) live; its true contribution is at most the true α − γ
    # ≤ 2.1ρ(α + γ), charged whole.
    if wide_eps == 0.0:
        near = (s >= 1) & (alpha <= gamma) & (alpha >= gamma * (1.0 - 4.0 * relative_error - 1e-12))
        charges[near] = 2.1 * relative_error * (alpha[near] + gamma[near])
    if not np.any(wide):
        return values, masses, charges
    index = index[wide]
    a, g, sl, log_ratio = a[wide], g[wide], sl[wide], log_ratio[wide]
    count_w = _top_counts(a, g, sl, wide_eps)
    # Top `count` points x = s − count + 1, …, s:  Σ b_{s−1}(x − 1) = P[Bin(s−1, ½) ≥ s − count].
    # With j = s − count: T₁ = P[Bin(s−1, ½) ≥ j], T₂ = P[… ≥ j + 1] and b_{s−1}(j), one lookup.
    low_w = sl - count_w
    first = None if massless is None else ~np.asarray(massless, dtype=bool).ravel()[index]
    tail_1w, tail_2w, point_w = symmetric_line_values(sl - 1.0, low_w, first)
    masses[index] = a * tail_1w + g * tail_2w
    # The model's count at ε + κ (0 where even the top point is out): the true count is above.
    narrow = log_ratio > epsilon + kappa
    count_n = np.zeros_like(count_w)
    if np.any(narrow):
        count_n[narrow] = _top_counts(a[narrow], g[narrow], sl[narrow], epsilon + kappa)
    # ρ·E over counts from count_n to count_w (E's b at the largest point of that range;
    # a range that starts at 0 points starts at the top point).
    expm1_eps = math.expm1(min(epsilon, 700.0))
    scaled_all = _exp_times(epsilon, g)
    biggest = _largest_point(sl - 1.0, low_w, sl - np.maximum(count_n, 1.0), known=point_w)
    with np.errstate(over="ignore", invalid="ignore"):
        drift = np.where(tail_2w > 0, (a + g) * expm1_eps * tail_2w, 0.0)
    weights_charge = rho * ((a + scaled_all) * biggest + drift)
    charges[index] = weights_charge
    on = log_ratio > epsilon
    if not np.any(on):
        return values, masses, charges
    index_on = index[on]
    a, g, sl, count_w, tail_2 = a[on], g[on], sl[on], count_w[on], tail_2w[on]
    scaled_g = scaled_all[on]
    count = _top_counts(a, g, sl, epsilon)
    # b at the threshold: mostly the point at the widened region's threshold (kept above).
    point = point_w[on]
    other = count != count_w
    if np.any(other):
        _, tail_2[other], point[other] = symmetric_line_values(
            sl[other] - 1.0, sl[other] - count[other], np.zeros(int(np.sum(other)), dtype=bool)
        )
    first, second, values[index_on] = _top_values(a, g, scaled_g, expm1_eps, tail_2, point)
    # Evaluation error: the tail (τ(s − 1)), the pmf point, the products (a few units
    # each), the subtraction α − e^ε γ (three units of α + e^ε γ, plus e^ε's own
    # error), a pmf point or tail that underflowed to 0 (at most 1e-300 each), and
    # weights that fell below the normal range (α, γ off by a few subnormal units
    # absolutely: their effect is at most that times (1 + e^ε) per point summed).
    exp_error = _exp_relative_error(epsilon)
    # (Below the normal range every operation above may also be off by half a subnormal
    # unit whatever its relative error: 16 units cover the products, the difference,
    # the clip and the line's share of the sum.)
    charges[index_on] += 16.0 * _SUBNORMAL + (
        (_tail_relative_error(sl - 1.0) + 8.0 * _UNIT_ROUNDOFF) * second
        + (_POINT_RELATIVE_ERROR + 8.0 * _UNIT_ROUNDOFF) * np.abs(first)
        + (3.0 * _UNIT_ROUNDOFF + exp_error) * (a + scaled_g) * point
        + _UNDERFLOW * (a + g) * np.where(point == 0.0, 1.0, 0.0)
        + _UNDERFLOW * (a + g) * math.expm1(min(epsilon, 30.0)) * np.where(tail_2 == 0, 1.0, 0.0)
    )
    # α enters the divergence with a coefficient of at most T₁ = b + T₂ in size, γ with
    # at most e^ε·T₁. (A weight that is exactly 0 is either 0 by construction or rounded
    # down from below 2^-1075, which only raises the divergence: the lower sides'
    # callers drop such lines.)
    tiny_a = (a > 0.0) & (a < _SMALLEST_NORMAL)
    if np.any(tiny_a):
        charges[index_on[tiny_a]] += 4.0 * _SUBNORMAL * (point[tiny_a] + tail_2[tiny_a])
    tiny_g = (g > 0.0) & (g < _SMALLEST_NORMAL)
    if np.any(tiny_g):
        with np.errstate(over="ignore"):
            charges[index_on[tiny_g]] += (
                4.0 * _SUBNORMAL * _exp_times(epsilon, point[tiny_g] + tail_2[tiny_g])
            )
    return values, masses, charges


def line_divergence(
    alpha: NDArray[np.float64],
    gamma: NDArray[np.float64],
    lines: NDArray[np.float64],
    epsilon: float,
    *,
    relative_error: float = 0.0,
) -> tuple[float, float, float]:
    """Sum H_ε over lines (see :func:`line_divergence_each`); return (divergence, mass, charge)."""
    values, masses, charges = line_divergence_each(
        alpha, gamma, lines, epsilon, relative_error=relative_error
    )
    return float(np.sum(values)), float(np.sum(masses)), float(np.sum(charges))


def certify(
    total: float,
    mass: float,
    *,
    charge: float,
    terms: int,
    dropped: float,
    epsilon: float,
    rounding: Rounding,
) -> float:
    """Round a computed divergence to the safe side.

    Why the allowance suffices. Let ρ bound the relative error of every
    computed line weight α̂, γ̂ against the true one (the blanket pmf's error,
    the victim's weights' own rounding and a few units for the products: the
    ``relative_error`` the lines were evaluated with); let e^ε be computed
    within 2u. Write f = P − e^ε Q.

    1. The threshold of each line is computed from α̂, γ̂ by
       :func:`_top_counts`. Its rounding (including the cancellation in
       α − e^ε γ, which the threshold's sensitivity damps by the same factor)
       amounts to a relative change of e^ε by at most 20u, so the computed
       region Ŝ is the exact positive region of the model laws P̂, Q̂ (built
       from α̂, γ̂) at some ε̃ with |e^ε̃/e^ε − 1| ≤ 20u, and Ŝ maximizes
       P̂ − e^ε̃ Q̂ over all sets.
    2. The true region S* lies between the model regions at ε + κ and at
       ε − κ (κ = 3ρ + 1e-12, far above the 20u of the thresholds' rounding):
       a point where P̂ > e^{ε+κ} Q̂ has P > e^ε Q, and a point where
       P > e^ε Q has P̂ > e^{ε−κ} Q̂. On each line, on any top set between those
       two, the weights' errors move f by at most the line's ρ·E
       (:func:`line_divergence_each`), which is part of ``charge``.
    3. Upper bound. δ = f(S*) ≤ f̂(S*) + ρE ≤ (P̂ − e^ε̃ Q̂)(Ŝ) + 20u·e^ε Q̂(S*) + ρE
       ≤ f̂(Ŝ) + 41u·P̂(Ŵ) + ρE, with Ŵ the model region at ε − κ (whose P̂-mass
       is ``mass``); the computed sum differs from f̂(Ŝ) by at most the
       evaluation part of ``charge`` plus the rounding of summing ``terms``
       non-negative numbers ((terms + 2)u of the sum). Blanket mass outside
       the window adds at most ``dropped``.
    4. Lower bound. δ ≥ f(Ŝ) ≥ f̂(Ŝ) − ρE, the same evaluation errors, and Q's
       mass outside the window costs e^ε·dropped.

    The allowance is four times the mass term (41u·P̂(Ŵ) ≤ 2.1·20u·P̂(Ŵ)) and
    twice the charge.
    """
    rounding = check_rounding(rounding)
    allowance = (
        8.0 * 20.0 * _UNIT_ROUNDOFF * mass
        + 1e-15 * mass
        + 2.0 * charge
        + (terms + 2) * _UNIT_ROUNDOFF * total
    )
    if rounding == "up":
        return min(1.0, total + dropped + allowance)
    charged = _exp_times(epsilon, np.array([dropped]))[0] if dropped > 0 else 0.0
    charged *= 1.0 + _exp_relative_error(epsilon)
    return max(0.0, total - float(charged) - allowance)
