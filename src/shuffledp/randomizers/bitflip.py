"""FLIP's randomizer: bitwise randomized response plus fake users (Alg. 1–2).

A user with value j builds the one-hot vector e_j and k all-zero vectors, and
flips every bit of every vector independently with probability q (Alg. 2).
Each set bit is sent as its own message carrying only the bin index, so the
shuffled multiset of messages is exactly the vector of per-bin counts that the
accountant in :mod:`shuffledp.accounting.certificates.flip` analyses.

Sampling is sparse: the set bits of a stretch of L independent Bernoulli(q)
bits are drawn as a Binomial(L, q) count followed by a uniform subset of that
size, which has exactly the law of the bits but costs O(messages), not
O((k + 1)·d) per user.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shuffledp._progress import progress
from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import check_flip_probability, check_int
from shuffledp.data.checks import check_histogram, check_values
from shuffledp.messages import MessageBatch

__all__ = ["FlipRandomizer", "bernoulli_positions"]

IntArray = NDArray[np.int64]

#: Users randomized per vectorized step of :meth:`FlipRandomizer.randomize`.
DEFAULT_CHUNK = 1 << 20


def bernoulli_positions(length: int, p: float, rng: np.random.Generator) -> IntArray:
    """Return the sorted indices of successes among ``length`` iid Bernoulli(p) trials.

    The number of successes is Binomial(length, p) and, given that number, the
    set of successful indices is uniform among subsets of that size, which is
    the exact joint law of the trials.

    Args:
        length: Number of trials, ≥ 0.
        p: Success probability in [0, 1].
        rng: Source of randomness.
    """
    count = int(rng.binomial(length, p)) if length > 0 else 0
    if count == 0:
        return np.empty(0, dtype=np.int64)
    positions = rng.choice(length, size=count, replace=False, shuffle=False)
    positions.sort()
    return positions.astype(np.int64, copy=False)


class FlipRandomizer:
    """R_FLIP of Alg. 1 with the bitwise randomized response R_{d,q} of Alg. 2.

    Args:
        domain_size: d ≥ 2, the number of bins.
        q: Flip probability in (0, 1/2).
        fake_users: k ≥ 0, all-zero reports each user adds.
    """

    def __init__(self, domain_size: int, q: float, fake_users: int) -> None:
        self.domain_size = check_int(domain_size, "domain_size", minimum=2)
        self.q = check_flip_probability(q)
        self.fake_users = check_int(fake_users, "fake_users", minimum=0)

    @property
    def expected_messages_per_user(self) -> float:
        """E[messages per user] = (1 − q) + q(d − 1) + k·d·q."""
        d, k, q = self.domain_size, self.fake_users, self.q
        return (1.0 - q) + q * (d - 1) + k * d * q

    def _randomize_chunk(
        self, values: IntArray, first_user: int, rng: np.random.Generator
    ) -> tuple[IntArray, IntArray]:
        n, d, k, q = values.shape[0], self.domain_size, self.fake_users, self.q
        # The real report's 1-bit survives with probability 1 − q.
        kept = np.flatnonzero(rng.random(n) >= q)
        payloads = [values[kept]]
        senders = [kept]
        # The real report's d − 1 zero bits, as one stretch of n(d − 1) trials.
        pos = bernoulli_positions(n * (d - 1), q, rng)
        user = pos // (d - 1)
        offset = pos - user * (d - 1)
        payloads.append(offset + (offset >= values[user]))
        senders.append(user)
        # The k all-zero reports: n·k·d trials; the bin is the position mod d.
        if k > 0:
            pos = bernoulli_positions(n * k * d, q, rng)
            payloads.append(pos % d)
            senders.append(pos // (k * d))
        payload = np.concatenate(payloads).astype(np.int64, copy=False)
        sender = np.concatenate(senders).astype(np.int64, copy=False) + first_user
        return payload, sender

    def randomize(
        self,
        values: NDArray[np.integer],
        seed: SeedLike = None,
        *,
        chunk_size: int = DEFAULT_CHUNK,
    ) -> MessageBatch:
        """Randomize every user's value; return the messages before shuffling.

        The order of messages in the batch groups them by kind (real bit, flipped
        zero bits, fake reports) and carries no meaning once shuffled.

        Args:
            values: Bin index in ``[0, d)`` of each user.
            seed: Randomness (see :func:`shuffledp._rng.make_rng`).
            chunk_size: Users per vectorized step (bounds temporary memory).

        Raises:
            DataError: If ``values`` is empty or holds an index outside the domain.
        """
        arr = check_values(values, self.domain_size)
        rng = make_rng(seed)
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        n = arr.shape[0]
        parts = [
            self._randomize_chunk(arr[start : start + chunk_size], start, rng)
            for start in progress(
                range(0, n, chunk_size),
                total=-(-n // chunk_size),
                desc="randomizing",
                delay=0.5,  # quick calls (a client's few users) show no bar
            )
        ]
        payload = np.concatenate([p for p, _ in parts])
        sender = np.concatenate([s for _, s in parts])
        return MessageBatch(payload=payload, sender=sender, n_users=n)

    def randomize_one(self, value: int, seed: SeedLike = None) -> IntArray:
        """Return one user's messages (bin indices), sorted so their order says nothing.

        This is the client-side call of a deployment: the returned bin indices
        are what the user hands to the shuffler.
        """
        batch = self.randomize(np.array([value], dtype=np.int64), seed)
        return np.sort(batch.payload)

    def sample_counts(self, histogram: NDArray[np.integer], seed: SeedLike = None) -> IntArray:
        """Draw the per-bin message counts directly (the count-level path).

        C_j = Bin(h_j, 1 − q) + Bin(N − h_j, q) independently over bins, with
        N = n(k + 1): the exact law of ``bincount`` of the shuffled messages.

        Args:
            histogram: h_j, the number of users holding each value.
            seed: Randomness.
        """
        hist = check_histogram(histogram, self.domain_size)
        rng = make_rng(seed)
        hist = hist.astype(np.int64)
        total = int(hist.sum()) * (self.fake_users + 1)
        ones = rng.binomial(hist, 1.0 - self.q)
        zeros = rng.binomial(total - hist, self.q)
        return (ones + zeros).astype(np.int64)
