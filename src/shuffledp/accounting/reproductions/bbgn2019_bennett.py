"""The privacy blanket's Bennett bound as its authors' reference implementation integrates it.

Source: B. Balle, J. Bell, A. Gascón and K. Nissim, "The privacy blanket of the
shuffle model", CRYPTO 2019, arXiv 1903.02837. The sound integration of the
same inequality is :func:`shuffledp.accounting.published.generic_bounds.bbgn2019_bennett_delta`;
the reference implementation divides by m·(a/b₊)·ln(1 + β), a factor m·a
smaller, and falls below the exact δ of binary randomized response at large n.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate (registered, if at all, as
``BoundKind.REPRODUCTION``). May import the numerical core, published bounds
and certificates (to compare against them); nothing imports it but the
questions layer, protocols, experiments and the command line.
"""

from __future__ import annotations

import math

import numpy as np

from shuffledp._validation import check_epsilon, check_int
from shuffledp.accounting.numerics.binomial import DEFAULT_TAIL, binomial_window
from shuffledp.accounting.published.generic_bounds import Bound, bbgn_log_constants, bennett_parts

__all__ = ["bbgn2019_bennett_published_delta"]


def bbgn2019_bennett_published_delta(epsilon: float, epsilon0: float, n: int) -> Bound:
    """The Bennett bound as the authors' reference implementation computes it (not certified).

    δ = (1/(γn))·E_{M∼Bin(n,γ)}[e^{−Mαφ(β)}/(M·(a/b₊)·ln(1 + β))] over M ≥ 1. Kept for
    reproduction: against binary randomized response at n = 1e6, ε₀ = 1,
    ε = 0.002 it gives 8.6e-6 while a concrete dataset has δ = 1.1e-5 (tests).
    """
    epsilon = check_epsilon(epsilon)
    epsilon0, n = check_epsilon(epsilon0, "epsilon0"), check_int(n, "n", minimum=1)
    reason = "a published formula that is not a guarantee"
    if epsilon >= epsilon0:
        return Bound(0.0, False, reason)
    k = bbgn_log_constants(epsilon, epsilon0)
    alpha_phi, _, log_log1p = bennett_parts(k)
    window = binomial_window(n, math.exp(k.log_gamma), DEFAULT_TAIL, -math.expm1(k.log_gamma))
    m = np.arange(window.lo, window.hi + 1, dtype=np.float64)
    keep = m >= 1
    log_terms = (
        -m[keep] * alpha_phi
        - np.log(m[keep])
        - (k.log_a - k.log_max)
        - log_log1p
        - k.log_gamma
        - math.log(n)
    )
    with np.errstate(over="ignore"):
        value = float(np.sum(window.pmf[keep] * np.exp(np.minimum(log_terms, 700.0))))
    return Bound(min(1.0, value), False, reason)
