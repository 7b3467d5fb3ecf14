"""Exact accounting for signed messages with correlated noise (the ``correlated`` protocol).

Which group: a mechanism-specific certificate (with its own exact numerical
core); it imports the package's validation, the correlated noise's pmfs, the
add/remove certificate, the flooding searches
(:mod:`shuffledp.accounting.certificates.correlated_flooding`), the settling
search of the numerical core and numpy/scipy.

The protocol (Ghazi, Kumar, Manurangsi & Pagh, "Private counting from anonymous
messages: near-optimal accuracy with vanishing communication overhead", ICML
2020, arXiv 2106.04247; Ghazi, Kumar, Manurangsi, Pagh & Sinha, "Differentially
private aggregation in the shuffle model: almost central accuracy in almost a
single message", ICML 2021, arXiv 2109.13158). Every user sends its value as
the message (x, +1) and, for every bin j, A_ij copies of (j, +1), A′_ij copies
of (j, −1) and W_ij copies of both, where A, A′ ~ NB(1/m, α) and
W ~ NB(r/m, q) are i.i.d. shares (m: the number of users whose noise the
guarantee counts on; NB(s, q) has P(k) = C(k + s − 1, k)(1 − q)^s q^k). With
m such users, by infinite divisibility the analyzer sees, per bin, exactly

    N⁺ = h + A + W,   N⁻ = A′ + W,   A, A′ ~ Geo(α), W ~ NB(r, q),

independent across bins given the data, and estimates h by N⁺ − N⁻ = h + DLap(a)
(α = e^{−a}). More users' noise is independent noise added to both counts:
post-processing, so m users is the worst case.

**The dominating pair and its privacy loss (re-derived here).** Shifting N⁺ by
the data, one bin's pair is P₀ = law(A + W, A′ + W) against P₁ = law(1 + A + W,
A′ + W). With g(k) = (1 − α)α^k and w the pmf of W,

    P₀(u, v) = Σ_{x ≤ min(u, v)} w(x) g(u − x) g(v − x) = (1 − α)² α^{u+v} S(min(u, v)),

S(t) = Σ_{x ≤ t} w(x) α^{−2x}, and P₁(u, v) = P₀(u − 1, v). So the loss
ln P₀/P₁ is ln α = −a where u > v (there min(u − 1, v) = min(u, v) = v), +∞ at
u = 0 (P₁ = 0 there), and, where 1 ≤ u ≤ v,

    ln(α·S(u)/S(u − 1)) = −a + ln(1 + w(u)/T(u)),   T(u) = α^{2u} S(u − 1),

with T(0) = 0 and T(x) = α²(w(x − 1) + T(x − 1)). Summing P₀ and P₁ over
v ≥ u gives the masses (a geometric series in v):

* under P₀ (loss L = ln P₀/P₁): −a with mass P(A > A′) = α/(1 + α);
  −a + ln(1 + w(x)/T(x)) with mass (1 − α)(w(x) + T(x)) for x ≥ 1; +∞ with
  mass (1 − α)w(0);
* under P₁ (loss L′ = ln P₁/P₀ = −L): +a with mass P(A ≥ A′) = 1/(1 + α);
  a − ln(1 + w(x)/T(x)) with mass (1 − α)T(x)/α for x ≥ 1.

(The masses add up: Σ_x T(x) = α²/(1 − α²), so (1 − α)(1 + α²/(1 − α²)) = 1/(1 + α).)

**Neighbours.** Replacement (one user's value moves from bin x to bin y; its
noise shares are the same in both datasets): shifting both bins, the pair is
P₁ ⊗ P₀ against P₀ ⊗ P₁, whose loss is L′ + L with L′ and L independent, so
δ(ε) = E[(1 − e^{ε − L′ − L})₊], summed exactly over the two atom sets (one
sort and two suffix sums). Swapping the two bins maps one direction onto the
other, so δ is the same both ways. Add/remove (the usual relation: one user
present or absent, and an absent user sends nothing, neither its value nor
its noise shares) changes every bin's noise, so it composes all d bins and
depends on d and m: :mod:`shuffledp.accounting.certificates.correlated_add_remove`
computes it, and :func:`correlated_delta` dispatches there. (Shuffledp 0.2
certified under the name ``add-remove`` a relation in which the absent user
still sent its noise shares, the single-bin pair H_ε(P₀‖P₁), H_ε(P₁‖P₀) above;
no user who leaves does that, so it is no longer a relation the package
certifies. It survives only as :func:`_single_bin_delta`, a fast proxy that
seeds the add/remove calibration's search; every answer is then certified by
the usual relation.)

**Exactness and rounding.** W's pmf is evaluated on [0, X] with X past the
point where a Chernoff bound leaves 1e-20 of its mass; atoms beyond X are
dropped and their whole mass (bounded through T(X + 1)) is added to an upper
bound. The pmf's relative error is bounded from the log-gamma terms; T is a
recursion of positive terms (a few units per step). A relative error ρ on
every mass moves δ by at most 2ρδ; an error η on every loss value moves it by
at most 2η times the mass where L′ + L > ε − 2η; both are charged, with a
factor two of margin, plus the floating-point sums. Tests compare with a sum
over the whole joint law (brute force), with a second algorithm that sums the
two-dimensional law of each bin directly (:func:`generic_bin_delta`, which also
gives the exact δ when fewer than m users' noise is present: A, A′ ~ NB(β, α),
the generalized discrete Laplace of Harrison & Manurangsi, FORC 2025, arXiv
2504.05202), and with a Monte Carlo estimate.

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core, published
bounds and other certificates, never reproductions, composition or the questions layer.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Integral
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_probability,
    check_rounding,
)
from shuffledp.accounting.certificates.correlated_add_remove import (
    CertificateTooLargeError,
    _add_remove_delta,
    _add_remove_loss,
)
from shuffledp.accounting.certificates.correlated_flooding import (
    MAX_FLOOD_MEAN,
    cheapest_for,
    smallest_flooding_shape,
)
from shuffledp.accounting.certificates.correlated_noise import (
    DEFAULT_TAIL,
    NEIGHBOURS,
    CorrelatedNoise,
    Neighbours,
    check_neighbours,
    dlap_std,
    negative_binomial_tail_point,
    negative_binomial_window,
)
from shuffledp.accounting.numerics.search import settle_epsilon

_UNIT_ROUNDOFF = 2.0**-53

__all__ = [
    "NEIGHBOURS",
    "CorrelatedNoise",
    "Neighbours",
    "central_dlap_parameter",
    "cheapest_flooding",
    "check_add_remove_size",
    "check_neighbours",
    "correlated_delta",
    "correlated_epsilon",
    "dlap_std",
    "epsilon_with_fewer_honest",
    "flooding_floor",
    "generic_bin_delta",
    "largest_alpha",
    "negative_binomial_tail_point",
    "window_floor",
]

# -- one bin's privacy-loss distribution ------------------------------------------------


@dataclass(frozen=True)
class _BinLoss:
    """One bin's two privacy-loss distributions (module docstring), truncated at X.

    Attributes:
        values0: Finite loss values of L = ln P₀/P₁ under P₀ (x = 0 … X).
        masses0: Their masses.
        infinite0: P₀'s mass where P₁ = 0 (loss +∞).
        values1: Loss values of L′ = ln P₁/P₀ under P₁ (x = 0 … X).
        masses1: Their masses.
        beyond1: P₁'s mass of the atoms beyond X (a bound); each has a loss
            a − ln(1 + w/T) ≤ a, so an upper bound puts it at +a.
        charge0: Bound on what P₀'s atoms beyond X can add to δ: each adds at
            most (1 − α)·w(x) (its loss is −a + ln(1 + w/T), and with ε > 0 the
            factor (1 − e^{ε − L′ − L})₊ ≤ w/(w + T) since L′ ≤ a), so their sum
            is at most (1 − α) times W's mass beyond X.
        value_error: Bound on the absolute error of every loss value.
        mass_error: Bound on the relative error of every mass.
    """

    values0: NDArray[np.float64]
    masses0: NDArray[np.float64]
    infinite0: float
    values1: NDArray[np.float64]
    masses1: NDArray[np.float64]
    beyond1: float
    charge0: float
    value_error: float
    mass_error: float


def _bin_loss(noise: CorrelatedNoise, tail: float) -> _BinLoss:
    alpha = noise.alpha
    a = -math.log(alpha)
    flood = negative_binomial_window(noise.flood_r, noise.flood_q, tail)
    w = flood.pmf
    end = len(w) - 1
    # T(0) = 0, T(x) = α²(w(x − 1) + T(x − 1)) for x = 1 … X + 1: T = filter of α²·w shifted.
    alpha2 = alpha * alpha
    from scipy import signal  # here: importing the certificate stays light

    t_all = signal.lfilter([0.0, alpha2], [1.0, -alpha2], np.append(w, 0.0))
    t = t_all[1 : end + 1]  # T(1) … T(X)
    beyond_first = float(t_all[end + 1])  # T(X + 1)
    ws = w[1:]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        excess = np.log1p(ws / t)
    ok = np.isfinite(excess) & (t > 0)
    values0 = np.concatenate([[-a], -a + excess[ok]])
    masses0 = np.concatenate([[alpha / (1.0 + alpha)], (1.0 - alpha) * (ws[ok] + t[ok])])
    values1 = np.concatenate([[a], a - excess[ok]])
    masses1 = np.concatenate([[1.0 / (1.0 + alpha)], (1.0 - alpha) * t[ok] / alpha])
    # Beyond X, Σ_{x>X} T(x) ≤ T(X + 1)/(1 − α²) + (W's mass beyond X)·α²/(1 − α²). An atom
    # whose T underflowed to 0 (w/T unbounded) is charged whole on both sides.
    lost_w = float(np.sum(ws[~ok]))
    lost_t = float(np.sum(t[~ok])) + _TINY
    beyond_t = beyond_first / (1.0 - alpha2) + flood.dropped * alpha2 / (1.0 - alpha2)
    # Errors: w relative ρ_w; T a recursion of positive terms, 3 units a step; the masses
    # a product and a sum more; the values log1p of w/T (ρ_w + ρ_T + 2 units) and −a.
    rho_t = flood.rel_error + 3.0 * (end + 2) * _UNIT_ROUNDOFF
    mass_error = flood.rel_error + rho_t + 6.0 * _UNIT_ROUNDOFF
    value_error = 2.0 * (flood.rel_error + rho_t) + 8.0 * _UNIT_ROUNDOFF * (1.0 + a)
    return _BinLoss(
        values0=values0,
        masses0=masses0,
        infinite0=(1.0 - alpha) * float(w[0]) + _TINY,
        values1=values1,
        masses1=masses1,
        beyond1=(1.0 - alpha) / alpha * (beyond_t + lost_t),
        charge0=(1.0 - alpha) * (flood.dropped + lost_w + lost_t),
        value_error=value_error,
        mass_error=mass_error,
    )


#: What a probability that underflowed to 0 may have been (charged to upper bounds).
_TINY = 1e-300


def _positive_part(values: NDArray[np.float64], masses: NDArray[np.float64], eps: float) -> float:
    """Σ over atoms with value > ε of mass·(1 − e^{ε − value})."""
    keep = values > eps
    return float(np.sum(masses[keep] * -np.expm1(eps - values[keep])))


def _mass_above(values: NDArray[np.float64], masses: NDArray[np.float64], eps: float) -> float:
    return float(np.sum(masses[values > eps]))


#: The largest exponent :meth:`_Composed.hockey` evaluates (e^700 ≈ 1e304 < float max).
_LARGEST_EXPONENT = 700.0


class _Composed:
    """The sum L′ + L of two independent atom sets, as sorted suffix sums (one sort)."""

    def __init__(self, values: NDArray[np.float64], masses: NDArray[np.float64]) -> None:
        order = np.argsort(values, kind="stable")
        self.values = values[order]
        m = masses[order]
        self.shift = float(self.values[0]) if len(self.values) else 0.0
        # Suffix sums of q_j and of q_j·e^{shift − u_j} (≤ q_j: no overflow).
        self.suffix_mass = np.concatenate([np.cumsum(m[::-1])[::-1], [0.0]])
        self.suffix_scaled = np.concatenate(
            [np.cumsum((m * np.exp(self.shift - self.values))[::-1])[::-1], [0.0]]
        )

    def hockey(
        self,
        values: NDArray[np.float64],
        masses: NDArray[np.float64],
        eps: float,
        *,
        rounding: Literal["up", "down"] = "up",
    ) -> tuple[float, float]:
        """(E[(1 − e^{ε − V − U})₊], P[V + U > ε]) over the atoms (values, masses) ⊗ self.

        For an atom V = v the inner sum Σ_{u_j > ε − v} q_j (1 − e^{ε − v − u_j}) lies
        in [0, P[U > ε − v]]. Where e^{ε − v − shift} would overflow (a spread of the
        losses beyond 700 nats) that interval is all that is known, and its safe end
        is taken: the upper end for ``rounding="up"``, 0 for ``"down"``.
        """
        thresholds = eps - values
        # The same indices as searching the thresholds as they come, found about three
        # times faster in increasing order (each search starts where the last ended).
        order = np.argsort(thresholds, kind="stable")
        index = np.empty(len(thresholds), dtype=np.intp)
        index[order] = np.searchsorted(self.values, thresholds[order], side="right")
        above = self.suffix_mass[index]
        live = above > 0
        exponent = thresholds[live] - self.shift
        overflow = exponent > _LARGEST_EXPONENT
        scale = np.exp(np.minimum(exponent, _LARGEST_EXPONENT))
        inner = np.clip(above[live] - scale * self.suffix_scaled[index[live]], 0.0, None)
        inner[overflow] = above[live][overflow] if rounding == "up" else 0.0
        total = float(np.sum(masses[live] * inner))
        return total, float(np.sum(masses[live] * above[live]))


def _certified(
    total: float, region: float, *, loss: _BinLoss, terms: int, dropped: float, rounding: str
) -> float:
    """Round a computed δ to the safe side (module docstring, "Exactness and rounding")."""
    allowance = (
        4.0 * loss.mass_error * total
        + 4.0 * loss.value_error * region
        + (terms + 16) * 4.0 * _UNIT_ROUNDOFF * region
    )
    if rounding == "up":
        return min(1.0, total + allowance + dropped)
    return max(0.0, total - allowance)


def _replacement_delta(
    epsilon: float, noise: CorrelatedNoise, rounding: Literal["up", "down"], tail: float
) -> float:
    """δ(ε) under replacement (module docstring), unchecked: the search's kernel."""
    loss = _bin_loss(noise, tail)
    up = rounding == "up"
    a = noise.a
    values1, masses1 = loss.values1, loss.masses1
    if up and loss.beyond1 > 0:  # P₁'s atoms beyond X, each at its largest loss, +a
        values1 = np.append(values1, a)
        masses1 = np.append(masses1, loss.beyond1)
    infinite0 = loss.infinite0 if up else max(0.0, loss.infinite0 - _TINY)
    # The extra margin of the value errors: atoms within 2η of the threshold.
    widen = 2.0 * loss.value_error
    terms = 2 * len(loss.values0)
    composed = _Composed(loss.values0, loss.masses0)
    total, _ = composed.hockey(values1, masses1, epsilon, rounding=rounding)
    _, region = composed.hockey(values1, masses1, epsilon - 2.0 * widen)
    # L = +∞ (u = 0 in the second bin) contributes its mass whatever L′ is.
    weight1 = float(np.sum(masses1))
    total += infinite0 * weight1
    region += infinite0 * weight1
    return _certified(
        total, region, loss=loss, terms=terms, dropped=loss.charge0, rounding=rounding
    )


def _single_bin_delta(epsilon: float, noise: CorrelatedNoise, tail: float = DEFAULT_TAIL) -> float:
    """max(H_ε(P₀‖P₁), H_ε(P₁‖P₀)) of one bin at the same noise: not a certificate.

    The relation shuffledp 0.2 called ``add-remove`` (the absent user's noise shares
    still sent). The usual add/remove relation's δ differs from it by what the user's
    own shares reveal, small when m is large, so it is a fast proxy that seeds the
    add/remove calibration's search (:func:`cheapest_flooding`); nothing it returns is
    reported.
    """
    loss = _bin_loss(noise, tail)
    values1, masses1 = loss.values1, loss.masses1
    if loss.beyond1 > 0:
        values1 = np.append(values1, noise.a)
        masses1 = np.append(masses1, loss.beyond1)
    widen = 2.0 * loss.value_error
    terms = 2 * len(loss.values0)
    first = loss.infinite0 + _positive_part(loss.values0, loss.masses0, epsilon)
    region0 = loss.infinite0 + _mass_above(loss.values0, loss.masses0, epsilon - widen)
    second = _positive_part(values1, masses1, epsilon)
    region1 = _mass_above(values1, masses1, epsilon - widen)
    return max(
        _certified(first, region0, loss=loss, terms=terms, dropped=loss.charge0, rounding="up"),
        _certified(second, region1, loss=loss, terms=terms, dropped=0.0, rounding="up"),
    )


def check_add_remove_size(
    neighbours: Neighbours, domain_size: object, min_honest: object
) -> tuple[int, int] | None:
    """The (d, m) the add/remove relation needs, checked; None under replacement.

    Raises:
        InvalidParameterError: Under add/remove, if ``domain_size`` is not an integer
            ≥ 2 or ``min_honest`` not an integer ≥ 2 (naming the parameter and why).
    """
    if neighbours == "replacement":
        return None
    if isinstance(domain_size, bool) or not isinstance(domain_size, Integral) or domain_size < 2:
        raise InvalidParameterError(
            "domain_size must be an integer >= 2 under neighbours='add-remove' (an absent "
            f"user's noise shares are missing from every bin), got {domain_size!r}"
        )
    if isinstance(min_honest, bool) or not isinstance(min_honest, Integral) or min_honest < 2:
        raise InvalidParameterError(
            "min_honest must be an integer >= 2 under neighbours='add-remove' (the dataset "
            "without the user holds min_honest - 1 honest users' noise), got "
            f"{min_honest!r}"
        )
    return int(domain_size), int(min_honest)


def correlated_delta(
    epsilon: float,
    noise: CorrelatedNoise,
    *,
    neighbours: Neighbours = "replacement",
    domain_size: int | None = None,
    min_honest: int | None = None,
    rounding: Literal["up", "down"] = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return the exact δ(ε) of the correlated protocol's view (module docstring).

    Args:
        epsilon: ε > 0.
        noise: The per-bin noise totals (at the m honest users the guarantee counts on).
        neighbours: ``"replacement"`` (one user's value moves between two bins,
            the default) or ``"add-remove"`` (one user present or absent; an
            absent user sends nothing:
            :mod:`shuffledp.accounting.certificates.correlated_add_remove`).
        domain_size: d, the number of bins (add/remove only; required there).
        min_honest: m, honest users in the dataset that holds the user (add/remove
            only; required there): their shares are NB(1/m, ·) each.
        rounding: ``"up"`` for the certificate, ``"down"`` for a lower bound on
            the same exact δ (truncated atoms only lower it).
        tail: Mass each window leaves out (added to an upper bound).
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    neighbours = check_neighbours(neighbours)
    tail = check_probability(tail, "tail")
    if not isinstance(noise, CorrelatedNoise):
        raise InvalidParameterError(f"noise must be a CorrelatedNoise, got {type(noise).__name__}")
    size = check_add_remove_size(neighbours, domain_size, min_honest)
    return _correlated_delta(epsilon, noise, size, rounding, tail)


def _correlated_delta(
    epsilon: float,
    noise: CorrelatedNoise,
    size: tuple[int, int] | None,
    rounding: Literal["up", "down"] = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """:func:`correlated_delta` on checked inputs (``size``: add/remove's (d, m), else None).

    What a caller that has validated its inputs once evaluates (calibrations,
    searches): the same computation, bit for bit, without checking them again.
    """
    if size is None:
        return _replacement_delta(epsilon, noise, rounding, tail)
    return _add_remove_delta(
        epsilon, noise, domain_size=size[0], min_honest=size[1], rounding=rounding, tail=tail
    )


def correlated_epsilon(
    delta: float,
    noise: CorrelatedNoise,
    *,
    neighbours: Neighbours = "replacement",
    domain_size: int | None = None,
    min_honest: int | None = None,
    precision: float = 1e-6,
) -> tuple[float, float]:
    """Return (ε, δ(ε)): the smallest ε found with :func:`correlated_delta` ≤ ``delta``.

    Settled on the same computation as :func:`correlated_delta` (its unchecked
    kernel), so the pair holds exactly. ε is searched in (0, 50]; the view is
    (a, 0)-DP at no ε below the local bound, since W's flooding makes P₀ put mass
    where P₁ has none. ``domain_size`` and ``min_honest`` as for
    :func:`correlated_delta` (add/remove only).

    Raises:
        InvalidParameterError: If no ε up to 50 reaches ``delta`` (it cannot
            go below the mass of the +∞ atom, (1 − α)·P[W = 0]).
    """
    target = check_delta(delta)
    neighbours = check_neighbours(neighbours)
    if not isinstance(noise, CorrelatedNoise):
        raise InvalidParameterError(f"noise must be a CorrelatedNoise, got {type(noise).__name__}")
    size = check_add_remove_size(neighbours, domain_size, min_honest)

    def value(eps: float) -> float:
        if size is None:
            return _replacement_delta(eps, noise, "up", DEFAULT_TAIL)
        return _add_remove_delta(eps, noise, domain_size=size[0], min_honest=size[1])

    floor = value(50.0)
    if floor > target:
        raise InvalidParameterError(
            f"no epsilon reaches delta={target:g} with this noise: delta stays at "
            f"{floor:.3g} or above at epsilon=50 (the view reveals a bin with no flooding, "
            "probability (1 - alpha)*P[W = 0], or, under add/remove, the user's own noise "
            "shares); change the noise"
        )
    lo, hi = 1e-9, 50.0
    while hi / lo > 1.0 + 1e-3:
        mid = math.sqrt(lo * hi)
        if value(mid) <= target:
            hi = mid
        else:
            lo = mid
    return settle_epsilon(value, target, hi, 50.0, precision=precision)


# -- a second algorithm: each bin's two-dimensional law summed directly -----------------


def generic_bin_delta(
    epsilon: float,
    *,
    alpha: float,
    shape: float,
    flood_r: float,
    flood_q: float,
    neighbours: Neighbours = "replacement",
    tail: float = 1e-16,
) -> float:
    """δ(ε) with A, A′ ~ NB(``shape``, α) and W ~ NB(``flood_r``, ``flood_q``), summed directly.

    Builds each bin's law P₀(u, u + d) = Σ_k g(k)·w(u − k)·g(k + d) on a band
    |d| ≤ D around the diagonal (g the NB(shape, α) pmf, truncated where
    Chernoff's bound leaves ``tail``), takes the privacy loss of every cell
    and composes the two bins as :func:`correlated_delta` does. At shape 1 it
    is a second algorithm for the closed form; below 1 it is the exact δ when
    only a fraction ``shape`` of the honest users' noise is present (the
    generalized discrete Laplace of Harrison & Manurangsi, FORC 2025, arXiv
    2504.05202), where no closed form is used. The mass outside the band and
    windows is added (an upper bound up to floating point; an analysis number,
    not a certificate). Work grows as (X + D)·D², X W's window.
    """
    epsilon = check_epsilon(epsilon)
    neighbours = check_neighbours(neighbours)
    if neighbours != "replacement":
        raise InvalidParameterError(
            "generic_bin_delta sums the replacement pair of two bins; the add/remove "
            "relation changes every bin: use correlated_delta(..., neighbours='add-remove', "
            "domain_size=..., min_honest=...)"
        )
    tail = check_probability(tail, "tail")
    CorrelatedNoise(alpha, flood_r, flood_q)  # checks alpha, flood_r and flood_q
    if not (isinstance(shape, float | int) and math.isfinite(shape) and shape > 0.0):
        raise InvalidParameterError(f"shape must be a finite number > 0, got {shape!r}")
    return _generic_bin_delta(epsilon, alpha, shape, flood_r, flood_q, tail)


def _generic_bin_delta(
    epsilon: float, alpha: float, shape: float, flood_r: float, flood_q: float, tail: float
) -> float:
    """:func:`generic_bin_delta` on checked inputs (replacement): a search's kernel.

    Only the hockey-stick sum depends on ε: the pair of laws and their losses are
    built once per noise (:func:`_generic_bin_pair`) for every ε a search tries.
    """
    pair = _generic_bin_pair(alpha, shape, flood_r, flood_q, tail)
    total, _ = pair.composed.hockey(pair.v1, pair.m1, epsilon)
    total += pair.infinite
    return min(1.0, total + 2.0 * pair.dropped)


@dataclass(frozen=True)
class _GenericBinPair:
    """What :func:`_generic_bin_delta` sums at every ε, for one noise (arrays read-only).

    Attributes:
        composed: P₀'s finite losses, sorted for :meth:`_Composed.hockey`.
        v1: P₁'s finite losses (the other direction).
        m1: Their masses under P₁.
        infinite: The δ the atoms of infinite loss add, at every ε.
        dropped: The mass the truncated windows leave out.
    """

    composed: _Composed
    v1: NDArray[np.float64]
    m1: NDArray[np.float64]
    infinite: float
    dropped: float


@functools.lru_cache(maxsize=2)  # ~20-30 MB each at the noise a calibration chooses
def _generic_bin_pair(
    alpha: float, shape: float, flood_r: float, flood_q: float, tail: float
) -> _GenericBinPair:
    """The two laws of one bin's view and their privacy losses (no ε involved)."""
    g = negative_binomial_window(shape, alpha, tail)
    w = negative_binomial_window(flood_r, flood_q, tail)
    depth = len(g.pmf) - 1  # g(k) = 0 (dropped) beyond D
    band = np.arange(-depth - 1, depth + 2)
    u = np.arange(len(w.pmf) + depth + 1)
    # P₀ on the (u, d) grid: u from 0 to X + D, d from −D−1 to D+1.
    p0 = np.zeros((len(u) + 1, len(band)))
    w_pad = np.concatenate([w.pmf, np.zeros(depth + 2)])
    g_pad = np.concatenate([g.pmf, np.zeros(2 * depth + 4)])
    for k in range(depth + 1):
        x = u - k
        valid = x >= 0
        rows = np.flatnonzero(valid)
        second = k + band
        ok = second >= 0
        contrib = g.pmf[k] * np.outer(
            w_pad[x[valid]], np.where(ok, g_pad[np.clip(second, 0, None)], 0.0)
        )
        p0[rows] += contrib
    p0 = p0[: len(u)]
    # P₁(u, u + d) = P₀(u − 1, (u − 1) + (d + 1)).
    p1 = np.zeros_like(p0)
    p1[1:, :-1] = p0[:-1, 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.log(p0) - np.log(p1)
    finite = (p0 > 0) & (p1 > 0)
    inf0 = float(np.sum(p0[(p0 > 0) & (p1 == 0)]))
    inf1 = float(np.sum(p1[(p1 > 0) & (p0 == 0)]))
    v0, m0 = loss[finite], p0[finite]
    v1, m1 = -loss[finite], p1[finite]
    dropped = 2.0 * (w.dropped + 2.0 * g.dropped) + 1e-14
    composed = _Composed(v0, m0)
    for array in (composed.values, composed.suffix_mass, composed.suffix_scaled, v1, m1):
        array.setflags(write=False)
    infinite = inf0 * (float(np.sum(m1)) + inf1) + inf1 * float(np.sum(m0))
    return _GenericBinPair(composed, v1, m1, infinite, dropped)


# -- calibration -------------------------------------------------------------------------


def central_dlap_parameter(epsilon: float, neighbours: Neighbours = "replacement") -> float:
    """The central discrete Laplace's parameter at ε.

    ε/2 for replacement (a histogram's L1 sensitivity is 2), ε for add/remove (1).
    """
    return _central_parameter(check_epsilon(epsilon), check_neighbours(neighbours))


def _central_parameter(epsilon: float, neighbours: Neighbours) -> float:
    """:func:`central_dlap_parameter` on checked inputs."""
    return epsilon / 2.0 if neighbours == "replacement" else epsilon


def largest_alpha(std: float) -> float:
    """The largest α whose DLap(−ln α) has standard deviation at most ``std`` (> 0)."""
    if not (math.isfinite(std) and std > 0):
        raise InvalidParameterError(f"std must be a finite number > 0, got {std!r}")
    # √(2α)/(1 − α) = s  ⇔  s²α² − (2s² + 2)α + s² = 0, the root in (0, 1).
    s2 = std * std
    b = 2.0 * s2 + 2.0
    alpha = (b - math.sqrt(b * b - 4.0 * s2 * s2)) / (2.0 * s2)
    alpha = min(alpha, math.nextafter(1.0, 0.0))
    while math.sqrt(2.0 * alpha) / (1.0 - alpha) > std:  # round to the safe side
        alpha = math.nextafter(alpha, 0.0)
    return alpha


def flooding_floor(
    epsilon: float, alpha: float, *, neighbours: Neighbours = "replacement"
) -> float:
    """The δ(ε) no flooding gets below: the limit of unlimited flooding.

    As W's pmf flattens, w(x)/T(x) tends to (1 − α²)/α² and each bin's loss to
    ±a with masses α/(1 + α) and 1/(1 + α) (the discrete Laplace's own pair).
    Replacement composes two bins: δ∞ = (1/(1 + α))²·(1 − e^{ε − 2a})₊, positive
    only where the two-sided part alone spends more than ε. Under add/remove more
    flooding also shows more of the absent user's own shares, so there is no such
    limit to state.

    Raises:
        InvalidParameterError: If ``neighbours`` is not ``"replacement"``.
    """
    epsilon = check_epsilon(epsilon)
    if check_neighbours(neighbours) != "replacement":
        raise InvalidParameterError(
            "flooding_floor is the replacement relation's limit; under add/remove more "
            "flooding does not only help"
        )
    return _flooding_floor(epsilon, alpha)


def _flooding_floor(epsilon: float, alpha: float) -> float:
    """:func:`flooding_floor` on checked inputs (replacement)."""
    a = -math.log(alpha)
    return (1.0 / (1.0 + alpha)) ** 2 * max(0.0, -math.expm1(epsilon - 2.0 * a))


def window_floor(alpha: float) -> float:
    """What every certificate at this α charges whatever the flooding: (1 − α)·``DEFAULT_TAIL``.

    W's window leaves out ``DEFAULT_TAIL`` of its mass and the replacement
    certificate adds (1 − α) times it (``charge0``); without flooding the +∞ atom
    alone weighs 1 − α. The add/remove certificate charges more (3·``DEFAULT_TAIL``
    per bin and its FFT rounding). No δ at or below this can be certified.
    """
    return (1.0 - alpha) * DEFAULT_TAIL


def cheapest_flooding(
    epsilon: float,
    delta: float,
    alpha: float,
    *,
    neighbours: Neighbours = "replacement",
    domain_size: int | None = None,
    min_honest: int | None = None,
    rtol: float = 1e-4,
) -> CorrelatedNoise:
    """The cheapest flooding NB(r, q) that certifies (ε, δ) with the two-sided part α.

    Cheapest: the fewest expected messages E[W] = rq/(1 − q); certifies:
    :func:`correlated_delta` at ε is at most δ.

    Replacement: at fixed q, δ does not increase with r (W_{r+s} = W_r + W_s: more
    flooding is independent noise added to both counts, a post-processing), so the
    smallest r is found by a bracketed search on the certificate itself (every r
    returned passed it); over q, a grid of 1 − q from 0.5 down (stopped once the
    cost rises) and a golden-section refinement keep the cheapest. The view's +∞
    atom gives the starting r: (1 − α)(1 − q)^r ≤ δ.

    Add/remove (``domain_size`` and ``min_honest`` required): more flooding also
    makes the absent user's own flooding shares easier to see, so δ is not monotone
    in r. The single-bin proxy :func:`_single_bin_delta` gives, fast, what the
    value's bin alone needs: its cheapest flooding is returned if the add/remove
    certificate passes it; otherwise, for each q of a grid, r walks up from the
    proxy's need (by 1.4×) until the certificate passes or δ starts rising, is
    narrowed by three bisection steps, and the cheapest passing flooding over q is
    kept. Every noise returned passed the certificate; "cheapest" is up to the
    grid.

    Raises:
        InvalidParameterError: If no flooding up to r = 1e7 certifies (ε, δ) (ε
            too small for this α: the two-sided part alone costs e^{a} per bin),
            or, under add/remove, if the search finds no flooding that passes (the
            user's own shares are too visible at this m and d; the message states
            the smallest δ reached).
    """
    epsilon = check_epsilon(epsilon)
    target = check_delta(delta)
    alpha = check_probability(alpha, "alpha")
    neighbours = check_neighbours(neighbours)
    size = check_add_remove_size(neighbours, domain_size, min_honest)
    return _cheapest_flooding(epsilon, target, alpha, size, rtol)


def _cheapest_flooding(
    epsilon: float,
    target: float,
    alpha: float,
    size: tuple[int, int] | None,
    rtol: float = 1e-4,
) -> CorrelatedNoise:
    """:func:`cheapest_flooding` on checked inputs (``size``: add/remove's (d, m), else None).

    What a calibration that has validated its target once calls for each α it tries.
    """
    floor = window_floor(alpha)
    if target <= floor:
        raise InvalidParameterError(
            f"delta={target:g} is not above what the certificate always charges: "
            f"{floor:.3g}, the flooding mass its windows leave out ((1 - alpha) * "
            f"{DEFAULT_TAIL:g} at alpha={alpha:.6g}); ask for a larger delta"
        )
    if size is None:
        floor = _flooding_floor(epsilon, alpha)
        if floor >= target:
            a = -math.log(alpha)
            raise InvalidParameterError(
                f"no flooding certifies ({epsilon:g}, {target:g}) with a={a:.4g}: even "
                f"unlimited flooding leaves delta={floor:.3g} (the two-sided part alone "
                f"spends {2 * a:.4g} > epsilon); lower a"
            )

        def kernel(noise: CorrelatedNoise) -> float:
            return _replacement_delta(epsilon, noise, "up", DEFAULT_TAIL)

        found = cheapest_for(kernel, epsilon, target, alpha, rtol)
        if found is None:
            raise InvalidParameterError(
                f"no flooding certifies ({epsilon:g}, {target:g}) with alpha={alpha:g} "
                f"(a={-math.log(alpha):.4g}): epsilon must leave room above what the "
                "two-sided part spends"
            )
        return found
    return _add_remove_flooding(epsilon, target, alpha, *size)


#: 1 − q of the floodings the add/remove search scans, from the flattest.
_ADD_REMOVE_SPREADS: tuple[float, ...] = (0.5, 0.2, 0.1, 0.05, 0.02, 0.01)
#: Steps up in r from the value bin's own need, their factor, and the finer factor used
#: from the single-bin proxy's own answer.
_ADD_REMOVE_STEPS, _ADD_REMOVE_FACTOR, _ADD_REMOVE_FINE = 8, 1.4, 1.05


def _add_remove_flooding(
    epsilon: float, target: float, alpha: float, d: int, m: int
) -> CorrelatedNoise:
    """The add/remove branch of :func:`cheapest_flooding` (its docstring)."""

    def real(noise: CorrelatedNoise) -> float:
        try:
            return _add_remove_delta(epsilon, noise, domain_size=d, min_honest=m)
        except CertificateTooLargeError:
            return math.inf  # noise this spread is past what the certificate holds

    def proxy_kernel(noise: CorrelatedNoise) -> float:
        return _single_bin_delta(epsilon, noise)

    # Fast path: the single-bin proxy's cheapest flooding, when the user's own shares
    # cost little (m large against d), passes as it is.
    fast = cheapest_for(proxy_kernel, epsilon, target, alpha, 1e-3)
    smallest_seen = math.inf
    if fast is not None:
        value = real(fast)
        if value <= target:
            return fast
        smallest_seen = value
        try:
            # add_remove_loss(fast, d, m), the loss real(fast) has just built.
            charged = _add_remove_loss(fast, d, m, "up", DEFAULT_TAIL, None, 1.0).charges()
        except CertificateTooLargeError:
            charged = 0.0
        if charged >= target / 2.0:
            raise InvalidParameterError(
                f"delta={target:g} is too close to what the add/remove certificate charges "
                f"whatever the noise at domain_size={d}: about {charged:.3g} for the rounding "
                "of composing every bin and the mass its windows leave out; ask for a "
                "larger delta"
            )
    best: tuple[float, CorrelatedNoise] | None = None

    def walk(q: float, need: float, factor: float, failing: float = 0.0) -> None:
        """From r = ``need`` up by ``factor`` until δ passes or rises; then 3 bisections.

        ``failing``: an r below ``need`` known to fail (the bisection's lower end).
        """
        nonlocal best, smallest_seen
        r, previous = need, math.inf
        passed: float | None = None
        for _ in range(_ADD_REMOVE_STEPS):
            if best is not None and r * q / (1.0 - q) >= best[0]:
                return  # dearer than what already passed
            value = real(CorrelatedNoise(alpha, r, q))
            smallest_seen = min(smallest_seen, value)
            if value <= target:
                passed = r
                break
            if value > previous:
                return
            failing, previous, r = r, value, r * factor
        if passed is None:
            return
        lo, hi = failing, passed
        for _ in range(3 if lo > 0.0 else 0):
            mid = 0.5 * (lo + hi)
            if real(CorrelatedNoise(alpha, mid, q)) <= target:
                hi = mid
            else:
                lo = mid
        noise = CorrelatedNoise(alpha, hi, q)
        if best is None or noise.flood_mean < best[0]:
            best = (noise.flood_mean, noise)

    if fast is not None:
        # The proxy's own q first, in small steps from its r.
        walk(fast.flood_q, fast.flood_r * _ADD_REMOVE_FINE, _ADD_REMOVE_FINE, fast.flood_r)
    for spread in _ADD_REMOVE_SPREADS:
        q = 1.0 - spread

        def proxy_at(r: float, q: float = q) -> float:
            if r * q / (1.0 - q) > MAX_FLOOD_MEAN:
                return math.inf
            return proxy_kernel(CorrelatedNoise(alpha, r, q))

        start = math.log((1.0 - alpha) / target) / -math.log1p(-q)
        need = smallest_flooding_shape(proxy_at, target, start, 1e-2)
        if need is not None:
            walk(q, need, _ADD_REMOVE_FACTOR)
    if best is not None:
        return best[1]
    raise InvalidParameterError(
        f"no flooding certifies ({epsilon:g}, {target:g}) under add/remove with alpha={alpha:g} "
        f"at min_honest={m} and domain_size={d}: the smallest delta the search reached was "
        f"{smallest_seen:.3g} (the absent user's own noise shares, in every bin, stay "
        "visible, or the view reveals the user where a bin holds no flooding); raise "
        "min_honest, allow a larger slack, or use replacement"
    )


def epsilon_with_fewer_honest(
    delta: float,
    noise: CorrelatedNoise,
    fraction: float,
    *,
    neighbours: Neighbours = "replacement",
    domain_size: int | None = None,
    min_honest: int | None = None,
    precision: float = 1e-4,
) -> float:
    """ε at δ when only a ``fraction`` β of the noise the guarantee counts on is present.

    Dropouts and colluding users remove their shares: the totals become
    A, A′ ~ NB(β, α) and W ~ NB(β·r, q). Under replacement their two-dimensional
    law is summed directly by :func:`generic_bin_delta` (at β < 1 the difference
    A − A′ is the generalized discrete Laplace of Harrison & Manurangsi, FORC 2025,
    arXiv 2504.05202); under add/remove (``domain_size`` and ``min_honest``
    required) the dataset with the user holds β·m users' shares and the one without
    β·m − 1 (:func:`~shuffledp.accounting.certificates.correlated_add_remove.add_remove_delta`).
    An analysis number for the documentation and reports (the guarantee itself
    assumes β = 1), found by bisection on ε to ``precision``, the upper end returned.

    Raises:
        InvalidParameterError: If ``fraction`` is not in (0, 1] (under add/remove,
            also β·m ≥ 1), or no ε up to 50 reaches δ.
    """
    target = check_delta(delta)
    neighbours = check_neighbours(neighbours)
    if not isinstance(noise, CorrelatedNoise):
        raise InvalidParameterError(f"noise must be a CorrelatedNoise, got {type(noise).__name__}")
    if not (isinstance(fraction, float | int) and 0.0 < fraction <= 1.0):
        raise InvalidParameterError(f"fraction must be in (0, 1], got {fraction!r}")
    size = check_add_remove_size(neighbours, domain_size, min_honest)
    if size is not None and fraction * size[1] < 1.0:
        raise InvalidParameterError(
            f"fraction must leave at least one honest user under add/remove: "
            f"fraction * min_honest = {fraction * size[1]:g} < 1"
        )

    def value(eps: float) -> float:
        if size is not None:
            return _add_remove_delta(
                eps, noise, domain_size=size[0], min_honest=size[1], fraction=float(fraction)
            )
        # generic_bin_delta at its default tail, its inputs valid for every ε searched.
        return _generic_bin_delta(
            eps, noise.alpha, float(fraction), noise.flood_r * fraction, noise.flood_q, 1e-16
        )

    lo, hi = 1e-6, 50.0
    if value(hi) > target:
        raise InvalidParameterError(
            f"no epsilon up to 50 reaches delta={target:g} with {fraction:g} of the noise"
        )
    while hi - lo > precision * hi:
        mid = 0.5 * (lo + hi)
        if value(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi
