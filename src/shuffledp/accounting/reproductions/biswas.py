"""The δ formula of Biswas, Jung & Palamidessi (FPS 2023), Def. 11 / Thm 1, for reproduction.

Source: S. Biswas, K. Jung and C. Palamidessi, "Tight differential privacy guarantees
for the shuffle model with k-randomized response", FPS 2023, arXiv 2205.08858.

The paper considers one fixed dataset: ``n_x0`` users other than the victim
hold x₀, and the victim moves from x₀ to x₁. With κ₁ = e^{ε₀}(e^{ε₀} + k − 2)/(k − 1),
κ₂ = (k − 1)/(e^{ε₀} + k − 2), κ₃(s) = (k − 1)^{n_x0}(e^{ε₀} + k − 2)^{n−n_x0−s}/(e^{ε₀} + k − 1)^n,
μ(s, r) = C(n_x0, r)·C(n − n_x0, s − r)·κ₁^r and τ_r = κ₂(n − n_x0) + (e^{ε₀} − κ₂)(s − r):

    δ̂(ε) = Σ_s 1{v_s > ε}·(1 − e^{ε − v_s})·κ₃/(n − n_x0)·Σ_r μ(s, r)τ_r.

The last factor is the paper's eq. 8, P[count of x₀ = s] under D(x₀); eq. 9 gives
P[count = s] under D(x₁) as κ₃·Σ_r μ(s, r). Thm 1 prints

    v_s = ln(κ₂ + (e^{ε₀} − κ₂)/(n − n_x0)
                 · Σ_r (s − r)C(n_x0, r)C(n − 1 − n_x0, s − 1 − r)κ₁^r / Σ_r μ(s, r)),

which is not the log-ratio of eqs. 8 and 9: that ratio has
Σ_r C(n_x0, r)C(n − 1 − n_x0, s − 1 − r)κ₁^r in the numerator, without the factor
(s − r)/(n − n_x0). The paper's Table 3 follows from the printed form
(:func:`biswas2023_delta` reproduces it). Even with the log-ratio
(``corrected=True``), δ̂ is the divergence of one marginal, the count of x₀, on
one dataset, in one direction: a lower bound on the mechanism's δ, never a
guarantee (:func:`shuffledp.accounting.certificates.krr.krr_delta` is the certificate).

Sums run over every term when there are at most 4e6, else over windows of the
two binomial counts that make up the count of x₀ reaching out to 1e-80 of
their mass (1e-20 beyond 20000 users), far beyond the paper's smallest printed
value; the rest is dropped, as befits a reproduction.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate. May import the numerical
core, published bounds and certificates; nothing below imports it.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import gammaln

from shuffledp._validation import InvalidParameterError, check_epsilon, check_int
from shuffledp.accounting.numerics.binomial import DEFAULT_TAIL, binomial_window

__all__ = ["biswas2023_delta"]

#: Sum over every (r, s − r) when the grid has at most this many cells.
_FULL_GRID = 4_000_000
#: Otherwise keep each binomial window out to this tail, far enough for the
#: paper's smallest printed values (about 1e-57).
_WIDE_TAIL = 1e-80
#: Beyond this many users the windows stop at 1e-20 (the paper's tiny values come
#: from small n).
_WIDE_UP_TO = 20_000


def _log_binom(n: int | np.ndarray, k: np.ndarray) -> np.ndarray:
    n_arr = np.asarray(n, dtype=np.float64)
    k_arr = np.asarray(k, dtype=np.float64)
    out = np.full(np.broadcast(n_arr, k_arr).shape, -np.inf)
    ok = (k_arr >= 0) & (k_arr <= n_arr)
    nb = np.broadcast_to(n_arr, out.shape)[ok]
    kb = np.broadcast_to(k_arr, out.shape)[ok]
    out[ok] = gammaln(nb + 1.0) - gammaln(kb + 1.0) - gammaln(nb - kb + 1.0)
    return out


def _diagonal_logsumexp(row_terms: np.ndarray, col_terms: np.ndarray) -> np.ndarray:
    """Ln Σ_{r + t = s} exp(row_terms[r] + col_terms[t]) for every s (row by row, stable)."""
    rows, cols = len(row_terms), len(col_terms)
    peak = np.full(rows + cols - 1, -np.inf)
    for i, value in enumerate(row_terms):
        if np.isfinite(value):
            np.maximum(peak[i : i + cols], value + col_terms, out=peak[i : i + cols])
    safe = np.where(np.isfinite(peak), peak, 0.0)
    sums = np.zeros(rows + cols - 1)
    with np.errstate(invalid="ignore"):
        for i, value in enumerate(row_terms):
            if np.isfinite(value):
                sums[i : i + cols] += np.exp(value + col_terms - safe[i : i + cols])
    with np.errstate(divide="ignore"):
        return np.where(np.isfinite(peak), safe + np.log(sums), -np.inf)


@functools.lru_cache(maxsize=32)
def _losses(
    epsilon0: float, k: int, n: int, n_x0: int, corrected: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(v_s, ln P8(s)) over the lines s of the sum; independent of ε, so cached."""
    e0 = math.exp(epsilon0)
    log_k1 = epsilon0 + math.log(e0 + k - 2) - math.log(k - 1)
    k2 = (k - 1) / (e0 + k - 2)
    rest = n - n_x0
    if (n_x0 + 1) * (rest + 1) <= _FULL_GRID:
        r = np.arange(0, n_x0 + 1, dtype=np.float64)
        t = np.arange(0, rest + 1, dtype=np.float64)
    else:
        # r: holders of x0 reporting x0; t = s − r: the other n − n_x0 users' reports of x0.
        tail = _WIDE_TAIL if n <= _WIDE_UP_TO else DEFAULT_TAIL
        r_win = binomial_window(n_x0, e0 / (e0 + k - 1), tail)
        t_win = binomial_window(rest, 1.0 / (e0 + k - 1), tail)
        r = np.arange(r_win.lo, r_win.hi + 1, dtype=np.float64)
        t = np.arange(max(0, t_win.lo - 1), t_win.hi + 1, dtype=np.float64)
    s_values = r[0] + t[0] + np.arange(len(r) + len(t) - 1, dtype=np.float64)
    row = _log_binom(n_x0, r) + r * log_k1
    col_mu = _log_binom(rest, t)
    col_shift = _log_binom(rest - 1, t - 1)
    tau = k2 * rest + (e0 - k2) * t
    with np.errstate(divide="ignore"):
        log_den = _diagonal_logsumexp(row, col_mu)
        log_tau_sum = _diagonal_logsumexp(row, col_mu + np.log(np.maximum(tau, 0.0)))
        if corrected:
            ratio = np.exp(_diagonal_logsumexp(row, col_shift) - log_den)
        else:
            weighted = col_shift + np.log(np.maximum(t, 0.0))
            ratio = np.exp(_diagonal_logsumexp(row, weighted) - log_den) / rest
    ratio = np.where(np.isfinite(log_den), np.nan_to_num(ratio, nan=0.0), 0.0)
    log_c3 = (
        n_x0 * math.log(k - 1)
        - n * math.log(e0 + k - 1)
        + (n - n_x0 - s_values) * math.log(e0 + k - 2)
    )
    log_p8 = log_c3 - math.log(rest) + log_tau_sum
    with np.errstate(divide="ignore"):
        v = np.log(k2 + (e0 - k2) * ratio)
    v.setflags(write=False)
    log_p8.setflags(write=False)
    return v, log_p8


def biswas2023_delta(
    epsilon: float,
    epsilon0: float,
    k: int,
    n: int,
    n_x0: int,
    *,
    corrected: bool = False,
) -> float:
    """Return δ̂(ε) of Def. 11 (k-RR paper) for the dataset with ``n_x0`` others at x₀.

    Args:
        epsilon: ε > 0.
        epsilon0: Local ε₀ of k-RR.
        k: Domain size, ≥ 2.
        n: Number of users, including the victim.
        n_x0: Other users holding x₀ (0 ≤ n_x0 ≤ n − 1).
        corrected: Use the log-ratio of eqs. 8 and 9 for v_s instead of Thm 1's
            printed expression.

    Returns:
        The formula's value: a reproduction of the paper (``corrected=False``) or
        the one-directional δ of the count of x₀ (``corrected=True``). Neither is
        a privacy guarantee.

    Raises:
        InvalidParameterError: For ε₀ > 700, where the printed formula's e^{ε₀}
            overflows a double.
    """
    epsilon = check_epsilon(epsilon)
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    if epsilon0 > 700.0:
        raise InvalidParameterError(
            f"epsilon0={epsilon0:g} is outside the range of the k-RR paper's formula as "
            "evaluated here (epsilon0 <= 700: e^epsilon0 overflows beyond it)"
        )
    k = check_int(k, "k", minimum=2)
    n = check_int(n, "n", minimum=1)
    n_x0 = check_int(n_x0, "n_x0", minimum=0, maximum=n - 1)
    v, log_p8 = _losses(epsilon0, k, n, n_x0, corrected)
    live = (v > epsilon) & np.isfinite(log_p8)
    total = float(np.sum(-np.expm1(epsilon - v[live]) * np.exp(log_p8[live])))
    return min(1.0, total)
