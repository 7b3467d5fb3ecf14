"""δ of a mixture of two-count pairs over an observed (or revealed) count.

Two certificates are averages, over a count T the adversary sees or is given,
of the divergence of a two-count pair (:mod:`shuffledp.accounting.numerics.two_counts`)
whose parameters depend on T:

* k-RR (:func:`shuffledp.accounting.certificates.krr.krr_delta`): T = B, the number of
  other users whose report came from the uniform part; pair_B has B blanket
  messages and the victim's fixed weights.
* The Poisson randomizer (:func:`shuffledp.accounting.certificates.poisson.poisson_delta`):
  T, the number of messages the analyzer receives; pair_T has T − 1 blanket
  messages and a victim who is present with a probability λ_T that grows with T.

When T is revealed, δ = Σ_T P[T]·H_ε(pair_T) exactly (the view is the pair
(T, the pair's counts) and P[T] is the same under both datasets).

Evaluation by blocks of T. The divergence of a two-count pair does not
increase when the number of blanket messages grows (one more message is the
same kernel under both laws), and does not decrease when the victim's message
is present more often (P_λ' = (λ'/λ)P_λ + (1 − λ'/λ)N with N the law without
the victim's message, the same N under both datasets, so joint convexity
gives H(P_λ'‖Q_λ') ≤ (λ'/λ)·H(P_λ‖Q_λ)). So over a block of T values
[t₁, t₂] each pair_T lies between two "virtual" pairs: the fewest blanket
messages with the most-present victim (above) and the most blanket messages
with the least-present victim (below). The block's probability times the
upper pair's δ (rounded up) bounds the block's share of δ; the blocks are cut
at equal probability and the widest gaps halved until the two sides are within
a tolerance. The mass of T outside its window (a Bernstein bound) is added.

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import check_rounding
from shuffledp.accounting.numerics.binomial import DEFAULT_TAIL, Window
from shuffledp.accounting.numerics.two_counts import (
    BlockMemo,
    FrozenLines,
    Rounding,
    TwoCountPair,
    frozen_deltas,
    frozen_upper_lines,
    two_count_deltas,
)

__all__ = [
    "INNER_TOLERANCE",
    "OUTER_TOLERANCE",
    "DeltaCurve",
    "PairAt",
    "mixture_curve",
    "mixture_delta",
]

#: ``pair_at(t_first, t_last, side, probability)``: a virtual pair and a weight w such that
#: w·δ(pair) bounds Σ_{T in the block} P[T]·δ(pair_T) from above (``side="upper"``) or
#: below (``"lower"``); ``probability`` is P[T in the block], the usual weight. ``None``
#: when that side is 0.
PairAt = Callable[[int, int, Literal["upper", "lower"], float], "tuple[TwoCountPair, float] | None"]

_UNIT_ROUNDOFF = 2.0**-53
#: Blocks of T the sum starts from (equal probability).
_FIRST_BLOCKS = 8
_MAX_ROUNDS = 40
#: Relative gap of the outer blocks at which the refinement stops.
OUTER_TOLERANCE = 3e-3
#: Tolerance of each pair's own block sum in a mixture (hundreds of pairs per answer:
#: tighter than the outer gap, looser than one pair's default).
INNER_TOLERANCE = 2e-3
#: Relative tolerance of a sum that is only compared with a target (deciding mode).
_DECIDING_TOLERANCE = 1e-2
#: Tolerance of the pair sums that steer the refinement (the answer is recomputed).
_STEERING_TOLERANCE = 0.005
#: A sum whose lower side (steering sums, each at most 2% above its pair's exact δ)
#: exceeds the target by this factor is decided above it: so is every finer sum.
_CLEARLY_ABOVE = 1.05
#: Pair evaluations after which the refinement stops whatever the gap (a small n, where
#: the pairs change fast with T, would otherwise need one per value of T).
_PAIR_BUDGET = 1024


def _mixture(
    window: Window,
    pair_at: PairAt,
    epsilon: float,
    *,
    rounding: Rounding = "up",
    tolerance: float = OUTER_TOLERANCE,
    inner_tolerance: float = INNER_TOLERANCE,
    tail: float = DEFAULT_TAIL,
    target: float | None = None,
    weight_error: float = 0.0,
    curve: bool = False,
) -> float | DeltaCurve:
    """The refinement behind :func:`mixture_delta` and :func:`mixture_curve`."""
    if target is not None and not curve:
        # A comparison needs less precision than a reported number: a value that
        # passes is certified whatever the tolerance, and one within a percent of
        # the target costs its caller under a percent of its parameter.
        tolerance = max(tolerance, _DECIDING_TOLERANCE)
        inner_tolerance = max(inner_tolerance, _DECIDING_TOLERANCE / 2.0)
    pmf = window.pmf
    n = len(pmf)
    cumulative = np.concatenate([[0.0], np.cumsum(pmf)])  # to cut blocks only
    estimates: dict[TwoCountPair | None, float] = {None: 0.0}
    memo: BlockMemo = {}  # each pair's blocks: the answer refines them further

    def upper_values(pairs: list[TwoCountPair | None]) -> NDArray[np.float64]:
        # Where to cut: each pair's sum to a coarse tolerance, rounded up (cached;
        # new pairs evaluated together). Both sides of a block alike, so the gap
        # compares like with like; the answer is then recomputed to the tolerance.
        new = [pair for pair in dict.fromkeys(pairs) if pair not in estimates]
        if new:
            found = two_count_deltas(
                [pair for pair in new if pair is not None],
                epsilon,
                rounding="up",
                tail=tail,
                tolerance=_STEERING_TOLERANCE,
                memo=memo,
            )
            estimates.update(zip(new, found, strict=True))
        return np.array([estimates[pair] for pair in pairs])

    if n <= _FIRST_BLOCKS:
        edges = list(range(n + 1))
    else:
        cuts = np.searchsorted(
            cumulative[1:], np.linspace(0.0, cumulative[-1], _FIRST_BLOCKS + 1)[1:-1]
        )
        edges = sorted({0, n, *[int(c) for c in cuts if 0 < c < n]})
    for _ in range(_MAX_ROUNDS):
        blocks = list(itertools.pairwise(edges))
        # Direct sums of positive terms (a difference of prefix sums could cancel).
        masses = np.add.reduceat(pmf, np.array(edges[:-1], dtype=np.int64))
        tops = [
            pair_at(window.lo + i, window.lo + j - 1, "upper", float(m))
            for (i, j), m in zip(blocks, masses, strict=True)
        ]
        bottoms = [
            pair_at(window.lo + i, window.lo + j - 1, "lower", float(m))
            for (i, j), m in zip(blocks, masses, strict=True)
        ]
        values = upper_values([None if b is None else b[0] for b in tops + bottoms])
        weights = np.array([0.0 if b is None else b[1] for b in tops + bottoms])
        upper = values[: len(blocks)] * weights[: len(blocks)]
        gap = upper - values[len(blocks) :] * weights[len(blocks) :]
        widths = np.array([j - i for i, j in blocks])
        budget = tolerance * float(np.sum(upper))
        if float(np.sum(gap)) <= budget or np.all(widths == 1):
            break
        if (
            target is not None
            and not curve
            and rounding == "up"
            and (
                float(np.sum(upper)) <= target
                or float(np.sum(upper - gap)) > _CLEARLY_ABOVE * target
            )
        ):
            # Decided: the steering sums are certified upper bounds of the blocks'
            # tops, and the bottoms' exact values exceed the target.
            return _finish(float(np.sum(upper)), window, n, weight_error, "up")
        if len(estimates) >= _PAIR_BUDGET:
            break  # small n: the pairs change fast with T; the blocks as they stand still bound δ
        fair = budget / len(blocks)
        chosen = np.flatnonzero((gap > fair) & (widths > 1))
        if len(chosen) == 0:
            chosen = np.array([int(np.argmax(np.where(widths > 1, gap, -1.0)))])
        for b in chosen.tolist():
            i, j = blocks[b]
            edges.append((i + j) // 2)
        edges = sorted(set(edges))
    if curve:
        present = list(dict.fromkeys(b[0] for b in tops if b is not None))
        frozen = dict(
            zip(
                present,
                frozen_upper_lines(present, epsilon, tail=tail, tolerance=inner_tolerance),
                strict=True,
            )
        )
        kept = [b for b in tops if b is not None]
        return DeltaCurve(
            lines=[frozen[b[0]] for b in kept],
            weights=np.array([b[1] for b in kept]),
            window=window,
            mass_error=window.rel_error + (n + 2) * _UNIT_ROUNDOFF + weight_error,
        )
    side = tops if rounding == "up" else bottoms
    present = list(dict.fromkeys(b[0] for b in side if b is not None))
    found = two_count_deltas(
        present,
        epsilon,
        rounding=rounding,
        tail=tail,
        tolerance=inner_tolerance,
        memo=memo,
    )
    final = dict(zip(present, found, strict=True))
    total = sum(0.0 if b is None else b[1] * final[b[0]] for b in side)
    return _finish(total, window, n, weight_error, rounding)


@dataclass(frozen=True)
class DeltaCurve:
    """A certified δ(ε) for every ε from one set of blocks refined at one ε.

    The blocks of T and each top pair's blocks of lines are kept; any such
    partition bounds δ from above at every ε, so evaluating it at another ε is
    one vectorized pass (what a search for ε(δ) needs), tight near the ε it
    was refined at.

    Attributes:
        lines: Each block's top pair, frozen.
        weights: Each block's weight.
        window: T's window (for the mass outside it).
        mass_error: Relative error bound of the weights.
    """

    lines: list[FrozenLines]
    weights: NDArray[np.float64]
    window: Window
    mass_error: float

    def __call__(self, epsilon: float) -> float:
        """δ(ε), rounded up."""
        total = float(np.sum(self.weights * frozen_deltas(self.lines, epsilon)))
        return min(1.0, total * (1.0 + self.mass_error) + self.window.dropped)


def mixture_delta(
    window: Window,
    pair_at: PairAt,
    epsilon: float,
    *,
    rounding: Rounding = "up",
    tolerance: float = OUTER_TOLERANCE,
    inner_tolerance: float = INNER_TOLERANCE,
    tail: float = DEFAULT_TAIL,
    target: float | None = None,
    weight_error: float = 0.0,
) -> float:
    """Return Σ_T P[T]·H_ε(pair_T) bounded by blocks of T (see the module docstring).

    Args:
        window: The law of T (its pmf on a window, with the mass left out).
        pair_at: The virtual pairs and weights of a block (inclusive bounds t₁ ≤ t₂).
        epsilon: ε ≥ 0.
        rounding: ``"up"`` for an upper bound (blocks at their upper pairs, the
            mass outside the window added); ``"down"`` for a lower bound.
        tolerance: Stop when the blocks' two sides are this close (relative).
        inner_tolerance: Tolerance of each pair's own block sum.
        tail: Mass left out on each side of each pair's blanket window.
        target: When given, stop refining once the answer is clearly on one
            side of it (a calibration only compares δ with its target); the
            answer is still a certified bound, only looser.
        weight_error: Relative error bound of the weights ``pair_at`` returns
            beyond that of the window's probabilities.
    """
    rounding = check_rounding(rounding)
    out = _mixture(
        window,
        pair_at,
        epsilon,
        rounding=rounding,
        tolerance=tolerance,
        inner_tolerance=inner_tolerance,
        tail=tail,
        target=target,
        weight_error=weight_error,
    )
    assert isinstance(out, float)
    return out


def mixture_curve(
    window: Window,
    pair_at: PairAt,
    epsilon: float,
    *,
    tolerance: float = OUTER_TOLERANCE,
    inner_tolerance: float = INNER_TOLERANCE,
    tail: float = DEFAULT_TAIL,
    weight_error: float = 0.0,
) -> DeltaCurve:
    """Return the blocks of :func:`mixture_delta` refined at ``epsilon`` as a δ(·) curve."""
    out = _mixture(
        window,
        pair_at,
        epsilon,
        tolerance=tolerance,
        inner_tolerance=inner_tolerance,
        tail=tail,
        weight_error=weight_error,
        curve=True,
    )
    assert isinstance(out, DeltaCurve)
    return out


def _finish(total: float, window: Window, n: int, weight_error: float, rounding: Rounding) -> float:
    """Round a block sum to the safe side: weights' rounding and the mass outside the window.

    Each weight is a block probability (at most n positive terms, each within the
    window's error) or the caller's formula, within ``weight_error`` of its value.
    """
    mass_error = window.rel_error + (n + 2) * _UNIT_ROUNDOFF + weight_error
    if rounding == "up":
        return min(1.0, total * (1.0 + mass_error) + window.dropped)
    return max(0.0, total * (1.0 - mass_error))
