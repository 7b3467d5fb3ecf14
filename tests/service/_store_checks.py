"""Checks that every analyzer store passes (SQLite and PostgreSQL alike)."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pytest

from shuffledp.service.shuffler import permute_messages
from shuffledp.service.store_common import content_digest
from shuffledp.service.store_protocols import (
    Aggregation,
    AnalyzerStore,
    BatchConflictError,
    CiphertextAlreadyHeldError,
    ClientAlreadySubmittedError,
    NewSubmission,
    ReceivedBatch,
    ShufflerStore,
    SubmitOutcome,
)
from shuffledp.service.task import new_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH


def key(i: int) -> bytes:
    """A 32-byte replay key."""
    return i.to_bytes(32, "big")


def aggregation(batch_id: str, indices: list[int], keys: list[int], d: int = 3) -> Aggregation:
    """An aggregation of good messages with these indices and keys (no bad message)."""
    return Aggregation(batch_id, np.array(indices, dtype=np.int64), tuple(map(key, keys)), d)


def _batch(fill: int, n: int = 3) -> ReceivedBatch:
    payload = bytes([fill]) * (CIPHERTEXT_LENGTH * n)
    return ReceivedBatch(new_id(), payload, n, n, content_digest(payload, CIPHERTEXT_LENGTH))


def check_analyzer_records_each_batch_once(store: AnalyzerStore) -> None:
    """Batches are stored once, conflicts refused, and each is aggregated once."""
    batch = _batch(0)
    assert store.add_batch(batch) is True
    assert store.add_batch(batch) is False
    with pytest.raises(BatchConflictError):
        store.add_batch(ReceivedBatch(new_id(), batch.payload, 3, 3, batch.content_digest))
    assert store.load_batch(batch.batch_id) == batch
    assert store.unaggregated_batches() == [batch.batch_id]
    agg = aggregation(batch.batch_id, [0, 0, 2], [1, 2, 3])
    recorded = store.record_aggregation(agg)
    assert recorded is not None and (recorded.counted, recorded.duplicates) == (3, 0)
    assert store.record_aggregation(agg) is None
    second = _batch(1)
    assert store.add_batch(second) is True
    # every batch, aggregated or not, in arrival order; only the second waits
    assert store.batch_ids() == [batch.batch_id, second.batch_id]
    assert store.unaggregated_batches() == [second.batch_id]
    recorded = store.record_aggregation(aggregation(second.batch_id, [0, 0, 2], [4, 5, 6]))
    assert recorded is not None and recorded.counted == 3
    totals = store.totals(3)
    assert totals.counts.tolist() == [4, 0, 2]
    assert (totals.n_users, totals.n_batches, totals.smallest_batch_users) == (6, 2, 3)
    assert (totals.n_messages, totals.pending_batches) == (6, 0)
    assert store.metrics()["batches_aggregated"] == 2
    assert store.unaggregated_batches() == []
    with pytest.raises(KeyError):
        store.load_batch(new_id())


def check_analyzer_counts_each_replay_key_once(store: AnalyzerStore) -> None:
    """A message whose key was counted, in an earlier batch or earlier in its own, is dropped."""
    before, counted_before = store.totals(3), store.metrics().get("messages_duplicate", 0)
    first, second = _batch(2, 4), _batch(3, 5)
    assert store.add_batch(first) and store.add_batch(second)
    # keys 10 and 11 counted; 11 again in the same batch is a copy
    recorded = store.record_aggregation(aggregation(first.batch_id, [0, 1, 1, 2], [10, 11, 11, 12]))
    assert recorded is not None and (recorded.counted, recorded.duplicates) == (3, 1)
    # 10 and 12 again in a later batch (whatever index a forger claims): copies
    recorded = store.record_aggregation(
        aggregation(second.batch_id, [0, 2, 2, 1, 1], [10, 12, 13, 14, 14])
    )
    assert recorded is not None and (recorded.counted, recorded.duplicates) == (2, 3)
    totals = store.totals(3)
    # 10 -> 0, 11 -> 1, 12 -> 2, 13 -> 2, 14 -> 1
    assert (totals.counts - before.counts).tolist() == [1, 2, 2]
    assert totals.n_messages - before.n_messages == 5
    assert store.metrics()["messages_duplicate"] - counted_before == 4


def check_shuffler_refuses_copies_it_holds(
    store: ShufflerStore, reopen: Callable[[ShufflerStore], ShufflerStore]
) -> ShufflerStore:
    """A new submission holding a waiting ciphertext (by its replay key) or client id is refused.

    ``reopen`` closes the store and opens it again (a restart); the store in
    use at the end is returned (for the caller to close).
    """

    def submit(subs: list[NewSubmission]) -> SubmitOutcome:
        return store.submit(subs, min_batch_users=10**9, permute=permute_messages)

    victim = NewSubmission(new_id(), os.urandom(2 * CIPHERTEXT_LENGTH), "c1" * 16)
    assert submit([victim]).accepted == 1
    copy = NewSubmission(new_id(), victim.messages[CIPHERTEXT_LENGTH:])
    forged = NewSubmission(new_id(), victim.messages[:32] + os.urandom(CIPHERTEXT_LENGTH - 32))
    fresh = os.urandom(CIPHERTEXT_LENGTH)
    for request in (
        [copy],  # a copy of a held ciphertext
        [forged],  # its encapsulated key with other bytes
        [NewSubmission(new_id(), fresh + fresh)],  # twice in one submission
        [NewSubmission(new_id(), fresh), NewSubmission(new_id(), fresh)],  # in one request
        [NewSubmission(new_id(), os.urandom(CIPHERTEXT_LENGTH)), copy],  # all or nothing
    ):
        with pytest.raises(CiphertextAlreadyHeldError):
            submit(request)
    assert store.stats()["submissions_stored"] == 1
    assert submit([victim]).duplicates == 1  # a retry of the same submission is a no-op
    # ... even one that carries other ciphertexts: they are not stored, nor held
    other = os.urandom(CIPHERTEXT_LENGTH)
    assert submit([NewSubmission(victim.submission_id, other, "c1" * 16)]).duplicates == 1
    assert submit([NewSubmission(new_id(), other)]).accepted == 1

    store = reopen(store)  # a restart: what waits is still held, its client still used
    with pytest.raises(CiphertextAlreadyHeldError):
        submit([copy])
    with pytest.raises(ClientAlreadySubmittedError):
        submit([NewSubmission(new_id(), fresh, "c1" * 16)])
    assert submit([NewSubmission(new_id(), fresh, "c2" * 16)]).accepted == 1

    batch = store.cut_batch(1, permute_messages)
    assert batch is not None and batch.n_users == 3 and batch.n_messages == 4
    # once cut, the shuffler holds no ciphertext: a copy is stored (the analyzer drops it)
    assert submit([copy]).accepted == 1
    with pytest.raises(ClientAlreadySubmittedError):  # a client id stays used for good
        submit([NewSubmission(new_id(), os.urandom(CIPHERTEXT_LENGTH), "c1" * 16)])
    store = reopen(store)
    with pytest.raises(ClientAlreadySubmittedError):
        submit([NewSubmission(new_id(), os.urandom(CIPHERTEXT_LENGTH), "c2" * 16)])
    assert store.stats()["users_waiting"] == 1
    return store
