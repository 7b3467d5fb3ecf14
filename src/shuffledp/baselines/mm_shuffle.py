"""Baseline "MM, shuffle": balls-into-bins multi-message frequency estimation, for sets.

Luo, Wang & Yi, "Frequency estimation in the shuffle model with almost a
single message", CCS 2022 (ref. [12] of the segmented paper: Wang et al., "Segmented
private data aggregation in the multi-message shuffle model", arXiv 2407.19639). For a domain
much smaller than n their protocol sends each user's value unchanged plus
blanket ("dummy") messages, each uniform over the domain; the number of
blanket messages per user is ⌊m⌋ + Bernoulli(m − ⌊m⌋) (the authors' code,
github.com/hkustDB/SDPFE, ``FE/fe.cpp``: ``send_fixed_messages`` plus one
more with probability ``remaining_prob``). The segmented paper runs it on
sets (L504): each user sends each of its s items. Here:

* every user sends its s slots, an empty slot as the padding symbol d (one
  more symbol of the message domain, d′ = d + 1, when ``padding`` is on), and
  its blanket messages, uniform over the d′ symbols; one uniform shuffle;
* the analyzer counts C_j, the messages equal to item j, and returns
  ŵ_j = (C_j − n·m/d′)/n (Alg. 2's estimator with λ = 1), unbiased: every
  user's items are sent and E[N] = n·m blanket messages spread uniformly.

``blanket="alg2"`` instead makes ⌈m⌉ tries per user, each sending with
probability m/⌈m⌉: Alg. 2 of the segmented paper with K = 1, λ = 1. The
two agree for m ≤ 1 and at integer m.

Accounting (user level: the whole set changes). Per slot, one item changes
x₀ → x₁ (either may be the padding symbol) while the victim's other slots
and the other users' items are handed to the adversary (Lemma 2 of the
segmented paper); the blanket messages of all n users, the victim's included,
remain (they do not depend on any data). Then the s slots compose by
:func:`shuffledp.accounting.certificates.segmented.group_delta`.

* ``alg2``: :func:`shuffledp.accounting.certificates.segmented.level_delta` with λ = 1
  (this package's exact accountant for Alg. 2).
* ``lwy``: every user sends exactly s data messages, so the number of
  messages reveals N, the blanket messages: N = n⌊m⌋ + Bin(n, m − ⌊m⌋). Given
  N, the counts of x₀ and x₁ are the two-count pair with N blanket messages at
  rate 2/d′ and the victim's message on x₀ (the other symbols' counts have the
  same law under both datasets given the pair's total), so
  δ′ = Σ_N P[N]·H_{ε/s}(pair_N) exactly, summed by blocks of N with
  :func:`shuffledp.accounting.numerics.mixture.mixture_delta` (H falls as N grows: one
  more blanket message is a post-processing) and the mass of N outside its
  window added.

Calibration (:func:`calibrate_blanket_rate`): the smallest m certifying
(ε, δ). δ is not monotone in m for ``alg2``: on (j − 1, j] the blanket count
Bin(nj, m/j) grows stochastically with m, so δ falls, then jumps up after j
where ⌈m⌉ does; at integers N = nm is fixed and δ falls with m. So the
search finds the smallest certified integer j, then bisects inside (j − 1, j];
for ``lwy``, δ falls with m everywhere (N grows stochastically), and the same
search applies. Every returned m is evaluated and certified, whatever the
shape of δ(m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shuffledp._rng import SeedLike, child_seeds, make_rng
from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp.accounting.certificates.segmented import group_delta, level_delta, level_lower_bound
from shuffledp.accounting.numerics.binomial import DEFAULT_TAIL, Window, binomial_window
from shuffledp.accounting.numerics.mixture import mixture_delta
from shuffledp.accounting.numerics.search import settle_smallest
from shuffledp.accounting.numerics.two_counts import TwoCountPair
from shuffledp.baselines.base import (
    PAD,
    ExecutionPath,
    SetFrequencyEstimate,
    check_item_matrix,
    check_shape,
    check_user_levels,
    default_delta,
    item_counts,
    sampling_error,
)
from shuffledp.messages import MessageBatch
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.shuffler.uniform import UniformShuffler

__all__ = [
    "BLANKETS",
    "Blanket",
    "MMShuffle",
    "blanket_count_moments",
    "calibrate_blanket_rate",
    "calibrate_mm",
    "lwy_item_delta",
    "mm_level_delta",
]

Blanket = Literal["lwy", "alg2"]
BLANKETS: tuple[str, ...] = ("lwy", "alg2")

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Largest blanket rate the calibration searches.
_MAX_RATE = 1 << 20
#: Smallest blanket rate the calibration searches.
_MIN_RATE = 1e-6


def _check_blanket(blanket: str) -> Blanket:
    if blanket not in BLANKETS:
        raise InvalidParameterError(f"blanket must be 'lwy' or 'alg2', got {blanket!r}")
    return "lwy" if blanket == "lwy" else "alg2"


def _check_rate(blanket_rate: float) -> float:
    if (
        not isinstance(blanket_rate, int | float)
        or isinstance(blanket_rate, bool)
        or not (math.isfinite(blanket_rate) and blanket_rate > 0)
    ):
        raise InvalidParameterError(
            f"blanket_rate m must be a finite number > 0, got {blanket_rate!r}"
        )
    return float(blanket_rate)


def blanket_count_moments(n: int, blanket_rate: float, blanket: Blanket) -> tuple[float, float]:
    """Return (E N, Var N) of the total number of blanket messages of n users."""
    m = _check_rate(blanket_rate)
    if _check_blanket(blanket) == "lwy":
        frac = m - math.floor(m)
        return n * m, n * frac * (1.0 - frac)
    tries = math.ceil(m)
    gamma = m / tries
    return n * m, n * tries * gamma * (1.0 - gamma)


def _group_factor(item_epsilon: float, items: int) -> float:
    return 1.0 if items == 1 else math.expm1(items * item_epsilon) / math.expm1(item_epsilon)


def lwy_item_delta(
    epsilon: float,
    *,
    message_domain: int,
    n: int,
    blanket_rate: float,
    target: float | None = None,
) -> float:
    """Certified δ(ε) of one slot under LWY's blanket count (module docstring).

    Args:
        epsilon: ε of the slot.
        message_domain: d′.
        n: Users sending blanket messages (the victim included).
        blanket_rate: m, the expected blanket messages per user.
        target: A δ the caller compares with (lets the block sum stop early;
            the answer is still certified).
    """
    epsilon = check_epsilon(epsilon)
    d = check_int(message_domain, "message_domain", minimum=2)
    n = check_int(n, "n", minimum=1)
    m = _check_rate(blanket_rate)
    whole = math.floor(m)
    frac = m - whole  # exact in floating point
    extra = binomial_window(n, frac, DEFAULT_TAIL, float(whole + 1) - m)
    window = Window(n * whole + extra.lo, extra.pmf, extra.dropped, extra.rel_error)
    rate, complement = 2.0 / d, (d - 2) / d

    def pair_at(first: int, last: int, side: str, probability: float) -> tuple[TwoCountPair, float]:
        # δ of a pair falls as its blanket messages grow: a block of N is bounded
        # above by its fewest and below by its most.
        pair = TwoCountPair(
            blanket=first if side == "upper" else last,
            rate=rate,
            w1=1.0,
            w2=0.0,
            w0=0.0,
            rate_complement=complement,
        )
        return pair, probability

    return mixture_delta(window, pair_at, epsilon, rounding="up", target=target)


def mm_level_delta(
    epsilon: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket_rate: float,
    blanket: Blanket = "lwy",
    target: float | None = None,
) -> float:
    """Certified δ at ε for a user's whole set of s items (module docstring).

    Args:
        epsilon: ε > 0 (the user's).
        message_domain: d′.
        items: s.
        n: Users in the shuffle.
        blanket_rate: m.
        blanket: ``"lwy"`` or ``"alg2"``.
        target: A δ the caller compares with (early stopping; still certified).
    """
    epsilon = check_epsilon(epsilon)
    s = check_int(items, "items", minimum=1)
    m = _check_rate(blanket_rate)
    if _check_blanket(blanket) == "alg2":
        return level_delta(
            epsilon,
            1.0,
            message_domain=message_domain,
            items=s,
            n=n,
            blanket_rate=m,
            variant="paper",
            target=target,
        )
    item_eps = epsilon / s
    item_target = None if target is None else target / _group_factor(item_eps, s)
    per_item = lwy_item_delta(
        item_eps, message_domain=message_domain, n=n, blanket_rate=m, target=item_target
    )
    return group_delta(per_item, item_eps, s)


def calibrate_blanket_rate(
    epsilon: float,
    delta: float,
    *,
    message_domain: int,
    items: int,
    n: int,
    blanket: Blanket = "lwy",
    rtol: float = 1e-3,
) -> tuple[float, float]:
    """Return (m, δ): the smallest blanket rate found that certifies (ε, δ), and its δ.

    Finds the smallest integer j with δ(j) ≤ target (doubling, then bisection
    over integers: δ falls with integer m), then bisects inside (j − 1, j] to a
    relative ``rtol`` (module docstring). Those comparisons use the deciding
    mode (sums stop refining once decided); the answer is then settled on the
    fully refined certificate: the δ that :func:`mm_level_delta`
    reports at m (no target) is at most the target, and it is the δ returned.

    Raises:
        InvalidParameterError: On a bad parameter, or when no m up to 2^20 is certified.
    """
    epsilon = check_epsilon(epsilon)
    target = check_delta(delta)
    blanket = _check_blanket(blanket)
    if not (0.0 < rtol < 1.0):
        raise InvalidParameterError(f"rtol must be in (0, 1), got {rtol!r}")
    memo: dict[float, float] = {}

    def value(m: float) -> float:
        if m not in memo:
            memo[m] = mm_level_delta(
                epsilon,
                message_domain=message_domain,
                items=items,
                n=n,
                blanket_rate=m,
                blanket=blanket,
                target=target,
            )
        return memo[m]

    def passes(m: float) -> bool:
        return value(m) <= target

    low, high = 0, 1
    while not passes(float(high)):
        low, high = high, 2 * high
        if high > _MAX_RATE:
            raise InvalidParameterError(
                f"no blanket rate up to {_MAX_RATE} certifies ({epsilon:g}, {target:g}) with "
                f"n={n}, s={items}, d'={message_domain}"
            )
    while high - low > 1:
        mid = (low + high) // 2
        if passes(float(mid)):
            high = mid
        else:
            low = mid
    # The answer lies in (high − 1, high]; δ falls with m there.
    hi: float = float(high)
    lo: float = float(high - 1) if high > 1 else _MIN_RATE
    if high == 1 and passes(lo):
        hi = lo
    while hi - lo > rtol * hi:
        middle = 0.5 * (lo + hi) if high > 1 else math.sqrt(lo * hi)
        if passes(middle):
            hi = middle
        else:
            lo = middle

    def public(m: float) -> float:
        # The certificate as reported (sums refined in full, no deciding target).
        return mm_level_delta(
            epsilon,
            message_domain=message_domain,
            items=items,
            n=n,
            blanket_rate=m,
            blanket=blanket,
        )

    try:
        hi = settle_smallest(lambda m: public(m) <= target, hi, float(_MAX_RATE), rtol=rtol)
    except ValueError:  # pragma: no cover - the deciding search passed here
        raise InvalidParameterError(
            f"no blanket rate up to {_MAX_RATE} certifies ({epsilon:g}, {target:g})"
        ) from None
    return hi, public(hi)


@dataclass(frozen=True)
class MMShuffle:
    """The balls-into-bins protocol on sets, calibrated (module docstring).

    Attributes:
        n_users: Number of users (the guarantee is for exactly these many).
        d: Items of the public domain.
        s: Slots per user.
        epsilon: The users' ε.
        target_delta: The δ asked for.
        padding: Whether empty slots are allowed (message domain d + 1).
        blanket: ``"lwy"`` or ``"alg2"``.
        blanket_rate: m, expected blanket messages per user.
        report: The certified guarantee.
        name: ``"mm-shuffle"``.
    """

    n_users: int
    d: int
    s: int
    epsilon: float
    target_delta: float
    padding: bool
    blanket: Blanket
    blanket_rate: float
    report: PrivacyReport
    name: str = "mm-shuffle"

    @property
    def n(self) -> int:
        """Number of users."""
        return self.n_users

    @property
    def domain_size(self) -> int:
        """The number of items of the public domain, d."""
        return self.d

    @property
    def items_per_user(self) -> int:
        """The slots per user, s."""
        return self.s

    @property
    def message_domain(self) -> int:
        """d′ = d, plus the padding symbol d when padding is on."""
        return self.d + (1 if self.padding else 0)

    def privacy_reports(self) -> tuple[PrivacyReport, ...]:
        """The one level's guarantee."""
        return (self.report,)

    def blanket_variance(self) -> float:
        """Var of one item's blanket count B_j: E[N]·p(1 − p) + Var[N]·p², p = 1/d′."""
        mean, var = blanket_count_moments(self.n_users, self.blanket_rate, self.blanket)
        p = 1.0 / self.message_domain
        return mean * p * (1.0 - p) + var * p * p

    def _blanket_per_user(self, rng: np.random.Generator) -> IntArray:
        m = self.blanket_rate
        if self.blanket == "lwy":
            whole = math.floor(m)
            extra = rng.random(self.n_users) < (m - whole)
            return (whole + extra).astype(np.int64)
        tries = math.ceil(m)
        return rng.binomial(tries, m / tries, size=self.n_users).astype(np.int64)

    def _blanket_total(self, rng: np.random.Generator) -> int:
        m = self.blanket_rate
        if self.blanket == "lwy":
            whole = math.floor(m)
            return int(self.n_users * whole + rng.binomial(self.n_users, m - whole))
        tries = math.ceil(m)
        return int(rng.binomial(self.n_users * tries, m / tries))

    def randomize(self, items: IntArray, seed: SeedLike = None) -> MessageBatch:
        """Every user's messages before the shuffle: its s slots, then its blanket messages."""
        rng = make_rng(seed)
        n, s = items.shape
        data = np.where(items == PAD, self.d, items).ravel()
        per_user = self._blanket_per_user(rng)
        blanket = rng.integers(0, self.message_domain, size=int(per_user.sum()), dtype=np.int64)
        users = np.arange(n, dtype=np.int64)
        return MessageBatch(
            payload=np.concatenate([data, blanket]),
            sender=np.concatenate([np.repeat(users, s), np.repeat(users, per_user)]),
            n_users=n,
        )

    def estimate(self, counts: IntArray, n: int, path: ExecutionPath) -> SetFrequencyEstimate:
        """ŵ_j = (C_j − n·m/d′)/n for j < d, with the (data-independent) standard error."""
        c = np.asarray(counts[: self.d], dtype=np.float64)
        freq = (c - n * self.blanket_rate / self.message_domain) / n
        stderr = np.full(self.d, math.sqrt(self.blanket_variance()) / n)
        return SetFrequencyEstimate(
            frequencies=freq,
            stderr=stderr,
            n=n,
            messages=int(np.sum(counts)),
            mechanism=self.name,
            path=path,
            statistic=np.asarray(counts, dtype=np.int64),
        )

    def run(
        self,
        user_items: ArrayLike,
        *,
        user_levels: ArrayLike | None = None,
        seed: SeedLike = None,
        path: ExecutionPath = "message",
    ) -> SetFrequencyEstimate:
        """Run the protocol on exactly n users' item matrices and estimate w.

        ``"message"``: real messages and a uniform shuffle (cryptographically
        secure without a seed); ``"count"``: the message counts drawn directly
        (the users' item counts plus a multinomial of the blanket total).
        ``user_levels`` is only checked: every user runs at the one ε.
        """
        items = check_item_matrix(
            user_items,
            domain_size=self.d,
            items_per_user=self.s,
            padding=self.padding,
            n=self.n_users,
        )
        check_user_levels(user_levels, self.n_users)
        # Independent streams for the randomizers and the shuffle (None: OS entropy and
        # the cryptographic shuffle).
        randomize_seed, shuffle_seed = child_seeds(seed, 2)
        rng = make_rng(randomize_seed)
        if path == "message":
            batch = self.randomize(items, rng)
            shuffled = UniformShuffler().shuffle(batch, seed=shuffle_seed)
            counts = np.bincount(shuffled.payload, minlength=self.message_domain).astype(np.int64)
        elif path == "count":
            held = item_counts(items, self.message_domain, pad_symbol=self.d)
            total = self._blanket_total(rng)
            uniform = np.full(self.message_domain, 1.0 / self.message_domain)
            counts = held + rng.multinomial(total, uniform).astype(np.int64)
        else:
            raise InvalidParameterError(f"path must be 'message' or 'count', got {path!r}")
        return self.estimate(counts, self.n_users, path)

    def expected_error(
        self, frequencies: ArrayLike | None = None, *, include_sampling: bool = False
    ) -> float:
        """E Σ_j (ŵ_j − w_j)² = d·Var(B_j)/n² (plus the sampling error when asked)."""
        w = None if frequencies is None else np.asarray(frequencies, dtype=np.float64)
        if w is not None and w.shape != (self.d,):
            raise InvalidParameterError(
                f"frequencies must have {self.d} entries, got shape {w.shape}"
            )
        error = self.d * self.blanket_variance() / self.n_users**2
        if include_sampling:
            error += sampling_error(w, self.n_users, self.s)
        return error

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dictionary."""
        return {
            "mechanism": self.name,
            "n": self.n_users,
            "domain_size": self.d,
            "items_per_user": self.s,
            "padding": self.padding,
            "message_domain": self.message_domain,
            "blanket": self.blanket,
            "blanket_rate": self.blanket_rate,
            "messages_per_user": self.s + self.blanket_rate,
            "expected_error": self.expected_error(),
            "privacy": self.report.to_dict(),
        }


def calibrate_mm(
    n: int,
    domain_size: int,
    items_per_user: int,
    *,
    epsilon: float = 0.5,
    delta: float | None = None,
    padding: bool = False,
    blanket: Blanket = "lwy",
    rtol: float = 1e-3,
    lower_bound: bool = True,
) -> MMShuffle:
    """Return "MM, shuffle" with the smallest blanket rate certifying (ε, δ) for every user.

    Args:
        n: Users in the shuffle.
        domain_size: d.
        items_per_user: s.
        epsilon: The users' ε (default 0.5, the strictest level of §6).
        delta: Target δ (default 0.01/n).
        padding: Whether sets may hold fewer than s items.
        blanket: ``"lwy"`` (Luo, Wang & Yi's count, default) or ``"alg2"``.
        rtol: Relative precision of m.
        lower_bound: Also compute δ of a concrete dataset pair at the same m
            (``alg2``, or ``lwy`` at m ≤ 1 or integer m, where the two coincide).

    Raises:
        InvalidParameterError: On a bad parameter.
    """
    n = check_int(n, "n", minimum=1)
    d, s = check_shape(domain_size, items_per_user)
    epsilon = check_epsilon(epsilon)
    target = check_delta(default_delta(n) if delta is None else delta)
    blanket = _check_blanket(blanket)
    d_msg = d + (1 if padding else 0)
    m, certified = calibrate_blanket_rate(
        epsilon, target, message_domain=d_msg, items=s, n=n, blanket=blanket, rtol=rtol
    )
    same_as_alg2 = blanket == "alg2" or m <= 1.0 or m == math.floor(m)
    lower = (
        level_lower_bound(
            epsilon,
            1.0,
            message_domain=d_msg,
            items=s,
            n=n,
            blanket_rate=m,
            variant="paper",
            padding=padding,
        )
        if lower_bound and same_as_alg2
        else None
    )
    source = (
        "shuffledp.accounting.certificates.segmented.level_delta (Alg. 2, lambda = 1)"
        if blanket == "alg2"
        else "mixture over the revealed blanket count of the two-count pairs, then group_delta"
    )
    report = PrivacyReport(
        guarantee=ApproxDP(epsilon, certified),
        method=f"mm-{blanket}",
        bound=BoundKind.UPPER,
        n=n,
        lower_bound_delta=lower,
        neighbouring="replace-one user's whole set",
        parameters={
            "blanket_rate": m,
            "blanket": blanket,
            "target_delta": target,
            "message_domain": d_msg,
        },
        notes=f"{source}; per slot at epsilon/s, then the slots' group bound",
        assumptions=(
            "each row is one user's set of exactly s items (after padding)",
            "a trusted uniform shuffler; exactly n users take part",
        ),
    )
    return MMShuffle(n, d, s, epsilon, target, padding, blanket, m, report)
