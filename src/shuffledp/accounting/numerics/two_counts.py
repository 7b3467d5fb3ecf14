"""Exact hockey-stick divergence of the "two-count" pairs behind shuffle amplification.

Several amplification analyses reduce the shuffled output to a pair of counts:

    P = (A + Δ₁, C − A + Δ₂),   Q = (A + Δ₂, C − A + Δ₁),

with C ~ Bin(m, r) blanket messages that each land on one of two outputs with
probability 1/2 (A | C ~ Bin(C, 1/2)), and the victim's (Δ₁, Δ₂) equal to
(1, 0) with probability w₁, (0, 1) with probability w₂ and (0, 0) otherwise.

* Feldman, McMillan & Talwar, FOCS 2021 ("hiding among the clones"):
  m = n − 1, r = e^{−ε₀}, w₁ = e^{ε₀}/(e^{ε₀} + 1), w₂ = 1 − w₁.
* Wang et al., VLDB 2024, arXiv 2304.05007 (variation-ratio reduction, Thm 1
  of the segmented paper, arXiv 2407.19639): m = n − 1, r = 2βp/((p − 1)q),
  w₁ = βp/(p − 1), w₂ = β/(p − 1).
* k-RR among n users whose other members all hold a third value, restricted to
  the counts of the two values the victim moves between: m = n − 1,
  r = 2/(e^{ε₀} + k − 1), w₁ = e^{ε₀}/(e^{ε₀} + k − 1), w₂ = 1/(e^{ε₀} + k − 1).

Evaluation. Writing s = x + y and using Bin(s, 1/2)'s pmf b_s(x) = ½(b_{s−1}(x−1)
+ b_{s−1}(x)), both laws on the line x + y = s are α_s·b_{s−1}(x−1) + γ_s·b_{s−1}(x)
and γ_s·b_{s−1}(x−1) + α_s·b_{s−1}(x), with α_s = ½w₀B_s + w₁B_{s−1},
γ_s = ½w₀B_s + w₂B_{s−1}, B_c = P[C = c]. The ratio b_{s−1}(x−1)/b_{s−1}(x) =
x/(s − x) increases with x, so P − e^ε Q is positive exactly above a threshold
and each line's contribution is two binomial tails. δ is a sum over the window
of C only: O(√m) work instead of O(m).

Swapping the two coordinates maps P to Q, so H_ε(P‖Q) = H_ε(Q‖P).

One line's divergence and the certified rounding of a sum of lines are
:mod:`~shuffledp.accounting.numerics.line_kernel`'s (re-exported here); this
module sums them over a pair's lines by certified blocks.

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import special

from shuffledp._validation import InvalidParameterError, check_int, check_rounding
from shuffledp.accounting.numerics.binomial import DEFAULT_TAIL, binomial_window, binomial_windows
from shuffledp.accounting.numerics.hockey_stick import hockey_stick
from shuffledp.accounting.numerics.line_kernel import (
    _SMALLEST_NORMAL,
    _UNIT_ROUNDOFF,
    Rounding,
    certify,
    line_divergence,
    line_divergence_each,
)

__all__ = [
    "BlockMemo",
    "FrozenLines",
    "Rounding",
    "TwoCountPair",
    "certify",
    "frozen_deltas",
    "frozen_upper_lines",
    "line_divergence",
    "line_divergence_each",
    "sample_two_count_loss",
    "sampled_line_sum",
    "two_count_delta",
    "two_count_delta_direct",
    "two_count_delta_lines",
    "two_count_deltas",
]


@dataclass(frozen=True)
class TwoCountPair:
    """The pair (P, Q) of the module docstring.

    Each probability must be within 3 rounding units (relative) of the value
    it stands for; compute small ones directly (e.g. 1/(e^{ε₀} + 1), not
    1 − e^{ε₀}/(e^{ε₀} + 1)). :attr:`weight_error` is what the certificate
    charges for that.

    Attributes:
        blanket: m, the number of potential blanket messages (other users).
        rate: r, the probability that each lands on one of the two outputs.
        w1: P[(Δ₁, Δ₂) = (1, 0)] under P.
        w2: P[(Δ₁, Δ₂) = (0, 1)] under P (≤ w1).
        w0: P[(Δ₁, Δ₂) = (0, 0)]; ``None`` takes 1 − w1 − w2, whose relative
            error grows as it gets small (charged in :attr:`weight_error`).
        rate_complement: 1 − r computed directly, for r near 1 (optional).
        weight_units: Bound on the relative error of w₀, w₁, w₂ in rounding
            units (3 by default; more when they come out of a longer formula).
    """

    blanket: int
    rate: float
    w1: float
    w2: float
    w0: float | None = None
    rate_complement: float | None = None
    weight_units: float = 3.0

    def __post_init__(self) -> None:
        check_int(self.blanket, "blanket", minimum=0)
        if not (0.0 <= self.rate <= 1.0):
            raise InvalidParameterError(f"blanket rate must be in [0, 1], got {self.rate!r}")
        if self.rate_complement is not None and not (
            0.0 <= self.rate_complement <= 1.0
            and abs(self.rate + self.rate_complement - 1.0) <= 1e-12
        ):
            raise InvalidParameterError(
                f"rate_complement must be 1 - rate, got {self.rate_complement!r} for rate "
                f"{self.rate!r}"
            )
        if not (0.0 <= self.w2 <= self.w1 and self.w1 + self.w2 <= 1.0 + 1e-12):
            raise InvalidParameterError(
                f"need 0 <= w2 <= w1 and w1 + w2 <= 1, got w1={self.w1!r}, w2={self.w2!r}"
            )
        if self.w0 is not None and not (
            0.0 <= self.w0 and abs(self.w0 + self.w1 + self.w2 - 1.0) <= 1e-12
        ):
            raise InvalidParameterError(
                f"w0 must be 1 - w1 - w2 (in [0, 1]), got w0={self.w0!r} for "
                f"w1={self.w1!r}, w2={self.w2!r}"
            )
        for name in ("rate", "w1", "w2", "w0", "rate_complement"):
            value = getattr(self, name)
            if value is not None and 0.0 < value < _SMALLEST_NORMAL:
                raise InvalidParameterError(
                    f"{name}={value!r} is below the smallest normal double (2.2e-308): it "
                    "cannot stand for a probability within a few rounding units; use 0 or "
                    "a value of at least 2.2e-308"
                )

    @property
    def idle(self) -> float:
        """w₀, the probability that the victim lands on neither output."""
        if self.w0 is not None:
            return self.w0
        return max(0.0, 1.0 - self.w1 - self.w2)

    @property
    def weight_error(self) -> float:
        """Bound on the relative error of w₀, w₁, w₂ as the probabilities they stand for.

        ``weight_units``·u each by the class contract; when w₀ is derived as
        1 − w₁ − w₂ it is off by at most 3u(w₁ + w₂) + 2u in absolute terms, so
        5u/w₀ relative. (A derived w₀ that rounds to 0 is taken as 0.)
        """
        w0 = self.idle
        units = self.weight_units * _UNIT_ROUNDOFF
        if self.w0 is not None or w0 == 0.0:
            return units
        return units + 5.0 * _UNIT_ROUNDOFF / w0


@dataclass(frozen=True)
class _Lines:
    """The ε-free part of a pair's line sum (cached): each line's weights and mass.

    Attributes:
        s: Line index s = x + y.
        alpha: α_s.
        gamma: γ_s.
        lam: α_s/(α_s + γ_s), the weight of b_{s−1}(x − 1) on the normalized line.
        lam_c: γ_s/(α_s + γ_s) = 1 − lam, computed directly (no cancellation).
        lam_low: lam for lower sides: ½ on lines whose γ underflowed to 0.
        lam_c_high: lam_c for lower sides, likewise.
        underflow: Where γ underflowed to 0.
        mass: α_s + γ_s.
        cum: Prefix sums of the line masses (length len(s) + 1), to cut blocks.
        rho: Relative error bound of every α_s and γ_s.
        dropped: Blanket mass outside C's window.
        pmf_error: Relative error bound of the blanket pmf entries.
        padded: Rows mass, lam, lam_c, lam_low, lam_c_high, each with a 0 after its
            last line (what :func:`_segments` reduces over; the attributes above
            are views of these rows).
    """

    s: NDArray[np.float64]
    alpha: NDArray[np.float64]
    gamma: NDArray[np.float64]
    lam: NDArray[np.float64]
    lam_c: NDArray[np.float64]
    lam_low: NDArray[np.float64]
    lam_c_high: NDArray[np.float64]
    underflow: NDArray[np.bool_]
    mass: NDArray[np.float64]
    cum: NDArray[np.float64]
    rho: float
    dropped: float
    pmf_error: float
    padded: NDArray[np.float64]


#: Rows of :attr:`_Lines.padded`.
_MASS, _LAM, _LAM_C, _LAM_LOW, _LAM_C_HIGH = range(5)


@functools.lru_cache(maxsize=256)
def _pair_lines(pair: TwoCountPair, tail: float) -> _Lines:
    window = binomial_window(pair.blanket, pair.rate, tail, pair.rate_complement)
    w0 = pair.idle
    # Lines s = x + y run over the window of C and one above it.
    s = np.arange(window.lo, window.hi + 2, dtype=np.float64)
    b_s = np.concatenate([window.pmf, [0.0]])
    b_prev = np.concatenate([[0.0], window.pmf])
    alpha = 0.5 * w0 * b_s + pair.w1 * b_prev
    gamma = 0.5 * w0 * b_s + pair.w2 * b_prev
    n = len(s)
    padded = np.zeros((5, n + 1))
    mass, lam, lam_c, lam_low, lam_c_high = (row[:n] for row in padded)
    np.add(alpha, gamma, out=mass)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam[:] = np.where(mass > 0, alpha / mass, 0.5)
        lam_c[:] = np.where(mass > 0, gamma / mass, 0.5)
    # A γ that underflowed to 0 (its weight and pmf positive) looks like a line the
    # adversary reads perfectly: harmless above, but a lower side must not count it.
    underflow = (gamma == 0.0) & (alpha > 0.0) & ((pair.w2 > 0.0) | (w0 > 0.0))
    lam_low[:] = np.where(underflow, 0.5, lam)  # G(½, s) = 0
    lam_c_high[:] = np.where(underflow, 0.5, lam_c)
    cum = np.concatenate([[0.0], np.cumsum(mass)])
    for array in (s, alpha, gamma, lam, lam_c, lam_low, lam_c_high, underflow, mass, cum, padded):
        array.setflags(write=False)
    # α, γ: the pmf's and the weights' errors, plus two products and a sum.
    rho = window.rel_error + pair.weight_error + 4.0 * _UNIT_ROUNDOFF
    return _Lines(
        s,
        alpha,
        gamma,
        lam,
        lam_c,
        lam_low,
        lam_c_high,
        underflow,
        mass,
        cum,
        rho,
        window.dropped,
        window.rel_error,
        padded,
    )


#: Pairs with at most this many lines are summed line by line.
_EXACT_LINES = 512
#: Blocks of lines a pair's sum starts from (of about equal mass).
_FIRST_BLOCKS = 48
#: Refinement rounds before the sum falls back to single lines.
_MAX_ROUNDS = 60
#: Default bound on (upper − lower)/upper of the block sums (before rounding allowances).
#: A single pair refined this far costs milliseconds even at 1e8 blanket messages
#: (about as many lines as the exact line sum only where the window is narrow), and
#: its answer is the exact line sum to six digits: what a reported δ, and an ε read
#: off it, should be (a looser sum costs up to 1e-4 of ε against the exact value).
DEFAULT_TOLERANCE = 1e-6


def _segments(
    ufunc: np.ufunc,
    padded: NDArray[np.float64],
    bounds: NDArray[np.int64],
) -> NDArray[np.float64]:
    """``ufunc`` reduced over each segment [start, end) of ``padded`` (see :func:`_bounds`).

    ``padded`` ends with one entry past the lines (reduceat needs every index
    below the length).
    """
    out: NDArray[np.float64] = ufunc.reduceat(padded, bounds)[0::2]
    return out


def _bounds(starts: NDArray[np.int64], ends: NDArray[np.int64]) -> NDArray[np.int64]:
    """start₀, end₀, start₁, end₁, … of disjoint, increasing, non-empty segments."""
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2] = starts
    bounds[1::2] = ends
    return bounds


def _virtual_lines(
    lines: _Lines, starts: NDArray[np.int64], ends: NDArray[np.int64], *, upper: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], float]:
    """One line standing for each block [start, end) of lines.

    The block's mass M goes to a single line of index s_min (upper) or s_max
    (lower) whose normalized weight is the block's largest (upper) or smallest
    (lower) λ. Returns (α, γ, s) of those lines and the relative error of their
    weights against the exact M·λ: M sums positive terms (ρ plus one rounding
    per term), λ is a ratio of two of them (2ρ + 2u), and one product.
    """
    rows, bounds = lines.padded, _bounds(starts, ends)
    mass = _segments(np.add, rows[_MASS], bounds)
    if upper:
        lam = _segments(np.maximum, rows[_LAM], bounds)
        lam_c = _segments(np.minimum, rows[_LAM_C], bounds)
        # Line 0 carries nothing (no split to see) and G(λ, 1) ≥ G(λ, s) for s ≥ 1:
        # a block starting at line 0 is bounded at line 1.
        s = np.maximum(lines.s[starts], 1.0)
    else:
        lam = _segments(np.minimum, rows[_LAM_LOW], bounds)
        lam_c = _segments(np.maximum, rows[_LAM_C_HIGH], bounds)
        s = lines.s[ends - 1]
    width = int(np.max(ends - starts)) if len(starts) else 1
    if width == 1:  # each virtual line is its own line: M·λ = α up to three roundings
        return mass * lam, mass * lam_c, s, lines.rho + 4.0 * _UNIT_ROUNDOFF
    rho = 3.0 * lines.rho + (width + 4) * _UNIT_ROUNDOFF
    return mass * lam, mass * lam_c, s, rho


def _first_blocks(lines: _Lines, count: int) -> NDArray[np.int64]:
    """Block starts cutting the lines into about ``count`` blocks of equal mass."""
    total = lines.cum[-1]
    n = len(lines.s)
    if total <= 0:
        return np.array([0], dtype=np.int64)
    cuts = np.searchsorted(lines.cum[1:], np.linspace(0.0, total, count + 1)[1:-1], side="right")
    return np.unique(np.concatenate([[0], np.clip(cuts, 0, n - 1)])).astype(np.int64)


def two_count_delta(
    pair: TwoCountPair,
    epsilon: float,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
    tolerance: float = DEFAULT_TOLERANCE,
) -> float:
    """Return H_ε(P‖Q) (= H_ε(Q‖P)) for a two-count pair, with certified rounding.

    Each line s contributes (α_s + γ_s)·G(λ_s, s), where G(λ, s) is the
    divergence of the normalized line λ·U_s + (1 − λ)·V_s against
    (1 − λ)·U_s + λ·V_s (U_s, V_s: the laws of X + 1 and X, X ~ Bin(s − 1, ½)).
    Two facts bound a block of lines by one line:

    * G is non-decreasing in λ ≥ ½: the pair at λ' < λ is the pair at λ passed
      through randomized response (keep with probability μ, swap otherwise,
      λ' = μλ + (1 − μ)(1 − λ)), the same kernel under both laws, so the
      data-processing inequality applies.
    * G is non-increasing in s: adding one fair coin to X maps (U_s, V_s) to
      (U_{s+1}, V_{s+1}), again one kernel for both.

    So a block B of lines with total mass M satisfies
    M·G(min λ, max s) ≤ Σ_{s∈B} (α_s + γ_s)·G(λ_s, s) ≤ M·G(max λ, min s),
    each side a single line's divergence (:func:`line_divergence_each`). The
    lines are cut into blocks of equal mass, and blocks whose two sides differ
    most are halved until the sides' totals are within ``tolerance`` of each
    other (a block of one line is exact). Windows of at most 512 lines are
    summed line by line. The upper (lower) side is then rounded up (down) by
    :func:`certify`, with the blocks' lines as the model: the virtual lines'
    weights carry the lines' errors plus one rounding per summed line.

    Args:
        pair: The pair.
        epsilon: ε ≥ 0.
        rounding: ``"up"`` adds the blanket mass outside the summation window
            and a floating-point allowance (an upper bound); ``"down"`` subtracts
            what they could have added (a lower bound). See :func:`certify`.
        tail: Mass left out on each side of C's window.
        tolerance: Relative gap between the block sums' two sides at which the
            refinement stops (the answer is within it of the exact line sum).
    """
    rounding = check_rounding(rounding)
    return two_count_deltas([pair], epsilon, rounding=rounding, tail=tail, tolerance=tolerance)[0]


def two_count_deltas(
    pairs: list[TwoCountPair],
    epsilon: float,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
    tolerance: float = DEFAULT_TOLERANCE,
    rounds: int | None = None,
    memo: BlockMemo | None = None,
) -> list[float]:
    """:func:`two_count_delta` for several pairs at once (their blocks share each evaluation).

    Args:
        pairs: The pairs.
        epsilon: ε ≥ 0.
        rounding: ``"up"`` or ``"down"`` (see :func:`two_count_delta`).
        tail: Mass left out on each side of each blanket window.
        tolerance: Relative gap at which a pair's refinement stops.
        rounds: Stop after this many rounds (each answer is still certified,
            only looser); ``None`` refines to the tolerance.
        memo: Blocks already refined at this ``epsilon`` (and ``tail``), by pair:
            a pair found there continues from them (to a tighter tolerance);
            new pairs are added. Only for calls at one ε.
    """
    rounding = check_rounding(rounding)
    if epsilon < 0:
        raise InvalidParameterError(f"epsilon must be >= 0, got {epsilon!r}")
    # The new pairs' blanket windows in one pass (one per distinct rate).
    fresh = [pair for pair in pairs if memo is None or pair not in memo]
    for rate, complement in {(pair.rate, pair.rate_complement) for pair in fresh}:
        blankets = [p.blanket for p in fresh if (p.rate, p.rate_complement) == (rate, complement)]
        binomial_windows(blankets, rate, tail, complement)
    states = []
    for pair in pairs:
        state = None if memo is None else memo.get(pair)
        if state is None:
            state = _BlockState(_pair_lines(pair, tail))
            if memo is not None:
                memo[pair] = state
        else:
            state.resume(tolerance)
        states.append(state)
    # A lower side's mass serves only a lower bound (kept blocks may serve a later
    # call that rounds down).
    _refine(
        states,
        epsilon,
        tolerance=tolerance,
        rounds=rounds,
        lower_charges=rounding == "down" or memo is not None,
    )
    column = 0 if rounding == "up" else 3
    if column == 3 and not all(state.lower_charged for state in states):  # pragma: no cover
        raise RuntimeError("a lower bound from blocks whose lower sides were not charged")
    return [
        certify(
            float(np.sum(state.values[:, column])),
            float(np.sum(state.values[:, column + 1])),
            charge=float(np.sum(state.values[:, column + 2])),
            terms=len(state.starts),
            dropped=state.lines.dropped,
            epsilon=epsilon,
            rounding=rounding,
        )
        for state in states
    ]


#: The blocks of each pair refined at one ε (see :func:`two_count_deltas`).
BlockMemo = dict[TwoCountPair, "_BlockState"]


class _BlockState:
    """One pair's blocks of lines during the refinement of :func:`two_count_deltas`.

    ``values`` holds, per block, the upper side, P's mass on its widened region
    and its evaluation charge, then the same three for the lower side; ``fresh``
    marks blocks not evaluated yet.
    """

    def __init__(self, lines: _Lines) -> None:
        self.lines = lines
        n = len(lines.s)
        self.starts = (
            np.arange(n, dtype=np.int64) if n <= _EXACT_LINES else _first_blocks(lines, 48)
        )
        self.ends = np.append(self.starts[1:], n)
        self.values = np.zeros((len(self.starts), 6))
        self.fresh = np.ones(len(self.starts), dtype=bool)
        self.rho = 0.0
        self.done = False
        #: Whether every lower side's mass was computed (not left at NaN).
        self.lower_charged = True

    def split(self, tolerance: float) -> None:
        """Mark done if within tolerance; else cut the blocks with the largest gaps.

        Every block whose gap exceeds its fair share of the tolerance is cut
        into as many pieces as its gap is times that share (a block's gap
        shrinks about as its width squared); other blocks keep their values.
        """
        widths = self.ends - self.starts
        gap = self.values[:, 0] - self.values[:, 3]
        budget = tolerance * float(np.sum(self.values[:, 0]))
        if float(np.sum(gap)) <= budget or np.all(widths == 1):
            self.done = True
            return
        fair = max(budget / len(self.starts), 1e-300)
        chosen = (gap > fair) & (widths > 1)
        if not np.any(chosen):
            chosen[int(np.argmax(np.where(widths > 1, gap, -1.0)))] = True
        pieces = np.where(chosen, np.clip(np.ceil(gap / fair), 2, 32), 1).astype(np.int64)
        pieces = np.minimum(pieces, widths)
        owner = np.repeat(np.arange(len(self.starts)), pieces)
        part = np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        self.starts = self.starts[owner] + (widths[owner] * part) // pieces[owner]
        self.ends = np.append(self.starts[1:], len(self.lines.s))
        self.values = self.values[owner]
        self.fresh = chosen[owner]

    def resume(self, tolerance: float) -> None:
        """Continue refining evaluated blocks to ``tolerance`` (for :func:`two_count_deltas`)."""
        if not np.any(self.fresh):
            self.done = False
            self.split(tolerance)

    def exact(self) -> None:
        """Fall back to single lines (the exact line sum)."""
        n = len(self.lines.s)
        self.starts = np.arange(n, dtype=np.int64)
        self.ends = self.starts + 1
        self.values = np.zeros((n, 6))
        self.fresh = np.ones(n, dtype=bool)


def _refine(
    states: list[_BlockState],
    epsilon: float,
    *,
    tolerance: float,
    rounds: int | None,
    lower_charges: bool = True,
) -> None:
    """Evaluate and split every state's blocks until each is within the tolerance.

    Each round evaluates the fresh blocks of all states in one
    :func:`line_divergence_each` call, upper and lower sides together, with the
    largest of their relative errors (a wider region, so a larger allowance).
    Without ``lower_charges`` (an upper bound is all that will be certified) the
    lower sides only steer the refinement: their masses are not computed (NaN,
    one tail fewer per line; :attr:`_BlockState.lower_charged` is False), their
    divergences are the same doubles.
    """
    limit = _MAX_ROUNDS if rounds is None else rounds
    for round_number in range(limit + 1):
        active = [state for state in states if not state.done]
        if not active:
            return
        if any(not np.any(state.fresh) for state in active):  # pragma: no cover - defensive
            raise RuntimeError("a block state to refine has nothing to evaluate")
        if round_number == _MAX_ROUNDS:
            for state in active:
                state.exact()
        batch = []
        for state in active:
            s0, e0 = state.starts[state.fresh], state.ends[state.fresh]
            # A one-line block is its own lower side, unless a γ underflowed there.
            wide = (e0 - s0 > 1) | state.lines.underflow[s0]
            up = _virtual_lines(state.lines, s0, e0, upper=True)
            low = _virtual_lines(state.lines, s0[wide], e0[wide], upper=False)
            batch.append((wide, up, low))
        rho = max(max(up[3], low[3]) for _, up, low in batch)
        sides = [up for _, up, _ in batch] + [low for _, _, low in batch]
        alpha, gamma, lines = (np.concatenate([side[i] for side in sides]) for i in range(3))
        massless = None
        if not lower_charges:
            massless = np.arange(len(alpha)) >= sum(len(up[0]) for _, up, _ in batch)
        value, mass, charge = line_divergence_each(
            alpha, gamma, lines, epsilon, relative_error=rho, massless=massless
        )
        up_at = 0
        low_at = sum(len(up[0]) for _, up, _ in batch)
        for state, (wide, up, low) in zip(active, batch, strict=True):
            a, b = up_at, up_at + len(up[0])
            c, d = low_at, low_at + len(low[0])
            upper_side = [value[a:b], mass[a:b], charge[a:b]]
            fresh_values = np.column_stack(upper_side + upper_side)
            fresh_values[wide, 3] = value[c:d]
            fresh_values[wide, 4] = mass[c:d]
            fresh_values[wide, 5] = charge[c:d]
            state.values[state.fresh] = fresh_values
            state.rho = max(state.rho, rho)
            state.lower_charged = state.lower_charged and lower_charges
            up_at, low_at = b, d
            if round_number == _MAX_ROUNDS or round_number == limit:
                state.done = True
            else:
                state.split(tolerance)


@dataclass(frozen=True)
class FrozenLines:
    """A pair's upper-side virtual lines, fixed once refined at one ε.

    Any partition of the lines into blocks bounds the pair's δ from above at
    every ε (the block argument of :func:`two_count_delta` does not depend on
    ε), so a partition refined at one ε gives a certified δ(ε) curve that costs
    one :func:`line_divergence_each` call per ε. Tight near the ε it was
    refined at.

    Attributes:
        alpha: α of each virtual line.
        gamma: γ of each virtual line.
        s: Line index of each virtual line.
        rho: Relative error bound of their weights.
        dropped: The blanket mass outside the pair's window.
    """

    alpha: NDArray[np.float64]
    gamma: NDArray[np.float64]
    s: NDArray[np.float64]
    rho: float
    dropped: float


def frozen_upper_lines(
    pairs: list[TwoCountPair],
    epsilon: float,
    *,
    tail: float = DEFAULT_TAIL,
    tolerance: float = DEFAULT_TOLERANCE,
) -> list[FrozenLines]:
    """Refine each pair's blocks at ``epsilon`` (as :func:`two_count_deltas`) and freeze them."""
    states = [_BlockState(_pair_lines(pair, tail)) for pair in pairs]
    _refine(states, epsilon, tolerance=tolerance, rounds=None, lower_charges=False)
    out = []
    for state in states:
        alpha, gamma, s, rho = _virtual_lines(state.lines, state.starts, state.ends, upper=True)
        out.append(FrozenLines(alpha, gamma, s, max(rho, state.rho), state.lines.dropped))
    return out


def frozen_deltas(frozen: list[FrozenLines], epsilon: float) -> NDArray[np.float64]:
    """Each frozen pair's certified δ(ε) (rounded up), all lines in one evaluation."""
    if not frozen:
        return np.zeros(0)
    rho = max(f.rho for f in frozen)
    counts = np.array([len(f.s) for f in frozen])
    values, masses, charges = line_divergence_each(
        np.concatenate([f.alpha for f in frozen]),
        np.concatenate([f.gamma for f in frozen]),
        np.concatenate([f.s for f in frozen]),
        epsilon,
        relative_error=rho,
    )
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
    totals = np.add.reduceat(values, offsets)
    mass = np.add.reduceat(masses, offsets)
    charge = np.add.reduceat(charges, offsets)
    return np.array(
        [
            certify(
                float(t),
                float(m),
                charge=float(c),
                terms=len(f.s),
                dropped=f.dropped,
                epsilon=epsilon,
                rounding="up",
            )
            for t, m, c, f in zip(totals, mass, charge, frozen, strict=True)
        ]
    )


def two_count_delta_lines(
    pair: TwoCountPair,
    epsilon: float,
    *,
    rounding: Rounding = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return H_ε(P‖Q) by summing every line of C's window (the exact line sum).

    The same number as :func:`two_count_delta` without blocks: O(√m) tail
    evaluations. Kept as the reference the blocked sum is tested against.
    """
    rounding = check_rounding(rounding)
    if epsilon < 0:
        raise InvalidParameterError(f"epsilon must be >= 0, got {epsilon!r}")
    lines = _pair_lines(pair, tail)
    keep = ~lines.underflow if rounding == "down" else np.ones(len(lines.s), dtype=bool)
    total, mass, charge = line_divergence(
        lines.alpha[keep], lines.gamma[keep], lines.s[keep], epsilon, relative_error=lines.rho
    )
    return certify(
        total,
        mass,
        charge=charge,
        terms=len(lines.s),
        dropped=lines.dropped,
        epsilon=epsilon,
        rounding=rounding,
    )


#: Normal scores of the lines :func:`sampled_line_sum` evaluates (by the lines' mass), and
#: how many blocks of lines it sums over.
_SAMPLE_SCORES = np.linspace(-9.0, 7.0, 16)
_SAMPLE_BLOCKS = 512


@functools.lru_cache(maxsize=64)
def _line_sample(
    pair: TwoCountPair, tail: float
) -> tuple[NDArray[np.intp], NDArray[np.float64], NDArray[np.float64]]:
    """The lines :func:`sampled_line_sum` evaluates, and its blocks' masses and middle s."""
    lines = _pair_lines(pair, tail)
    n = len(lines.s)
    quantiles = special.ndtr(_SAMPLE_SCORES) * lines.cum[-1]
    picked = np.searchsorted(lines.cum[1:], quantiles)
    # Each node is a pair of neighbouring lines (node, node + 1).
    nodes = np.unique(np.clip(np.concatenate([[0, n - 2], picked]), 0, max(0, n - 2)))
    starts = np.unique(np.linspace(0, n, min(n, _SAMPLE_BLOCKS) + 1).astype(np.int64)[:-1])
    ends = np.append(starts[1:], n)
    masses = np.add.reduceat(lines.mass, starts)
    middles = 0.5 * (lines.s[starts] + lines.s[ends - 1])
    return nodes, masses, middles


def sampled_line_sum(
    pair: TwoCountPair, epsilon: float, *, tail: float = DEFAULT_TAIL
) -> float | None:
    """H_ε(P‖Q) approximated from a few of its lines: a starting point, no guarantee.

    The exact line sum (:func:`two_count_delta_lines`) weighs each line's
    normalized divergence G(λ_s, s) (the line's divergence over its mass) by the
    line's mass. G changes slowly along the window, apart from a ripple between
    odd and even s (up to 2e-5 relative, from the parity of Bin(s − 1, ½)), so it
    is evaluated exactly on about 18 pairs of neighbouring lines (the window's
    ends and the lines at 16 normal scores −9 … 7 of the mass; each pair's two
    divergences over its two masses), interpolated in ln G between them, and
    summed over 512 blocks of lines with their masses; beyond a sampled pair
    that is not live (G = 0) it counts nothing. Where the blanket spreads over
    m·r ≥ 10⁵ messages this was within 2e-6 (relative) of the exact line sum
    wherever measured; the searches use it only to place their first evaluation
    (:func:`~shuffledp.accounting.numerics.gaussian_guess.polished_epsilon_guess`).

    Returns:
        The approximate δ(ε), or ``None`` when fewer than two sampled pairs are live.
    """
    lines = _pair_lines(pair, tail)
    if len(lines.s) < 2:  # pragma: no cover - a window has at least one point, so two lines
        return None
    nodes, masses, middles = _line_sample(pair, tail)
    both = np.concatenate([nodes, nodes + 1])
    values, _, _ = line_divergence_each(
        lines.alpha[both], lines.gamma[both], lines.s[both], epsilon
    )
    k = len(nodes)
    value = values[:k] + values[k:]
    weight = lines.mass[nodes] + lines.mass[nodes + 1]
    live = (value > 0.0) & (weight > 0.0)
    if np.count_nonzero(live) < 2:
        return None
    at = lines.s[nodes] + 0.5
    normalized = np.exp(np.interp(middles, at[live], np.log(value[live] / weight[live])))
    first, last = at[live][0], at[live][-1]
    if np.any(~live & (at < first)):
        normalized[middles < first] = 0.0
    if np.any(~live & (at > last)):
        normalized[middles > last] = 0.0
    return float(np.sum(masses * normalized))


def two_count_delta_direct(pair: TwoCountPair, epsilon: float) -> float:
    """Return H_ε(P‖Q) by summing over every (x, y): O(m²), for tests and small m."""
    from scipy.stats import binom

    m = pair.blanket
    w0 = pair.idle
    c_pmf = binom.pmf(np.arange(m + 1), m, pair.rate)
    size = m + 2
    p = np.zeros((size, size))
    q = np.zeros((size, size))
    for c in range(m + 1):
        a_pmf = binom.pmf(np.arange(c + 1), c, 0.5)
        a_idx = np.arange(c + 1)
        for (d1, d2), weight in (((1, 0), pair.w1), ((0, 1), pair.w2), ((0, 0), w0)):
            p[a_idx + d1, c - a_idx + d2] += c_pmf[c] * weight * a_pmf
            q[a_idx + d2, c - a_idx + d1] += c_pmf[c] * weight * a_pmf
    return hockey_stick(p.ravel(), q.ravel(), epsilon)


def sample_two_count_loss(
    pair: TwoCountPair, size: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Draw privacy losses ln P(Z)/Q(Z) for Z ~ P (for Monte Carlo checks).

    δ(ε) = E_P[(1 − e^{ε − L})_+], so averaging that over these draws gives an
    unbiased estimate of δ with a standard error from the sample.
    """
    c = rng.binomial(pair.blanket, pair.rate, size=size)
    a = rng.binomial(c, 0.5)
    u = rng.random(size)
    d1 = (u < pair.w1).astype(np.int64)
    d2 = ((u >= pair.w1) & (u < pair.w1 + pair.w2)).astype(np.int64)
    x = a + d1
    y = c - a + d2
    s = x + y
    w0 = pair.idle

    def log_c_pmf(k: NDArray[np.int64]) -> NDArray[np.float64]:
        with np.errstate(divide="ignore"):
            out = np.full(k.shape, -np.inf)
            ok = (k >= 0) & (k <= pair.blanket)
            kk = k[ok]
            out[ok] = (
                special.gammaln(pair.blanket + 1)
                - special.gammaln(kk + 1)
                - special.gammaln(pair.blanket - kk + 1)
                + kk * math.log(pair.rate)
                + (pair.blanket - kk) * math.log1p(-pair.rate)
            )
        return out

    def log_half_binom(n_: NDArray[np.int64], k: NDArray[np.int64]) -> NDArray[np.float64]:
        out = np.full(k.shape, -np.inf)
        ok = (k >= 0) & (k <= n_) & (n_ >= 0)
        out[ok] = (
            special.gammaln(n_[ok] + 1)
            - special.gammaln(k[ok] + 1)
            - special.gammaln(n_[ok] - k[ok] + 1)
            - n_[ok] * math.log(2.0)
        )
        return out

    with np.errstate(divide="ignore"):
        base = (
            np.log(w0) + log_c_pmf(s) + log_half_binom(s, x) if w0 > 0 else np.full(size, -np.inf)
        )
        first = log_c_pmf(s - 1) + log_half_binom(s - 1, x - 1)
        second = log_c_pmf(s - 1) + log_half_binom(s - 1, x)
        log_w1 = math.log(pair.w1) if pair.w1 > 0 else -np.inf
        log_w2 = math.log(pair.w2) if pair.w2 > 0 else -np.inf
        log_p = np.logaddexp(base, np.logaddexp(log_w1 + first, log_w2 + second))
        log_q = np.logaddexp(base, np.logaddexp(log_w2 + first, log_w1 + second))
    losses: NDArray[np.float64] = log_p - log_q
    return losses
