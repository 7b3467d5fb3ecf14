"""Exact δ when the other users' reports are i.i.d. and symmetric in the two values at stake.

Setting. A victim moves between values x₀ and x₁. Every one of N other
messages independently lands on x₀ or x₁ with probability o_s each, on a
third observable category z with probability o_z, and on a "rest" category
with probability o_r = 1 − 2o_s − o_z. The victim's message lands on
(x₀, x₁, z, rest) with probabilities (p₀, p₁, p_z, p_r) under the first
dataset and (p₁, p₀, p_z, p_r) under the second. Within z and within rest the
victim and the others are exchangeable (or z and rest are single categories),
so the adversary's view is the count vector (u, v, w, ρ) of x₀, x₁, z, rest
with u + v + w + ρ = N + 1.

Likelihood ratio. With O the others' law, P(u, v, w) = p₀O(u−1, v, w) +
p₁O(u, v−1, w) + p_zO(u, v, w−1) + p_rO(u, v, w). Given S = u + v the others'
split is Bin(S, 1/2), so on the line (s, w) the two laws are
α·b_{s−1}(u − 1) + γ·b_{s−1}(u) and γ·b_{s−1}(u − 1) + α·b_{s−1}(u), with
α = p₀·O(s − 1, w) + ½β', γ = p₁·O(s − 1, w) + ½β', β' = p_z·O(s, w − 1) +
p_r·O(s, w), O(s, w) = P[S = s, W = w]. The positive part of P − e^ε Q on each
line is two binomial tails (as in :mod:`shuffledp.accounting.numerics.two_counts`),
and δ is a sum over the (s, w) windows.

Instances: k-RR where every other user holds one third value
(:func:`shuffledp.accounting.certificates.krr.krr_delta_homogeneous`); the Poisson
randomizer against uniform blanket messages, with an absent-message category
(:func:`shuffledp.accounting.certificates.poisson.poisson_delta`).

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_int, check_rounding
from shuffledp.accounting.numerics.binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_pmf,
    binomial_window,
)
from shuffledp.accounting.numerics.two_counts import Rounding, certify, line_divergence

__all__ = ["MAX_CELLS", "IidBlanket", "iid_blanket_delta"]

#: Largest (s, w) grid the exact sum builds (8 bytes a cell).
MAX_CELLS = 30_000_000
#: Grid cells evaluated per vectorized block.
_CELLS = 2_000_000
#: Cells whose probability is below this are charged in full (their sum is added to δ).
_FAINT = 1e-28


@dataclass(frozen=True)
class IidBlanket:
    """Parameters of the module docstring's setting.

    Attributes:
        others: N, the number of other messages (or potential messages).
        o_sym: Probability each lands on x₀ (and, separately, on x₁).
        o_z: Probability each lands on z.
        victim: (p₀, p₁, p_z, p_r) under the first dataset.
        o_r: Probability each lands on the rest, 1 − 2o_s − o_z; ``None``
            derives it, pass it computed directly when it is small relative to
            o_z (the law of W given S needs o_r/(o_z + o_r) to full relative
            precision).
    """

    others: int
    o_sym: float
    o_z: float
    victim: tuple[float, float, float, float]
    o_r: float | None = None

    def __post_init__(self) -> None:
        check_int(self.others, "others", minimum=0)
        if self.o_sym < 0 or self.o_z < 0 or 2 * self.o_sym + self.o_z > 1 + 1e-12:
            raise InvalidParameterError("need o_sym, o_z >= 0 and 2*o_sym + o_z <= 1")
        if self.o_r is not None and not (
            self.o_r >= 0 and abs(2 * self.o_sym + self.o_z + self.o_r - 1.0) <= 1e-12
        ):
            raise InvalidParameterError(
                f"o_r must be 1 - 2*o_sym - o_z, got o_r={self.o_r!r} for o_sym="
                f"{self.o_sym!r}, o_z={self.o_z!r}"
            )
        if any(p < 0 for p in self.victim) or abs(sum(self.victim) - 1.0) > 1e-9:
            raise InvalidParameterError("the victim's four probabilities must sum to 1")
        if self.victim[0] < self.victim[1]:
            raise InvalidParameterError("order the values so that p0 >= p1")


@dataclass(frozen=True)
class _JointGrid:
    s_window: Window
    w: NDArray[np.int64]
    joint: NDArray[np.float64]
    rel_w: float
    dropped_w: float


@functools.lru_cache(maxsize=16)
def _joint_grid(setting: IidBlanket, tail: float) -> _JointGrid:
    """P[S = s, W = w] on rows s_lo − 1 … s_hi + 1 and columns w_lo − 1 … w_hi (cached: ε-free)."""
    n_others = setting.others
    s_window = binomial_window(n_others, min(1.0, 2.0 * setting.o_sym), tail)
    o_r = max(0.0, 1.0 - 2.0 * setting.o_sym - setting.o_z) if setting.o_r is None else setting.o_r
    rest_of_s = setting.o_z + o_r
    p_z_given = 0.0 if rest_of_s <= 0 else min(1.0, setting.o_z / rest_of_s)
    p_r_given = 1.0 - p_z_given if rest_of_s <= 0 else min(1.0, o_r / rest_of_s)
    # W | S = s ~ Bin(N − s, p_z_given): one window covering every s in S's window.
    w_lo_win = binomial_window(n_others - s_window.hi, p_z_given, tail, p_r_given)
    w_hi_win = binomial_window(n_others - s_window.lo, p_z_given, tail, p_r_given)
    w_lo, w_hi = w_lo_win.lo, w_hi_win.hi + 1
    rows = np.arange(s_window.lo - 1, s_window.hi + 2, dtype=np.int64)
    cols = np.arange(w_lo - 1, w_hi + 1, dtype=np.int64)
    if len(rows) * len(cols) > MAX_CELLS:
        raise InvalidParameterError(
            f"the exact sum needs {len(rows) * len(cols):.3g} cells, more than {MAX_CELLS:.3g}"
        )
    inside = (rows >= s_window.lo) & (rows <= s_window.hi)
    weight = np.zeros(len(rows))
    weight[inside] = s_window.pmf[rows[inside] - s_window.lo]
    m = (n_others - rows).astype(np.float64)[:, None]
    c = cols.astype(np.float64)[None, :]
    if p_z_given == 0.0 or p_r_given == 0.0:
        point = np.zeros_like(m) if p_z_given == 0.0 else m
        law = (c == point).astype(np.float64)
    else:
        law = binomial_pmf(c, m, p_z_given, p_r_given)
    joint = weight[:, None] * law
    joint.setflags(write=False)
    return _JointGrid(
        s_window=s_window,
        w=cols[1:],
        joint=joint,
        rel_w=max(w_lo_win.rel_error, w_hi_win.rel_error),
        dropped_w=w_lo_win.dropped + w_hi_win.dropped,
    )


def iid_blanket_delta(
    setting: IidBlanket, epsilon: float, *, rounding: Rounding = "up", tail: float = DEFAULT_TAIL
) -> float:
    """Return H_ε(P‖Q) (equal to H_ε(Q‖P) by the x₀ ↔ x₁ symmetry), with certified rounding.

    Args:
        setting: The parameters.
        epsilon: ε ≥ 0.
        rounding: ``"up"`` adds the mass outside the windows and a floating-point
            allowance; ``"down"`` subtracts them.
        tail: Mass left out on each side of each window.
    """
    rounding = check_rounding(rounding)
    if epsilon < 0:
        raise InvalidParameterError(f"epsilon must be >= 0, got {epsilon!r}")
    p0, p1, pz, pr = setting.victim
    grid = _joint_grid(setting, tail)
    s_window = grid.s_window
    shrink = math.exp(-epsilon)
    # α, γ per cell: the joint pmf's error, the victim's weights' (4u) and a few roundings.
    rho = s_window.rel_error + grid.rel_w + 12.0 * 2.0**-53
    total = 0.0
    positive = 0.0
    charged = 0.0
    skipped = 0.0
    w = grid.w
    chunk = max(1, _CELLS // max(1, len(w)))
    lines = np.arange(max(1, s_window.lo), s_window.hi + 2, dtype=np.int64)
    joint = grid.joint  # rows s = s_lo − 1 … s_hi + 1, columns w = w_lo − 1 … w_hi
    for start in range(0, len(lines), chunk):
        s_block = lines[start : start + chunk]
        r = s_block - (s_window.lo - 1)
        o_prev = joint[r - 1, 1:]
        beta = pz * joint[r, :-1] + pr * joint[r, 1:]  # P[S = s, W = w − 1], P[S = s, W = w]
        alpha = p0 * o_prev + 0.5 * beta
        gamma = p1 * o_prev + 0.5 * beta
        # Cells whose whole mass is negligible are charged in full instead of summed.
        faint = (alpha * shrink >= gamma * (1.0 - 1e-9)) & (alpha < _FAINT)
        skipped += float(np.sum(alpha[faint] + gamma[faint]))
        alpha[faint] = 0.0
        gamma[faint] = 0.0
        part, mass, charge = line_divergence(
            alpha, gamma, s_block[:, None].astype(np.float64), epsilon, relative_error=rho
        )
        total += part
        positive += mass
        charged += charge
    # Mass left out: S's window, W's tails beyond one window that covers every
    # line, and the faint cells.
    return certify(
        total,
        positive,
        charge=charged,
        terms=len(lines) * len(w),
        dropped=s_window.dropped + grid.dropped_w + skipped,
        epsilon=epsilon,
        rounding=rounding,
    )
