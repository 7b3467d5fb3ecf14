"""The uniform shuffler S of Def. II.7 (FLIP paper): a uniformly random permutation.

Source: A. Cheu and M. Zhilyaev, "Differentially private histograms in the shuffle model
from fake users", IEEE S&P 2022, arXiv 2104.02739.

The secure permutation (:func:`secure_permutation`) gives every position a
32-bit key from the OS CSPRNG and packs it above the position's index into one
unsigned 64-bit integer, so a plain ``np.sort`` (an unstable SIMD sort, 15 to
20 times faster than the stable argsort of 64-bit keys it replaces) orders the
positions by key and carries each index along; positions with equal keys are
then put in a uniformly random order from fresh CSPRNG keys, never left in
index order. The docstring of :func:`secure_permutation` proves the result
uniform.

It works in blocks of 2²⁰ elements (drawing and sorting each block, moving
the blocks' runs into buckets by their keys' top bits, sorting each bucket),
so that a Ctrl-C (which Python delivers between bytecodes, never inside one
numpy call) stops it within a fraction of a second whatever the batch's size:
no numpy call handles more than about a block, a few milliseconds of work.
The same blocks drive the progress bar :meth:`UniformShuffler.shuffle` shows
on a terminal.
"""

from __future__ import annotations

import itertools
import math
import secrets
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from shuffledp._progress import progress_bar
from shuffledp._rng import SeedLike, make_rng
from shuffledp.messages import MessageBatch, ShuffledBatch

__all__ = ["UniformShuffler", "argsort_random_keys", "secure_permutation", "secure_shuffle"]

#: Elements per uninterruptible drawing, sorting or gathering step (a few milliseconds each).
_SORT_CHUNK = 1 << 20
#: Bits of the random key each position gets in the first round (at most ``64 - ⌈log₂ n⌉``,
#: the bits the packed index leaves free). Tests lower it to force ties.
_KEY_BITS = 32
#: Bits of the fresh keys that order a class of tied positions. Tests lower it to force
#: ties within a class.
_TIE_KEY_BITS = 64
#: Passes over the keys that :func:`argsort_random_keys` reports to ``advance``
#: (counting them into buckets, placing them, sorting within the buckets).
SORT_PASSES = 3
#: Passes :func:`secure_permutation` reports: drawing the keys (and sorting each block),
#: moving the blocks' runs into buckets, sorting each bucket (and ordering its ties).
PERMUTATION_PASSES = 3

#: Called with the number of elements a step has handled (for a progress bar).
Advance = Callable[[int], object]
#: The integer type of the values :func:`secure_shuffle` shuffles.
IntT = TypeVar("IntT", bound=np.integer[Any])


def _ignore(_: int) -> None:
    """An ``advance`` that does nothing."""


def _sort(keys: NDArray[np.uint64]) -> None:
    """Sort ``keys`` in place: one uninterruptible numpy call (tests record its sizes)."""
    keys.sort()


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


def _random_bits(count: int, width: int) -> NDArray[np.uint64]:
    """Return ``count`` i.i.d. integers uniform on ``[0, 2**width)`` from the OS CSPRNG.

    Args:
        count: How many, ≥ 0.
        width: Bits of each, 1 to 64 (at most 32 takes 4 bytes of :func:`secrets.token_bytes`
            each, more takes 8; the top ``width`` bits of uniform bytes are uniform).
    """
    if width <= 32:
        bits = np.frombuffer(secrets.token_bytes(4 * count), np.uint32).astype(np.uint64)
        bits >>= np.uint64(32 - width)
        return bits
    return np.frombuffer(secrets.token_bytes(8 * count), np.uint64) >> np.uint64(64 - width)


#: Called with ``(start, stop)``: the values to carry in the low bits of keys ``start:stop``.
LowValues = Callable[[int, int], NDArray[np.uint64]]


def _indices(start: int, stop: int) -> NDArray[np.uint64]:
    """The indices ``start, …, stop - 1``: what :func:`secure_permutation` carries."""
    return np.arange(start, stop, dtype=np.uint64)


def _draw_packed(
    out: NDArray[np.uint64], start: int, low: LowValues, low_bits: int, width: int
) -> None:
    """Fill ``out`` (keys ``start:…``) with ``(random key << low_bits) | low value``."""
    np.left_shift(_random_bits(out.shape[0], width), np.uint64(low_bits), out=out)
    out |= low(start, start + out.shape[0])


def _tie_classes(tied: NDArray[np.intp]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """From the ``k`` whose item ties with item ``k + 1``: the tied items and their classes.

    Returns:
        The items that tie with a neighbour, ascending, and for each a class
        number, non-decreasing: a class is a maximal run of items tied in a
        chain (``k``, ``k + 1``, …).
    """
    after = tied + 1
    items = np.union1d(tied, after)
    return items, np.cumsum(~np.isin(items, after), dtype=np.intp)


def _order_ties(carried: NDArray[np.uint64], tied: NDArray[np.intp]) -> None:
    """Put each class of tied positions of ``carried`` in a uniformly random order, in place.

    Each member of a class draws a fresh key of :data:`_TIE_KEY_BITS` bits
    from the OS CSPRNG and the class is sorted by them; members whose fresh
    keys tie again (probability about m²/2⁶⁵ for a class of m) form the next
    round's classes, until none is left.

    Args:
        carried: The carried values, in the order of the first round's keys.
        tied: Ascending positions ``k`` whose first-round key equals that at ``k + 1``.
    """
    items, classes = _tie_classes(tied)
    while items.shape[0]:
        keys = _random_bits(items.shape[0], _TIE_KEY_BITS)
        arrangement = np.lexsort((keys, classes))  # classes stay in place: they are sorted
        carried[items] = carried[items[arrangement]]
        keys = keys[arrangement]
        again = np.flatnonzero((keys[1:] == keys[:-1]) & (classes[1:] == classes[:-1]))
        members, classes = _tie_classes(again)
        items = items[members]


def _bucketed_keys(
    size: int, low: LowValues, low_bits: int, width: int, step: Advance
) -> tuple[NDArray[np.uint64], list[int]]:
    """Draw the packed keys block by block and move them into buckets by their top key bits.

    Each block is drawn and sorted, cut where its keys' top bits change and its
    runs copied to their buckets (buckets follow key order; one bucket holds
    about half a block for uniform keys, so sorting one is a block's work).

    Returns:
        The keys, bucket after bucket (each bucket unsorted), and the buckets' bounds.
    """
    bits = min(32, width, max(1, math.ceil(math.log2(2 * size / _SORT_CHUNK))))
    buckets = 1 << bits
    edges = np.arange(1, buckets, dtype=np.uint64) << np.uint64(low_bits + width - bits)
    starts = range(0, size, _SORT_CHUNK)
    cuts = np.empty((len(starts), buckets + 1), dtype=np.int64)  # each block's runs
    drawn = np.empty(size, dtype=np.uint64)
    for row, start in enumerate(starts):
        stop = min(size, start + _SORT_CHUNK)
        block = drawn[start:stop]
        _draw_packed(block, start, low, low_bits, width)
        _sort(block)
        cuts[row, 0], cuts[row, -1] = start, stop
        cuts[row, 1:-1] = np.searchsorted(block, edges) + start
        step(stop - start)
    runs = np.diff(cuts, axis=1)
    bounds = np.zeros(buckets + 1, dtype=np.int64)
    np.cumsum(runs.sum(axis=0), out=bounds[1:])
    targets = bounds[:-1] + np.cumsum(runs, axis=0) - runs  # where each run goes
    placed = np.empty(size, dtype=np.uint64)
    for row, start in enumerate(starts):
        ends = cuts[row].tolist()
        for j, target in enumerate(targets[row].tolist()):
            lo, hi = ends[j], ends[j + 1]
            placed[target : target + hi - lo] = drawn[lo:hi]
        step(min(size, start + _SORT_CHUNK) - start)
    return placed, bounds.tolist()


def _sort_by_random_keys(
    size: int, low: LowValues, low_bits: int, step: Advance
) -> NDArray[np.uint64]:
    """Return the ``low`` values of ``size`` positions in the order of fresh CSPRNG keys.

    The construction and its proof are in :func:`secure_permutation`'s
    docstring; ``low`` gives the values carried in the keys' low ``low_bits``
    bits (indices there, the messages themselves in :func:`secure_shuffle`).
    Reports :data:`PERMUTATION_PASSES` times ``size`` to ``step``.
    """
    width = max(1, min(_KEY_BITS, 64 - low_bits))
    if size > _SORT_CHUNK:
        keys, bounds = _bucketed_keys(size, low, low_bits, width, step)
    else:
        keys, bounds = np.empty(size, dtype=np.uint64), [0, size]
        _draw_packed(keys, 0, low, low_bits, width)
        step(2 * size)  # drawn; one bucket, nothing to move
    limit = np.uint64(1) << np.uint64(low_bits)  # equal random keys: the xor is below this
    for lo, hi in itertools.pairwise(bounds):
        bucket = keys[lo:hi]
        _sort(bucket)
        tied = np.flatnonzero((bucket[1:] ^ bucket[:-1]) < limit)
        bucket &= limit - np.uint64(1)
        if tied.shape[0]:
            _order_ties(bucket, tied)
        step(hi - lo)
    return keys


def secure_permutation(size: int, *, advance: Advance | None = None) -> NDArray[np.int64]:
    """Return a uniformly random permutation of ``range(size)`` from the OS CSPRNG.

    Position ``i`` gets a key ``R_i`` of ``w`` bits from :func:`secrets.token_bytes`
    (``w = min(32, 64 - b)`` where ``b = ⌈log₂ size⌉`` bits hold the index), and
    ``(R_i << b) | i`` is sorted with ``np.sort``: the positions in order of
    their keys, each index carried along. A class of positions with equal keys
    (about size²/2³³ pairs: 12 thousand at 10⁷) is then put in random order:
    each member draws a fresh 64-bit CSPRNG key and the class is sorted by
    them, again on the members that tie once more, until no tie is left. The
    index under the key never decides an order. (Keys of 32 bits take half
    the OS generator's work of 64-bit ones, its largest cost; the ties they
    add cost a few milliseconds at 10⁷.)

    Why the result is uniform: let position ``i`` hold the sequence of keys
    ``(K_i¹, K_i², …)`` it draws or would draw in rounds 1, 2, … (a key of a
    round it does not reach never matters). The output lists the positions in
    the lexicographic order of these sequences, which are i.i.d. across
    positions (every key is a fresh uniform draw) and pairwise distinct with
    probability 1 (a class of m members ties again with probability below
    m²/2⁶⁵, so the rounds end). Relabelling the positions by any fixed
    permutation σ leaves the joint law of the sequences unchanged and turns
    the output π into σ∘π; so π and σ∘π have the same law for every σ, which
    only the uniform law on the size! permutations has. The buckets only
    change how the sort is computed, not its result (the packed keys are
    distinct, so their sorted order is unique). Against an adversary this
    holds as far as the OS generator is cryptographically secure.

    Args:
        size: Number of elements, ≥ 0.
        advance: Called after each step with the number of elements it handled,
            :data:`PERMUTATION_PASSES` times ``size`` in all, for a progress bar.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    step = _ignore if advance is None else advance
    index_bits = max(1, (size - 1).bit_length())
    return _sort_by_random_keys(size, _indices, index_bits, step).view(np.int64)


#: Widest range of values :func:`secure_shuffle` packs beside a 32-bit key.
_PACKED_VALUE_BITS = 32


def secure_shuffle(values: NDArray[IntT], *, advance: Advance | None = None) -> NDArray[IntT]:
    """Return ``values`` in a uniformly random order from the OS CSPRNG.

    The same law as ``values[secure_permutation(len(values))]``, drawn
    without the permutation when the values' range fits in 32 bits: each key
    carries ``value - min`` instead of an index, so the sorted keys are the
    shuffled values and no gather over the whole batch is needed. The proof
    of :func:`secure_permutation` holds unchanged: the output is the values
    in the lexicographic order of their positions' key sequences, and a
    value, like an index, never decides an order (a class of equal keys is
    ordered by fresh keys). Values of a wider range, or of a type that does
    not fit in int64, are gathered through :func:`secure_permutation`.

    Args:
        values: One-dimensional integers (message payloads).
        advance: Called after each step with the number of elements it handled,
            ``(PERMUTATION_PASSES + 1)`` times ``len(values)`` in all.
    """
    if values.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {values.shape}")
    step = _ignore if advance is None else advance
    size = int(values.shape[0])
    low = int(values.min()) if size else 0
    spread = int(values.max()) - low if size else 0
    if not np.can_cast(values.dtype, np.int64) or spread.bit_length() > _PACKED_VALUE_BITS:
        order = secure_permutation(size, advance=step)
        out = np.empty_like(values)
        for start in range(0, size, _SORT_CHUNK):
            block = order[start : start + _SORT_CHUNK]
            out[start : start + _SORT_CHUNK] = values[block]
            step(block.shape[0])
        return out

    def shifted(start: int, stop: int) -> NDArray[np.uint64]:
        part = values[start:stop].astype(np.int64)
        if low:
            part -= low
        return part.view(np.uint64)

    carried = _sort_by_random_keys(size, shifted, max(1, spread.bit_length()), step)
    shuffled = carried.view(np.int64)
    same_type = values.dtype == np.int64
    converted = cast("NDArray[IntT]", shuffled) if same_type else np.empty_like(values)
    for start in range(0, size, _SORT_CHUNK):
        block = shuffled[start : start + _SORT_CHUNK]
        if low:
            block += low
        if not same_type:
            converted[start : start + _SORT_CHUNK] = block
        step(block.shape[0])
    return converted


class UniformShuffler:
    """Applies a uniformly random permutation and discards the senders.

    Without a seed the order comes from the operating system's
    cryptographically secure generator (:func:`secure_shuffle`, the law of
    :func:`secure_permutation`), which is what a deployment must use. With a
    seed it comes from a seeded numpy generator: reproducible, for
    experiments and tests only.
    """

    def shuffle(
        self, batch: MessageBatch, seed: SeedLike = None, *, show_progress: bool = True
    ) -> ShuffledBatch:
        """Return the shuffled payloads of ``batch``.

        Args:
            batch: Messages as sent (a message of several words, a row of the
                payload, moves as one).
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
            if seed is None and batch.payload.ndim == 1:
                payload = secure_shuffle(batch.payload, advance=bar.update)
                return ShuffledBatch(payload=payload, n_users=batch.n_users)
            if seed is None:  # messages of several words: the secure permutation of the rows
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
