"""FLIP's published calibration and error bound (Cheu & Zhilyaev, IEEE S&P 2022).

Source: A. Cheu and M. Zhilyaev, "Differentially private histograms in the shuffle model
from fake users", IEEE S&P 2022, arXiv 2104.02739.

Reading of the paper's text. A text conversion of the paper lost Claim
III.1's formulas; the PDF's own text gives the privacy condition as the quadratic

    q(1 − q) = 33 / (5nk) · ((e^ε + 1)/(e^ε − 1))² · ln(4/δ),   δ < 1/32,

whose root in (0, 1/2) exists iff k ≥ 132/(5n) · ((e^ε + 1)/(e^ε − 1))² ·
ln(4/δ) (strictly, since q < 1/2). Thm III.3 sets q ← max(q̂, q̃) with q̂ that
root. The PDF text's q̃ is garbled ("1 … nk+n ln 2/β"); we read it as
q̃ = ln(2/β)/(n(k + 1)), a floor that keeps the Chernoff step valid. It never
binds: n(k+1)·q̂ ≥ 33/5 · ln 128 > 32 > ln 20 for every ε > 0 and δ < 1/32.

Error bound. Thm III.3(b) states, with probability 9/10 for each bin j,
|z_j − hist_j| < (1/n)·((e^ε+1)/(e^ε−1))·sqrt(264/5 · ln(4/δ) · ln 20 · g(k)).
The PDF's text places ln 20·g(k) under the square root next to 264/5 (the
text conversion moved it to the denominator, which would make the bound shrink
as the confidence grows). Substituting the quadratic shows the theorem is the
per-bin tail bound

    |z_j − hist_j| < (2/(1 − 2q)) · sqrt(2(k + 1)·q·ln(2/β) / n)      (frequency units)

at β = 1/10, with g(k) = (k + 1)/(k(1 − q)(1 − 2q)²), which decreases to 1.
:func:`paper_error_bound` evaluates this form for any q and β.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate. May import the numerical
core, published bounds and certificates; nothing below imports it.
"""

from __future__ import annotations

import math

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_flip_probability,
    check_int,
    check_probability,
)

__all__ = [
    "PAPER_MAX_DELTA",
    "paper_error_bound",
    "paper_flip_q",
    "paper_min_fake_users",
]

#: Claim III.1 and Thm III.3 assume δ < 1/32.
PAPER_MAX_DELTA = 1.0 / 32.0


def _coth_half(epsilon: float) -> float:
    """Return (e^ε + 1)/(e^ε − 1) = coth(ε/2), stable for small ε."""
    return 1.0 / math.tanh(epsilon / 2.0)


def _paper_constant(epsilon: float, delta: float, n: int) -> float:
    """Return 33/(5n)·coth(ε/2)²·ln(4/δ): the right side of the quadratic times k."""
    return 33.0 / (5.0 * n) * _coth_half(epsilon) ** 2 * math.log(4.0 / delta)


def _check_paper_delta(delta: float) -> float:
    delta = check_delta(delta)
    if delta >= PAPER_MAX_DELTA:
        raise InvalidParameterError(
            f"delta must be < 1/32 for the paper's calibration (Claim III.1), got {delta:g}"
        )
    return delta


def paper_min_fake_users(epsilon: float, delta: float, n: int) -> int:
    """Return the least k for which Claim III.1's quadratic has a root q < 1/2.

    That is the least integer k > 132/(5n)·((e^ε+1)/(e^ε−1))²·ln(4/δ).
    """
    epsilon = check_epsilon(epsilon)
    delta = _check_paper_delta(delta)
    n = check_int(n, "n", minimum=1)
    return max(1, math.floor(4.0 * _paper_constant(epsilon, delta, n)) + 1)


def paper_flip_q(
    epsilon: float, delta: float, n: int, fake_users: int, *, beta: float = 0.1
) -> float:
    """Return the paper's flip probability q = max(q̂, q̃) (Claim III.1, Thm III.3).

    Args:
        epsilon: Target ε > 0.
        delta: Target δ in (0, 1/32).
        n: Number of users.
        fake_users: k, at least :func:`paper_min_fake_users`.
        beta: Failure probability of the accuracy statement (1/10 in Thm III.3).

    Raises:
        InvalidParameterError: If δ ≥ 1/32 or k is too small for a root < 1/2.
    """
    epsilon = check_epsilon(epsilon)
    delta = _check_paper_delta(delta)
    n = check_int(n, "n", minimum=1)
    k = check_int(fake_users, "fake_users", minimum=1)
    beta = check_probability(beta, "beta")
    rhs = _paper_constant(epsilon, delta, n) / k
    if rhs >= 0.25:
        raise InvalidParameterError(
            "fake_users must be at least "
            f"{paper_min_fake_users(epsilon, delta, n)} for the paper's calibration "
            f"(Thm III.3) at n={n}, epsilon={epsilon:g}, delta={delta:g}; got {k}"
        )
    # Smaller root of q² − q + rhs = 0, written to avoid cancellation.
    q_hat = 2.0 * rhs / (1.0 + math.sqrt(1.0 - 4.0 * rhs))
    q_tilde = math.log(2.0 / beta) / (n * (k + 1))
    return max(q_hat, q_tilde)


def paper_error_bound(q: float, fake_users: int, n: int, *, beta: float = 0.1) -> float:
    """Return Thm III.3(b)'s per-bin error bound in counts (multiply by 1/n for frequencies).

    With probability at least 1 − β, |n·z_j − n·hist_j| < (2/(1−2q))·sqrt(2(k+1)·n·q·ln(2/β)).
    """
    q = check_flip_probability(q)
    k = check_int(fake_users, "fake_users", minimum=0)
    n = check_int(n, "n", minimum=1)
    beta = check_probability(beta, "beta")
    return 2.0 / (1.0 - 2.0 * q) * math.sqrt(2.0 * (k + 1) * n * q * math.log(2.0 / beta))
