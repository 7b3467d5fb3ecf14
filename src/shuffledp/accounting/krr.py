"""Accounting for k-randomized response shuffled among n users (histogram output).

k-RR with local ε₀ reports the true value with probability a = e^{ε₀}/(e^{ε₀} + k − 1)
and each other value with probability b = 1/(e^{ε₀} + k − 1) (Def. 5 of the
k-RR paper). The shuffled output is the histogram of the n reports; a victim
moves from value x₀ to x₁ (replace-one neighbours).

Certified upper bound for every dataset (:func:`krr_delta`). Every user's
report is kb·Uniform([k]) + (a − b)·δ_{own value}. Reveal to the adversary which
other users drew from the uniform part ("blanket" users, BBGN 2019); the others
report their own value, which the adversary can subtract. What remains is the
victim's report plus B ~ Bin(n − 1, kb) uniform reports. Given B, the counts
of x₀ and x₁ are a two-count pair (C ~ Bin(B, 2/k), w₁ = a, w₂ = b), and the
rest carries nothing: blanket reports outside {x₀, x₁} and the victim's are all
uniform on the k − 2 other values. So, by joint convexity,

    δ(ε) ≤ Σ_B P[B]·H_ε(pair_B).

One more blanket report is a post-processing, so H_ε(pair_B) decreases in B;
B's window is summed value by value when it is at most 400 wide; otherwise in
blocks of about equal probability, split where a block's two ends disagree by
more than 0.2% of the total, each charged at its smallest B.

Lower bounds (:func:`krr_delta_lower_bound`). In a dataset where every other
user holds the same third value z, the likelihood ratio of the histogram
depends only on the counts of x₀, x₁ and z, and δ is an exact sum over two
dimensions (:func:`krr_delta_homogeneous`). Restricted further to the counts of
x₀ and x₁ it is the two-count pair C ~ Bin(n − 1, 2b), w₁ = a, w₂ = b
(:func:`krr_delta_two_count_marginal`).

That last pair is what the variation-ratio reduction (Thm 1 of the segmented
paper) gives with k-RR's parameters p = q = e^{ε₀}, β = (e^{ε₀} − 1)/(e^{ε₀} + k − 1),
and claims as an upper bound. It is not one: at n = 6, k = 4, ε₀ = 2, ε = 0.5
the histogram of the dataset above has δ = 0.30442 against the pair's 0.30431
(brute-force enumeration in the test suite). The extra information is the count
of z, which tells a little about whether the victim reported x₀ or x₁ at all.

k = 2 (binary randomized response): the histogram is the count of x₀, and the
exact δ of any dataset is a one-dimensional sum (:func:`krr_delta_for_dataset`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from shuffledp._validation import InvalidParameterError, check_epsilon, check_int
from shuffledp.accounting._binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_window,
    convolve,
    plus_bernoulli,
    reflected,
)
from shuffledp.accounting.hockey_stick import hockey_stick_both, rounding_allowance
from shuffledp.accounting.iid_blanket import IidBlanket, iid_blanket_delta
from shuffledp.accounting.two_counts import Rounding, TwoCountPair, two_count_delta

__all__ = [
    "krr_delta",
    "krr_delta_for_dataset",
    "krr_delta_homogeneous",
    "krr_delta_lower_bound",
    "krr_delta_two_count_marginal",
    "krr_marginal_delta",
    "krr_probabilities",
    "krr_two_count_pair",
]


def krr_probabilities(epsilon0: float, k: int) -> tuple[float, float]:
    """Return (a, b): k-RR's probability of the true value and of each other value."""
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    k = check_int(k, "k", minimum=2)
    denom = math.exp(epsilon0) + k - 1
    return math.exp(epsilon0) / denom, 1.0 / denom


def krr_two_count_pair(epsilon0: float, k: int, n: int) -> TwoCountPair:
    """The counts of x₀ and x₁ when no other user holds them: C ~ Bin(n − 1, 2b), w₁ = a, w₂ = b."""
    a, b = krr_probabilities(epsilon0, k)
    n = check_int(n, "n", minimum=1)
    return TwoCountPair(blanket=n - 1, rate=min(1.0, 2.0 * b), w1=a, w2=b)


def krr_delta_two_count_marginal(
    epsilon: float, epsilon0: float, k: int, n: int, *, rounding: Rounding = "down"
) -> float:
    """Return δ(ε) of the counts of x₀ and x₁ when no other user holds x₀ or x₁.

    A lower bound on k-RR's worst-case δ (rounded down by default). It is also
    the variation-ratio bound with k-RR's parameters, which is not an upper
    bound (see the module docstring).
    """
    epsilon = check_epsilon(epsilon)
    return two_count_delta(krr_two_count_pair(epsilon0, k, n), epsilon, rounding=rounding)


_BLOCKS = 32
#: Windows of B at most this wide are summed value by value.
_EXACT_UP_TO = 400
#: Split blocks until none spans more than this fraction of the bound (or the budget ends).
_REFINE_TOLERANCE = 0.002
_REFINE_BUDGET = 200


def krr_delta(
    epsilon: float,
    epsilon0: float,
    k: int,
    n: int,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return a δ(ε) that holds for every dataset (the blanket bound of the module docstring).

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
    a, b = krr_probabilities(epsilon0, k)
    n = check_int(n, "n", minimum=1)
    window = binomial_window(n - 1, min(1.0, k * b), tail)
    lo, hi = window.lo, window.hi
    rate = min(1.0, 2.0 / k)
    cache: dict[int, float] = {}

    def pair_delta(blanket: int) -> float:
        if blanket not in cache:
            pair = TwoCountPair(blanket=blanket, rate=rate, w1=a, w2=b)
            cache[blanket] = two_count_delta(pair, epsilon, rounding=rounding, tail=tail)
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


def krr_delta_homogeneous(
    epsilon: float, epsilon0: float, k: int, n: int, *, rounding: Rounding = "up"
) -> float:
    """Return the exact δ(ε) of the dataset where every other user holds one third value z.

    The other users' reports are i.i.d.: x₀ and x₁ with probability b each, z
    with probability a, each remaining value with b; the victim's report puts
    a on x₀ (b under the neighbour), b on x₁, b on z and b on each remaining
    value. :func:`shuffledp.accounting.iid_blanket.iid_blanket_delta` sums the
    histogram's likelihood ratio exactly. Needs k ≥ 3; the work grows like the
    product of the two count windows' widths (about n·b for large n).
    """
    epsilon = check_epsilon(epsilon)
    k = check_int(k, "k", minimum=3)
    n = check_int(n, "n", minimum=1)
    a, b = krr_probabilities(epsilon0, k)
    setting = IidBlanket(others=n - 1, o_sym=b, o_z=a, victim=(a, b, b, (k - 3) * b))
    return iid_blanket_delta(setting, epsilon, rounding=rounding)


def _one_dimensional_delta(
    epsilon: float, background: Window, p_d: float, p_d_prime: float, rounding: Rounding
) -> float:
    """Max over directions of H_ε between background + Ber(p_d) and background + Ber(p_d')."""
    first = plus_bernoulli(background, p_d).pmf
    second = plus_bernoulli(background, p_d_prime).pmf
    value = hockey_stick_both(first, second, epsilon)
    allowance = rounding_allowance(background.rel_error, len(first))
    if rounding == "up":
        return min(1.0, value + background.dropped + allowance)
    return max(0.0, value - math.exp(epsilon) * background.dropped - allowance)


def krr_marginal_delta(
    epsilon: float,
    epsilon0: float,
    k: int,
    n: int,
    others_at_value: int,
    *,
    rounding: Rounding = "down",
) -> float:
    """Return the exact δ(ε) of the count of x₀ alone, both directions.

    ``others_at_value`` users other than the victim hold x₀; the rest hold other
    values. The count of x₀ is a post-processing of the histogram, so this is a
    lower bound on the δ of that dataset (rounded down by default). It is the
    quantity the k-RR paper's Def. 11 sets out to compute, with the log-ratio of
    its eqs. 8–9 in place of the printed v_s.
    """
    epsilon = check_epsilon(epsilon)
    a, b = krr_probabilities(epsilon0, k)
    n = check_int(n, "n", minimum=1)
    m = check_int(others_at_value, "others_at_value", minimum=0, maximum=n - 1)
    background = convolve(binomial_window(m, a), binomial_window(n - 1 - m, b))
    return _one_dimensional_delta(epsilon, background, a, b, rounding)


_ENUMERATION_LIMIT = 2_000_000


def _enumerated_delta(
    epsilon: float,
    epsilon0: float,
    k: int,
    others: list[int],
    x0: int,
    x1: int,
    rounding: Rounding,
) -> float:
    """Exact δ by building the histogram's law user by user on the grid {0..n}^k.

    Each cell is a sum of at most kⁿ products of n probabilities, all positive,
    so its relative rounding error is below 2n·u; the allowance follows.
    """
    a, b = krr_probabilities(epsilon0, k)
    n = len(others) + 1

    def law(values: list[int]) -> np.ndarray:
        grid = np.zeros((n + 1,) * k)
        grid[(0,) * k] = 1.0
        for value in values:
            probs = np.full(k, b)
            probs[value] = a
            new = np.zeros_like(grid)
            for y in range(k):
                src = [slice(None)] * k
                dst = [slice(None)] * k
                src[y], dst[y] = slice(0, n), slice(1, n + 1)
                new[tuple(dst)] += probs[y] * grid[tuple(src)]
            grid = new
        return grid

    first, second = law([*others, x0]), law([*others, x1])
    value = hockey_stick_both(first, second, epsilon)
    allowance = rounding_allowance(2.0 * (n + 1) * 2.0**-53, first.size)
    if rounding == "up":
        return min(1.0, value + allowance)
    return max(0.0, value - allowance)


def krr_delta_for_dataset(
    epsilon: float,
    epsilon0: float,
    k: int,
    others: np.ndarray | list[int],
    *,
    x0: int = 0,
    x1: int = 1,
    rounding: Rounding = "up",
) -> float:
    """Return the exact δ(ε) of one neighbouring pair of datasets.

    The victim moves from x₀ to x₁; ``others[j]`` users besides the victim hold
    value j (a histogram of length k).

    * k = 2: the histogram is the count of x₀: a one-dimensional sum.
    * every other user on one value z ∉ {x₀, x₁}: :func:`krr_delta_homogeneous`.
    * otherwise, when (n + 1)^k ≤ 2e6: the histogram's law is enumerated.

    Raises:
        InvalidParameterError: When none of these applies (use :func:`krr_delta`
            for a bound that holds for every dataset).
    """
    epsilon = check_epsilon(epsilon)
    k = check_int(k, "k", minimum=2)
    counts = np.asarray(others)
    if counts.shape != (k,) or not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
        raise InvalidParameterError(
            f"others must be {k} non-negative integer counts, got {others!r}"
        )
    if not (0 <= x0 < k and 0 <= x1 < k and x0 != x1):
        raise InvalidParameterError(f"x0 and x1 must be distinct values in [0, {k - 1}]")
    n = int(counts.sum()) + 1
    if k == 2:
        a, b = krr_probabilities(epsilon0, 2)
        n0, n1 = int(counts[x0]), int(counts[x1])
        # Users at x1 report x0 with probability b = 1 − a: Bin(n1, b) = n1 − Bin(n1, a).
        background = convolve(binomial_window(n0, a), reflected(binomial_window(n1, a), n1))
        return _one_dimensional_delta(epsilon, background, a, b, rounding)
    support = np.flatnonzero(counts)
    if len(support) == 1 and support[0] not in (x0, x1):
        return krr_delta_homogeneous(epsilon, epsilon0, k, n, rounding=rounding)
    if n == 1:
        return krr_delta_homogeneous(epsilon, epsilon0, k, 1, rounding=rounding)
    if (n + 1) ** k <= _ENUMERATION_LIMIT:
        values = [int(v) for v in np.repeat(np.arange(k), counts)]
        return _enumerated_delta(epsilon, epsilon0, k, values, x0, x1, rounding)
    raise InvalidParameterError(
        f"the exact delta of this dataset needs its whole histogram law ({n + 1}^{k} cells); "
        "use krr_delta (valid for every dataset) and krr_delta_lower_bound"
    )


def krr_delta_lower_bound(epsilon: float, epsilon0: float, k: int, n: int) -> float:
    """Return the exact δ of a concrete neighbouring pair: a lower bound on the worst case.

    For k ≥ 3 the dataset whose other users all hold one third value
    (:func:`krr_delta_homogeneous`, rounded down) when its two-dimensional sum is
    affordable (n ≤ 3e4), else the two-count marginal of that dataset. For k = 2
    the largest exact δ over up to 33 splits of the other users between x₀ and x₁.
    """
    k = check_int(k, "k", minimum=2)
    n = check_int(n, "n", minimum=1)
    if k >= 3:
        marginal = krr_delta_two_count_marginal(epsilon, epsilon0, k, n)
        if n <= 30_000:
            return max(marginal, krr_delta_homogeneous(epsilon, epsilon0, k, n, rounding="down"))
        return marginal
    splits = np.unique(np.linspace(0, n - 1, num=min(n, 33)).round().astype(int))
    return max(
        krr_delta_for_dataset(
            epsilon, epsilon0, 2, np.array([int(m), n - 1 - int(m)]), rounding="down"
        )
        for m in splits
    )
