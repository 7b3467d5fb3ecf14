"""The correlated protocol under the usual add/remove relation: the absent user sends nothing.

Which group: a mechanism certificate; it imports the correlated noise's pmfs
(:mod:`shuffledp.accounting.certificates.correlated_noise`) and the grid
composition of the numerical core (:mod:`shuffledp.accounting.numerics.loss_grid`).

**The relation.** Two datasets differ by one user, present in one and absent
from the other; an absent user sends nothing, neither its value message nor
its noise shares. Every user's shares are NB(1/m, α) copies of (j, +1) and of
(j, −1) and NB(r/m, q) copies of both, for every bin j (m = ``min_honest``).
The guarantee assumes that the dataset *with* the user holds at least m honest
users, the user among them, so the dataset without the user holds m − 1 (more
honest users add the same independent noise to both: post-processing). That
covers every participant of a release whose data hold m honest users (a user
who leaves a batch of m leaves m − 1 behind); requiring m honest users
*besides* the one added would compare m and m + 1 users' noise, a weaker
guarantee that protects no participant of a batch of exactly m.

**The pair.** By infinite divisibility, with β = (m − 1)/m, each bin of the
view (after subtracting the other users' values) is, without the user,

    P = law(A + W, A′ + W),   A, A′ ~ NB(β, α),  W ~ NB(β·r, q),

and with the user Q = law(A + W, A′ + W) at shapes 1 and r, shifted by one in
N⁺ in the bin of the user's value. Bins are independent given the data, so the
view's privacy loss is the sum of one value bin's loss and d − 1 untouched
bins' losses (by symmetry the value's bin does not matter), in each direction:
δ(ε) = max(H_ε(P^d ‖ Q_x ⊗ Q^{d−1}), H_ε(Q_x ⊗ Q^{d−1} ‖ P^d)).

**How it is computed.** Each bin's two-dimensional law is summed exactly on
the band |N⁺ − N⁻| ≤ D + 1 around the diagonal (A and A′ on [0, D], W on
[0, X], D and X past the points where Chernoff's bound leaves ``tail``):
P(u, u + b) = Σ_k g(k)·g(k + b)·w(u − k), a sum of positive terms whose
relative error is bounded. The losses of every cell go on a grid by the
connect-the-dots discretization and the d bins are composed by FFT
(:mod:`shuffledp.accounting.numerics.loss_grid`), with the FFT's rounding
charged. Mass outside the windows (at most 3·``tail`` per bin and side) is
charged whole to an upper bound: writing P = P̂ + P_miss with P̂ the summed
cells, H_ε(P ‖ Q) ≤ H_ε(P̂ ‖ Q̂) + P_miss(all) since Q ≥ Q̂, and for products
the terms holding a missing part weigh at most d·3·``tail``. A lower bound
subtracts e^ε times the same (the missing part of the other law).

Tests compare it with the whole joint law of two bins summed directly (d = 2,
small m), with the same sum composed exactly at d = 3, and with a Monte Carlo
estimate of the privacy loss.

Group: mechanism certificates and lower bounds (``shuffledp.accounting.certificates``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_rounding
from shuffledp.accounting.certificates.correlated_noise import (
    CorrelatedNoise,
    negative_binomial_tail_point,
    negative_binomial_window,
)
from shuffledp.accounting.numerics.loss_grid import GridLoss, grid_loss

__all__ = [
    "MAX_CELLS",
    "AddRemoveLoss",
    "CertificateTooLargeError",
    "add_remove_delta",
    "add_remove_loss",
    "bin_laws",
]

FloatArray = NDArray[np.float64]

_UNIT_ROUNDOFF = 2.0**-53
#: Rows of the band law built at once (bounds the temporary Toeplitz block).
_ROWS = 1 << 13
#: The most cells (rows × band) one bin's law may take: about 100 bytes each at the
#: peak, so about 1.5 GB. Beyond it (α near 1, or a flooding mean of 1e5 and more) the
#: certificate is refused rather than run out of memory.
MAX_CELLS = 15_000_000
#: Grid step of the value bin's atoms (kept in the cache: connect the dots, second order).
_VALUE_STEP = 1e-4


class CertificateTooLargeError(InvalidParameterError):
    """The add/remove certificate of this noise would not fit in memory (:data:`MAX_CELLS`)."""


@dataclass(frozen=True)
class _BandLaw:
    """A bin's law on rows u = 0 … X + D + 1 and band b = v − u = −D − 1 … D + 1."""

    cells: FloatArray
    rel_error: float


def _band_law(
    shape: float, alpha: float, flood_shape: float, q: float, depth: int, window: int, tail: float
) -> _BandLaw:
    """P(u, u + b) = Σ_k g(k)·g(k + b)·w(u − k), g = NB(shape, α), w = NB(flood_shape, q)."""
    g_window = negative_binomial_window(shape, alpha, tail, end=depth)
    w_window = negative_binomial_window(flood_shape, q, tail, end=window)
    g = np.zeros(depth + 1)
    g[: len(g_window.pmf)] = g_window.pmf
    w = np.zeros(window + 1)
    w[: len(w_window.pmf)] = w_window.pmf
    width = 2 * depth + 3
    # F[k, j] = g(k)·g(k + b), b = j − D − 1 (zero where k + b is off [0, D]).
    padded = np.concatenate([np.zeros(depth + 1), g, np.zeros(depth + 2)])
    k = np.arange(depth + 1)[:, None]
    band = np.arange(width)[None, :] - (depth + 1)
    factors = g[:, None] * padded[k + band + depth + 1]
    rows = window + depth + 2
    cells = np.zeros((rows, width))
    # Row u takes w(u − k) for k = 0 … D: a Toeplitz block times the factors, in chunks.
    w_padded = np.concatenate([np.zeros(depth), w, np.zeros(depth + 2)])
    for start in range(0, rows, _ROWS):
        stop = min(rows, start + _ROWS)
        u = np.arange(start, stop)[:, None]
        block = w_padded[u - np.arange(depth + 1)[None, :] + depth]
        cells[start:stop] = block @ factors
    rel_error = 2.0 * g_window.rel_error + w_window.rel_error + (depth + 4) * _UNIT_ROUNDOFF
    return _BandLaw(cells, 2.0 * rel_error)


def bin_laws(
    noise: CorrelatedNoise, min_honest: int, tail: float, fraction: float = 1.0
) -> tuple[FloatArray, FloatArray, float, float]:
    """One bin's laws without and with the user (untouched bin), their error and missing mass.

    Args:
        noise: The noise totals at m users' shares.
        min_honest: m.
        tail: Mass each window leaves out.
        fraction: β: the dataset with the user holds β·m users' shares (1 for the
            guarantee; less for what dropouts leave), the one without β·m − 1.

    Returns:
        (P, Q, rel_error, missing): P at β·m − 1 users' noise, Q at β·m users' on
        the band grid of :func:`_band_law`; the value bin's law with the user is Q
        shifted by one in N⁺ (:func:`_value_bin`). ``missing`` bounds either law's
        mass outside the windows.
    """
    depth = negative_binomial_tail_point(fraction, noise.alpha, tail)
    window = negative_binomial_tail_point(fraction * noise.flood_r, noise.flood_q, tail)
    cells = (window + depth + 2) * (2 * depth + 3)
    if cells > MAX_CELLS:
        raise CertificateTooLargeError(
            f"the add/remove certificate of this noise (alpha={noise.alpha:.6g}, flooding "
            f"mean {noise.flood_mean:.4g} per bin) would sum {cells:,} cells per bin, above "
            f"the {MAX_CELLS:,} it holds in memory (about 100 bytes each); use a smaller "
            "flooding or a smaller alpha (a larger epsilon), or replacement"
        )
    beta = fraction - 1.0 / min_honest
    without = _band_law(beta, noise.alpha, beta * noise.flood_r, noise.flood_q, depth, window, tail)
    with_user = _band_law(
        fraction, noise.alpha, fraction * noise.flood_r, noise.flood_q, depth, window, tail
    )
    rel_error = max(without.rel_error, with_user.rel_error)
    missing = 3.0 * tail if noise.flood_r > 0 and noise.flood_q > 0 else 2.0 * tail
    return without.cells, with_user.cells, rel_error, missing


def _value_bin(cells: FloatArray) -> FloatArray:
    """Q_x(u, u + b) = Q(u − 1, (u − 1) + (b + 1)): one more (x, +1) message."""
    shifted = np.zeros_like(cells)
    shifted[1:, :-1] = cells[:-1, 1:]
    return shifted


def _atoms(
    numerator: FloatArray, denominator: FloatArray
) -> tuple[FloatArray, FloatArray, float, float]:
    """Loss values ln(num/den) under num, their masses, the +∞ mass, max |ln| seen."""
    both = (numerator > 0) & (denominator > 0)
    log_num = np.log(numerator[both])
    log_den = np.log(denominator[both])
    infinite = float(np.sum(numerator[(numerator > 0) & (denominator == 0)]))
    largest = float(max(np.max(np.abs(log_num), initial=0.0), np.max(np.abs(log_den), initial=0.0)))
    return log_num - log_den, numerator[both], infinite, largest


def _grid_step(values: FloatArray, masses: FloatArray) -> float:
    """A grid step fine against the untouched bins' spread: std/8, within [2e-5, 1e-3]."""
    total = float(np.sum(masses))
    mean = float(np.sum(masses * values)) / total
    std = math.sqrt(max(0.0, float(np.sum(masses * (values - mean) ** 2)) / total))
    return min(1e-3, max(2e-5, std / 8.0))


@dataclass(frozen=True)
class _Direction:
    """One direction's loss: the value bin's atoms and the d − 1 untouched bins composed."""

    values: FloatArray
    masses: FloatArray
    infinite: float
    untouched: GridLoss

    def delta(self, epsilon: float) -> float:
        return self.untouched.delta_after(self.values, self.masses, self.infinite, epsilon)


@dataclass(frozen=True)
class AddRemoveLoss:
    """The view's losses in both directions, and what is charged beside them.

    Attributes:
        remove: Loss under the dataset with the user against the one without.
        add: Loss under the dataset without the user against the one with.
        bins: d, the number of bins composed.
        rel_error: Bound on every cell mass's relative error (grid sums included).
        missing: Bound on each bin's mass outside the windows (either law).
        rounding: ``"up"`` (upper bounds) or ``"down"`` (lower bounds).
    """

    remove: _Direction
    add: _Direction
    bins: int
    rel_error: float
    missing: float
    rounding: Literal["up", "down"]

    @property
    def h(self) -> float:
        """The untouched bins' grid step."""
        return self.add.untouched.h

    def charges(self) -> float:
        """What every δ this loss gives carries whatever ε: rounding and windows' mass."""
        rounding = (
            max(self.add.untouched.allowance(), self.remove.untouched.allowance())
            * (1.0 - self.rel_error) ** -self.bins
        )
        return rounding + self.bins * self.missing

    def delta(self, epsilon: float) -> float:
        """δ(ε), both directions (module docstring), on the safe side of every rounding."""
        d = self.bins
        worst = max(self.remove.delta(epsilon), self.add.delta(epsilon))
        if self.rounding == "up":
            return min(1.0, worst * (1.0 - self.rel_error) ** -d + d * self.missing)
        charge = math.exp(min(epsilon, 700.0)) * d * self.missing
        return max(0.0, worst * (1.0 + self.rel_error) ** -d - charge)


def _direction(
    untouched: tuple[FloatArray, FloatArray],
    value: tuple[FloatArray, FloatArray],
    bins: int,
    rel_error: float,
    rounding: Literal["up", "down"],
    h: float | None,
) -> tuple[_Direction, int]:
    values_o, masses_o, infinite_o, largest_o = _atoms(*untouched)
    values_x, masses_x, infinite_x, largest_x = _atoms(*value)
    if h is None:
        h = _grid_step(values_o, masses_o)
        if rounding == "down" and bins > 2:
            # Flooring adds up to h per untouched bin: a finer grid keeps the lower bound
            # close (up to 16 times finer: the grids stay small at any d).
            h = max(1e-7, h / min(math.sqrt(bins - 1), 16.0))
    value_error = 2.5 * rel_error + 4.0 * _UNIT_ROUNDOFF * (1.0 + max(largest_o, largest_x))
    if bins == 1:
        composed = GridLoss(h, 0, np.ones(1), 0.0, rounding)
    else:
        grid_o = grid_loss(
            values_o,
            masses_o,
            infinite=infinite_o,
            h=h,
            rounding=rounding,
            value_error=value_error,
        )
        composed = grid_o.self_compose(bins - 1)
    # The value bin's atoms on a fine grid (connect the dots: on the same side as the
    # rest), so that a cached loss holds thousands of atoms, not one per cell.
    value_grid = grid_loss(
        values_x,
        masses_x,
        infinite=infinite_x,
        h=min(h, _VALUE_STEP),
        rounding=rounding,
        value_error=value_error,
    )
    keep = value_grid.pmf > 0.0
    direction = _Direction(
        value_grid.values[keep], value_grid.pmf[keep], value_grid.infinite, composed
    )
    return direction, max(len(values_o), len(values_x))


def add_remove_loss(
    noise: CorrelatedNoise,
    domain_size: int,
    min_honest: int,
    *,
    rounding: Literal["up", "down"] = "up",
    tail: float = 1e-20,
    h: float | None = None,
    fraction: float = 1.0,
) -> AddRemoveLoss:
    """The view's losses under the usual add/remove relation (module docstring).

    The last 8 losses built are kept (:func:`_add_remove_loss`).

    Args:
        noise: The per-bin noise totals at m = ``min_honest`` users.
        domain_size: d ≥ 1.
        min_honest: m ≥ 1, honest users in the dataset that holds the user.
        rounding: ``"up"`` (upper bounds) or ``"down"`` (lower bounds).
        tail: Mass each window leaves out (per law, per NB part).
        h: Grid step of the untouched bins (default: from their spread).
        fraction: β, the share of the m users' noise present with the user (1 for the
            guarantee; see :func:`bin_laws`).
    """
    rounding = check_rounding(rounding)
    _check_counts(domain_size, min_honest)
    return _add_remove_loss(noise, domain_size, min_honest, rounding, tail, h, fraction)


def _check_counts(domain_size: object, min_honest: object) -> None:
    if not (isinstance(domain_size, int) and domain_size >= 1):
        raise InvalidParameterError(f"domain_size must be an integer >= 1, got {domain_size!r}")
    if not (isinstance(min_honest, int) and min_honest >= 1):
        raise InvalidParameterError(f"min_honest must be an integer >= 1, got {min_honest!r}")


@functools.lru_cache(maxsize=8)
def _add_remove_loss(
    noise: CorrelatedNoise,
    domain_size: int,
    min_honest: int,
    rounding: Literal["up", "down"],
    tail: float,
    h: float | None,
    fraction: float,
) -> AddRemoveLoss:
    """:func:`add_remove_loss` on checked inputs, cached (the searches build each loss once)."""
    without, with_user, rel_error, missing = bin_laws(noise, min_honest, tail, fraction)
    with_value = _value_bin(with_user)
    add, cells = _direction(
        (without, with_user), (without, with_value), domain_size, rel_error, rounding, h
    )
    remove, cells2 = _direction(
        (with_user, without), (with_value, without), domain_size, rel_error, rounding, h
    )
    # np.bincount adds up to every cell into one grid point: charge that too.
    grid_error = rel_error + max(cells, cells2) * _UNIT_ROUNDOFF
    return AddRemoveLoss(
        remove=remove,
        add=add,
        bins=domain_size,
        rel_error=grid_error,
        missing=missing,
        rounding=rounding,
    )


def add_remove_delta(
    epsilon: float,
    noise: CorrelatedNoise,
    *,
    domain_size: int,
    min_honest: int,
    rounding: Literal["up", "down"] = "up",
    tail: float = 1e-20,
    fraction: float = 1.0,
) -> float:
    """δ(ε) of the view under the usual add/remove relation (module docstring).

    Checks ``rounding``, ``domain_size`` and ``min_honest`` only:
    :func:`shuffledp.accounting.certificates.correlated.correlated_delta` is the
    public entry, and the searches, whose inputs are checked once, call
    :func:`_add_remove_delta`.
    """
    rounding = check_rounding(rounding)
    _check_counts(domain_size, min_honest)
    return _add_remove_delta(
        epsilon,
        noise,
        domain_size=domain_size,
        min_honest=min_honest,
        rounding=rounding,
        tail=tail,
        fraction=fraction,
    )


def _add_remove_delta(
    epsilon: float,
    noise: CorrelatedNoise,
    *,
    domain_size: int,
    min_honest: int,
    rounding: Literal["up", "down"] = "up",
    tail: float = 1e-20,
    fraction: float = 1.0,
) -> float:
    """:func:`add_remove_delta` on checked inputs: the same value, nothing checked again."""
    loss = _add_remove_loss(noise, domain_size, min_honest, rounding, tail, None, fraction)
    return loss.delta(epsilon)
