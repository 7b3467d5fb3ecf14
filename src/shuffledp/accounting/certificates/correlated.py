"""Exact accounting for signed messages with correlated noise (the ``correlated`` protocol).

Which group: a mechanism-specific certificate (with its own exact numerical
core); it imports only the package's validation, the settling search of
:mod:`shuffledp.accounting.calibration` and numpy/scipy.

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
other, so δ is the same both ways. Add/remove (option): one user's value
message is present or absent; its noise shares are counted with the others'
in both datasets (a user who opts out of a value still sends noise) — the
relation the issue's replacement figures extend to a single bin:
δ = max(H_ε(P₀‖P₁), H_ε(P₁‖P₀)).

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

import math
from collections.abc import Callable
from dataclasses import dataclass
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
from shuffledp.accounting.numerics.search import settle_epsilon

__all__ = [
    "NEIGHBOURS",
    "CorrelatedNoise",
    "Neighbours",
    "central_dlap_parameter",
    "cheapest_flooding",
    "check_neighbours",
    "correlated_delta",
    "correlated_epsilon",
    "dlap_std",
    "epsilon_with_fewer_honest",
    "flooding_floor",
    "generic_bin_delta",
    "largest_alpha",
    "negative_binomial_tail_point",
]

Neighbours = Literal["replacement", "add-remove"]
NEIGHBOURS: tuple[str, ...] = ("replacement", "add-remove")

_UNIT_ROUNDOFF = 2.0**-53
#: Mass W's window leaves out (a Chernoff bound), added to every upper bound.
DEFAULT_TAIL = 1e-20


def check_neighbours(neighbours: object) -> Neighbours:
    """Return ``neighbours`` as a :data:`Neighbours` if it is one of :data:`NEIGHBOURS`.

    Raises:
        InvalidParameterError: Naming the parameter, the value and the two allowed.
    """
    if neighbours not in NEIGHBOURS:
        raise InvalidParameterError(
            f"neighbours must be 'replacement' or 'add-remove', got {neighbours!r}"
        )
    return "replacement" if neighbours == "replacement" else "add-remove"


def dlap_std(a: float) -> float:
    """Standard deviation of the discrete Laplace DLap(a) (P(k) ∝ e^{−a|k|}): √(2α)/(1 − α)."""
    alpha = math.exp(-a)
    return math.sqrt(2.0 * alpha) / (-math.expm1(-a))


@dataclass(frozen=True)
class CorrelatedNoise:
    """The per-bin noise totals the guarantee counts on.

    With the honest users' shares present, the analyzer's per-bin counts are
    N⁺ = h + A + W and N⁻ = A′ + W, A, A′ ~ Geo(α) = NB(1, α), W ~ NB(r, q).
    These are the floats the randomizer samples with: the certificate is for
    exactly them.

    Attributes:
        alpha: α = e^{−a} in (0, 1): the two-sided geometric part; N⁺ − N⁻ − h
            is DLap(a).
        flood_r: r ≥ 0, the flooding count's shape (0: no flooding).
        flood_q: q in [0, 1), the flooding count's probability (0: no flooding).
    """

    alpha: float
    flood_r: float
    flood_q: float

    def __post_init__(self) -> None:
        if not (isinstance(self.alpha, float | int) and 0.0 < self.alpha < 1.0):
            raise InvalidParameterError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if not (math.isfinite(self.flood_r) and self.flood_r >= 0.0):
            raise InvalidParameterError(
                f"flood_r must be a finite number >= 0, got {self.flood_r!r}"
            )
        if not (0.0 <= self.flood_q < 1.0):
            raise InvalidParameterError(f"flood_q must be in [0, 1), got {self.flood_q!r}")
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "flood_r", float(self.flood_r))
        object.__setattr__(self, "flood_q", float(self.flood_q))

    @classmethod
    def from_a(cls, a: float, flood_r: float, flood_q: float) -> CorrelatedNoise:
        """The noise with α = e^{−a}."""
        a = check_epsilon(a, "a")
        return cls(math.exp(-a), flood_r, flood_q)

    @property
    def a(self) -> float:
        """The discrete Laplace parameter a = −ln α."""
        return -math.log(self.alpha)

    @property
    def per_bin_std(self) -> float:
        """Standard deviation of N⁺ − N⁻ − h = A − A′ (the flooding cancels)."""
        return math.sqrt(2.0 * self.alpha) / (1.0 - self.alpha)

    @property
    def flood_mean(self) -> float:
        """E[W] = rq/(1 − q) per bin."""
        return self.flood_r * self.flood_q / (1.0 - self.flood_q)

    @property
    def messages_per_bin(self) -> float:
        """Expected noise messages per bin in all: E[A] + E[A′] + 2E[W]."""
        return 2.0 * self.alpha / (1.0 - self.alpha) + 2.0 * self.flood_mean

    def to_dict(self) -> dict[str, float]:
        """Return a JSON-serialisable dictionary."""
        return {
            "a": self.a,
            "alpha": self.alpha,
            "flood_r": self.flood_r,
            "flood_q": self.flood_q,
            "flood_mean": self.flood_mean,
            "per_bin_std": self.per_bin_std,
        }


# -- the flooding count's pmf ------------------------------------------------------------


def _log_chernoff(t: float, r: float, q: float) -> float:
    """Chernoff's bound on P[NB(r, q) ≥ t], in logs, for t above the mean (optimal s)."""
    # E[e^{sW}] = ((1 − q)/(1 − q e^s))^r; the minimizer has q e^s = t/(r + t).
    return t * math.log(q * (r + t) / t) + r * math.log((1.0 - q) * (r + t) / r)


def negative_binomial_tail_point(r: float, q: float, tail: float) -> int:
    """The smallest integer t ≥ the mean with P[NB(r, q) ≥ t] ≤ ``tail`` by Chernoff's bound."""
    if r == 0.0 or q == 0.0:
        return 0
    mean = r * q / (1.0 - q)
    log_tail = math.log(tail)
    lo = max(1.0, mean)
    hi = max(2.0 * lo, lo + 10.0)
    while _log_chernoff(hi, r, q) > log_tail:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1.0:
        mid = 0.5 * (lo + hi)
        if _log_chernoff(mid, r, q) > log_tail:
            lo = mid
        else:
            hi = mid
    return math.ceil(hi)


@dataclass(frozen=True)
class _Pmf:
    """A pmf on 0..len(pmf) − 1, with the mass left out and a relative error bound."""

    pmf: NDArray[np.float64]
    dropped: float
    rel_error: float


#: lnΓ(k + 1) for k = 0, 1, …, grown on demand (every pmf below shares it).
_LOG_FACTORIALS = np.zeros(1)


def _log_factorials(end: int) -> NDArray[np.float64]:
    """lnΓ(k + 1) for k = 0 … ``end`` (a read-only view of a shared table)."""
    global _LOG_FACTORIALS
    table = _LOG_FACTORIALS
    if len(table) <= end:
        from scipy import special

        table = special.gammaln(np.arange(max(end + 1, 2 * len(table)), dtype=np.float64) + 1.0)
        table.flags.writeable = False
        _LOG_FACTORIALS = table
    return table[: end + 1]


def _negative_binomial_pmf(shape: float, q: float, tail: float) -> _Pmf:
    """NB(shape, q) on [0, X] (X past the Chernoff point for ``tail``), with its error bound.

    ln P(k) = lnΓ(k + s) − lnΓ(s) − lnΓ(k + 1) + s·ln(1 − q) + k·ln q; each term
    carries a few units of its own size, so the pmf's relative error is at most
    e^{Σ} − 1 of their sum (about 16 units of each, with margin).
    """
    if shape == 0.0 or q == 0.0:
        return _Pmf(np.ones(1), 0.0, 0.0)
    end = negative_binomial_tail_point(shape, q, tail)
    k = np.arange(end + 1, dtype=np.float64)
    # The five terms, added left to right (as a sum over a stacked array adds its rows).
    from scipy import special

    first = special.gammaln(k + shape)
    second = -special.gammaln(shape)
    third = -_log_factorials(end)
    fourth = shape * math.log1p(-q)
    fifth = k * math.log(q)
    log_pmf = first + second
    log_pmf += third
    log_pmf += fourth
    log_pmf += fifth
    size = np.abs(first) + abs(second)
    size += np.abs(third)
    size += abs(fourth)
    size += np.abs(fifth)
    err = float(np.max(16.0 * _UNIT_ROUNDOFF * (size + 1.0)))
    with np.errstate(under="ignore"):
        pmf = np.exp(log_pmf)
    return _Pmf(pmf, tail, math.expm1(err))


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
    flood = _negative_binomial_pmf(noise.flood_r, noise.flood_q, tail)
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


def correlated_delta(
    epsilon: float,
    noise: CorrelatedNoise,
    *,
    neighbours: Neighbours = "replacement",
    rounding: Literal["up", "down"] = "up",
    tail: float = DEFAULT_TAIL,
) -> float:
    """Return the exact δ(ε) of the correlated protocol's view (module docstring).

    Args:
        epsilon: ε > 0.
        noise: The per-bin noise totals (at the honest users the guarantee counts on).
        neighbours: ``"replacement"`` (one user's value moves between two bins,
            the default) or ``"add-remove"`` (one value message present or absent).
        rounding: ``"up"`` for the certificate, ``"down"`` for a lower bound on
            the same exact δ (truncated atoms only lower it).
        tail: Mass W's window leaves out (added to an upper bound).
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    neighbours = check_neighbours(neighbours)
    tail = check_probability(tail, "tail")
    if not isinstance(noise, CorrelatedNoise):
        raise InvalidParameterError(f"noise must be a CorrelatedNoise, got {type(noise).__name__}")
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
    if neighbours == "add-remove":
        first = infinite0 + _positive_part(loss.values0, loss.masses0, epsilon)
        region0 = infinite0 + _mass_above(loss.values0, loss.masses0, epsilon - widen)
        second = _positive_part(values1, masses1, epsilon)
        region1 = _mass_above(values1, masses1, epsilon - widen)
        return max(
            _certified(
                first, region0, loss=loss, terms=terms, dropped=loss.charge0, rounding=rounding
            ),
            _certified(second, region1, loss=loss, terms=terms, dropped=0.0, rounding=rounding),
        )
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


def correlated_epsilon(
    delta: float,
    noise: CorrelatedNoise,
    *,
    neighbours: Neighbours = "replacement",
    precision: float = 1e-6,
) -> tuple[float, float]:
    """Return (ε, δ(ε)): the smallest ε found with :func:`correlated_delta` ≤ ``delta``.

    Settled on :func:`correlated_delta` itself, so the pair holds exactly. ε is
    searched in (0, 50]; the view is (a, 0)-DP at no ε below the local bound,
    since W's flooding makes P₀ put mass where P₁ has none.

    Raises:
        InvalidParameterError: If no ε up to 50 reaches ``delta`` (it cannot
            go below the mass of the +∞ atom, (1 − α)·P[W = 0]).
    """
    target = check_delta(delta)
    neighbours = check_neighbours(neighbours)

    def value(eps: float) -> float:
        return correlated_delta(eps, noise, neighbours=neighbours)

    if value(50.0) > target:
        floor = value(50.0)
        raise InvalidParameterError(
            f"no epsilon reaches delta={target:g} with this noise: delta stays at "
            f"{floor:.3g} or above (the view reveals a bin with no flooding, "
            f"probability (1 - alpha)*P[W = 0]); raise the flooding"
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
    tail = check_probability(tail, "tail")
    CorrelatedNoise(alpha, flood_r, flood_q)  # checks alpha, flood_r and flood_q
    if not (isinstance(shape, float | int) and math.isfinite(shape) and shape > 0.0):
        raise InvalidParameterError(f"shape must be a finite number > 0, got {shape!r}")
    g = _negative_binomial_pmf(shape, alpha, tail)
    w = _negative_binomial_pmf(flood_r, flood_q, tail)
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
    if neighbours == "add-remove":
        return min(
            1.0,
            max(inf0 + _positive_part(v0, m0, epsilon), inf1 + _positive_part(v1, m1, epsilon))
            + dropped,
        )
    composed = _Composed(v0, m0)
    total, _ = composed.hockey(v1, m1, epsilon)
    total += inf0 * (float(np.sum(m1)) + inf1) + inf1 * float(np.sum(m0))
    return min(1.0, total + 2.0 * dropped)


# -- calibration -------------------------------------------------------------------------


def central_dlap_parameter(epsilon: float, neighbours: Neighbours = "replacement") -> float:
    """The central discrete Laplace's parameter at ε.

    ε/2 for replacement (a histogram's L1 sensitivity is 2), ε for add/remove (1).
    """
    epsilon = check_epsilon(epsilon)
    return epsilon / 2.0 if check_neighbours(neighbours) == "replacement" else epsilon


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


#: The largest flooding mean E[W] per bin a calibration considers: the accountant holds
#: W's pmf on a window a few times that long.
MAX_FLOOD_MEAN = 1e7


def flooding_floor(
    epsilon: float, alpha: float, *, neighbours: Neighbours = "replacement"
) -> float:
    """The δ(ε) no flooding gets below: the limit of unlimited flooding.

    As W's pmf flattens, w(x)/T(x) tends to (1 − α²)/α² and each bin's loss to
    ±a with masses α/(1 + α) and 1/(1 + α) (the discrete Laplace's own pair).
    Replacement composes two bins: δ∞ = (1/(1 + α))²·(1 − e^{ε − 2a})₊;
    add/remove: (1/(1 + α))·(1 − e^{ε − a})₊. Positive only where the two-sided
    part alone spends more than ε.
    """
    epsilon = check_epsilon(epsilon)
    a = -math.log(alpha)
    if check_neighbours(neighbours) == "replacement":
        return (1.0 / (1.0 + alpha)) ** 2 * max(0.0, -math.expm1(epsilon - 2.0 * a))
    return (1.0 / (1.0 + alpha)) * max(0.0, -math.expm1(epsilon - a))


def _smallest_flooding_shape(
    passes: Callable[[float], bool], start: float, rtol: float
) -> float | None:
    """The smallest r ≥ ``start`` (to ``rtol``) with passes(r); None if none below 1e7."""
    lo, hi = 0.0, max(start, 1e-3)
    while not passes(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e7:
            return None
    if lo == 0.0:
        lo = hi / 2.0
        while lo > 1e-6 and passes(lo):
            hi, lo = lo, lo / 2.0
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def cheapest_flooding(
    epsilon: float,
    delta: float,
    alpha: float,
    *,
    neighbours: Neighbours = "replacement",
    rtol: float = 1e-4,
) -> CorrelatedNoise:
    """The cheapest flooding NB(r, q) that certifies (ε, δ) with the two-sided part α.

    Cheapest: the fewest expected messages E[W] = rq/(1 − q); certifies:
    :func:`correlated_delta` at ε is at most δ.

    At fixed q, δ does not increase with r (W_{r+s} = W_r + W_s: more flooding is
    independent noise added to both counts, a post-processing), so the smallest
    r is found by bisection on the certificate itself (every r returned passed
    it). Over q (a log grid of 1 − q from 0.5 to 2e-4, then a golden-section
    refinement around the best point) the cheapest is kept. The view's +∞ atom
    gives the starting r: (1 − α)(1 − q)^r ≤ δ.

    Raises:
        InvalidParameterError: If no flooding up to r = 1e7 certifies (ε, δ) (ε
            too small for this α: the two-sided part alone costs e^{a} per bin).
    """
    epsilon = check_epsilon(epsilon)
    target = check_delta(delta)
    neighbours = check_neighbours(neighbours)
    floor = flooding_floor(epsilon, alpha, neighbours=neighbours)
    if floor >= target:
        a = -math.log(alpha)
        raise InvalidParameterError(
            f"no flooding certifies ({epsilon:g}, {target:g}) with a={a:.4g}: even unlimited "
            f"flooding leaves delta={floor:.3g} (the two-sided part alone spends "
            f"{2 * a if neighbours == 'replacement' else a:.4g} > epsilon); lower a"
        )
    memo: dict[float, tuple[float, float] | None] = {}

    def at(q: float) -> tuple[float, float] | None:
        """(E[W], r) of the smallest certified r at this q."""
        if q not in memo:
            start = math.log((1.0 - alpha) / target) / -math.log1p(-q)

            def passes(r: float) -> bool:
                if r * q / (1.0 - q) > MAX_FLOOD_MEAN:
                    return False  # beyond what the accountant's window affords
                noise = CorrelatedNoise(alpha, r, q)
                return correlated_delta(epsilon, noise, neighbours=neighbours) <= target

            r = _smallest_flooding_shape(passes, start, rtol)
            memo[q] = None if r is None else (r * q / (1.0 - q), r)
        return memo[q]

    grid = 1.0 - np.geomspace(0.5, 2e-4, 14)
    found = [(at(float(q)), float(q)) for q in grid]
    if all(cost is None for cost, _ in found):
        raise InvalidParameterError(
            f"no flooding certifies ({epsilon:g}, {target:g}) with alpha={alpha:g} "
            f"(a={-math.log(alpha):.4g}): epsilon must leave room above what the two-sided "
            "part spends"
        )
    # Golden-section search on logit(q) between the best grid point's neighbours.
    costs = [math.inf if cost is None else cost[0] for cost, _ in found]
    index = int(np.argmin(costs))
    left = float(grid[max(index - 1, 0)])
    right = float(grid[min(index + 1, len(grid) - 1)])
    x_lo, x_hi = math.log(left / (1 - left)), math.log(right / (1 - right))
    ratio = (math.sqrt(5.0) - 1.0) / 2.0

    def cost_at(x: float) -> float:
        q = 1.0 / (1.0 + math.exp(-x))
        found_q = at(q)
        return math.inf if found_q is None else found_q[0]

    c = x_hi - ratio * (x_hi - x_lo)
    d = x_lo + ratio * (x_hi - x_lo)
    for _ in range(12):
        if cost_at(c) < cost_at(d):
            x_hi = d
        else:
            x_lo = c
        c = x_hi - ratio * (x_hi - x_lo)
        d = x_lo + ratio * (x_hi - x_lo)
    candidates = [(v[0], q, v[1]) for q, v in memo.items() if v is not None]
    _, q, r = min(candidates)
    return CorrelatedNoise(alpha, r, q)


def epsilon_with_fewer_honest(
    delta: float,
    noise: CorrelatedNoise,
    fraction: float,
    *,
    neighbours: Neighbours = "replacement",
    precision: float = 1e-4,
) -> float:
    """ε at δ when only a ``fraction`` β of the noise the guarantee counts on is present.

    Dropouts and colluding users remove their shares: the totals become
    A, A′ ~ NB(β, α) and W ~ NB(β·r, q), whose two-dimensional law
    :func:`generic_bin_delta` sums directly (at β < 1 the difference A − A′ is
    the generalized discrete Laplace of Harrison & Manurangsi, FORC 2025, arXiv
    2504.05202). An analysis number for the documentation and reports (the
    guarantee itself assumes β = 1), found by bisection on ε to ``precision``,
    the upper end returned.

    Raises:
        InvalidParameterError: If ``fraction`` is not in (0, 1], or no ε up to 50
            reaches δ.
    """
    target = check_delta(delta)
    if not (isinstance(fraction, float | int) and 0.0 < fraction <= 1.0):
        raise InvalidParameterError(f"fraction must be in (0, 1], got {fraction!r}")

    def value(eps: float) -> float:
        return generic_bin_delta(
            eps,
            alpha=noise.alpha,
            shape=float(fraction),
            flood_r=noise.flood_r * fraction,
            flood_q=noise.flood_q,
            neighbours=neighbours,
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
