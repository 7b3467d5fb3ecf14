"""Counts per (batch, bin): what every backend's data-parallel step produces, and how to combine.

A backend reduces messages to triples ``(batch, bin, count)``. ``bin`` is a
bin of the public domain, ``0 ≤ bin < d``, or one of three codes for messages
that were not counted: :func:`undecryptable_code` (``d``: the HPKE decryption
failed, or the row is not a ciphertext of the right length),
:func:`undecodable_code` (``d + 1``: it decrypted to something that is not a
valid plaintext, see :mod:`shuffledp.service.wire`) and :func:`duplicate_code`
(``d + 2``: it decrypted and decoded, but a message with the same HPKE
encapsulated key is counted instead: a copy, see
:mod:`shuffledp.backends.replays`). The analyzer service counts the same four
outcomes per batch (``Aggregator.aggregate`` and the store's
``record_aggregation``); :func:`code_width` is the number of codes, ``d + 3``.

Partial triples from any number of chunks or executors are combined by
:func:`combine_triples` with exact int64 sums in a fixed order, so two backends
that read the same messages return equal counts, bit for bit, whatever their
chunking or partitioning.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, check_int

__all__ = [
    "BinTriples",
    "MessageCounts",
    "code_width",
    "combine_triples",
    "count_bins",
    "duplicate_code",
    "undecodable_code",
    "undecryptable_code",
]

IntArray = NDArray[np.int64]


def undecryptable_code(domain_size: int) -> int:
    """The bin code of a message that did not decrypt: ``d``."""
    return domain_size


def undecodable_code(domain_size: int) -> int:
    """The bin code of a message that decrypted to an invalid plaintext: ``d + 1``."""
    return domain_size + 1


def duplicate_code(domain_size: int) -> int:
    """The bin code of a good message not counted: a copy of one counted instead (``d + 2``)."""
    return domain_size + 2


def code_width(domain_size: int) -> int:
    """The number of bin codes: the d bins and the three codes of messages not counted."""
    return domain_size + 3


@dataclass(frozen=True)
class BinTriples:
    """Sparse counts: ``count[i]`` messages of batch ``batch[i]`` fell in bin ``bin[i]``.

    Attributes:
        batch: Batch index (into the dataset's batch list), int64.
        bin: Bin, or :func:`undecryptable_code` / :func:`undecodable_code` /
            :func:`duplicate_code`, int64.
        count: Number of messages (> 0 after :func:`combine_triples`), int64.
    """

    batch: IntArray
    bin: IntArray
    count: IntArray

    @staticmethod
    def empty() -> BinTriples:
        """No messages."""
        none = np.empty(0, dtype=np.int64)
        return BinTriples(none, none, none)

    def __len__(self) -> int:
        return int(self.count.shape[0])


def count_bins(
    batch: NDArray[np.integer],
    bins: NDArray[np.integer],
    width: int,
    weights: NDArray[np.integer] | None = None,
) -> BinTriples:
    """Count messages per (batch, bin code); vectorized.

    Args:
        batch: Batch index of every message.
        bins: Bin code of every message, in ``[0, width)``.
        width: Number of bin codes (:func:`code_width`: ``d + 3`` with the codes of
            messages not counted).
        weights: How many messages each entry stands for (default one each);
            summed exactly in int64.
    """
    batch_codes: IntArray = np.asarray(batch, dtype=np.int64)
    bin_codes: IntArray = np.asarray(bins, dtype=np.int64)
    if batch.size == 0:
        return BinTriples.empty()
    if weights is not None:
        counts = np.asarray(weights, dtype=np.int64)
        return combine_triples([BinTriples(batch_codes, bin_codes, counts)], width)
    first, last = int(batch_codes.min()), int(batch_codes.max())
    if first == last:  # the usual case: a chunk inside one batch
        counts = np.bincount(bin_codes, minlength=width).astype(np.int64)
        nonzero = np.flatnonzero(counts)
        return BinTriples(np.full(nonzero.size, first, dtype=np.int64), nonzero, counts[nonzero])
    keys = (batch_codes - first) * width + bin_codes
    unique, counts = np.unique(keys, return_counts=True)
    return BinTriples(unique // width + first, unique % width, counts.astype(np.int64))


def combine_triples(parts: Iterable[BinTriples], width: int) -> BinTriples:
    """Sum triples with the same (batch, bin); return them sorted by (batch, bin), counts > 0.

    Exact (int64) and independent of the order and grouping of ``parts``.
    """
    items = [p for p in parts if len(p)]
    if not items:
        return BinTriples.empty()
    batch = np.concatenate([p.batch for p in items])
    keys = batch * width + np.concatenate([p.bin for p in items])
    counts = np.concatenate([p.count for p in items]).astype(np.int64, copy=False)
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    sums = np.add.reduceat(counts, starts)
    unique = keys[starts]
    keep = sums != 0
    return BinTriples(unique[keep] // width, unique[keep] % width, sums[keep])


@dataclass(frozen=True)
class MessageCounts:
    """What a backend counted in a message dataset: per batch and bin, plus failures.

    Attributes:
        domain_size: d.
        n_batches: Batches in the dataset (some may have no row).
        triples: Combined counts, sorted by (batch, bin) (see :func:`combine_triples`).
    """

    domain_size: int
    n_batches: int
    triples: BinTriples

    def __post_init__(self) -> None:
        t = self.triples
        if len(t) and (
            int(t.batch.min()) < 0
            or int(t.batch.max()) >= self.n_batches
            or int(t.bin.min()) < 0
            or int(t.bin.max()) > duplicate_code(self.domain_size)
        ):
            raise DataError("a count refers to a batch or bin outside the dataset")

    @classmethod
    def from_parts(
        cls, parts: Iterable[BinTriples], domain_size: int, n_batches: int
    ) -> MessageCounts:
        """Combine partial triples (the ``combine`` step every backend ends with)."""
        d = check_int(domain_size, "domain_size", minimum=1)
        return cls(d, n_batches, combine_triples(parts, code_width(d)))

    @property
    def counts(self) -> IntArray:
        """Good messages per bin over every batch (the analyzer's sufficient statistic)."""
        t, d = self.triples, self.domain_size
        good = t.bin < d
        out = np.zeros(d, dtype=np.int64)
        np.add.at(out, t.bin[good], t.count[good])
        return out

    def batch_counts(self) -> NDArray[np.int64]:
        """Good messages per (batch, bin): an ``(n_batches, d)`` matrix."""
        t, d = self.triples, self.domain_size
        out = np.zeros((self.n_batches, d), dtype=np.int64)
        good = t.bin < d
        out[t.batch[good], t.bin[good]] = t.count[good]
        return out

    def _per_batch(self, mask: NDArray[np.bool_]) -> IntArray:
        out = np.zeros(self.n_batches, dtype=np.int64)
        np.add.at(out, self.triples.batch[mask], self.triples.count[mask])
        return out

    @property
    def messages_per_batch(self) -> IntArray:
        """Rows read per batch, counted or not."""
        return self._per_batch(np.ones(len(self.triples), dtype=bool))

    @property
    def undecryptable_per_batch(self) -> IntArray:
        """Messages per batch that did not decrypt."""
        return self._per_batch(self.triples.bin == undecryptable_code(self.domain_size))

    @property
    def undecodable_per_batch(self) -> IntArray:
        """Messages per batch that decrypted to an invalid plaintext."""
        return self._per_batch(self.triples.bin == undecodable_code(self.domain_size))

    @property
    def duplicates_per_batch(self) -> IntArray:
        """Good messages per batch not counted: copies of a message counted instead."""
        return self._per_batch(self.triples.bin == duplicate_code(self.domain_size))

    @property
    def messages(self) -> int:
        """Rows read."""
        return int(self.triples.count.sum())

    @property
    def undecryptable(self) -> int:
        """Messages that did not decrypt."""
        return int(self.undecryptable_per_batch.sum())

    @property
    def undecodable(self) -> int:
        """Messages that decrypted to an invalid plaintext."""
        return int(self.undecodable_per_batch.sum())

    @property
    def duplicates(self) -> int:
        """Good messages not counted: copies of a message counted instead."""
        return int(self.duplicates_per_batch.sum())

    def same_as(self, other: MessageCounts) -> bool:
        """Whether both hold exactly the same counts (bit for bit)."""
        a, b = self.triples, other.triples
        return (
            self.domain_size == other.domain_size
            and self.n_batches == other.n_batches
            and np.array_equal(a.batch, b.batch)
            and np.array_equal(a.bin, b.bin)
            and np.array_equal(a.count, b.count)
        )
