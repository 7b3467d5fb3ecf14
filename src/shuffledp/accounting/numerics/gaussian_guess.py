"""Where a two-count pair's ε(δ) lies, guessed from a Gaussian approximation (no guarantee).

A search for ε(δ) of a costly certificate starts better the nearer its first
point is to the answer. For a two-count pair
(:class:`~shuffledp.accounting.numerics.two_counts.TwoCountPair`) with many
blanket messages, the privacy loss is nearly Gaussian: given the line
s = x + y, the loss at a point is about 4(w₁ − w₂)(x − s/2)/s, and x − s/2 has
standard deviation √s/2 with s ≈ m·r, so the pair behaves like the Gaussian
mechanism of Dong, Roth and Su ("Gaussian differential privacy", JRSS-B 2022)
with μ = 2(w₁ − w₂)/√(m·r), whose hockey-stick divergence is

    δ(ε) = Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2).

Solving that for the target gives ε to within 1e-6 (relative) at n ≥ 10⁶ and
small ε₀, 1e-4 to 1e-3 at n ~ 10⁴ … 10⁵, and worse when m·r is small or ε
approaches ε₀; in the far tail (large ε₀, small δ) 1e-5 … 6e-5 even at n ~ 10⁷.
:func:`polished_epsilon_guess` then takes one Newton step on the pair's own
line sum sampled at a few lines, which lands within about 1e-7 once
m·r ≥ 10⁵. Both are only ever a starting point: nothing reported depends on
them but the time a search takes.

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import math

from shuffledp.accounting.numerics.two_counts import TwoCountPair, sampled_line_sum

__all__ = [
    "SHARP_SPREAD",
    "gaussian_delta_guess",
    "gaussian_epsilon_guess",
    "gaussian_guess_is_sharp",
    "polished_epsilon_guess",
]

#: Fewest expected blanket messages on the two outputs (m·r) for the approximation.
_SMALLEST_BLANKET = 50.0
#: From this many (m·r), the guessed ε was within 2e-5 of the answers of vr2024,
#: fmt2021-numeric and krr-two-count (the pairs themselves) in each of 60 random
#: settings (n 1e5 to 3e7, ε₀ 0.05 to 5, δ 1e-12 to 1e-3), 4.3e-5 at most in 60
#: others further in the tail (n 1e6 to 1e8, δ down to 1e-12): nearer than their
#: sums to 0.2% can place it; polished (:func:`polished_epsilon_guess`), within 5e-7.
SHARP_SPREAD = 1e5
_SQRT2 = math.sqrt(2.0)


def _upper_normal_tail(x: float) -> float:
    """P[N(0, 1) > x]."""
    return 0.5 * math.erfc(x / _SQRT2)


def _gaussian_delta(epsilon: float, mu: float) -> float:
    """δ(ε) of the μ-GDP Gaussian mechanism (may round to ≤ 0 far in the tail)."""
    return _upper_normal_tail(epsilon / mu - mu / 2.0) - math.exp(
        min(epsilon, 700.0)
    ) * _upper_normal_tail(epsilon / mu + mu / 2.0)


def _mu(pair: TwoCountPair) -> float | None:
    """μ of the Gaussian approximation, or None where it does not apply."""
    spread = pair.blanket * pair.rate
    if spread < _SMALLEST_BLANKET or pair.w1 <= pair.w2:
        return None
    return 2.0 * (pair.w1 - pair.w2) / math.sqrt(spread)


def gaussian_guess_is_sharp(pair: TwoCountPair) -> bool:
    """Whether ``pair`` has m·r ≥ :data:`SHARP_SPREAD` (its guess then lands within 2e-5)."""
    return pair.blanket * pair.rate >= SHARP_SPREAD


def gaussian_delta_guess(pair: TwoCountPair, epsilon: float) -> float | None:
    """δ(ε) of the Gaussian approximation of ``pair`` (``None`` where it does not apply)."""
    mu = _mu(pair)
    return None if mu is None else _gaussian_delta(epsilon, mu)


def gaussian_epsilon_guess(pair: TwoCountPair, target: float) -> tuple[float, float] | None:
    """(ε, d ln δ/d ln ε at ε) where the Gaussian approximation of ``pair`` meets ``target``.

    ``None`` when the approximation does not apply (m·r below 50, w₁ = w₂) or
    its δ does not cross the target inside (1e-12, 50).
    """
    mu = _mu(pair)
    if mu is None or not 0.0 < target < 1.0:
        return None
    lo, hi = 1e-12, 50.0
    if not _gaussian_delta(lo, mu) > target or _gaussian_delta(hi, mu) > target:
        return None
    for _ in range(200):  # bisection on ln ε, to a relative 1e-12
        if hi / lo - 1.0 <= 1e-12:
            break
        mid = math.sqrt(lo * hi)
        if _gaussian_delta(mid, mu) > target:
            lo = mid
        else:
            hi = mid
    value = _gaussian_delta(hi, mu)
    if not value > 0.0:
        return None
    # dδ/dε = −e^ε·P_Q[loss > ε] for a hockey-stick divergence.
    derivative = -math.exp(min(hi, 700.0)) * _upper_normal_tail(hi / mu + mu / 2.0)
    slope = hi * derivative / value
    return hi, slope


#: Farthest (relative) a polish may move a guess: a larger step means the sample is off.
_LONGEST_POLISH = 1e-3


def polished_epsilon_guess(
    pair: TwoCountPair, target: float, epsilon: float, slope: float
) -> float:
    """The guess ``epsilon`` moved by one Newton step on the pair's sampled line sum.

    In the far tail (large ε₀, small δ) the Gaussian approximation's crossing
    can be 1e-5 … 6e-5 (relative) below the pair's; one step
    ε·exp(−ln(δ̃(ε)/target)/slope) on
    :func:`~shuffledp.accounting.numerics.two_counts.sampled_line_sum` (the
    exact kernel on about 18 pairs of lines), with the approximation's own
    slope, lands near the crossing of the public δ once m·r ≥ 10⁵: on 60
    random settings of vr2024 and fmt2021-numeric (n 1e6 to 1e8, ε₀ 0.1 to 5,
    δ 1e-12 to 1e-4) within 2.6e-8 (median), 9e-8 (90%) and 4.9e-7 (max) of
    it, against 2.3e-7, 5.9e-6 and 4.3e-5 for the Gaussian guess alone; a
    search's first evaluation, half a precision (1e-6) beyond, then ended
    every one of them with its partner. No guarantee either: the guess is
    returned unchanged when the sample gives nothing or asks for a step
    above 1e-3.

    Args:
        pair: The pair.
        target: The δ to meet.
        epsilon: The Gaussian guess (> 0).
        slope: d ln δ/d ln ε there (< 0).
    """
    if not (slope < 0.0 and epsilon > 0.0):
        return epsilon
    sampled = sampled_line_sum(pair, epsilon)
    if sampled is None or not sampled > 0.0:
        return epsilon
    step = -math.log(sampled / target) / slope
    if abs(step) > _LONGEST_POLISH:
        return epsilon
    return epsilon * math.exp(step)
