"""Published amplification bounds for any ε₀-LDP randomizer shuffled among n users.

Each function returns a :class:`Bound`: a number and whether the source
theorem certifies it at these parameters. A bound outside its proven range is
reported as not certified, with the reason, and is never used to calibrate.

* :func:`erlingsson2019_delta` / :func:`erlingsson2019_epsilon`: Erlingsson,
  Feldman, Mironov, Raghunathan, Talwar & Thakurta, "Amplification by
  shuffling", SODA 2019: ε = 12·ε₀·sqrt(ln(1/δ)/n) for ε₀ < 1/2, n ≥ 1000 and
  δ < 1/100.
* :func:`bbgn2019_hoeffding_delta`, :func:`bbgn2019_bennett_delta`: Balle,
  Bell, Gascón & Nissim, "The privacy blanket of the shuffle model", CRYPTO
  2019. The blanket decomposition with the generic blanket probability
  γ = e^{−ε₀}, for which δ = (1/(γn))·E_{M∼Bin(n,γ)}[E(Σ_{i≤M} L_i)₊] exactly,
  with the privacy amplification variable L bounded with Hoeffding's (resp.
  Bennett's) inequality. The constants are the generic ones of the authors'
  reference implementation: range of L at most (e^ε + 1)(e^{ε₀} − e^{−ε₀}),
  maximum at most e^{ε₀}(1 − e^{ε − 2ε₀}), second moment at most
  e^{ε₀}(e^{2ε} + 1) − 2γe^{ε − 2ε₀} (each follows from
  R(x)(y)/ω(y) ∈ [e^{−ε₀}, e^{ε₀}]). The Bennett version is integrated here
  without the reference implementation's extra 1/(m·a) factor, which makes it
  unsound
  (:func:`shuffledp.accounting.reproductions.bbgn2019_bennett.bbgn2019_bennett_published_delta`
  keeps it for reproduction).
* :func:`fmt2021_closed_epsilon` / :func:`fmt2021_closed_delta`: Feldman,
  McMillan & Talwar, "Hiding among the clones", FOCS 2021, the closed form
  (as restated in Theorem 6 of "Per-user histograms in the shuffle model"):
  for ε₀ ≤ ln(n/(16 ln(2/δ))),
  ε = ln(1 + (e^{ε₀} − 1)/(e^{ε₀} + 1)·(8·sqrt(e^{ε₀} ln(4/δ)/n) + 8e^{ε₀}/n)).
  (That restatement prints the last term as 8e^ε/q; FMT's has n.)

The numerical bounds (FMT's clones, the variation-ratio reduction) are exact
divergences of two-count pairs: see :mod:`shuffledp.accounting.published.variation_ratio`.

Group: published bounds (``shuffledp.accounting.published``); may import the
numerical core and other published bounds, nothing else of the accountant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shuffledp._validation import check_delta, check_epsilon, check_int

__all__ = [
    "Bound",
    "bbgn2019_bennett_delta",
    "bbgn2019_hoeffding_delta",
    "erlingsson2019_delta",
    "erlingsson2019_epsilon",
    "fmt2021_closed_delta",
    "fmt2021_closed_epsilon",
]


@dataclass(frozen=True)
class Bound:
    """A value from a bound and whether its theorem certifies it.

    Attributes:
        value: The ε or δ the formula gives (``math.inf`` or 1.0 when nothing useful).
        certified: Whether the parameters are inside the theorem's range.
        reason: Why the value is not certified (empty when it is).
    """

    value: float
    certified: bool
    reason: str = ""


def _not(value: float, reason: str) -> Bound:
    return Bound(value=value, certified=False, reason=reason)


_SMALLEST_NORMAL = 2.2250738585072014e-308


def _upper_exp(log_value: float) -> float:
    """e^{log_value} capped at 1, never rounded down to 0 (an upper bound stays one)."""
    if log_value >= 0.0:
        return 1.0
    return max(math.exp(log_value), _SMALLEST_NORMAL)


# --------------------------------------------------------------------- EFMRTT'19


def _erlingsson_range(epsilon0: float, n: int) -> str:
    if not epsilon0 < 0.5:
        return f"needs epsilon0 < 1/2 (got {epsilon0:g})"
    if n < 1000:
        return f"needs n >= 1000 (got {n})"
    return ""


def erlingsson2019_epsilon(epsilon0: float, n: int, delta: float) -> Bound:
    """ε = 12·ε₀·sqrt(ln(1/δ)/n) (EFMRTT, SODA 2019), for ε₀ < 1/2, n ≥ 1000, δ < 1/100."""
    epsilon0, n, delta = (
        check_epsilon(epsilon0, "epsilon0"),
        check_int(n, "n", minimum=1),
        check_delta(delta),
    )
    eps = 12.0 * epsilon0 * math.sqrt(math.log(1.0 / delta) / n)
    reason = _erlingsson_range(epsilon0, n)
    if not reason and not delta < 0.01:
        reason = f"needs delta < 1/100 (got {delta:g})"
    return _not(eps, reason) if reason else Bound(eps, True)


def erlingsson2019_delta(epsilon: float, epsilon0: float, n: int) -> Bound:
    """δ = exp(−n·(ε/(12ε₀))²), the inverse of :func:`erlingsson2019_epsilon`."""
    epsilon = check_epsilon(epsilon)
    epsilon0, n = check_epsilon(epsilon0, "epsilon0"), check_int(n, "n", minimum=1)
    delta = _upper_exp(-n * (epsilon / (12.0 * epsilon0)) ** 2)
    reason = _erlingsson_range(epsilon0, n)
    if not reason and not delta < 0.01:
        reason = f"the formula gives delta={delta:.3g}, outside its range delta < 1/100"
    return _not(delta, reason) if reason else Bound(delta, True)


# ----------------------------------------------------------------------- BBGN'19


def _log_expm1(x: float) -> float:
    """ln(e^x − 1) for x > 0, without overflow or cancellation."""
    return x + math.log(-math.expm1(-x)) if x > 1.0 else math.log(math.expm1(x))


def _log1p_exp(x: float) -> float:
    """ln(1 + e^x), without overflow."""
    return x + math.log1p(math.exp(-x)) if x > 0.0 else math.log1p(math.exp(x))


def _exp_capped(log_value: float) -> float:
    """e^x for x ≤ 700, else e^700 (used where a smaller value only loosens an upper bound)."""
    return math.exp(min(log_value, 700.0))


def _bennett_phi(beta: float) -> float:
    """φ(β) = (1 + β)ln(1 + β) − β, by its series Σ_{j≥2} (−β)^j/(j(j − 1)) for small β.

    The closed form cancels for small β (φ ≈ β²/2); the series is alternating
    with decreasing terms for β < 0.1, and 30 terms leave less than 1e-31 relative.
    """
    if beta >= 0.1:
        return (1.0 + beta) * math.log1p(beta) - beta
    total, power = 0.0, -beta  # (−β)^1; the loop's first term is (−β)²/2 = β²/2
    for j in range(2, 32):
        power *= -beta
        total += power / (j * (j - 1))
    return total


@dataclass(frozen=True)
class BbgnLogConstants:
    """Logarithms of BBGN's generic constants (everything here may exceed a double)."""

    log_gamma: float  # ln γ = −ε₀
    log_a: float  # ln(e^ε − 1)
    log_range: float  # ln((e^ε + 1)(e^{ε₀} − e^{−ε₀})): range of L
    log_max: float  # ln(e^{ε₀}(1 − e^{ε − 2ε₀})): b₊, maximum of L
    log_second: float  # ln(e^{ε₀}(e^{2ε} + 1) − 2γe^{ε − 2ε₀}): c, second moment bound


def bbgn_log_constants(epsilon: float, epsilon0: float) -> BbgnLogConstants:
    """The generic constants of the module docstring, in log space (needs ε < ε₀)."""
    log_one_plus_e2 = _log1p_exp(2.0 * epsilon)
    return BbgnLogConstants(
        log_gamma=-epsilon0,
        log_a=_log_expm1(epsilon),
        log_range=_log1p_exp(epsilon) + epsilon0 + math.log1p(-math.exp(-2.0 * epsilon0)),
        log_max=epsilon0 + math.log1p(-math.exp(epsilon - 2.0 * epsilon0)),
        log_second=epsilon0
        + log_one_plus_e2
        + math.log1p(-2.0 * math.exp(epsilon - 4.0 * epsilon0 - log_one_plus_e2)),
    )


def bbgn2019_hoeffding_delta(epsilon: float, epsilon0: float, n: int) -> Bound:
    """Privacy-blanket bound with Hoeffding's inequality (BBGN, CRYPTO 2019).

    δ ≤ (1/(γn))·(b²/(4a))·(1 − γ(1 − e^{−2a²/b²}))ⁿ with a = e^ε − 1, b the range
    of the amplification variable, γ = e^{−ε₀}. Zero for ε ≥ ε₀ (no amplification
    is needed there). Evaluated in log space, so any ε₀ works.
    """
    epsilon = check_epsilon(epsilon)
    epsilon0, n = check_epsilon(epsilon0, "epsilon0"), check_int(n, "n", minimum=1)
    if epsilon >= epsilon0:
        return Bound(0.0, True)
    k = bbgn_log_constants(epsilon, epsilon0)
    gamma = math.exp(k.log_gamma)
    ratio = math.exp(min(0.0, 2.0 * (k.log_a - k.log_range)))  # a²/b² ≤ 1
    log_delta = (
        -k.log_gamma
        - math.log(n)
        + 2.0 * k.log_range
        - math.log(4.0)
        - k.log_a
        + n * math.log1p(-gamma * (-math.expm1(-2.0 * ratio)))
    )
    return Bound(_upper_exp(log_delta), True)


def bennett_parts(k: BbgnLogConstants) -> tuple[float, float, float]:
    """(α·φ(β), β, ln ln(1 + β)) with α = c/b₊², β = a·b₊/c.

    α·φ is capped at e^700 and taken as 0 if φ(β) underflows: both only
    loosen δ. ln ln(1 + β) uses ln(1 + β)/β = 1 − β/2 + β²/3 − … for small β,
    so it stays exact when β itself underflows (ε near a huge ε₀).
    """
    log_beta = k.log_a + k.log_max - k.log_second
    beta = math.exp(log_beta)
    phi = _bennett_phi(beta)
    alpha_phi = _exp_capped(k.log_second - 2.0 * k.log_max + math.log(phi)) if phi > 0 else 0.0
    if beta < 1e-4:
        log_log1p = log_beta + math.log1p(beta * (-0.5 + beta * (1.0 / 3.0 - beta / 4.0)))
    else:
        log_log1p = math.log(math.log1p(beta))
    return alpha_phi, beta, log_log1p


def bbgn2019_bennett_delta(epsilon: float, epsilon0: float, n: int) -> Bound:
    """Privacy-blanket bound with Bennett's inequality (BBGN, CRYPTO 2019), integrated soundly.

    With S_m the sum of m amplification variables (mean −a, a = e^ε − 1, maximum
    b₊, second moment c), Bennett's inequality and the convexity of
    φ(u) = (1 + u)ln(1 + u) − u give P[S_m > u] ≤ e^{−m·α·φ(β)}·e^{−u·ln(1+β)/b₊}
    with α = c/b₊², β = a·b₊/c, so E[(S_m)₊] ≤ b₊·e^{−mαφ(β)}/ln(1 + β). Averaging
    over M ~ Bin(n, γ):

        δ ≤ (1/(γn))·(b₊/ln(1 + β))·(1 − γ + γ·e^{−αφ(β)})ⁿ.

    The authors' reference implementation divides by m·(a/b₊)·ln(1 + β)
    instead
    (:func:`shuffledp.accounting.reproductions.bbgn2019_bennett.bbgn2019_bennett_published_delta`);
    that is smaller by a
    factor m·a and falls below the exact expectation once m·a > 1. Evaluated in
    log space, so any ε₀ works.
    """
    epsilon = check_epsilon(epsilon)
    epsilon0, n = check_epsilon(epsilon0, "epsilon0"), check_int(n, "n", minimum=1)
    if epsilon >= epsilon0:
        return Bound(0.0, True)
    k = bbgn_log_constants(epsilon, epsilon0)
    alpha_phi, _, log_log1p = bennett_parts(k)
    log_delta = (
        -k.log_gamma
        - math.log(n)
        + k.log_max
        - log_log1p
        + n * math.log1p(-math.exp(k.log_gamma) * (-math.expm1(-alpha_phi)))
    )
    return Bound(_upper_exp(log_delta), True)


# ------------------------------------------------------------------------ FMT'21


def _fmt_closed(epsilon0: float, n: int, delta: float) -> float:
    """ln(1 + tanh(ε₀/2)·(8√(e^{ε₀} ln(4/δ)/n) + 8e^{ε₀}/n)), in log space (any ε₀)."""
    log8 = math.log(8.0)
    log_inner = float(
        np.logaddexp(
            log8 + 0.5 * (epsilon0 + math.log(math.log(4.0 / delta)) - math.log(n)),
            log8 + epsilon0 - math.log(n),
        )
    )
    x = math.log(math.tanh(epsilon0 / 2.0)) + log_inner
    return _log1p_exp(x)


def _fmt_range(epsilon0: float, n: int, delta: float) -> str:
    limit = n / (16.0 * math.log(2.0 / delta))
    if limit <= 1.0 or epsilon0 > math.log(limit):
        return "needs epsilon0 <= ln(n/(16 ln(2/delta)))" + (
            f" = {math.log(limit):.3g}" if limit > 0 else ""
        )
    return ""


def fmt2021_closed_epsilon(epsilon0: float, n: int, delta: float) -> Bound:
    """ε from FMT's closed form (Theorem 6 of the per-user paper), with its range condition."""
    epsilon0, n, delta = (
        check_epsilon(epsilon0, "epsilon0"),
        check_int(n, "n", minimum=1),
        check_delta(delta),
    )
    eps = _fmt_closed(epsilon0, n, delta)
    reason = _fmt_range(epsilon0, n, delta)
    return _not(eps, reason) if reason else Bound(eps, True)


def fmt2021_closed_delta(epsilon: float, epsilon0: float, n: int) -> Bound:
    """The smallest δ for which FMT's closed form certifies ε (bisection on ln δ).

    The closed form decreases in δ while its range condition ε₀ ≤ ln(n/(16 ln(2/δ)))
    tightens as δ shrinks, so the certified δ is the larger of the two thresholds.
    """
    epsilon = check_epsilon(epsilon)
    epsilon0, n = check_epsilon(epsilon0, "epsilon0"), check_int(n, "n", minimum=1)
    # Range condition: ln(2/δ) <= n/(16 e^{ε0}) ⇔ δ >= 2·exp(−n/(16 e^{ε0})).
    delta_range = 2.0 * math.exp(-math.exp(math.log(n) - math.log(16.0) - epsilon0))
    if delta_range >= 1.0:
        return _not(1.0, "n is too small for the closed form at this epsilon0")
    lo, hi = 1e-300, 1.0 - 1e-16
    if _fmt_closed(epsilon0, n, hi) > epsilon:
        return _not(1.0, f"the closed form exceeds epsilon={epsilon:g} for every delta < 1")
    for _ in range(200):
        mid = math.exp(0.5 * (math.log(lo) + math.log(hi)))
        if _fmt_closed(epsilon0, n, mid) <= epsilon:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1.0 + 1e-9:
            break
    return Bound(max(hi, delta_range), True)
