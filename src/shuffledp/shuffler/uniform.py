"""The uniform shuffler S of Def. II.7 (FLIP paper): a uniformly random permutation.

Source: A. Cheu and M. Zhilyaev, "Differentially private histograms in the shuffle model
from fake users", IEEE S&P 2022, arXiv 2104.02739.

The secure shuffle sorts and gathers in blocks of 2²⁰ elements, so that a
Ctrl-C (which Python delivers between bytecodes, never inside one numpy call)
stops it within a fraction of a second whatever the batch's size: measured
0.1–0.2 s on 2·10⁷ keys, where one ``np.argsort`` over them blocked 1–3 s
(and about 4 s at 3·10⁷ in a whole ``run flip``). The same blocks drive the
progress bar :meth:`UniformShuffler.shuffle` shows on a terminal.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from shuffledp._progress import progress_bar
from shuffledp._rng import SeedLike, make_rng
from shuffledp.messages import MessageBatch, ShuffledBatch

__all__ = ["UniformShuffler", "argsort_random_keys", "secure_permutation"]

_CHUNK = 1 << 22
#: Elements per uninterruptible sorting or gathering step (about 0.1 s each).
_SORT_CHUNK = 1 << 20
#: Passes over the keys that :func:`argsort_random_keys` reports to ``advance``
#: (counting them into buckets, placing them, sorting within the buckets).
SORT_PASSES = 3
#: Passes :func:`secure_permutation` reports: drawing the keys, the sort, the check for ties.
PERMUTATION_PASSES = SORT_PASSES + 2

#: Called with the number of elements a step has handled (for a progress bar).
Advance = Callable[[int], object]


def _ignore(_: int) -> None:
    """An ``advance`` that does nothing."""


def argsort_random_keys(
    keys: NDArray[np.uint64], *, advance: Advance | None = None
) -> NDArray[np.int64]:
    """Return ``np.argsort(keys, kind="stable")``, computed in blocks of ``_SORT_CHUNK``.

    The keys are bucketed by their top bits (a counting sort, block by block,
    that keeps index order within a bucket), then each bucket is sorted
    stably by key. Buckets follow key order and equal keys share a bucket, so
    the result is exactly the stable argsort; for uniform keys every bucket
    holds about ``_SORT_CHUNK / 2`` of them, so no step handles many more
    elements than a block. Used by the shuffles so that an interrupt lands
    between blocks.

    Args:
        keys: One-dimensional unsigned 64-bit keys (uniform keys keep buckets small;
            any keys give the right order).
        advance: Called after each step with the number of elements it handled,
            :data:`SORT_PASSES` times ``len(keys)`` in all (for a progress bar).
    """
    step = _ignore if advance is None else advance
    n = int(keys.shape[0])
    if n <= _SORT_CHUNK:
        order = np.argsort(keys, kind="stable").astype(np.int64, copy=False)
        step(SORT_PASSES * n)
        return order
    bits = min(32, max(1, math.ceil(math.log2(2 * n / _SORT_CHUNK))))
    buckets = 1 << bits
    shift = np.uint64(64 - bits)
    counts = np.zeros(buckets, dtype=np.int64)
    for start in range(0, n, _SORT_CHUNK):
        bucket = (keys[start : start + _SORT_CHUNK] >> shift).astype(np.intp)
        counts += np.bincount(bucket, minlength=buckets)
        step(bucket.shape[0])
    bounds = np.zeros(buckets + 1, dtype=np.int64)
    np.cumsum(counts, out=bounds[1:])
    cursor = bounds[:-1].copy()
    order = np.empty(n, dtype=np.int64)
    for start in range(0, n, _SORT_CHUNK):
        bucket = (keys[start : start + _SORT_CHUNK] >> shift).astype(np.intp)
        local = np.argsort(bucket, kind="stable")
        in_block = np.bincount(bucket, minlength=buckets)
        first = np.zeros(buckets, dtype=np.int64)
        np.cumsum(in_block[:-1], out=first[1:])
        sorted_bucket = bucket[local]
        rank = np.arange(local.shape[0], dtype=np.int64) - first[sorted_bucket]
        order[cursor[sorted_bucket] + rank] = local + start
        cursor += in_block
        step(bucket.shape[0])
    for j in range(buckets):
        lo, hi = int(bounds[j]), int(bounds[j + 1])
        if hi - lo > 1:
            segment = order[lo:hi]
            order[lo:hi] = segment[np.argsort(keys[segment], kind="stable")]
        step(hi - lo)
    return order


def _has_adjacent_equal(
    keys: NDArray[np.uint64], order: NDArray[np.int64], advance: Advance
) -> bool:
    """Whether two keys are equal, given their sorted ``order`` (checked block by block)."""
    n = int(order.shape[0])
    for start in range(0, max(n - 1, 0), _SORT_CHUNK):
        ordered = keys[order[start : start + _SORT_CHUNK + 1]]
        if np.any(ordered[1:] == ordered[:-1]):
            return True
        advance(min(_SORT_CHUNK, n - 1 - start))  # the comparisons made
    advance(min(n, 1))  # n - 1 comparisons in all: one more makes n
    return False


def secure_permutation(size: int, *, advance: Advance | None = None) -> NDArray[np.int64]:
    """Return a uniformly random permutation of ``range(size)`` from the OS CSPRNG.

    Each position receives a 64-bit key from :func:`secrets.token_bytes`; the
    permutation sorts the keys (:func:`argsort_random_keys`, in blocks).
    Conditional on the keys being distinct the ranks are uniform over all
    permutations; on a collision (probability about size²/2⁶⁵) all keys are
    drawn again, so no tie-breaking rule biases the result.

    Args:
        size: Number of elements, ≥ 0.
        advance: Called after each step with the number of elements it handled,
            :data:`PERMUTATION_PASSES` times ``size`` in all (more in the rare
            case that the keys are drawn again), for a progress bar.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    step = _ignore if advance is None else advance
    while True:
        keys = np.empty(size, dtype=np.uint64)
        for start in range(0, size, _CHUNK):
            stop = min(size, start + _CHUNK)
            keys[start:stop] = np.frombuffer(secrets.token_bytes(8 * (stop - start)), np.uint64)
            step(stop - start)
        order = argsort_random_keys(keys, advance=step)
        if not _has_adjacent_equal(keys, order, step):
            return order


class UniformShuffler:
    """Applies a uniformly random permutation and discards the senders.

    Without a seed the permutation comes from the operating system's
    cryptographically secure generator (:func:`secure_permutation`), which is
    what a deployment must use. With a seed it comes from a seeded numpy
    generator: reproducible, for experiments and tests only.
    """

    def shuffle(
        self, batch: MessageBatch, seed: SeedLike = None, *, show_progress: bool = True
    ) -> ShuffledBatch:
        """Return the shuffled payloads of ``batch``.

        Args:
            batch: Messages as sent.
            seed: ``None`` for a cryptographically secure shuffle; an int or a
                generator for a reproducible one.
            show_progress: Show a progress bar (percent of the shuffle's steps)
                when stderr is a terminal and the shuffle takes over half a second.
        """
        n = len(batch)
        passes = (PERMUTATION_PASSES if seed is None else 1) + 1  # then the gather
        with progress_bar(
            total=passes * n, desc="shuffling", enabled=show_progress, delay=0.5, counts=False
        ) as bar:
            if seed is None:
                order = secure_permutation(n, advance=bar.update)
            else:
                order = make_rng(seed).permutation(n)
                bar.update(n)
            payload = np.empty_like(batch.payload)
            for start in range(0, n, _SORT_CHUNK):
                block = order[start : start + _SORT_CHUNK]
                payload[start : start + _SORT_CHUNK] = batch.payload[block]
                bar.update(block.shape[0])
        return ShuffledBatch(payload=payload, n_users=batch.n_users)
