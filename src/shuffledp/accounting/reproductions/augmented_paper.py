"""The augmented shuffle paper's ν for SAGeo-Shuffle, from its LNF route in closed form.

Source: T. Murakami, Y. Sei and R. Eriguchi, "Augmented shuffle protocols for
accurate and robust frequency estimation under differential privacy", arXiv
2504.07362. The exact pair and its calibration are
:mod:`shuffledp.accounting.certificates.augmented`.

Group: reproductions (``shuffledp.accounting.reproductions``): a printed formula
kept under its source's name, never a certificate (registered, if at all, as
``BoundKind.REPRODUCTION``). May import the numerical core, published bounds
and certificates (to compare against them); nothing imports it but the
questions layer, protocols, experiments and the command line.
"""

from __future__ import annotations

import math

from shuffledp._validation import check_delta
from shuffledp.accounting.certificates.augmented import check_beta, check_law_epsilon

__all__ = ["paper_sageo_nu"]


def paper_sageo_nu(epsilon: float, delta: float, beta: float = 1.0) -> int:
    """Return ν from the LNF framework's per-bin route, in closed form (a reproduction).

    The paper proves SAGeo-Shuffle private through its LNF framework: the
    whole protocol is (ε, δ)-DP if the binary mechanism that runs the same
    process on one bit, Bin(x, β) + z with x ∈ {0, 1}, is (ε/2, δ/2)-DP (two
    bins change under replacement). That mechanism's ratios are e^{±ε/2}
    everywhere but at a zero count, where it leaves
    δ_bin = f(0)·(1 − e^{ε/2}(1 − β)) = c·f(0). With x = q_l^ν,
    f(0) = x/(A − Bx), A = q_l/(1 − q_l) + 1/(1 − q_r), B = q_l/(1 − q_l), so
    c·f(0) ≤ δ/2 exactly when x ≤ (δ/2)A/(c + (δ/2)B), giving
    ν = ⌈ln((δ/2)A/(c + (δ/2)B))/ln q_l⌉ with q_l, q_r at ε itself. This is
    re-derived from the paper's route (Murakami, Sei & Eriguchi, arXiv
    2504.07362, the SAGeo-Shuffle theorem); it gives ν = 27 at ε = 1,
    δ = 1e-6, β = 1, where the exact pair needs 25
    (:func:`~shuffledp.accounting.certificates.augmented.calibrate_sageo_nu`).
    Never a certificate: the protocol reports the exact δ of whatever ν it runs.
    """
    epsilon = check_law_epsilon(epsilon)
    delta = check_delta(delta)
    beta = check_beta(beta, epsilon)
    half = epsilon / 2.0
    q_l = (beta + math.expm1(-half)) / beta
    q_r = beta / (math.expm1(half) + beta)
    c = 1.0 - math.exp(half) * (1.0 - beta)
    if q_l <= 0.0 or c <= 0.0:
        return 0
    b = q_l / (1.0 - q_l)
    a = b + 1.0 / (1.0 - q_r)
    x = (delta / 2.0) * a / (c + (delta / 2.0) * b)
    if x >= 1.0:
        return 0
    return max(0, math.ceil(math.log(x) / math.log(q_l)))
