"""Accounting for k-randomized response shuffled among n users (histogram output).

Source: S. Biswas, K. Jung and C. Palamidessi, "Tight differential privacy guarantees
for the shuffle model with k-randomized response", FPS 2023, arXiv 2205.08858.

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

Nothing in this argument depends on what the other users hold: the
decomposition applies to each of them whatever its value, the non-blanket
reports are the same fixed counts under both neighbouring datasets, and the
law of (victim + blanket reports) given B is the same for every dataset. So
the bound covers every dataset, including the ones that are worst at a given
(n, k, ε₀, ε), which vary (see below).

Lower bounds (:func:`krr_delta_lower_bound`). In a dataset where every other
user holds the same third value z (k ≥ 3), the likelihood ratio of the
histogram depends only on the counts of x₀, x₁ and z, and δ is an exact sum
over two dimensions (:func:`krr_delta_homogeneous`). Restricted further to the
counts of x₀ and x₁ it is the two-count pair C ~ Bin(n − 1, 2b), w₁ = a,
w₂ = b (:func:`krr_delta_two_count_marginal`). That dataset is often the worst
one, but not always: enumerating every dataset for n ≤ 8 and k ≤ 4 finds
other datasets worse in about a quarter of the configurations, mostly for ε
close to ε₀ (at n = 8, k = 3, ε₀ = 8, ε = 7.999992 it has δ = 3.8e-30 while
the dataset with every other user on x₁ has 7.96e-6). Its δ is a lower
bound, not the worst case.

That last pair is what the variation-ratio reduction (Thm 1 of the segmented
paper) gives with k-RR's parameters p = q = e^{ε₀}, β = (e^{ε₀} − 1)/(e^{ε₀} + k − 1),
and claims as an upper bound. It is not one: at n = 6, k = 4, ε₀ = 2, ε = 0.5
the histogram of the dataset above has δ = 0.30442 against the pair's 0.30431
(brute-force enumeration in the test suite). The extra information is the count
of z, which tells a little about whether the victim reported x₀ or x₁ at all.

k = 2 (binary randomized response): there is no third value. The histogram
is the count of x₀, the exact δ of any dataset is a one-dimensional sum
(:func:`krr_delta_for_dataset`), and only the split (n₀ other users on x₀, n₁ on
x₁) matters; the largest δ over all n splits is the exact worst case
(:func:`krr_binary_split_delta`).

Numerics. a and b are computed from e^{−ε₀} (no overflow, no 1 − x of an x
near 1; :func:`~shuffledp.randomizers.krr.krr_probabilities`, the randomizer's own
floats, re-exported here), and so is every probability near 1's complement (1 − kb, 1 − a), so
each is within a few rounding units of the truth; that is what the
certificates' allowances assume.

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core, published
bounds and other certificates, never reproductions, composition or the questions layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from shuffledp._validation import InvalidParameterError, check_epsilon, check_int, check_rounding
from shuffledp.accounting.numerics.binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_window,
    convolve,
    plus_bernoulli,
)
from shuffledp.accounting.numerics.hockey_stick import certified_hockey_stick
from shuffledp.accounting.numerics.iid_blanket import IidBlanket, iid_blanket_delta
from shuffledp.accounting.numerics.mixture import mixture_curve, mixture_delta
from shuffledp.accounting.numerics.two_counts import Rounding, TwoCountPair, two_count_delta
from shuffledp.randomizers.krr import krr_probabilities, krr_probabilities_unchecked

__all__ = [
    "ALL_SPLITS_UP_TO",
    "LOG_RANGE",
    "krr_binary_split_delta",
    "krr_delta",
    "krr_delta_curve",
    "krr_delta_for_dataset",
    "krr_delta_homogeneous",
    "krr_delta_lower_bound",
    "krr_delta_two_count_marginal",
    "krr_marginal_delta",
    "krr_probabilities",
    "krr_two_count_pair",
]


#: The accountants need b = 1/(e^{ε₀} + k − 1) ≥ 1e-300 (a normal double with full precision).
LOG_RANGE = 690.0


def _accounted(epsilon0: float, k: int) -> tuple[float, float]:
    """(a, b) for an accountant, refusing ε₀ where b would lose precision."""
    return _in_range(check_epsilon(epsilon0, "epsilon0"), check_int(k, "k", minimum=2))


def _in_range(epsilon0: float, k: int) -> tuple[float, float]:
    """:func:`_accounted` on checked ε₀ and k: the accountant's range is still enforced."""
    if epsilon0 + math.log(k) > LOG_RANGE:
        raise InvalidParameterError(
            f"epsilon0={epsilon0:g} with k={k} is outside the k-RR accountant's range "
            f"(epsilon0 + ln k <= {LOG_RANGE:g}: beyond it 1/(e^epsilon0 + k - 1) < 1e-300); "
            "for epsilon >= epsilon0 the local guarantee alone gives delta = 0"
        )
    return krr_probabilities_unchecked(epsilon0, k)


def _not_a(epsilon0: float, k: int) -> float:
    """1 − a = (k − 1)·b, computed directly."""
    return (k - 1) * krr_probabilities_unchecked(epsilon0, k)[1]


def krr_two_count_pair(epsilon0: float, k: int, n: int) -> TwoCountPair:
    """The counts of x₀ and x₁ when every other user holds a third value z (k ≥ 3).

    C ~ Bin(n − 1, 2b), w₁ = a, w₂ = b, w₀ = (k − 2)b.
    """
    k = check_int(k, "k", minimum=3)
    a, b = _accounted(epsilon0, k)
    n = check_int(n, "n", minimum=1)
    return TwoCountPair(blanket=n - 1, rate=2.0 * b, w1=a, w2=b, w0=(k - 2) * b)


def krr_delta_two_count_marginal(
    epsilon: float, epsilon0: float, k: int, n: int, *, rounding: Rounding = "down"
) -> float:
    """Return δ(ε) of the counts of x₀ and x₁ when every other user holds a third value.

    A lower bound on k-RR's worst-case δ (rounded down by default). It is also
    the variation-ratio bound with k-RR's parameters, which is not an upper
    bound (see the module docstring). Needs k ≥ 3: with k = 2 that dataset does
    not exist (and the pair would be the generic variation-ratio upper bound).
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    return two_count_delta(krr_two_count_pair(epsilon0, k, n), epsilon, rounding=rounding)


def krr_delta(
    epsilon: float,
    epsilon0: float,
    k: int,
    n: int,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
    target: float | None = None,
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
            of B at its largest B and rounds the pairs down: a lower bound on
            this bound, used to measure how much the blocking costs.
        tail: Mass left out of each binomial window, which sets the smallest δ
            resolved; smaller values cost wider sums.
        target: The δ the caller will compare the answer with: the sum stops
            refining once the comparison is decided (the answer is still an
            upper bound; see :func:`shuffledp.accounting.numerics.mixture.mixture_delta`).
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    k = check_int(k, "k", minimum=2)
    n = check_int(n, "n", minimum=1)
    return _krr_delta(epsilon, epsilon0, k, n, rounding=rounding, tail=tail, target=target)


def _krr_delta(
    epsilon: float,
    epsilon0: float,
    k: int,
    n: int,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
    target: float | None = None,
) -> float:
    """:func:`krr_delta` on checked inputs: what the registry's searches evaluate."""
    if epsilon >= epsilon0:
        return 0.0
    window, pair_at = _blanket_mixture(epsilon0, k, n, tail)
    return mixture_delta(window, pair_at, epsilon, rounding=rounding, tail=tail, target=target)


def krr_delta_curve(
    epsilon: float, epsilon0: float, k: int, n: int, *, tail: float = DEFAULT_TAIL
) -> Callable[[float], float]:
    """Return :func:`krr_delta`'s blocks refined at ``epsilon`` as a certified δ(·) curve.

    Valid (an upper bound for every dataset) at every ε, tight near ``epsilon``:
    what a search for ε(δ) evaluates many times. 0 at ε ≥ ε₀.
    """
    epsilon = check_epsilon(epsilon)
    e0 = check_epsilon(epsilon0, "epsilon0")
    k = check_int(k, "k", minimum=2)
    n = check_int(n, "n", minimum=1)
    return _krr_delta_curve(epsilon, e0, k, n, tail=tail)


def _krr_delta_curve(
    epsilon: float, epsilon0: float, k: int, n: int, *, tail: float = DEFAULT_TAIL
) -> Callable[[float], float]:
    """:func:`krr_delta_curve` on checked inputs (the curve itself checks nothing)."""
    window, pair_at = _blanket_mixture(epsilon0, k, n, tail)
    curve = mixture_curve(window, pair_at, min(epsilon, epsilon0), tail=tail)
    return lambda e: 0.0 if e >= epsilon0 else curve(e)


def _blanket_mixture(
    epsilon0: float, k: int, n: int, tail: float
) -> tuple[Window, Callable[[int, int, str, float], tuple[TwoCountPair, float]]]:
    """B's window and the virtual pairs of a block of B (the module docstring's mixture).

    On checked inputs (ε₀ > 0, k ≥ 2, n ≥ 1): its two callers validate them once.
    """
    a, b = _in_range(epsilon0, k)
    # B ~ Bin(n − 1, kb); 1 − kb = (1 − e^{−ε₀})·a computed directly.
    window = binomial_window(n - 1, min(1.0, k * b), tail, -math.expm1(-epsilon0) * a)
    rate, rate_complement = min(1.0, 2.0 / k), max(0.0, (k - 2) / k)
    # Each round of the mixture's refinement asks again for every block's pairs: one
    # pair per number of blanket reports, built once.
    pairs: dict[int, TwoCountPair] = {}

    def pair_at(first: int, last: int, side: str, probability: float) -> tuple[TwoCountPair, float]:
        # δ(pair_B) does not increase with B: the fewest blanket reports bound a
        # block from above, one more than the most from below (the next block's top).
        blanket = first if side == "upper" else last + 1
        pair = pairs.get(blanket)
        if pair is None:
            pair = pairs[blanket] = TwoCountPair(
                blanket=blanket,
                rate=rate,
                w1=a,
                w2=b,
                w0=(k - 2) * b,
                rate_complement=rate_complement,
            )
        return pair, probability

    return window, pair_at


def krr_delta_homogeneous(
    epsilon: float, epsilon0: float, k: int, n: int, *, rounding: Rounding = "up"
) -> float:
    """Return the exact δ(ε) of the dataset where every other user holds one third value z.

    The other users' reports are i.i.d.: x₀ and x₁ with probability b each, z
    with probability a, each remaining value with b; the victim's report puts
    a on x₀ (b under the neighbour), b on x₁, b on z and b on each remaining
    value. :func:`shuffledp.accounting.numerics.iid_blanket.iid_blanket_delta` sums the
    histogram's likelihood ratio exactly. Needs k ≥ 3; the work grows like the
    product of the two count windows' widths (about n·b for large n).
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    k = check_int(k, "k", minimum=3)
    n = check_int(n, "n", minimum=1)
    a, b = _accounted(epsilon0, k)
    setting = IidBlanket(
        others=n - 1, o_sym=b, o_z=a, victim=(a, b, b, (k - 3) * b), o_r=(k - 3) * b
    )
    return iid_blanket_delta(setting, epsilon, rounding=rounding)


def _one_dimensional_delta(
    epsilon: float,
    background: Window,
    victim: tuple[float, float],
    victim_prime: tuple[float, float],
    rounding: Rounding,
) -> float:
    """Max over directions of H_ε between background + Ber(p) and background + Ber(p').

    ``victim`` and ``victim_prime`` are (P[Z = 1], P[Z = 0]), each computed directly.
    """
    first = plus_bernoulli(background, *victim)
    second = plus_bernoulli(background, *victim_prime)
    return certified_hockey_stick(
        first.pmf,
        second.pmf,
        epsilon,
        relative_error=max(first.rel_error, second.rel_error),
        dropped=background.dropped,
        rounding=rounding,
    )


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
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    a, b = _accounted(epsilon0, k)
    not_a = _not_a(epsilon0, k)
    n = check_int(n, "n", minimum=1)
    m = check_int(others_at_value, "others_at_value", minimum=0, maximum=n - 1)
    background = convolve(binomial_window(m, a, DEFAULT_TAIL, not_a), binomial_window(n - 1 - m, b))
    return _one_dimensional_delta(epsilon, background, (a, not_a), (b, 1.0 - b), rounding)


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
    each probability within 4u of the truth, so its relative error is below
    6n·u (4u per factor, one rounding per product and per sum). On checked inputs.
    """
    a, b = _in_range(epsilon0, k)
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
    return certified_hockey_stick(
        first.ravel(),
        second.ravel(),
        epsilon,
        relative_error=6.0 * (n + 1) * 2.0**-53,
        rounding=rounding,
    )


def _binary_dataset_delta(
    epsilon: float, ab: tuple[float, float], n0: int, n1: int, *, rounding: Rounding
) -> float:
    """Exact δ for k = 2 with n₀ other users on x₀ and n₁ on x₁ (the count of x₀ is the output).

    ``ab``: k-RR's (a, b) at k = 2 (:func:`_accounted`), computed once for every split.
    """
    a, b = ab
    # Users on x₀ report x₀ with probability a (1 − a = b); users on x₁ with probability b.
    background = convolve(binomial_window(n0, a, DEFAULT_TAIL, b), binomial_window(n1, b))
    return _one_dimensional_delta(epsilon, background, (a, b), (b, a), rounding)


#: For k = 2 and n up to this, every split of the other users is evaluated.
ALL_SPLITS_UP_TO = 256
#: Above, this many evenly spaced splits (fewer beyond 1e4 users, where every
#: split's background has the same variance (n − 1)ab and their δs nearly agree).
_SPLITS, _SPLITS_LARGE, _LARGE = 65, 17, 10_000


def krr_binary_split_delta(
    epsilon: float, epsilon0: float, n: int, *, rounding: Rounding = "down"
) -> float:
    """Return the largest exact δ(ε) over splits of the other users, for k = 2.

    With two values every dataset is a split: n₀ other users on x₀ and
    n − 1 − n₀ on x₁ (the victim moves x₀ → x₁; the reverse move is the same
    split mirrored, and :func:`krr_delta_for_dataset` takes both directions).
    For n ≤ :data:`ALL_SPLITS_UP_TO` all n splits are evaluated, so the result
    is the exact worst case (rounded down by default); above, 65 evenly spaced
    splits (17 beyond 1e4 users), a lower bound. Every value is attained by a
    dataset that exists.
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    n = check_int(n, "n", minimum=1)
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
    ab = _in_range(epsilon0, 2)
    if epsilon >= epsilon0:
        return 0.0  # k-RR is ε₀-LDP: δ = 0 for every dataset
    if n <= ALL_SPLITS_UP_TO:
        splits = np.arange(n)
    else:
        count = _SPLITS if n <= _LARGE else _SPLITS_LARGE
        splits = np.unique(np.linspace(0, n - 1, num=count).round().astype(int))
    return max(
        _binary_dataset_delta(epsilon, ab, int(m), n - 1 - int(m), rounding=rounding)
        for m in splits
    )


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
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    epsilon0 = check_epsilon(epsilon0, "epsilon0")
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
        return _binary_dataset_delta(
            epsilon, _in_range(epsilon0, 2), int(counts[x0]), int(counts[x1]), rounding=rounding
        )
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
    affordable (n ≤ 3e4), else the two-count marginal of that dataset. That
    dataset is not always the worst one (see the module docstring). For k = 2
    the largest exact δ over splits of the other users between x₀ and x₁
    (:func:`krr_binary_split_delta`). 0 for ε ≥ ε₀, where δ = 0 exactly.
    """
    epsilon = check_epsilon(epsilon)
    k = check_int(k, "k", minimum=2)
    n = check_int(n, "n", minimum=1)
    _accounted(epsilon0, k)
    if epsilon >= epsilon0:
        return 0.0
    if k >= 3:
        marginal = krr_delta_two_count_marginal(epsilon, epsilon0, k, n)
        if n <= 30_000:
            return max(marginal, krr_delta_homogeneous(epsilon, epsilon0, k, n, rounding="down"))
        return marginal
    return krr_binary_split_delta(epsilon, epsilon0, n)
