"""Checks that every analyzer store passes (SQLite and PostgreSQL alike)."""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.service.store import Aggregation, AnalyzerStore, BatchConflictError, ReceivedBatch
from shuffledp.service.store_common import content_digest
from shuffledp.service.task import new_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH


def check_analyzer_records_each_batch_once(store: AnalyzerStore) -> None:
    """Batches are stored once, conflicts refused, and each is aggregated once."""
    payload = bytes(CIPHERTEXT_LENGTH * 3)
    batch = ReceivedBatch(new_id(), payload, 3, 3, content_digest(payload, CIPHERTEXT_LENGTH))
    assert store.add_batch(batch) is True
    assert store.add_batch(batch) is False
    with pytest.raises(BatchConflictError):
        store.add_batch(ReceivedBatch(new_id(), payload, 3, 3, batch.content_digest))
    assert store.load_batch(batch.batch_id) == batch
    assert store.unaggregated_batches() == [batch.batch_id]
    counts = np.array([2, 0, 1], dtype=np.int64)
    agg = Aggregation(batch.batch_id, counts, undecryptable=0, undecodable=0)
    assert store.record_aggregation(agg) is True
    assert store.record_aggregation(agg) is False
    second_payload = bytes([1]) * (CIPHERTEXT_LENGTH * 3)
    second = ReceivedBatch(
        new_id(), second_payload, 3, 3, content_digest(second_payload, CIPHERTEXT_LENGTH)
    )
    assert store.add_batch(second) is True
    # every batch, aggregated or not, in arrival order; only the second waits
    assert store.batch_ids() == [batch.batch_id, second.batch_id]
    assert store.unaggregated_batches() == [second.batch_id]
    assert store.record_aggregation(Aggregation(second.batch_id, counts, 0, 0)) is True
    totals = store.totals(3)
    assert totals.counts.tolist() == [4, 0, 2]
    assert (totals.n_users, totals.n_batches, totals.smallest_batch_users) == (6, 2, 3)
    assert (totals.n_messages, totals.pending_batches) == (6, 0)
    assert store.metrics()["batches_aggregated"] == 2
    assert store.unaggregated_batches() == []
    with pytest.raises(KeyError):
        store.load_batch(new_id())
