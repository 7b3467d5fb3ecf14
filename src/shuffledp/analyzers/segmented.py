"""The segmented protocol's analyzer (Wang et al., Alg. 2 lines 19–21 and §5.2).

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in the
multi-message shuffle model", arXiv 2407.19639 (the version implemented names no venue).

The server sees C_j, the number of shuffled messages equal to item j, and the
level counts n̂_k of Alg. 1 step 1. The paper's pooled estimator (line 21) is

    Ŵ_j = (C_j − E[blanket and dummy messages on j]) / Σ_k n̂_k λ_k,

with E[blanket on j] = n·m/d′ (n⌈m⌉ tries, each on j with probability γ/d′)
and, for the ``dummy`` variant, E[dummy on j] = Σ_k n̂_k·s·(1 − λ_k)/d′.

What it estimates. E[C_j − noise] = Σ_k λ_k·a_{k,j}, where a_{k,j} is the
number of level-k users holding j, so with exact level counts

    E[Ŵ_j] = Σ_k n_k λ_k w_{j,k} / Σ_k n_k λ_k          (w_{j,k} = a_{k,j}/n_k),

a λ-weighted average of the per-level frequencies (:func:`pooled_expectation`).
It equals the population frequency w_j = Σ_k a_{k,j}/n when the items do not
depend on the level (w_{j,k} equal across levels) or when all λ_k are equal;
otherwise it is biased towards the levels with larger λ (the liberal ones).

Why there is no unbiased alternative at the same cost. Messages carry no
level, so the analyzer's whole view is the count vector C (and n̂):

* Every estimator linear in the counts, f = c₀ + Σ_x c_x C_x, has
  E f = const + Σ_x c_x Σ_k λ_k a_{k,x}. Swapping items between a level-1 user
  holding j and a level-2 user holding y leaves w_j unchanged and moves E f by
  (c_j − c_y)(λ₁ − λ₂); unbiasedness for every dataset forces c_j = c_y for
  all y, i.e. f depends on Σ_x C_x only, which cannot track w_j. So no
  debias-and-rescale estimator is unbiased when two levels with users have
  different λ.
* No function of C_j alone is either: the law of C_j has generating function
  B(z)·Π_k (1 − λ_k + λ_k z)^{a_{k,j}}, and (1 − λ₂ + λ₂z) = (λ₂/λ₁)(1 − λ₁ + λ₁z)
  + (1 − λ₂/λ₁), so the law with one level-2 holder is (λ₂/λ₁)·(law with one
  level-1 holder) + (1 − λ₂/λ₁)·(law with none); an unbiased f would then give
  1 = λ₂/λ₁.
* Unbiased per-level estimates need each message's level: tagging messages
  with it (or one shuffle per level) spreads the blanket over K·d′ values, so
  each level's blanket on a pair of items is K times thinner and λ_k must
  shrink for the same (E_k, δ) — a different protocol, at a higher cost.

Standard errors (:func:`pooled_variance`) are for the randomization given the
users' sets. Var[C_j] = blanket + dummy variance + Σ_k c_k·λ_k a_{k,j} with
c_k = 1 − λ_k (paper) or (1 − λ_k)(1 − 2/d′) (dummy). Only Σ_k λ_k a_{k,j} is
identifiable (by (C_j − noise)⁺), so the data term is plugged in under the
estimator's own premise (items independent of the level, a_{k,j} ∝ n_k):
c̄·(C_j − noise)⁺ with c̄ = Σ_k n_k λ_k c_k / Σ_k n_k λ_k. That is exact when
the premise holds; otherwise the true data term lies between min_k c_k and
max_k c_k times Σ_k λ_k a_{k,j} (``worst_case=True`` takes the max, which
never understates). With DP level counts the delta method adds the level
counts' covariance through the denominator and the dummy expectation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.analyzers.estimate import HistogramEstimate

__all__ = [
    "POOLED_ESTIMATOR",
    "expected_noise",
    "pooled_estimate",
    "pooled_expectation",
    "pooled_variance",
]

FloatArray = NDArray[np.float64]

#: ``estimator`` name of :func:`pooled_estimate`.
POOLED_ESTIMATOR = "segmented-pooled"


def _variant(variant: str) -> Literal["paper", "dummy"]:
    if variant not in ("paper", "dummy"):
        raise InvalidParameterError(f"variant must be 'paper' or 'dummy', got {variant!r}")
    return "paper" if variant == "paper" else "dummy"


def expected_noise(
    n: int,
    blanket_rate: float,
    message_domain: int,
    *,
    level_counts: Sequence[float] | FloatArray,
    report_probabilities: Sequence[float] | FloatArray,
    items_per_user: int,
    variant: str = "paper",
) -> float:
    """E[blanket (and dummy) messages on one item]: n·m/d′ (+ Σ_k n_k·s·(1 − λ_k)/d′).

    Alg. 2 line 21's n·m/d; the dummy variant adds its dummy items. With
    estimated level counts n̂_k the dummy term is their (unbiased) plug-in.
    """
    variant = _variant(variant)
    out = n * blanket_rate / message_domain
    if variant == "dummy":
        counts = np.asarray(level_counts, dtype=np.float64)
        lams = np.asarray(report_probabilities, dtype=np.float64)
        out += items_per_user * float(counts @ (1.0 - lams)) / message_domain
    return float(out)


def pooled_expectation(
    pairs: NDArray[np.integer],
    report_probabilities: Sequence[float] | FloatArray,
    domain_size: int,
    items_per_user: int,
) -> FloatArray:
    """E[Ŵ_j] with exact level counts: Σ_k λ_k a_{k,j} / Σ_k n_k λ_k, for j < d.

    Args:
        pairs: a_{k,x}, the K × d′ slot counts (each row sums to n_k·s).
        report_probabilities: λ_k.
        domain_size: d (the padding column, if any, is dropped).
        items_per_user: s.
    """
    a = np.asarray(pairs, dtype=np.float64)
    lams = np.asarray(report_probabilities, dtype=np.float64)
    users = a.sum(axis=1) / items_per_user
    total = float(users @ lams)
    if total <= 0:
        raise InvalidParameterError("Σ_k n_k λ_k is 0: no level reports anything")
    out: FloatArray = (lams @ a)[:domain_size] / total
    return out


def pooled_variance(
    counts: NDArray[np.integer] | FloatArray,
    *,
    n: int,
    blanket_rate: float,
    message_domain: int,
    level_counts: Sequence[float] | FloatArray,
    report_probabilities: Sequence[float] | FloatArray,
    items_per_user: int,
    variant: str = "paper",
    level_covariance: FloatArray | None = None,
    worst_case: bool = False,
) -> FloatArray:
    """Plug-in variance of each Ŵ_j (see the module docstring), for every value of [0, d′).

    Args:
        counts: C_x, messages per value of the message domain.
        n: Number of users.
        blanket_rate: m.
        message_domain: d′.
        level_counts: n̂_k used by the estimator.
        report_probabilities: λ_k.
        items_per_user: s.
        variant: ``"paper"`` or ``"dummy"``.
        level_covariance: Cov(n̂) when the level counts are estimated (``None``: exact).
        worst_case: Take the data term at its largest over how each item's
            holders split across levels (default: the split the estimator assumes).
    """
    variant = _variant(variant)
    c = np.asarray(counts, dtype=np.float64)
    nk = np.asarray(level_counts, dtype=np.float64)
    lams = np.asarray(report_probabilities, dtype=np.float64)
    d = message_domain
    tries = int(np.ceil(blanket_rate))
    gamma = blanket_rate / tries
    p = gamma / d
    var = np.full(c.shape, n * tries * p * (1.0 - p))
    noise = expected_noise(
        n,
        blanket_rate,
        d,
        level_counts=nk,
        report_probabilities=lams,
        items_per_user=items_per_user,
        variant=variant,
    )
    if variant == "dummy":
        r = (1.0 - lams) / d
        var += float(items_per_user * (nk @ (r * (1.0 - r))))
        factors = (1.0 - lams) * (1.0 - 2.0 / d)
    else:
        factors = 1.0 - lams
    active = nk > 0
    weights = nk * lams
    if worst_case or weights.sum() <= 0:
        factor = float(factors[active].max()) if active.any() else 1.0
    else:
        factor = float(weights @ factors / weights.sum())
    signal = np.clip(c - noise, 0.0, None)
    var += max(factor, 0.0) * signal
    denominator = float(nk @ lams)
    out: FloatArray = var / denominator**2
    if level_covariance is not None:
        estimate = (c - noise) / denominator
        beta = items_per_user * (1.0 - lams) / d if variant == "dummy" else np.zeros_like(lams)
        # ∂Ŵ_j/∂n̂_k = −(β_k + Ŵ_j λ_k)/Λ̂ (numerator's dummy term and the denominator).
        grads = (beta[None, :] + estimate[:, None] * lams[None, :]) / denominator
        cov = np.asarray(level_covariance, dtype=np.float64)
        out = out + np.einsum("jk,kl,jl->j", grads, cov, grads)
    return out


def pooled_estimate(
    counts: NDArray[np.integer],
    *,
    n: int,
    blanket_rate: float,
    domain_size: int,
    message_domain: int,
    level_counts: Sequence[float] | FloatArray,
    report_probabilities: Sequence[float] | FloatArray,
    items_per_user: int,
    variant: str = "paper",
    level_covariance: FloatArray | None = None,
    worst_case: bool = False,
    domain: Sequence[str] | None = None,
) -> HistogramEstimate:
    """Alg. 2 line 21: Ŵ_j = (C_j − noise)/Σ_k n̂_k λ_k, as counts n·Ŵ_j with standard errors.

    The returned :class:`HistogramEstimate` has ``counts = n·Ŵ_j`` (users
    holding j) for the d items of the domain (the padding symbol's count is
    not estimated), standard errors from :func:`pooled_variance` (with
    ``worst_case``), and ``unbiased`` true only when every level with users has
    the same λ (module docstring) and the level counts are exact.

    Raises:
        DataError: If ``counts`` is not one count per value of [0, d′).
        InvalidParameterError: If Σ_k n̂_k λ_k is not positive.
    """
    variant = _variant(variant)
    c = np.asarray(counts, dtype=np.float64)
    if c.shape != (message_domain,):
        raise DataError(f"expected {message_domain} message counts, got shape {c.shape}")
    if not 2 <= domain_size <= message_domain:
        raise InvalidParameterError(
            f"domain_size must be in [2, message_domain={message_domain}], got {domain_size}"
        )
    nk = np.asarray(level_counts, dtype=np.float64)
    lams = np.asarray(report_probabilities, dtype=np.float64)
    if nk.shape != lams.shape:
        raise InvalidParameterError(
            f"level_counts has {nk.size} entries for {lams.size} report probabilities"
        )
    denominator = float(nk @ lams)
    if not denominator > 0:
        raise InvalidParameterError(
            f"sum of n_k * lambda_k is {denominator:g}: no level with users reports anything"
        )
    noise = expected_noise(
        n,
        blanket_rate,
        message_domain,
        level_counts=nk,
        report_probabilities=lams,
        items_per_user=items_per_user,
        variant=variant,
    )
    frequencies = (c - noise) / denominator
    var = pooled_variance(
        c,
        n=n,
        blanket_rate=blanket_rate,
        message_domain=message_domain,
        level_counts=nk,
        report_probabilities=lams,
        items_per_user=items_per_user,
        variant=variant,
        level_covariance=level_covariance,
        worst_case=worst_case,
    )
    labels = list(domain) if domain is not None else [str(j) for j in range(domain_size)]
    if len(labels) != domain_size:
        raise InvalidParameterError(f"domain has {len(labels)} labels, expected {domain_size}")
    active = lams[nk > 0]
    same = bool(active.size == 0 or np.ptp(active) == 0.0)
    return HistogramEstimate(
        domain=labels,
        counts=n * frequencies[:domain_size],
        stderr=n * np.sqrt(var[:domain_size]),
        n=n,
        estimator=POOLED_ESTIMATOR,
        unbiased=same and level_covariance is None,
    )
