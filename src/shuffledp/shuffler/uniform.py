"""The uniform shuffler S of Def. II.7 (FLIP paper): a uniformly random permutation."""

from __future__ import annotations

import secrets

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp.messages import MessageBatch, ShuffledBatch

__all__ = ["UniformShuffler", "secure_permutation"]

_CHUNK = 1 << 22


def secure_permutation(size: int) -> NDArray[np.int64]:
    """Return a uniformly random permutation of ``range(size)`` from the OS CSPRNG.

    Each position receives a 64-bit key from :func:`secrets.token_bytes`; the
    permutation sorts the keys. Conditional on the keys being distinct the
    ranks are uniform over all permutations; on a collision (probability about
    size²/2⁶⁵) all keys are drawn again, so no tie-breaking rule biases the
    result.

    Args:
        size: Number of elements, ≥ 0.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    while True:
        keys = np.empty(size, dtype=np.uint64)
        for start in range(0, size, _CHUNK):
            stop = min(size, start + _CHUNK)
            keys[start:stop] = np.frombuffer(secrets.token_bytes(8 * (stop - start)), np.uint64)
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        if size < 2 or not np.any(ordered[1:] == ordered[:-1]):
            return order.astype(np.int64, copy=False)


class UniformShuffler:
    """Applies a uniformly random permutation and discards the senders.

    Without a seed the permutation comes from the operating system's
    cryptographically secure generator (:func:`secure_permutation`), which is
    what a deployment must use. With a seed it comes from a seeded numpy
    generator: reproducible, for experiments and tests only.
    """

    def shuffle(self, batch: MessageBatch, seed: SeedLike = None) -> ShuffledBatch:
        """Return the shuffled payloads of ``batch``.

        Args:
            batch: Messages as sent.
            seed: ``None`` for a cryptographically secure shuffle; an int or a
                generator for a reproducible one.
        """
        if seed is None:
            order = secure_permutation(len(batch))
        else:
            order = make_rng(seed).permutation(len(batch))
        return ShuffledBatch(payload=batch.payload[order], n_users=batch.n_users)
