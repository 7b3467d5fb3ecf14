"""Accounting for the segmented multi-message protocol (Wang et al., Alg. 2 and Thm 1–3).

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in the
multi-message shuffle model", arXiv 2407.19639 (the version implemented names no venue).

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
  messages (:func:`shuffledp.accounting.certificates.poisson.poisson_delta`, with n⌈m⌉
  potential blanket messages: Prop. 1's count; Thm 3's n⌈m⌉ − 1 drops the
  victim's own blanket tries, which is valid but one message short).
* dummy: every user sends exactly s data messages, so the total reveals N;
  given N the counts of x₀ and x₁ are a two-count pair (N blanket messages at
  rate 2/d′, victim x₀ with probability λ + (1 − λ)/d′, x₁ with (1 − λ)/d′),
  and δ = Σ_N P[N]·H_ε(pair_N), computed by blocks of N
  (:mod:`shuffledp.accounting.numerics.mixture`).

A whole set changes slot by slot (hybrid datasets are valid sets), so per-slot
(ε′, δ′) gives (sε′, δ′·(e^{sε′} − 1)/(e^{ε′} − 1)) for the user
(:func:`group_delta`); Thm 3's (sε′, s·e^{sε′}·δ′) is larger, and kept for the
paper's reproduction (:mod:`shuffledp.accounting.reproductions.segmented_eq7`).
Lower bounds come from concrete dataset pairs
(:func:`level_lower_bound`).

Group: mechanism certificates and lower bounds
(``shuffledp.accounting.certificates``); may import the numerical core, published
bounds and other certificates, never reproductions, composition or the questions layer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
    check_probability,
    check_rounding,
)
from shuffledp.accounting.certificates.poisson import (
    _poisson_delta,
    check_poisson_parameters,
)
from shuffledp.accounting.numerics.binomial import (
    DEFAULT_TAIL,
    Window,
    binomial_pmf,
    binomial_window,
    convolve,
)
from shuffledp.accounting.numerics.hockey_stick import certified_hockey_stick
from shuffledp.accounting.numerics.mixture import mixture_delta
from shuffledp.accounting.numerics.search import largest_passing_below, settle_largest
from shuffledp.accounting.numerics.two_counts import TwoCountPair, two_count_delta

__all__ = [
    "VARIANTS",
    "Variant",
    "blanket_tries",
    "calibrate_level",
    "error_bound",
    "group_delta",
    "item_delta",
    "level_delta",
    "level_lower_bound",
    "lower_bound_slots",
]

Variant = Literal["paper", "dummy"]
VARIANTS: tuple[str, ...] = ("paper", "dummy")


def check_variant(variant: str) -> Variant:
    """Check a segmented variant name: ``"paper"`` or ``"dummy"``."""
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
            :func:`shuffledp.accounting.numerics.mixture.mixture_delta`).
    """
    rounding = check_rounding(rounding)
    epsilon = check_epsilon(epsilon)
    if report_probability == 0:
        return 0.0  # a slot never reported (λ = 0): the two datasets' views agree
    lam = check_probability(report_probability, "report_probability", high=1.0 + 1e-12)
    d = check_int(message_domain, "message_domain", minimum=2)
    variant = check_variant(variant)
    _, _, potential, gamma = check_poisson_parameters(
        lam, d, potential_blanket, blanket_probability
    )
    return _item_delta(
        epsilon, lam, d, potential, gamma, variant=variant, rounding=rounding, target=target
    )


def _item_delta(
    epsilon: float,
    lam: float,
    d: int,
    potential_blanket: int,
    blanket_probability: float,
    *,
    variant: Variant,
    rounding: Literal["up", "down"] = "up",
    target: float | None = None,
) -> float:
    """:func:`item_delta` on checked inputs: what :func:`calibrate_level`'s search evaluates."""
    if lam == 0:
        return 0.0
    lam = min(1.0, lam)
    if variant == "paper":
        return _poisson_delta(
            epsilon,
            lam,
            d,
            potential_blanket,
            blanket_probability,
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
    return _group_delta(item, item_epsilon, check_int(items, "items", minimum=1))


def _group_delta(item: float, item_epsilon: float, s: int) -> float:
    """:func:`group_delta` on a checked number of slots s ≥ 1."""
    if item <= 0.0:
        return 0.0
    if s == 1:
        return min(1.0, item)
    return min(1.0, item * _group_factor(item_epsilon, s) * (1.0 + 4.0 * 2.0**-53 * s))


def _group_factor(item_epsilon: float, items: int) -> float:
    """Σ_{j<s} e^{jε′} = (e^{sε′} − 1)/(e^{ε′} − 1) (s at ε′ = 0)."""
    if items == 1:
        return 1.0
    if item_epsilon <= 0:
        return float(items)
    return math.expm1(items * item_epsilon) / math.expm1(item_epsilon)


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
    if report_probability == 0:
        return 0.0
    lam = check_probability(report_probability, "report_probability", high=1.0 + 1e-12)
    d = check_int(message_domain, "message_domain", minimum=2)
    return _level_delta(epsilon, lam, d, s, potential, gamma, check_variant(variant), target)


def _level_delta(
    epsilon: float,
    lam: float,
    d: int,
    items: int,
    potential: int,
    gamma: float,
    variant: Variant,
    target: float | None = None,
) -> float:
    """:func:`level_delta` on checked inputs: slots at ε/s, then :func:`group_delta`."""
    item_eps = epsilon / items
    item_target = None if target is None else target / _group_factor(item_eps, items)
    per_item = _item_delta(item_eps, lam, d, potential, gamma, variant=variant, target=item_target)
    return _group_delta(per_item, item_eps, items)


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

    Certifies means: :func:`level_delta` at that λ, as reported (no target),
    is at most δ. The bisection compares in the deciding mode and then
    settles on that value (:func:`~shuffledp.accounting.calibration.settle_largest`).

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
    s = check_int(items, "items", minimum=1)
    d = check_int(message_domain, "message_domain", minimum=2)
    potential, gamma = blanket_tries(n, blanket_rate)
    variant = check_variant(variant)
    # Checked once here: the search evaluates the kernel at every λ it tries.

    def passes(lam: float) -> bool:
        return _level_delta(epsilon, lam, d, s, potential, gamma, variant, delta) <= delta

    def public(lam: float) -> float:
        return _level_delta(epsilon, lam, d, s, potential, gamma, variant)

    bracketed = start is not None and failing is not None and 0.0 < start < failing <= 1.0
    if not bracketed and public(1.0) <= delta:
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
    lo = largest_passing_below(passes, hi, rtol=rtol, lo=lo)
    if lo == 0.0:
        return 0.0
    # The comparisons above may stop refining once decided; the answer settles on
    # the certificate as reported (level_delta with no target).
    try:
        return settle_largest(lambda lam: public(lam) <= delta, lo, 0.0, tolerance=rtol)
    except ValueError:  # pragma: no cover - λ → 0 certifies any target
        return 0.0


def lemma3_pair_delta(
    epsilon: float, lam: float, d: int, blanket: int, gamma: float, rounding: Literal["up", "down"]
) -> float:
    """The two counts of x₀ and x₁ without the total: the pair of Lemma 3 / Prop. 1."""
    rounding = check_rounding(rounding)
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


#: Largest work (grid cells × terms per cell, ~3 ns each) a lower bound does; above
#: it the one-slot pair is tried.
_LOWER_BOUND_WORK = 300_000_000
#: Output cells computed at a time (bounds the temporary arrays).
_LOWER_BOUND_CHUNK = 1 << 19
#: Mass each binomial window of a lower bound leaves out on each side (a Bernstein
#: bound), and of the split's tails (Hoeffding's): charged e^ε times, so far below any δ.
_LOWER_TAIL = 1e-40
#: Noise entries below this are set to 0 (no subnormal number enters the sums); charged as mass.
_NEGLIGIBLE = 1e-280
_UNIT = 2.0**-53


def level_lower_bound(
    epsilon: float,
    report_probability: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket_rate: float,
    variant: Variant = "paper",
    padding: bool = False,
    others: Sequence[tuple[float, int]] | None = None,
) -> float | None:
    """δ(ε) of a concrete pair of neighbouring datasets at this level: a lower bound, or ``None``.

    The pair (Wang et al., "Segmented private data aggregation in the
    multi-message shuffle model", Alg. 2 with Thm 3's neighbouring relation:
    one user's set changes, every level stays): the
    victim changes t of its s slots from a set S₀ to a disjoint set S₁ of t
    real items and keeps its other s − t items; no other user holds an item
    of S₀ ∪ S₁. That needs room in the domain of d real items: with padding
    t = min(s, ⌊d/2⌋) (the other users' sets and the victim's kept slots may
    be padding); without, the others need s items outside S₀ ∪ S₁, so
    t = min(s, ⌊(d − s)/2⌋). When t = 0 no such pair exists and the result is
    ``None`` (no lower bound), never a number above the truth.

    The view is reduced to (A, B), the numbers of messages on S₀ and on S₁ (a
    post-processing of the multiset of messages, so its δ is at most the
    pair's). Everything that lands there is in it: every user's blanket tries
    (n⌈m⌉, each on S₀ ∪ S₁ with probability 2γt/d′) and, for ``dummy``, the
    uniform dummy item of every unreported slot (the victim's kept slots and
    all of the other users' slots, at their own λ: removing that noise would
    raise δ). Those messages fall on S₀ or S₁ with probability ½ each, so
    their law is P[T = a + b]·C(a + b, a)/2^{a+b} with T their total (a
    convolution of binomials). The victim's t changing slots add its exact
    law on (A, B) under each dataset (mirror images of each other, so
    H_ε(P‖Q) = H_ε(Q‖P) and one direction is summed).

    Summed exactly on the grid of (A, B) that holds all but ~1e-40 of the
    noise (Bernstein windows for T, Hoeffding's bound for the split), with at
    most 4e6 cells; the left-out noise mass is charged e^ε times and the
    floating-point error by
    :func:`~shuffledp.accounting.numerics.hockey_stick.certified_hockey_stick`,
    so the result is rounded down. A larger grid falls back to t = 1 (one
    slot), and then, for ``paper``, to the one-slot pair of the two counts
    with the blanket alone (exact for that pair); ``dummy`` returns ``None``.

    Args:
        epsilon: ε of the level (the whole set's).
        report_probability: λ of the victim's level.
        message_domain: d′ (the real items plus the padding symbol when padding is on).
        items: s.
        n: Number of users (the victim included).
        blanket_rate: m.
        variant: ``"paper"`` or ``"dummy"``.
        padding: Whether the message domain holds the padding symbol.
        others: (λ, users) for the other n − 1 users, by level; ``None``: all at
            the victim's λ. Only ``dummy`` depends on them (their dummy items).

    Returns:
        The rounded-down δ of the pair, or ``None`` when the domain leaves no
        room for the construction (or, for ``dummy``, the grid is too large).

    Raises:
        InvalidParameterError: On a bad parameter, or ``others`` not summing to n − 1.
    """
    epsilon = check_epsilon(epsilon)
    d_msg = check_int(message_domain, "message_domain", minimum=2)
    s = check_int(items, "items", minimum=1)
    n = check_int(n, "n", minimum=1)
    variant = check_variant(variant)
    potential, gamma = blanket_tries(n, blanket_rate)
    if report_probability == 0:
        return 0.0  # the victim's messages never depend on its set: the views agree
    lam = min(1.0, check_probability(report_probability, "report_probability", high=1.0 + 1e-12))
    other_users = _other_users(others, lam, n)
    changed = lower_bound_slots(d_msg, s, padding=padding)
    if changed < 1:
        return None
    tries = math.ceil(blanket_rate)
    for t in dict.fromkeys((changed, 1)):
        noise = _lower_bound_noise(
            t, s, lam, d_msg, potential, gamma, tries, blanket_rate, variant, other_users
        )
        value = _grid_lower_bound(epsilon, noise, _victim_laws(lam, t, d_msg, variant)[0])
        if value is not None:
            return value
    if variant == "paper":
        return lemma3_pair_delta(epsilon, lam, d_msg, potential, gamma, "down")
    return None


def lower_bound_slots(message_domain: int, items: int, *, padding: bool = False) -> int:
    """t: the victim's slots a lower-bound pair can change (:func:`level_lower_bound`).

    The victim moves t slots from S₀ to a disjoint S₁ of real items and no
    other user may hold an item of S₀ ∪ S₁: with padding, t = min(s, ⌊d/2⌋)
    (the others' sets may be padding); without, the others need s items
    outside S₀ ∪ S₁, so t = min(s, ⌊(d − s)/2⌋). 0 when no such pair exists.
    """
    d_msg = check_int(message_domain, "message_domain", minimum=2)
    s = check_int(items, "items", minimum=1)
    d = d_msg - (1 if padding else 0)
    return min(s, d // 2) if padding else min(s, max(0, d - s) // 2)


def _other_users(
    others: Sequence[tuple[float, int]] | None, lam: float, n: int
) -> dict[float, int]:
    """The other n − 1 users as {λ: users}, checked."""
    if others is None:
        return {lam: n - 1} if n > 1 else {}
    out: dict[float, int] = {}
    for other_lam, users in others:
        if not (math.isfinite(other_lam) and 0.0 <= other_lam <= 1.0):
            raise InvalidParameterError(
                f"others' report probabilities must lie in [0, 1], got {other_lam!r}"
            )
        count = check_int(users, "others' users", minimum=0)
        if count:
            out[float(other_lam)] = out.get(float(other_lam), 0) + count
    if sum(out.values()) != n - 1:
        raise InvalidParameterError(
            f"others must hold the other n - 1 = {n - 1} users, got {sum(out.values())}"
        )
    return out


def _lower_bound_noise(
    t: int,
    s: int,
    lam: float,
    d_msg: int,
    potential: int,
    gamma: float,
    tries: int,
    blanket_rate: float,
    variant: Variant,
    other_users: dict[float, int],
) -> Window:
    """T: the messages that land on S₀ ∪ S₁ without depending on the victim's set.

    A sum of independent Bernoulli variables (blanket tries, and for ``dummy``
    unreported slots): each part's window, convolved, then cut to T's own
    Bernstein window (both cuts are counted in ``dropped``).
    """
    rate = 2.0 * gamma * t / d_msg
    # 1 − rate without cancellation: (d′ − 2t + 2t(1 − γ))/d′, 1 − γ = (⌈m⌉ − m)/⌈m⌉.
    complement = (d_msg - 2 * t + 2 * t * ((tries - blanket_rate) / tries)) / d_msg
    parts = [(potential, min(1.0, rate), max(0.0, complement))]
    if variant == "dummy":
        slots: dict[float, int] = {}
        for other_lam, users in other_users.items():
            slots[other_lam] = slots.get(other_lam, 0) + s * users
        if s > t:
            slots[lam] = slots.get(lam, 0) + (s - t)  # the victim's kept slots
        for slot_lam, count in sorted(slots.items()):
            if count and slot_lam < 1.0:
                dummy_rate = 2.0 * (1.0 - slot_lam) * t / d_msg
                parts.append((count, dummy_rate, (d_msg - 2 * t + 2 * t * slot_lam) / d_msg))
    noise = binomial_window(*parts[0][:2], _LOWER_TAIL, parts[0][2])
    for count, part_rate, part_complement in parts[1:]:
        noise = convolve(noise, binomial_window(count, part_rate, _LOWER_TAIL, part_complement))
    if len(parts) == 1:
        return noise
    # Bernstein for T itself (every term within 1 of its mean): each side beyond
    # mean ± h holds at most the tail.
    mean = sum(count * p for count, p, _ in parts)
    var = sum(count * p * c for count, p, c in parts)
    log_inv = math.log(1.0 / _LOWER_TAIL)
    half = log_inv / 3.0 + math.sqrt((log_inv / 3.0) ** 2 + 2.0 * var * log_inv)
    lo = max(noise.lo, math.floor(mean - half))
    hi = min(noise.hi, math.ceil(mean + half))
    return Window(
        lo,
        noise.pmf[lo - noise.lo : hi - noise.lo + 1].copy(),
        noise.dropped + 2.0 * _LOWER_TAIL,
        noise.rel_error,
    )


def _grid_lower_bound(epsilon: float, noise: Window, victim: np.ndarray) -> float | None:
    """H_ε of (A, B) = noise split ½/½ plus the victim's law (and its mirror), rounded down.

    ``None`` when the work would exceed :data:`_LOWER_BOUND_WORK`.
    """
    t = victim.shape[0] - 1
    top = noise.hi
    # Hoeffding: P[|Bin(c, ½) − c/2| ≥ x] ≤ 2·exp(−2x²/c) ≤ tail for every c ≤ top.
    x = math.sqrt(top * math.log(2.0 / _LOWER_TAIL) / 2.0)
    low = max(0, math.floor(noise.lo / 2.0 - x))
    high = min(top, math.ceil(top / 2.0 + x))
    side = high - low + 1
    terms = [(i, j) for i in range(t + 1) for j in range(t + 1) if victim[i, j] or victim[j, i]]
    if (side + t) ** 2 * (2 * len(terms) + 12) > _LOWER_BOUND_WORK:
        return None
    # Noise left out: T's windows, the split's tails, and the entries set to 0.
    dropped = noise.dropped + _LOWER_TAIL + side * side * _NEGLIGIBLE
    # Each noise entry: T's pmf, the split's binomial (Loader's 2e-13 at the row's
    # mode, then at most `side` ratio steps of 2 units each) and their product; each
    # output cell adds (t + 1)² products of those with the victim's law (7 units
    # per slot of its recursion) and their sum.
    relative_error = (
        noise.rel_error + 2e-13 + 8.0 * _UNIT * side + (7.0 * t + (t + 1) ** 2 + 10.0) * _UNIT
    )
    columns = np.arange(low, high + 1, dtype=np.float64)
    rows_per_chunk = max(1, _LOWER_BOUND_CHUNK // (side + t))
    parts: list[float] = []
    for first in range(low, high + t + 1, rows_per_chunk):
        last = min(first + rows_per_chunk, high + t + 1) - 1  # output rows first..last
        src_lo, src_hi = max(low, first - t), min(high, last)
        if src_lo > src_hi:
            continue
        a = np.arange(src_lo, src_hi + 1, dtype=np.float64)[:, None]
        total = a + columns[None, :]
        index = total.astype(np.int64) - noise.lo
        inside = (index >= 0) & (index < noise.pmf.size)
        base = np.zeros(total.shape)
        base[inside] = noise.pmf[index[inside]]
        base *= _half_split(a, columns)
        base[base < _NEGLIGIBLE] = 0.0
        p = np.zeros((last - first + 1, side + t))
        q = np.zeros_like(p)
        for i, j in terms:
            out_lo, out_hi = max(first, src_lo + i), min(last, src_hi + i)
            if out_lo > out_hi:
                continue
            block = base[out_lo - i - src_lo : out_hi - i - src_lo + 1]
            rows = slice(out_lo - first, out_hi - first + 1)
            if victim[i, j]:
                p[rows, j : j + side] += victim[i, j] * block
            if victim[j, i]:
                q[rows, j : j + side] += victim[j, i] * block
        parts.append(
            certified_hockey_stick(
                p, q, epsilon, relative_error=relative_error, rounding="down", both=False
            )
        )
    total_value = math.fsum(parts) * (1.0 - 4.0 * _UNIT)
    charge = math.exp(epsilon) * dropped * (1.0 + 4.0 * _UNIT)
    return max(0.0, total_value - charge)


def _half_split(rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """P[Bin(a + b, ½) = a] for rows a (a column vector, each one of ``columns``) and columns b.

    Loader's pmf at b = a (the row's mode), then the ratios (a + b)/(2b) to the
    right and 2(b + 1)/(a + b + 1) to the left, multiplied out (one rounding each).
    """
    b = columns[None, :]
    mode = binomial_pmf(rows, 2.0 * rows, 0.5, 0.5)
    right = np.where(b > rows, (rows + b) / (2.0 * np.maximum(b, 1.0)), 1.0)
    right = np.where(b == rows, mode, right)
    left = np.where(b < rows, 2.0 * (b + 1.0) / (rows + b + 1.0), 1.0)
    left = np.where(b == rows, mode, left)
    up = np.cumprod(right, axis=1)
    down = np.cumprod(left[:, ::-1], axis=1)[:, ::-1]
    out: np.ndarray = np.where(b >= rows, up, down)
    return out


def _victim_laws(lam: float, s: int, d: int, variant: Variant) -> tuple[np.ndarray, np.ndarray]:
    """The victim's law on (messages on S₀, on S₁) under each dataset (s changing slots)."""
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
    variant = check_variant(variant)
    n = sum(level_counts)
    lam_total = sum(c * lam for c, lam in zip(level_counts, report_probabilities, strict=True))
    if lam_total <= 0:
        return math.inf
    data = items * lam_total if variant == "paper" else items * n
    return (n * blanket_rate + data) / lam_total**2
