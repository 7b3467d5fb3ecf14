"""The correlated protocol's randomizer: signed messages with correlated noise shares.

Ghazi, Kumar, Manurangsi & Pagh, "Private counting from anonymous messages:
near-optimal accuracy with vanishing communication overhead" (ICML 2020,
arXiv 2106.04247), and Ghazi, Kumar, Manurangsi, Pagh & Sinha, "Differentially
private aggregation in the shuffle model: almost central accuracy in almost a
single message" (ICML 2021, arXiv 2109.13158). A user with value x sends the
message (x, +1) and, for every bin j,

* A_j ~ NB(1/m, α) copies of (j, +1),
* A′_j ~ NB(1/m, α) copies of (j, −1),
* W_j ~ NB(r/m, q) copies of both (j, +1) and (j, −1),

all independent, where m is the number of users whose noise the guarantee
counts on (``min_honest``). NB(s, q) has P(k) = C(k + s − 1, k)(1 − q)^s q^k;
it is infinitely divisible, so m users' shares add up to Geo(α) = NB(1, α)
and NB(r, q) per bin (see :mod:`shuffledp.accounting.certificates.correlated`).

**Messages.** One integer payload per message: ``2·j`` for (j, +1) and
``2·j + 1`` for (j, −1) (:func:`encode_messages`, :func:`decode_messages`), so
a message needs ⌈log₂ d⌉ + 1 bits and says nothing about its sender beyond
(bin, sign). The analyzer's statistic is the count of each payload.

**Exact sampling at tiny shapes.** NB(s, q) is a compound Poisson law: a
Poisson(λ) number of clusters, λ = −s·ln(1 − q), each of Logarithmic(q) size
(P(k) = −q^k/(k·ln(1 − q)), k ≥ 1; numpy's ``Generator.logseries``). Both are
integer samplers, so no floating-point gamma variate of shape 1e-6 is ever
drawn (numpy's ``negative_binomial`` draws one and loses the law's tail at
such shapes). Over C i.i.d. cells (users × bins) the clusters form independent
Poisson processes, so their total is Poisson(C·λ) and each cluster falls in a
uniformly random cell (:func:`negative_binomial_clusters`): the work is the
number of clusters, about d·λ·n/m per component, and most users draw no noise
at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_epsilon, check_int
from shuffledp.data.checks import check_histogram, check_values
from shuffledp.messages import MessageBatch

__all__ = [
    "MAX_EXACT_CLUSTERS",
    "CorrelatedNoise",
    "CorrelatedRandomizer",
    "decode_messages",
    "encode_messages",
    "negative_binomial_clusters",
    "sample_negative_binomial",
]

IntArray = NDArray[np.int64]


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


#: Expected clusters above which :func:`sample_negative_binomial` uses numpy's
#: gamma–Poisson ``negative_binomial`` instead (large shapes only: the count path
#: when the honest users are a small fraction of n).
MAX_EXACT_CLUSTERS = 5e7


def _check_nb(shape: float, q: float) -> tuple[float, float]:
    if not (isinstance(shape, int | float) and math.isfinite(shape) and shape >= 0.0):
        raise InvalidParameterError(f"shape must be a finite number >= 0, got {shape!r}")
    if not (isinstance(q, int | float) and 0.0 <= q < 1.0):
        raise InvalidParameterError(f"q must be in [0, 1), got {q!r}")
    return float(shape), float(q)


def negative_binomial_clusters(
    cells: int, shape: float, q: float, rng: np.random.Generator
) -> tuple[IntArray, IntArray]:
    """Draw ``cells`` i.i.d. NB(shape, q) counts as clusters: (cell of each cluster, its size).

    Cell c's count is the sum of the sizes of the clusters whose cell is c. The
    law is exact: each cell's clusters are a Poisson(λ) count, λ = −shape·ln(1 − q),
    of Logarithmic(q) sizes, independent over cells; pooled, the clusters number
    Poisson(cells·λ) and each lands in a uniformly random cell. Cost: the number
    of clusters (about cells·λ), not ``cells``.

    Args:
        cells: Number of i.i.d. counts, ≥ 0.
        shape: s ≥ 0 (0: every count is 0).
        q: Probability in [0, 1) (0: every count is 0).
        rng: Source of randomness.

    Returns:
        Two int64 arrays of equal length: the cell index in ``[0, cells)`` and the
        size (≥ 1) of every cluster, in no meaningful order.
    """
    cells = check_int(cells, "cells", minimum=0)
    shape, q = _check_nb(shape, q)
    empty = np.empty(0, dtype=np.int64)
    if cells == 0 or shape == 0.0 or q == 0.0:
        return empty, empty
    rate = -shape * math.log1p(-q)
    total = int(rng.poisson(cells * rate))
    if total == 0:
        return empty, empty
    cell = rng.integers(0, cells, size=total, dtype=np.int64)
    size = rng.logseries(q, size=total).astype(np.int64, copy=False)
    return cell, size


def sample_negative_binomial(
    shape: float, q: float, size: int, rng: np.random.Generator
) -> IntArray:
    """Draw ``size`` i.i.d. NB(shape, q) counts (P(k) = C(k + s − 1, k)(1 − q)^s q^k).

    Exact (integer compound-Poisson sampling, :func:`negative_binomial_clusters`)
    unless more than :data:`MAX_EXACT_CLUSTERS` clusters are expected; then numpy's
    ``negative_binomial(shape, 1 − q)`` (a gamma–Poisson mixture, accurate at large shapes).

    Args:
        shape: s ≥ 0.
        q: Probability in [0, 1).
        size: Number of draws, ≥ 0.
        rng: Source of randomness.
    """
    size = check_int(size, "size", minimum=0)
    shape, q = _check_nb(shape, q)
    if size == 0 or shape == 0.0 or q == 0.0:
        return np.zeros(size, dtype=np.int64)
    if size * -shape * math.log1p(-q) > MAX_EXACT_CLUSTERS:
        drawn: IntArray = rng.negative_binomial(shape, 1.0 - q, size=size).astype(np.int64)
        return drawn
    cell, sizes = negative_binomial_clusters(size, shape, q, rng)
    order = np.argsort(cell, kind="stable")
    bounds = np.searchsorted(cell[order], np.arange(size + 1))
    sums: IntArray = np.concatenate([[0], np.cumsum(sizes[order])]).astype(np.int64)
    totals: IntArray = sums[bounds[1:]] - sums[bounds[:-1]]
    return totals


def encode_messages(bins: NDArray[np.integer], signs: NDArray[np.integer]) -> IntArray:
    """Return the payloads of messages (bin, sign): 2·bin for +1, 2·bin + 1 for −1.

    Raises:
        InvalidParameterError: If a sign is not +1 or −1 or a bin is negative.
    """
    b = np.asarray(bins, dtype=np.int64)
    s = np.asarray(signs, dtype=np.int64)
    if np.any((s != 1) & (s != -1)):
        raise InvalidParameterError("signs must be +1 or -1")
    if b.size and int(b.min()) < 0:
        raise InvalidParameterError(f"bins must be >= 0, got {int(b.min())}")
    return 2 * b + (s < 0)


def decode_messages(payload: NDArray[np.integer]) -> tuple[IntArray, IntArray]:
    """Return (bins, signs) of payloads made by :func:`encode_messages`."""
    p = np.asarray(payload, dtype=np.int64)
    return p >> 1, 1 - 2 * (p & 1)


class CorrelatedRandomizer:
    """Each user's value message and its noise shares (module docstring).

    Args:
        domain_size: d ≥ 2, the number of bins.
        noise: The per-bin totals at ``min_honest`` users: α, and the flooding NB(r, q).
        min_honest: m ≥ 1, the number of users whose shares the guarantee counts
            on; each user's shares are NB(1/m, α), NB(1/m, α) and NB(r/m, q) per bin.
    """

    def __init__(self, domain_size: int, noise: CorrelatedNoise, min_honest: int) -> None:
        self.domain_size = check_int(domain_size, "domain_size", minimum=2)
        if not isinstance(noise, CorrelatedNoise):
            raise InvalidParameterError(f"noise must be a CorrelatedNoise, got {noise!r}")
        self.noise = noise
        self.min_honest = check_int(min_honest, "min_honest", minimum=1)

    @property
    def share_shapes(self) -> tuple[float, float]:
        """The shapes of one user's shares: (1/m for A and A′, r/m for W)."""
        return 1.0 / self.min_honest, self.noise.flood_r / self.min_honest

    @property
    def expected_messages_per_user(self) -> float:
        """E[messages per user] = 1 + d·(2α/(1 − α) + 2rq/(1 − q))/m."""
        return 1.0 + self.domain_size * self.noise.messages_per_bin / self.min_honest

    def randomize(self, values: NDArray[np.integer], seed: SeedLike = None) -> MessageBatch:
        """Run every user's randomizer; return the messages before shuffling.

        Work is O(n + noise messages): the noise shares of all n·d (user, bin)
        cells are drawn as clusters (:func:`negative_binomial_clusters`). The
        batch groups messages by kind (values, A, A′, W); the order carries no
        meaning once shuffled.

        Args:
            values: Bin index in ``[0, d)`` of each user.
            seed: Randomness (see :func:`shuffledp._rng.make_rng`).

        Raises:
            DataError: If ``values`` is empty or holds an index outside the domain.
        """
        arr = check_values(values, self.domain_size)
        rng = make_rng(seed)
        n, d = arr.shape[0], self.domain_size
        cells = n * d
        ga, gw = self.share_shapes
        payloads = [2 * arr]
        senders = [np.arange(n, dtype=np.int64)]
        for offset in (0, 1):  # A: (j, +1); A′: (j, −1)
            cell, size = negative_binomial_clusters(cells, ga, self.noise.alpha, rng)
            payloads.append(np.repeat(2 * (cell % d) + offset, size))
            senders.append(np.repeat(cell // d, size))
        cell, size = negative_binomial_clusters(cells, gw, self.noise.flood_q, rng)
        user, plus = np.repeat(cell // d, size), np.repeat(2 * (cell % d), size)
        payloads += [plus, plus + 1]
        senders += [user, user]
        return MessageBatch(
            payload=np.concatenate(payloads).astype(np.int64, copy=False),
            sender=np.concatenate(senders).astype(np.int64, copy=False),
            n_users=n,
        )

    def randomize_one(self, value: int, seed: SeedLike = None) -> IntArray:
        """Return one user's payloads, sorted so that their order says nothing.

        The client-side call of a deployment: what the user hands to the shuffler.
        """
        batch = self.randomize(np.array([value], dtype=np.int64), seed)
        return np.sort(batch.payload)

    def message_counts(self, payload: NDArray[np.integer]) -> IntArray:
        """Return the statistic of a batch of payloads: row 0 N⁺_j, row 1 N⁻_j (shape (2, d)).

        Raises:
            DataError: If a payload is not a message of this domain.
        """
        p = np.asarray(payload)
        d = self.domain_size
        if p.size and (int(p.min()) < 0 or int(p.max()) >= 2 * d):
            bad = int(p.min()) if int(p.min()) < 0 else int(p.max())
            raise DataError(f"payload {bad} is not a message of a {d}-bin domain [0, {2 * d - 1}]")
        counts = np.bincount(p.astype(np.int64, copy=False), minlength=2 * d)
        return counts.reshape(d, 2).T.astype(np.int64)

    def sample_counts(self, histogram: NDArray[np.integer], seed: SeedLike = None) -> IntArray:
        """Draw the statistic directly (the count-level path), shape (2, d).

        N⁺_j = h_j + A_j + W_j and N⁻_j = A′_j + W_j with A, A′ ~ NB(n/m, α) and
        W ~ NB(n·r/m, q), independent over bins: the exact law of the message
        counts of n users (sums of n i.i.d. shares), drawn by
        :func:`sample_negative_binomial`.

        Args:
            histogram: h_j, the number of users holding each value.
            seed: Randomness.
        """
        d = self.domain_size
        hist = check_histogram(histogram, d)
        rng = make_rng(seed)
        n = int(hist.sum())
        scale = n / self.min_honest
        plus = sample_negative_binomial(scale, self.noise.alpha, d, rng)
        minus = sample_negative_binomial(scale, self.noise.alpha, d, rng)
        flood = sample_negative_binomial(scale * self.noise.flood_r, self.noise.flood_q, d, rng)
        return np.stack([hist.astype(np.int64) + plus + flood, minus + flood])
