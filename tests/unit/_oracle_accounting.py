"""The accountants as they were before the blocked sums (issue 8), kept as test oracles.

``krr_delta_before`` is ``shuffledp.accounting.krr.krr_delta`` as it stood, with
every pair summed line by line (``two_count_delta_lines``); ``poisson_delta_before``
is the two-dimensional exact sum of the reduced view (``iid_blanket_delta``).
The new implementations must stay upper bounds and within 1% of these.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from shuffledp._validation import check_epsilon, check_int
from shuffledp.accounting._binomial import DEFAULT_TAIL, binomial_window
from shuffledp.accounting.iid_blanket import IidBlanket, iid_blanket_delta
from shuffledp.accounting.krr import _accounted
from shuffledp.accounting.two_counts import Rounding, TwoCountPair, two_count_delta_lines

_BLOCKS = 32
_EXACT_UP_TO = 400
_REFINE_TOLERANCE = 0.002
_REFINE_BUDGET = 200


def krr_delta_before(
    epsilon: float,
    epsilon0: float,
    k: int,
    n: int,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return a δ(ε) that holds for every dataset (the blanket bound of the module docstring).

    Why every dataset, whichever is worst: each other user's report is a
    mixture kb·Uniform([k]) + (1 − kb)·(its own value), whatever that value is.
    Given which users drew from the uniform part, the others' reports are
    fixed counts, identical under both neighbouring datasets; what remains is
    the victim's report plus B uniform reports, whose law depends on B alone
    and not on the dataset. The counts of x₀ and x₁ are sufficient for it (a
    report outside {x₀, x₁} is uniform on the other k − 2 values, whoever sent
    it), giving the two-count pair of the module docstring. Joint convexity of
    H_ε over the mixture in B (and in which users are blanket) gives
    δ(D, D') ≤ Σ_B P[B]·H_ε(pair_B) for every pair D, D'.

    For ε ≥ ε₀ the answer is 0: k-RR is ε₀-LDP, so the shuffled histogram is
    (ε₀, 0)-DP whatever the other users hold.

    Args:
        epsilon: ε > 0.
        epsilon0: Local ε₀ of k-RR.
        k: Domain size, ≥ 2.
        n: Number of users.
        rounding: ``"up"`` (certified upper bound). ``"down"`` charges each block
            at its largest B and rounds the pairs down: a lower bound on this
            bound, used to measure how much the blocking costs.
        tail: Mass left out of each binomial window, which sets the smallest δ
            resolved; smaller values cost wider sums.
    """
    epsilon = check_epsilon(epsilon)
    if epsilon >= check_epsilon(epsilon0, "epsilon0"):
        return 0.0
    a, b = _accounted(epsilon0, k)
    n = check_int(n, "n", minimum=1)
    # B ~ Bin(n − 1, kb); 1 − kb = (1 − e^{−ε₀})·a computed directly.
    window = binomial_window(n - 1, min(1.0, k * b), tail, -math.expm1(-epsilon0) * a)
    lo, hi = window.lo, window.hi
    rate, rate_complement = min(1.0, 2.0 / k), max(0.0, (k - 2) / k)
    cache: dict[int, float] = {}

    def pair_delta(blanket: int) -> float:
        if blanket not in cache:
            pair = TwoCountPair(
                blanket=blanket,
                rate=rate,
                w1=a,
                w2=b,
                w0=(k - 2) * b,
                rate_complement=rate_complement,
            )
            cache[blanket] = two_count_delta_lines(pair, epsilon, rounding=rounding, tail=tail)
        return cache[blanket]

    cumulative = np.concatenate([[0.0], np.cumsum(window.pmf)])
    if len(window.pmf) <= _EXACT_UP_TO:
        total = float(sum(window.pmf[i] * pair_delta(lo + i) for i in range(len(window.pmf))))
    else:
        # Blocks of about equal probability, then split where the block's two ends
        # disagree: H_ε(pair_B) decreases in B, so a block [i, j) lies between
        # mass·δ(j − 1) and mass·δ(i); it is charged at the safe end.
        cuts = np.searchsorted(cumulative[1:], np.linspace(0, cumulative[-1], _BLOCKS + 1)[1:-1])
        edges = sorted(set(np.concatenate([[0], cuts, [len(window.pmf)]]).tolist()))
        blocks = [(int(i), int(j)) for i, j in itertools.pairwise(edges) if j > i]
        for _ in range(_REFINE_BUDGET):
            spans = [
                (cumulative[j] - cumulative[i]) * (pair_delta(lo + i) - pair_delta(lo + j - 1))
                for i, j in blocks
            ]
            upper = sum((cumulative[j] - cumulative[i]) * pair_delta(lo + i) for i, j in blocks)
            worst = int(np.argmax(spans))
            i, j = blocks[worst]
            if spans[worst] <= _REFINE_TOLERANCE * upper or j - i <= 1:
                break
            mid = (i + j) // 2
            blocks[worst : worst + 1] = [(i, mid), (mid, j)]
        total = sum(
            (cumulative[j] - cumulative[i]) * pair_delta(lo + (i if rounding == "up" else j - 1))
            for i, j in blocks
        )
    mass_error = window.rel_error + (hi - lo + 2) * 2.0**-53
    if rounding == "up":
        return min(1.0, total * (1.0 + mass_error) + window.dropped)
    return max(0.0, total * (1.0 - mass_error))


def poisson_delta_before(
    epsilon: float,
    report_probability: float,
    domain_size: int,
    blanket_messages: int,
    *,
    blanket_probability: float = 1.0,
    rounding: Rounding = "up",
) -> float:
    """The exact two-dimensional sum over (count of x0 and x1, count of other items)."""
    lam, d, n_msg, gamma = report_probability, domain_size, blanket_messages, blanket_probability
    setting = IidBlanket(
        others=n_msg,
        o_sym=gamma / d,
        o_z=gamma * (d - 2) / d,
        victim=(lam, 0.0, 0.0, 1.0 - lam),
        o_r=1.0 - gamma,
    )
    return iid_blanket_delta(setting, epsilon, rounding=rounding)
