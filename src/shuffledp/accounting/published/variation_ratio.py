"""Amplification through two-count pairs: the variation-ratio reduction and FMT's clones.

Variation-ratio reduction (S. Wang et al., "Privacy amplification via
shuffling: unified, simplified, and tightened", VLDB 2024, arXiv 2304.05007;
Thm 1 of the segmented paper, Wang et al., "Segmented private data aggregation
in the multi-message shuffle model", arXiv 2407.19639). If the victim's
randomizer has the (p, β)-variation property (every output probability ratio
between two inputs at most p, total variation at most β) and the q property
(the victim's output distribution is at most q times any other user's,
pointwise), then for any divergence satisfying data processing
the shuffled output is no more distinguishable than the two-count pair with

    C ~ Bin(n − 1, 2βp/((p − 1)q)),  w₁ = βp/(p − 1),  w₂ = β/(p − 1)

(:class:`shuffledp.accounting.numerics.two_counts.TwoCountPair`). Extensions proven in
the segmented paper:

* Thm 2: a Binomial(n, γ) number of blanket contributors gives
  C ~ Bin(n, γ·2βp/((p − 1)q)) (:func:`vr_pair` with ``blanket_probability``).
* Lemma 3: the Poisson randomizer (report the item with probability λ, else
  nothing) against uniform blanket messages over d items is the limit p = ∞
  with β = λ, q = dλ: C ~ Bin(messages, 2/d), w₁ = λ, w₂ = 0
  (:func:`poisson_pair`).
* Thm 3: a user holding s items is s virtual users; group privacy gives
  (s·ε, s·e^{s·ε}·δ) (:func:`group_composition`, as printed there; the standard
  group bound s·e^{(s−1)ε}·δ is smaller, so the printed one is also valid).

FMT's clones (Feldman, McMillan & Talwar, FOCS 2021, numerical analysis):
C ~ Bin(n − 1, e^{−ε₀}), w₁ = e^{ε₀}/(e^{ε₀} + 1), w₂ = 1/(e^{ε₀} + 1)
(:func:`fmt2021_numeric_pair`).

Group: published bounds (``shuffledp.accounting.published``); may import the
numerical core and other published bounds, nothing else of the accountant.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from shuffledp._validation import InvalidParameterError, check_epsilon, check_int, check_probability
from shuffledp.accounting.numerics.two_counts import TwoCountPair

__all__ = [
    "EPSILON0_MAX",
    "VariationRatio",
    "fmt2021_numeric_pair",
    "group_composition",
    "poisson_pair",
    "variation_ratio_from_channel",
    "vr_generic_pair",
    "vr_pair",
]


class VariationRatio(tuple[float, float, float]):
    """The (p, β, q) parameters of a randomizer (p and q may be ``math.inf``)."""

    __slots__ = ()

    def __new__(cls, p: float, beta: float, q: float) -> VariationRatio:  # noqa: D102
        if not p > 1.0:
            raise InvalidParameterError(f"p must be > 1, got {p!r}")
        if math.isfinite(p) and not (0.0 <= beta <= (p - 1.0) / (p + 1.0) + 1e-15):
            raise InvalidParameterError(f"beta must be in [0, (p-1)/(p+1)], got {beta!r}")
        if not q >= 1.0:
            raise InvalidParameterError(f"q must be >= 1, got {q!r}")
        return super().__new__(cls, (float(p), float(beta), float(q)))

    @property
    def p(self) -> float:
        """Largest output-probability ratio between two inputs."""
        return self[0]

    @property
    def beta(self) -> float:
        """Largest total-variation distance between two inputs' outputs."""
        return self[1]

    @property
    def q(self) -> float:
        """Largest ratio of the victim's output probability to another user's."""
        return self[2]


def vr_pair(
    ratio: VariationRatio, others: int, *, blanket_probability: float = 1.0
) -> TwoCountPair:
    """Return the two-count pair of the variation-ratio reduction (Thm 1, Thm 2).

    Small probabilities are computed directly, never as 1 minus a number near
    1. When rounding makes w₁ + w₂ exceed 1 (β at its maximum (p − 1)/(p + 1)),
    the large weight is reduced: w₁ = 1 − w₂, w₀ = 0. Otherwise w₀ = 1 − w₁ − w₂
    is derived, and the certificate charges its relative error
    (:attr:`~shuffledp.accounting.numerics.two_counts.TwoCountPair.weight_error`).

    Args:
        ratio: The randomizer's (p, β, q).
        others: Number of other users (n − 1 in Thm 1; n in Thm 2).
        blanket_probability: γ of Thm 2, the probability each contributes.
    """
    check_int(others, "others", minimum=0)
    p, beta, q = ratio
    w0: float | None
    if math.isinf(p):
        rate, w1, w2, w0 = 2.0 * beta / q, beta, 0.0, 1.0 - beta
    else:
        rate = 2.0 * beta * p / ((p - 1.0) * q)
        w1, w2, w0 = beta * p / (p - 1.0), beta / (p - 1.0), None
        if w1 + w2 >= 1.0:  # β at its maximum (p − 1)/(p + 1), up to rounding
            w1, w0 = 1.0 - w2, 0.0
    rate *= blanket_probability
    if rate > 1.0 + 1e-12:
        raise InvalidParameterError(f"the (p, beta, q) given imply a blanket rate {rate:.4g} > 1")
    return TwoCountPair(blanket=others, rate=min(rate, 1.0), w1=w1, w2=w2, w0=w0)


#: Largest ε₀ the generic pairs are built for: beyond it e^{−ε₀} < 1e-300 loses precision.
EPSILON0_MAX = 690.0


def _check_epsilon0(epsilon0: float) -> float:
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    if epsilon0 > EPSILON0_MAX:
        raise InvalidParameterError(
            f"epsilon0={epsilon0:g} is outside this accountant's range (epsilon0 <= "
            f"{EPSILON0_MAX:g}: beyond it e^-epsilon0 underflows); for epsilon >= epsilon0 "
            "the local guarantee alone gives delta = 0"
        )
    return epsilon0


def vr_generic_pair(epsilon0: float, n: int) -> TwoCountPair:
    """Variation-ratio pair for any ε₀-LDP randomizer: p = q = e^{ε₀}, β = tanh(ε₀/2).

    With β at its maximum the pair is C ~ Bin(n − 1, 2/(e^{ε₀} + 1)),
    w₁ = e^{ε₀}/(e^{ε₀} + 1), w₂ = 1/(e^{ε₀} + 1), w₀ = 0; every probability is
    computed from e^{−ε₀} directly (no 1 − x of an x near 1, no overflow).

    Raises:
        InvalidParameterError: For ε₀ > :data:`EPSILON0_MAX`.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    n = check_int(n, "n", minimum=1)
    e = math.exp(-epsilon0)
    return TwoCountPair(
        blanket=n - 1,
        rate=2.0 * e / (1.0 + e),
        w1=1.0 / (1.0 + e),
        w2=e / (1.0 + e),
        w0=0.0,
        rate_complement=math.tanh(epsilon0 / 2.0),
    )


def fmt2021_numeric_pair(epsilon0: float, n: int) -> TwoCountPair:
    """FMT's clone pair: C ~ Bin(n − 1, e^{−ε₀}), victim's clone choice Ber(e^{ε₀}/(e^{ε₀}+1)).

    w₂ = 1/(e^{ε₀} + 1) is computed directly (as e^{−ε₀}/(1 + e^{−ε₀})), not as
    1 − w₁: near ε₀ = 20 the subtraction lost 5e-8 of w₂, which the line sums
    amplify by 1/(1 − e^{ε − ε₀}) and which put the bound below the truth.

    Raises:
        InvalidParameterError: For ε₀ > :data:`EPSILON0_MAX`.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    n = check_int(n, "n", minimum=1)
    e = math.exp(-epsilon0)
    return TwoCountPair(
        blanket=n - 1,
        rate=e,
        w1=1.0 / (1.0 + e),
        w2=e / (1.0 + e),
        w0=0.0,
        rate_complement=-math.expm1(-epsilon0),
    )


def poisson_pair(
    report_probability: float,
    domain_size: int,
    blanket_messages: int,
    *,
    blanket_probability: float = 1.0,
) -> TwoCountPair:
    """Pair of Lemma 3 (with Thm 2): Poisson randomizer λ against uniform blanket messages.

    Args:
        report_probability: λ, the probability the victim reports its item.
        domain_size: d, the number of items a blanket message is uniform over.
        blanket_messages: Number of potential blanket messages from other users.
        blanket_probability: Probability each potential blanket message is sent.
    """
    lam = check_probability(report_probability, "report_probability", low=0.0, high=1.0 + 1e-12)
    d = check_int(domain_size, "domain_size", minimum=2)
    check_probability(blanket_probability, "blanket_probability", low=0.0, high=1.0 + 1e-12)
    return vr_pair(
        VariationRatio(math.inf, lam, d * lam),
        blanket_messages,
        blanket_probability=blanket_probability,
    )


def variation_ratio_from_channel(channel: ArrayLike) -> VariationRatio:
    """Return (p, β, q) of a randomizer given as a row-stochastic matrix R[x, y] = P[y | x].

    p is the largest ratio R[x, y]/R[x', y], β the largest total variation
    between two rows, and q = p when every user runs the same randomizer.
    """
    r = np.asarray(channel, dtype=np.float64)
    if r.ndim != 2 or r.shape[0] < 2:
        raise InvalidParameterError(f"channel must be a matrix with >= 2 rows, got shape {r.shape}")
    if np.any(r < 0) or not np.allclose(r.sum(axis=1), 1.0, atol=1e-12):
        raise InvalidParameterError("channel rows must be probability distributions")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = r[:, None, :] / r[None, :, :]
    ratios = np.where(r[:, None, :] == 0, 0.0, ratios)
    p = float(np.max(ratios))
    beta = float(np.max(0.5 * np.abs(r[:, None, :] - r[None, :, :]).sum(axis=2)))
    if p <= 1.0:
        raise InvalidParameterError("the channel's rows are identical: nothing to protect")
    return VariationRatio(p, min(beta, (p - 1.0) / (p + 1.0)) if math.isfinite(p) else beta, p)


def group_composition(epsilon: float, delta: float, items: int) -> tuple[float, float]:
    """Return (s·ε, s·e^{s·ε}·δ): Thm 3 of the segmented paper for s items per user."""
    s = check_int(items, "items", minimum=1)
    if delta <= 0.0:
        return s * epsilon, 0.0
    if s * epsilon > 700.0:  # e^{s·ε} would overflow; then s·e^{s·ε}·δ ≥ 1 unless δ < 1e-300
        log_delta = math.log(s) + s * epsilon + math.log(delta)
        return s * epsilon, 1.0 if log_delta >= -1.0 else math.exp(log_delta + 1e-12)
    return s * epsilon, min(1.0, s * math.exp(s * epsilon) * delta)
