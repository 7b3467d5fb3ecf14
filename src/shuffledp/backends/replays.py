"""Replayed ciphertexts in a message dataset: each encapsulated key counted at most once.

A copy of a sealed message decrypts like the original, so a dataset in which
an attacker has copied a victim's messages (under new submission ids, in later
batches, or many times in one batch posted past the shuffler) would make the
victim's bin grow if every row were counted. The backends count as the
analyzer service does (:mod:`shuffledp.service.analyzer`): a message's key is
its HPKE encapsulated key, its first
:data:`~shuffledp.service.wire.ENCAPSULATED_KEY_LENGTH` bytes, and

* only a message that decrypts and decodes (a *good* message) counts or
  blocks another: garbage sent with a victim's key in front does not shut
  out the victim's message;
* of the good messages that share a key, the first in the order (batch,
  ciphertext) counts: the earliest batch of the dataset's list (the
  analyzer's arrival order, in which its aggregator counts), and within one
  batch the smallest ciphertext (bytewise); the others are counted under
  :func:`~shuffledp.backends.counts.duplicate_code`, per batch.

So a dataset exported from the analyzer's store counts, bin for bin and batch
for batch, what the service counted (or will count) for the same batches.

How the backends apply the rule without moving decrypted data:

1. *Candidates*, from the public bytes alone (no decryption): every row of
   ciphertext length whose key's first :data:`PREFIX_BYTES` bytes (its
   prefix, an int64) another row shares (:func:`key_prefixes`,
   :func:`repeated_prefixes`): the local backend sorts every prefix in memory
   (8 bytes per message), Spark groups rows by prefix.
2. The kernel (:class:`~shuffledp.backends.kernels.ChunkCounter`) counts every
   other row as before: its key occurs once in the dataset, there is nothing
   to decide. It leaves the candidates out.
3. The driver reads the candidates
   (:func:`~shuffledp.backends.kernels.candidate_rows`), decrypts them and
   applies the rule (:func:`count_candidates`). They are the copies, the
   messages they copy, and rows whose prefixes collide by chance (about
   m²/2⁶⁵ pairs among m honest messages: 3 at 10¹⁰).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from shuffledp.backends.counts import (
    BinTriples,
    code_width,
    combine_triples,
    count_bins,
    duplicate_code,
    undecodable_code,
    undecryptable_code,
)

if TYPE_CHECKING:
    from shuffledp.service.wire import MessageOpener

__all__ = [
    "KEY_BYTES",
    "PREFIX_BYTES",
    "candidate_mask",
    "count_candidates",
    "key_prefixes",
    "repeated_prefixes",
]

#: Bytes of a message's replay key (= :data:`shuffledp.service.wire.ENCAPSULATED_KEY_LENGTH`;
#: a test checks they agree).
KEY_BYTES = 32
#: Bytes of the key prefix the candidates are found by.
PREFIX_BYTES = 8


def key_prefixes(rows: NDArray[np.uint8]) -> NDArray[np.int64]:
    """The first :data:`PREFIX_BYTES` bytes of each ciphertext row, as int64 (native order)."""
    rows = np.asarray(rows, dtype=np.uint8)
    if rows.shape[0] == 0:
        return np.empty(0, dtype=np.int64)
    return np.ascontiguousarray(rows[:, :PREFIX_BYTES]).view(np.int64).reshape(-1)


def repeated_prefixes(prefixes: NDArray[np.int64]) -> NDArray[np.int64]:
    """The prefixes that occur more than once, sorted, each once."""
    ordered = np.sort(np.asarray(prefixes, dtype=np.int64), kind="stable")
    if ordered.size < 2:
        return np.empty(0, dtype=np.int64)
    again = ordered[1:][ordered[1:] == ordered[:-1]]
    return np.unique(again)


def candidate_mask(rows: NDArray[np.uint8], repeated: NDArray[np.int64]) -> NDArray[np.bool_]:
    """Which ciphertext rows have a prefix among ``repeated`` (sorted, unique)."""
    if repeated.size == 0 or rows.shape[0] == 0:
        return np.zeros(rows.shape[0], dtype=bool)
    prefixes = key_prefixes(rows)
    at = np.minimum(np.searchsorted(repeated, prefixes), repeated.size - 1)
    return np.asarray(repeated[at] == prefixes, dtype=bool)


def count_candidates(
    opener: MessageOpener,
    codes: NDArray[np.integer],
    rows: NDArray[np.uint8],
    domain_size: int,
) -> BinTriples:
    """Decrypt the candidates and count them by the rule of the module docstring.

    Args:
        opener: The analyzer's opener (its key and the task).
        codes: Each candidate's batch index.
        rows: The candidates, an ``(m, CIPHERTEXT_LENGTH)`` matrix.
        domain_size: d.

    Returns:
        Per (batch, code): good messages counted in their bin, copies under
        :func:`~shuffledp.backends.counts.duplicate_code`, messages that do
        not decrypt or decode under their codes.
    """
    d = domain_size
    width = code_width(d)
    batches = np.asarray(codes, dtype=np.int64)
    parts: list[BinTriples] = []
    good_batch: list[NDArray[np.int64]] = []
    good_bins: list[NDArray[np.int64]] = []
    good_rows: list[NDArray[np.uint8]] = []
    for b in np.unique(batches).tolist():
        mine = rows[batches == b]
        opened = opener.open_payload(mine.tobytes())
        failed = np.array([undecryptable_code(d), undecodable_code(d)], dtype=np.int64)
        times = np.array([opened.undecryptable, opened.undecodable], dtype=np.int64)
        parts.append(count_bins(np.full(2, b), failed, width, times))
        good_batch.append(np.full(opened.indices.size, b, dtype=np.int64))
        good_bins.append(opened.indices)
        good_rows.append(mine[opened.positions])
    if not good_batch:
        return BinTriples.empty()
    batch = np.concatenate(good_batch)
    bins = np.concatenate(good_bins)
    texts = [row.tobytes() for row in np.concatenate(good_rows)]
    first: dict[bytes, tuple[int, bytes, int]] = {}
    for i, (b, text) in enumerate(zip(batch.tolist(), texts, strict=True)):
        key = text[:KEY_BYTES]
        best = first.get(key)
        if best is None or (b, text) < best[:2]:
            first[key] = (b, text, i)
    counted = np.full(bins.size, duplicate_code(d), dtype=np.int64)
    winners = np.fromiter((i for _, _, i in first.values()), dtype=np.int64, count=len(first))
    counted[winners] = bins[winners]
    parts.append(count_bins(batch, counted, width))
    return combine_triples(parts, width)
