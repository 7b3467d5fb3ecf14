"""Accounting for the segmented multi-message protocol (Wang et al., Alg. 2 and Thm 1–3).

A user at level k holds s item slots (its set, padded with a dummy symbol when
shorter; the dummy is one more item of the message domain, so that blanket
messages cover it). For each slot it sends the item with probability λ_k and,
otherwise, nothing (``variant="paper"``) or a uniformly random item of the
message domain (``variant="dummy"``, whose message count does not depend on
the data). Every user also makes ⌈m⌉ blanket tries, each sending one uniform
item with probability γ = m/⌈m⌉: N ~ Bin(n⌈m⌉, γ) blanket messages in all,
the user's own included.

Per slot (one item changes, x₀ → x₁; the other users' data messages handed to
the adversary, Lemma 2):

* paper: the exact δ of the reduced view, counts and the total number of
  messages (:func:`shuffledp.accounting.poisson.poisson_delta`, with n⌈m⌉
  potential blanket messages: Prop. 1's count; Thm 3's n⌈m⌉ − 1 drops the
  victim's own blanket tries, which is valid but one message short).
* dummy: every user sends exactly s data messages, so the total reveals N;
  given N the counts of x₀ and x₁ are a two-count pair (N blanket messages at
  rate 2/d′, victim x₀ with probability λ + (1 − λ)/d′, x₁ with (1 − λ)/d′),
  and δ = Σ_N P[N]·H_ε(pair_N), computed by blocks of N
  (:mod:`shuffledp.accounting.mixture`).

A whole set changes slot by slot (hybrid datasets are valid sets), so per-slot
(ε′, δ′) gives (sε′, δ′·(e^{sε′} − 1)/(e^{ε′} − 1)) for the user
(:func:`group_delta`); Thm 3's (sε′, s·e^{sε′}·δ′) is larger, and kept for the
paper's reproduction. Lower bounds come from concrete dataset pairs
(:func:`level_lower_bound`).
"""

from __future__ import annotations

import itertools
import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
    check_probability,
)
from shuffledp.accounting._binomial import DEFAULT_TAIL, binomial_pmf, binomial_window
from shuffledp.accounting.hockey_stick import certified_hockey_stick
from shuffledp.accounting.mixture import mixture_delta
from shuffledp.accounting.poisson import poisson_delta
from shuffledp.accounting.two_counts import TwoCountPair, two_count_delta

__all__ = [
    "VARIANTS",
    "LevelGuarantee",
    "SegmentedParameters",
    "Variant",
    "blanket_tries",
    "calibrate_level",
    "error_bound",
    "group_delta",
    "item_delta",
    "level_delta",
    "level_lower_bound",
    "optimize_parameters",
    "paper_report_probability",
    "thm3_group_delta",
]

Variant = Literal["paper", "dummy"]
VARIANTS: tuple[str, ...] = ("paper", "dummy")


def _check_variant(variant: str) -> Variant:
    if variant not in VARIANTS:
        raise InvalidParameterError(f"variant must be 'paper' or 'dummy', got {variant!r}")
    return "paper" if variant == "paper" else "dummy"


def blanket_tries(n: int, blanket_rate: float) -> tuple[int, float]:
    """Return (n⌈m⌉, γ = m/⌈m⌉): the potential blanket messages and each one's probability."""
    n = check_int(n, "n", minimum=1)
    if not (math.isfinite(blanket_rate) and blanket_rate > 0):
        raise InvalidParameterError(
            f"blanket rate m must be a finite number > 0, got {blanket_rate!r}"
        )
    tries = math.ceil(blanket_rate)
    return n * tries, blanket_rate / tries


def item_delta(
    epsilon: float,
    report_probability: float,
    *,
    message_domain: int,
    potential_blanket: int,
    blanket_probability: float,
    variant: Variant = "paper",
    rounding: Literal["up", "down"] = "up",
    target: float | None = None,
) -> float:
    """Return the certified δ(ε) for one item slot (see the module docstring).

    Args:
        epsilon: ε > 0 of the slot.
        report_probability: λ in (0, 1].
        message_domain: d′, items a message can carry (the domain plus the
            padding symbol when padding is on).
        potential_blanket: n⌈m⌉.
        blanket_probability: γ.
        variant: ``"paper"`` or ``"dummy"``.
        rounding: ``"up"`` for the certificate.
        target: A δ the caller compares with (lets the sum stop early; see
            :func:`shuffledp.accounting.mixture.mixture_delta`).
    """
    epsilon = check_epsilon(epsilon)
    if report_probability == 0:
        return 0.0  # a slot never reported (λ = 0): the two datasets' views agree
    lam = check_probability(report_probability, "report_probability", high=1.0 + 1e-12)
    d = check_int(message_domain, "message_domain", minimum=2)
    variant = _check_variant(variant)
    if variant == "paper":
        return poisson_delta(
            epsilon,
            lam,
            d,
            potential_blanket,
            blanket_probability=blanket_probability,
            rounding=rounding,
            target=target,
        )
    window = binomial_window(
        potential_blanket, min(1.0, blanket_probability), DEFAULT_TAIL, 1.0 - blanket_probability
    )
    absent = 1.0 - lam
    pair_weights = {
        "w1": lam + absent / d,
        "w2": absent / d,
        "w0": absent * (d - 2) / d,
    }

    def pair_at(first: int, last: int, side: str, probability: float) -> tuple[TwoCountPair, float]:
        # More blanket messages never help the adversary: a block of N is bounded
        # by its fewest (above) and by one more than its most (below).
        pair = TwoCountPair(
            blanket=first if side == "upper" else last + 1,
            rate=2.0 / d,
            rate_complement=(d - 2) / d,
            weight_units=6.0,
            **pair_weights,
        )
        return pair, probability

    return mixture_delta(window, pair_at, epsilon, rounding=rounding, target=target)


def group_delta(item: float, item_epsilon: float, items: int) -> float:
    """δ of a user's s slots from one slot's (ε′, δ′): δ′·(e^{sε′} − 1)/(e^{ε′} − 1).

    Changing the set slot by slot passes through s − 1 valid intermediate
    datasets; chaining P[M(X_j) ∈ S] ≤ e^{ε′}P[M(X_{j+1}) ∈ S] + δ′ gives
    P[M(X_0) ∈ S] ≤ e^{sε′}P[M(X_s) ∈ S] + δ′·Σ_{j<s} e^{jε′} (Dwork & Roth,
    Thm 2.2's chain, with the geometric sum kept exact).
    """
    s = check_int(items, "items", minimum=1)
    if item <= 0.0:
        return 0.0
    if s == 1:
        return min(1.0, item)
    factor = math.expm1(s * item_epsilon) / math.expm1(item_epsilon) if item_epsilon > 0 else s
    return min(1.0, item * factor * (1.0 + 4.0 * 2.0**-53 * s))


def _group_factor(item_epsilon: float, items: int) -> float:
    if items == 1:
        return 1.0
    return math.expm1(items * item_epsilon) / math.expm1(item_epsilon)


def thm3_group_delta(item: float, item_epsilon: float, items: int) -> float:
    """Thm 3 as printed: s·e^{sε′}·δ′ (valid, looser than :func:`group_delta`)."""
    s = check_int(items, "items", minimum=1)
    return min(1.0, s * math.exp(s * item_epsilon) * item)


def level_delta(
    epsilon: float,
    report_probability: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket_rate: float,
    variant: Variant = "paper",
    target: float | None = None,
) -> float:
    """Certified δ at ε for a user at one level: slots at ε/s, then :func:`group_delta`."""
    epsilon = check_epsilon(epsilon)
    s = check_int(items, "items", minimum=1)
    potential, gamma = blanket_tries(n, blanket_rate)
    item_eps = epsilon / s
    item_target = None if target is None else target / _group_factor(item_eps, s)
    per_item = item_delta(
        item_eps,
        report_probability,
        message_domain=message_domain,
        potential_blanket=potential,
        blanket_probability=gamma,
        variant=variant,
        target=item_target,
    )
    return group_delta(per_item, item_eps, s)


def calibrate_level(
    epsilon: float,
    delta: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket_rate: float,
    variant: Variant = "paper",
    start: float | None = None,
    failing: float | None = None,
    rtol: float = 1e-3,
) -> float:
    """Return the largest λ (to relative ``rtol``, rounded down) that certifies (ε, δ).

    δ grows with λ (for ``paper``: δ is convex in λ and 0 at λ = 0; for
    ``dummy``: a smaller λ is the larger one passed through a randomized
    response, the same kernel under both datasets). Returns 0.0 when no λ > 0
    is certified. ``start`` (a λ certified at a nearby blanket rate) brackets
    the search; ``failing`` (a λ above ``start`` known not to certify, e.g.
    from a coarser search at the same rate) closes the bracket.

    Raises:
        InvalidParameterError: On a bad parameter.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)

    def passes(lam: float) -> bool:
        value = level_delta(
            epsilon,
            lam,
            message_domain=message_domain,
            items=items,
            n=n,
            blanket_rate=blanket_rate,
            variant=variant,
            target=delta,
        )
        return value <= delta

    bracketed = start is not None and failing is not None and 0.0 < start < failing <= 1.0
    if not bracketed and passes(1.0):
        return 1.0
    lo, hi = 0.0, 1.0
    if bracketed:
        assert start is not None and failing is not None
        lo, hi = start, failing  # both known: the caller's coarser search
    elif start is not None and 0.0 < start < 1.0:
        probe = start
        if passes(probe):
            lo = probe
            step = 1.25
            while True:
                probe = min(1.0, lo * step)
                if probe >= hi or not passes(probe):
                    hi = min(hi, probe)
                    break
                lo, step = probe, step * step
        else:
            hi = probe
    if lo == 0.0:
        probe = hi / 4.0
        while probe > 1e-9:
            if passes(probe):
                lo = probe
                break
            hi, probe = probe, probe / 4.0
        if lo == 0.0:
            return 0.0
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _lemma3_item_delta(
    epsilon: float, lam: float, d: int, blanket: int, gamma: float, rounding: Literal["up", "down"]
) -> float:
    """The two counts of x₀ and x₁ without the total: the pair of Lemma 3 / Prop. 1."""
    rate = 2.0 * gamma / d
    pair = TwoCountPair(
        blanket=blanket,
        rate=min(rate, 1.0),
        w1=lam,
        w2=0.0,
        w0=1.0 - lam,
        rate_complement=1.0 - rate,
    )
    return two_count_delta(pair, epsilon, rounding=rounding)


def paper_report_probability(
    epsilon: float,
    delta: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket_rate: float,
    rtol: float = 1e-3,
) -> float:
    """λ that Eq. 7 (Lemma 3's pair, Thm 3's group bound) chooses: a reproduction, not a guarantee.

    Eq. 7 as printed: D_{e^{E/s}}(P‖Q) ≤ δ/(s·e^{E}) for the pair with n⌈m⌉ − 1
    blanket tries (Thm 3's n′ = n⌈m⌉ in Thm 1's convention), rate 2γ/d,
    victim x₀ with probability λ and nothing otherwise.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    s = check_int(items, "items", minimum=1)
    potential, gamma = blanket_tries(n, blanket_rate)
    target = delta / (s * math.exp(epsilon))

    def passes(lam: float) -> bool:
        return (
            _lemma3_item_delta(epsilon / s, lam, message_domain, max(0, potential - 1), gamma, "up")
            <= target
        )

    if passes(1.0):
        return 1.0
    lo, hi = 0.0, 1.0
    probe = 0.25
    while probe > 1e-9:
        if passes(probe):
            lo = probe
            break
        hi, probe = probe, probe / 4.0
    if lo == 0.0:
        return 0.0
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return lo


#: Largest grid (cells) the whole-set lower bound builds; above it the one-slot bound is used.
_WHOLE_SET_CELLS = 4_000_000
#: Mass a lower bound's windows may leave out: dropping points only lowers a divergence.
_LOWER_TAIL = 1e-14


def level_lower_bound(
    epsilon: float,
    report_probability: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket_rate: float,
    variant: Variant = "paper",
) -> float:
    """δ(ε) of a concrete pair of datasets at this level: what the certificate cannot beat.

    The victim's whole set changes to a disjoint set and no other user holds
    those 2s items; the view is reduced to (A, B), the numbers of messages on
    the first and on the second set (a post-processing, so its δ is a lower
    bound on that pair's). Blanket messages fall on either set with probability
    γs/d′ each; the victim adds Bin(s, λ) to A under the first dataset and to B
    under the second (``paper``), or, per slot, its item with probability λ and
    a uniform item otherwise (``dummy``; the other users' dummy items are left
    out, which lowers the bound further). Summed exactly on a grid when it has
    at most 4e6 cells; otherwise one slot changing, with the two counts of
    Lemma 3's pair. Rounded down.
    """
    epsilon = check_epsilon(epsilon)
    lam = check_probability(report_probability, "report_probability", high=1.0 + 1e-12)
    d = check_int(message_domain, "message_domain", minimum=2)
    s = check_int(items, "items", minimum=1)
    variant = _check_variant(variant)
    potential, gamma = blanket_tries(n, blanket_rate)
    if 2 * s > d:
        s = d // 2  # two disjoint sets of s items must fit in the domain
    p_set = gamma * s / d
    window = binomial_window(potential, min(1.0, 2.0 * p_set), _LOWER_TAIL)
    # Grid (a, b) around the blanket's mean split.
    half = max(1, math.ceil(window.hi / 2.0 + 8.0 * math.sqrt(window.hi / 4.0 + 1.0)))
    low = max(0, math.floor(window.lo / 2.0 - 8.0 * math.sqrt(window.hi / 4.0 + 1.0)))
    size = half - low + 1 + s
    if size * size > _WHOLE_SET_CELLS or p_set <= 0:
        return _one_slot_lower_bound(epsilon, lam, d, potential, gamma, variant)
    a = np.arange(low, low + size, dtype=np.float64)
    grid_a, grid_b = np.meshgrid(a, a, indexing="ij")
    total = grid_a + grid_b
    blanket = binomial_pmf(total, potential, min(1.0, 2.0 * p_set)) * binomial_pmf(
        grid_a, total, 0.5
    )
    victim_first, victim_second = _victim_laws(lam, s, d, variant)
    p = _shifted_sum(blanket, victim_first)
    q = _shifted_sum(blanket, victim_second)
    # Each cell: two Loader pmfs (2e-13 plus their means' conditioning) and a sum
    # of (s + 1)² shifted products.
    pmf_error = 2.0 * (2e-13 + 8.0 * 2.0**-53 * size) + ((s + 1) ** 2 + 2) * 2.0**-53
    return certified_hockey_stick(p, q, epsilon, relative_error=pmf_error, rounding="down")


def _victim_laws(lam: float, s: int, d: int, variant: Variant) -> tuple[np.ndarray, np.ndarray]:
    """The victim's law on (messages on the first set, on the second) under each dataset."""
    law = np.zeros((s + 1, s + 1))
    law[0, 0] = 1.0
    if variant == "paper":
        per_slot = {(1, 0): lam, (0, 0): 1.0 - lam}
    else:
        per_slot = {
            (1, 0): lam + (1.0 - lam) * s / d,
            (0, 1): (1.0 - lam) * s / d,
            (0, 0): (1.0 - lam) * (d - 2 * s) / d,
        }
    for _ in range(s):
        new = np.zeros_like(law)
        for (da, db), weight in per_slot.items():
            if weight <= 0:
                continue
            new[da:, db:] += weight * law[: s + 1 - da, : s + 1 - db]
        law = new
    return law, law.T.copy()


def _shifted_sum(base: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """Σ_{i,j} shifts[i, j]·base shifted by (i, j) (the law of a sum of two independent parts)."""
    out = np.zeros_like(base)
    rows, cols = base.shape
    for i in range(shifts.shape[0]):
        for j in range(shifts.shape[1]):
            weight = shifts[i, j]
            if weight > 0:
                out[i:, j:] += weight * base[: rows - i, : cols - j]
    return out


def _one_slot_lower_bound(
    epsilon: float, lam: float, d: int, potential: int, gamma: float, variant: Variant
) -> float:
    if variant == "paper":
        return _lemma3_item_delta(epsilon, lam, d, potential, gamma, "down")
    rate = 2.0 * gamma / d
    absent = 1.0 - lam
    pair = TwoCountPair(
        blanket=potential,
        rate=min(rate, 1.0),
        w1=lam + absent / d,
        w2=absent / d,
        w0=absent * (d - 2) / d,
        rate_complement=1.0 - rate,
    )
    return two_count_delta(pair, epsilon, rounding="down")


def error_bound(
    blanket_rate: float,
    report_probabilities: tuple[float, ...],
    level_counts: tuple[int, ...],
    *,
    items: int,
    variant: Variant = "paper",
) -> float:
    """§5.2's bound on Σ_j E(ŵ_j − w_j)²: (nm + sΛ)/Λ², Λ = Σ_k n_k λ_k.

    Each message adds at most 1 to Σ_j Var[C_j]; the paper variant sends
    n·m blanket messages and about sΛ data messages; the dummy variant sends
    n·s data messages (the dummy items included): (nm + ns)/Λ².
    """
    n = sum(level_counts)
    lam_total = sum(c * lam for c, lam in zip(level_counts, report_probabilities, strict=True))
    if lam_total <= 0:
        return math.inf
    data = items * lam_total if variant == "paper" else items * n
    return (n * blanket_rate + data) / lam_total**2


@dataclass(frozen=True)
class LevelGuarantee:
    """One level's parameters and what they certify.

    Attributes:
        epsilon: E_k, the level's ε.
        users: n_k.
        share: n_k/n.
        report_probability: λ_k.
        delta: The certified δ at E_k for this level's users (at most the target).
        lower_bound_delta: δ of a concrete dataset pair (:func:`level_lower_bound`).
        item_epsilon: ε′ = E_k/s of one slot.
        item_delta: The certified δ′ of one slot at ε′.
        paper_report_probability: λ that Eq. 7 with Lemma 3 would choose (a reproduction).
        paper_delta: The certified δ at E_k of that λ (how far Eq. 7 is from the truth).
    """

    epsilon: float
    users: int
    share: float
    report_probability: float
    delta: float
    lower_bound_delta: float
    item_epsilon: float
    item_delta: float
    paper_report_probability: float
    paper_delta: float

    def to_dict(self) -> dict[str, float | int]:
        """Return a JSON-serialisable dictionary."""
        return {
            "epsilon": self.epsilon,
            "users": self.users,
            "share": self.share,
            "lambda": self.report_probability,
            "delta": self.delta,
            "lower_bound_delta": self.lower_bound_delta,
            "item_epsilon": self.item_epsilon,
            "item_delta": self.item_delta,
            "paper_lambda": self.paper_report_probability,
            "paper_lambda_certified_delta": self.paper_delta,
        }


@dataclass(frozen=True)
class SegmentedParameters:
    """The protocol's parameters for given levels, and their guarantees.

    Attributes:
        n: Number of users.
        domain_size: d, the items of the public domain.
        message_domain: d′ = d plus one padding symbol when padding is on.
        items_per_user: s.
        delta: Target δ (every level).
        variant: ``"paper"`` or ``"dummy"``.
        blanket_rate: m, expected blanket messages per user.
        levels: One :class:`LevelGuarantee` per level, in level order.
        error_bound: §5.2's bound on Σ_j E(ŵ_j − w_j)².
        messages_per_user: Expected messages per user (blanket and data).
    """

    n: int
    domain_size: int
    message_domain: int
    items_per_user: int
    delta: float
    variant: str
    blanket_rate: float
    levels: tuple[LevelGuarantee, ...]
    error_bound: float
    messages_per_user: float

    @property
    def report_probabilities(self) -> tuple[float, ...]:
        """λ_k per level."""
        return tuple(level.report_probability for level in self.levels)

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-serialisable dictionary."""
        return {
            "n": self.n,
            "domain_size": self.domain_size,
            "message_domain": self.message_domain,
            "items_per_user": self.items_per_user,
            "delta": self.delta,
            "variant": self.variant,
            "blanket_rate": self.blanket_rate,
            "error_bound": self.error_bound,
            "messages_per_user": self.messages_per_user,
            "levels": [level.to_dict() for level in self.levels],
        }


def _split(grid: tuple[float, ...], workers: int) -> list[tuple[float, ...]]:
    """Contiguous parts of the grid, one per worker (neighbours warm-start each other)."""
    parts = max(1, min(workers, len(grid) // 4))
    size = math.ceil(len(grid) / parts)
    return [grid[i : i + size] for i in range(0, len(grid), size)]


#: Relative precision of λ while the grid is searched; the chosen m is then refined to 1e-3.
_SEARCH_RTOL = 1e-2


def _grid_points(
    job: tuple[
        tuple[float, ...], tuple[float, ...], tuple[int, ...], float, int, int, Variant, float
    ],
) -> list[tuple[float, float, tuple[float, ...]]]:
    """(m, error bound, λ per level) for each blanket rate of one part of the grid."""
    rates, epsilons, counts, delta, d_msg, s, variant, rtol = job
    n = sum(counts)
    previous: list[float | None] = [None] * len(epsilons)
    out = []
    for m in rates:
        lams: list[float] = []
        for k, eps in enumerate(epsilons):
            lam = calibrate_level(
                eps,
                delta,
                message_domain=d_msg,
                items=s,
                n=n,
                blanket_rate=m,
                variant=variant,
                start=previous[k],
                rtol=rtol,
            )
            lams.append(lam)
            previous[k] = lam if lam > 0 else None
        out.append((m, error_bound(m, tuple(lams), counts, items=s, variant=variant), tuple(lams)))
    return out


#: Blanket rates searched when none is given (20 points over the paper's range 0.1–10):
#: log-spaced below 1, and above 1 mostly just above an integer. At an integer rate with
#: γ = 1 the total message count shows whether the victim sent anything and the certified
#: λ collapses, while the best rate often sits just above an integer.
DEFAULT_BLANKET_GRID: tuple[float, ...] = (
    *(float(x) for x in np.round(np.geomspace(0.1, 0.9, 10), 4)),
    *(1.02, 1.5, 2.02, 2.5, 3.02, 4.02, 5.02, 6.5, 8.02, 10.02),
)


def optimize_parameters(
    levels: tuple[float, ...] | list[float],
    level_counts: tuple[int, ...] | list[int],
    delta: float,
    *,
    domain_size: int,
    items_per_user: int,
    padding: bool = False,
    variant: Variant = "paper",
    blanket_rate: float | None = None,
    blanket_grid: tuple[float, ...] | list[float] | None = None,
    with_paper: bool = True,
    workers: int | None = None,
) -> SegmentedParameters:
    """Alg. 1 step 2 (§5.2): λ_k per level and the blanket rate m minimizing the error bound.

    Each λ_k is the largest the exact accountant certifies for (E_k, δ) at
    that m (:func:`calibrate_level`). With ``blanket_rate`` given, m is fixed;
    otherwise every m of the grid is evaluated (δ is not monotone in m: it
    jumps where ⌈m⌉ does) and the one with the smallest bound is kept.

    Args:
        levels: E_1 < … < E_K.
        level_counts: n_k per level (exact or estimated), all ≥ 0.
        delta: Target δ of every level.
        domain_size: d.
        items_per_user: s.
        padding: Whether the message domain includes the padding symbol.
        variant: ``"paper"`` or ``"dummy"``.
        blanket_rate: A fixed m, or ``None`` to search ``blanket_grid``.
        blanket_grid: Rates to search (default: :data:`DEFAULT_BLANKET_GRID`, 20 rates from
            0.1 to 10).
        with_paper: Also compute what Eq. 7 would choose (for reports).
        workers: Processes that share the grid (default: one per core; 1 runs
            in this process).

    Raises:
        InvalidParameterError: On bad levels or counts, or when no λ > 0 is
            certified for some level at every m searched.
    """
    epsilons = tuple(check_epsilon(e, "level epsilon") for e in levels)
    if not epsilons:
        raise InvalidParameterError("levels must name at least one epsilon")
    if any(b <= a for a, b in itertools.pairwise(epsilons)):
        raise InvalidParameterError(f"levels must be strictly increasing, got {list(levels)}")
    counts = tuple(check_int(c, "level count", minimum=0) for c in level_counts)
    if len(counts) != len(epsilons):
        raise InvalidParameterError(
            f"level_counts has {len(counts)} entries for {len(epsilons)} levels"
        )
    n = sum(counts)
    if n < 1:
        raise InvalidParameterError("level_counts must sum to at least one user")
    delta = check_delta(delta)
    d = check_int(domain_size, "domain_size", minimum=2)
    s = check_int(items_per_user, "items_per_user", minimum=1)
    variant = _check_variant(variant)
    d_msg = d + (1 if padding else 0)
    grid = (
        (blanket_rate,)
        if blanket_rate is not None
        else tuple(blanket_grid if blanket_grid is not None else DEFAULT_BLANKET_GRID)
    )
    chunks = _split(grid, workers if workers is not None else (os.cpu_count() or 1))
    # Search the grid with λ to 1%, then refine the chosen m's λ to 0.1% (every λ is
    # certified either way; only the choice of m uses the coarser values).
    search_rtol = _SEARCH_RTOL if len(grid) > 1 else 1e-3
    jobs = [(chunk, epsilons, counts, delta, d_msg, s, variant, search_rtol) for chunk in chunks]
    if len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=len(jobs)) as pool:
            results = [point for part in pool.map(_grid_points, jobs) for point in part]
    else:
        results = _grid_points(jobs[0])
    best: tuple[float, float, tuple[float, ...]] | None = None
    for m_point, bound_point, lams_point in results:
        if best is None or bound_point < best[1]:
            best = (m_point, bound_point, lams_point)
    assert best is not None
    m, bound, lams = best
    if not math.isfinite(bound) or any(lam <= 0 for lam, c in zip(lams, counts, strict=True) if c):
        raise InvalidParameterError(
            f"no report probability is certified for every level at delta={delta:g} "
            f"with blanket rates {list(grid)}; raise the blanket rate or delta"
        )
    if search_rtol > 1e-3:
        lams = tuple(
            calibrate_level(
                eps,
                delta,
                message_domain=d_msg,
                items=s,
                n=n,
                blanket_rate=m,
                variant=variant,
                start=lam,
                failing=min(1.0, lam * (1.0 + search_rtol)),
            )
            if 0.0 < lam < 1.0
            else lam
            for eps, lam in zip(epsilons, lams, strict=True)
        )
        bound = error_bound(m, lams, counts, items=s, variant=variant)
    potential, gamma = blanket_tries(n, m)
    out = []
    for eps, count, lam in zip(epsilons, counts, lams, strict=True):
        item_eps = eps / s
        per_item = item_delta(
            item_eps,
            lam,
            message_domain=d_msg,
            potential_blanket=potential,
            blanket_probability=gamma,
            variant=variant,
            target=delta / _group_factor(item_eps, s),
        )
        certified = group_delta(per_item, item_eps, s)
        lower = level_lower_bound(
            eps, lam, message_domain=d_msg, items=s, n=n, blanket_rate=m, variant=variant
        )
        paper_lam = (
            paper_report_probability(eps, delta, message_domain=d_msg, items=s, n=n, blanket_rate=m)
            if with_paper
            else math.nan
        )
        paper_delta = (
            level_delta(
                eps, paper_lam, message_domain=d_msg, items=s, n=n, blanket_rate=m, variant=variant
            )
            if with_paper and paper_lam > 0
            else math.nan
        )
        out.append(
            LevelGuarantee(
                epsilon=eps,
                users=count,
                share=count / n,
                report_probability=lam,
                delta=certified,
                lower_bound_delta=lower,
                item_epsilon=item_eps,
                item_delta=per_item,
                paper_report_probability=paper_lam,
                paper_delta=paper_delta,
            )
        )
    lam_total = sum(c * lam for c, lam in zip(counts, lams, strict=True))
    data_messages = s * lam_total / n if variant == "paper" else float(s)
    return SegmentedParameters(
        n=n,
        domain_size=d,
        message_domain=d_msg,
        items_per_user=s,
        delta=delta,
        variant=variant,
        blanket_rate=m,
        levels=tuple(out),
        error_bound=bound,
        messages_per_user=m + data_messages,
    )
