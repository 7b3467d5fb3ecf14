"""What the stores share: ``meta`` checks, batches, replay keys, results from rows.

Only plain Python and NumPy here (no database driver, no SQL): the stores
(:mod:`shuffledp.service.sql_store`, and each backend's module for what it
keeps its own way) turn the rows they read into results with these functions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from shuffledp.service.store_protocols import (
    AggregateTotals,
    Aggregation,
    OutboxBatch,
    ReceivedBatch,
    RecordedAggregation,
    StoreError,
)
from shuffledp.service.task import new_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH, ENCAPSULATED_KEY_LENGTH

__all__ = [
    "REPLAY_KEY_LENGTH",
    "SCHEMA_VERSION",
    "aggregation_changes",
    "analyzer_metrics",
    "batch_ids_from_rows",
    "check_meta",
    "content_digest",
    "distinct_keys",
    "expected_meta",
    "new_outbox_batch",
    "outbox_batch_from_row",
    "received_batch_from_row",
    "replay_keys",
    "shuffler_stats",
    "totals_from_rows",
]

#: The tables' version, recorded in every store's ``meta``.
SCHEMA_VERSION = "1"
#: Bytes of a message's replay key: its HPKE encapsulated key (see
#: :mod:`shuffledp.service.store_protocols`).
REPLAY_KEY_LENGTH = ENCAPSULATED_KEY_LENGTH


def replay_keys(messages: bytes) -> list[bytes]:
    """The replay key of every fixed-length ciphertext of concatenated ``messages``, in order."""
    return [
        messages[start : start + REPLAY_KEY_LENGTH]
        for start in range(0, len(messages), CIPHERTEXT_LENGTH)
    ]


def expected_meta(role: str, task_id: str) -> dict[str, str]:
    """The ``meta`` rows a store of ``role`` for ``task_id`` records (every backend)."""
    return {"role": role, "task_id": task_id, "schema_version": SCHEMA_VERSION}


def check_meta(found: Mapping[str, str], where: str, role: str, task_id: str) -> None:
    """Refuse a store whose ``meta`` rows name another role, task or schema version.

    Args:
        found: The store's ``meta`` rows (key -> value).
        where: How to name the store in an error (a path, a URL without password).
        role: The role that opens it.
        task_id: The task that opens it.

    Raises:
        StoreError: If ``found`` is not :func:`expected_meta` of ``role`` and ``task_id``.
    """
    if found.get("role") != role:
        raise StoreError(f"store {where!r} belongs to the {found.get('role')}, not the {role}")
    if found.get("task_id") != task_id:
        raise StoreError(f"store {where!r} belongs to task {found.get('task_id')}, not {task_id}")
    if found.get("schema_version") != SCHEMA_VERSION:
        raise StoreError(f"store {where!r} has schema {found.get('schema_version')}")


def new_outbox_batch(
    messages: bytes, n_users: int, permute: Callable[[bytes], bytes]
) -> OutboxBatch:
    """The batch of the waiting submissions: a new id, all their ciphertexts permuted.

    Args:
        messages: Every waiting submission's ciphertexts, concatenated (in any order).
        n_users: How many submissions wait.
        permute: One uniformly random permutation of fixed-length ciphertexts (the
            shuffler passes :func:`~shuffledp.service.shuffler.permute_messages`, or
            for an augmented task a :class:`~shuffledp.service.augment.DummyAugmenter`,
            which also samples the messages and adds dummies: ``n_messages``
            counts what it returns).
    """
    payload = permute(messages)
    return OutboxBatch(
        batch_id=new_id(),
        payload=payload,
        n_users=n_users,
        n_messages=len(payload) // CIPHERTEXT_LENGTH,
    )


def distinct_keys(aggregation: Aggregation) -> list[bytes]:
    """The aggregation's replay keys, each once, in the order of their first occurrence."""
    return list(dict.fromkeys(aggregation.keys))


def aggregation_changes(
    aggregation: Aggregation, new_keys: set[bytes]
) -> tuple[RecordedAggregation, list[tuple[int, int]], dict[str, int]]:
    """What recording ``aggregation`` writes, in every backend.

    A good message is counted if its key is among ``new_keys`` (the keys this
    transaction added to the counted ones) and no earlier message of the
    batch had the same key; the others are copies.

    Returns:
        What was counted and dropped, the ``(bin, count)`` pairs of the nonzero
        bins, and the metric deltas.
    """
    keep = np.zeros(len(aggregation.keys), dtype=bool)
    seen: set[bytes] = set()
    for i, key in enumerate(aggregation.keys):
        if key in new_keys and key not in seen:
            keep[i] = True
            seen.add(key)
    indices = np.asarray(aggregation.indices, dtype=np.int64)[keep]
    counts = np.bincount(indices, minlength=aggregation.domain_size)
    counted = int(keep.sum())
    duplicates = len(aggregation.keys) - counted
    bins = [(int(j), int(counts[j])) for j in np.flatnonzero(counts)]
    deltas = {
        "batches_aggregated": 1,
        "messages_counted": counted,
        "messages_duplicate": duplicates,
        "messages_undecryptable": aggregation.undecryptable,
        "messages_undecodable": aggregation.undecodable,
    }
    return RecordedAggregation(counted, duplicates), bins, deltas


def content_digest(payload: bytes, length: int) -> str:
    """SHA-256 of a payload's fixed-length ciphertexts in sorted order (order-free)."""
    rows = sorted(payload[i : i + length] for i in range(0, len(payload), length))
    digest = hashlib.sha256()
    for row in rows:
        digest.update(row)
    return digest.hexdigest()


def batch_ids_from_rows(rows: Iterable[Sequence[Any]]) -> list[str]:
    """The batch ids of rows whose first column is a batch id, in their order."""
    return [str(row[0]) for row in rows]


def outbox_batch_from_row(batch_id: str, row: Sequence[Any] | None) -> OutboxBatch:
    """The outbox batch of a ``(payload, n_users, n_messages)`` row.

    Raises:
        KeyError: If there is no row or its payload is gone (the batch was sent).
    """
    if row is None or row[0] is None:
        raise KeyError(batch_id)
    return OutboxBatch(batch_id, bytes(row[0]), int(row[1]), int(row[2]))


def received_batch_from_row(batch_id: str, row: Sequence[Any] | None) -> ReceivedBatch:
    """The stored batch of a ``(payload, n_users, n_messages, content_digest)`` row.

    Raises:
        KeyError: If there is no row.
    """
    if row is None:
        raise KeyError(batch_id)
    return ReceivedBatch(batch_id, bytes(row[0]), int(row[1]), int(row[2]), str(row[3]))


def shuffler_stats(stored: Any, waiting: Any, cut: Any, sent: Any) -> dict[str, int]:
    """The shuffler store's stats from its submission, waiting, batch and sent counts."""
    return {
        "submissions_stored": int(stored),
        "users_waiting": int(waiting),
        "batches_stored": int(cut),
        "batches_acknowledged": int(sent),
        "batches_unsent": int(cut) - int(sent),
    }


def totals_from_rows(
    domain_size: int,
    bin_counts: Iterable[Sequence[Any]],
    aggregated: Sequence[Any],
    pending: Any,
) -> AggregateTotals:
    """The analyzer's totals from what its store read.

    Args:
        domain_size: Bins of the task.
        bin_counts: ``(bin, count)`` rows summed over the aggregated batches.
        aggregated: The aggregated batches' ``(count, users, messages counted,
            smallest users or None)``.
        pending: How many batches are not aggregated yet.
    """
    counts = np.zeros(domain_size, dtype=np.int64)
    for j, c in bin_counts:
        counts[int(j)] = int(c)
    n_batches, users, messages, smallest = aggregated
    return AggregateTotals(
        counts=counts,
        n_users=int(users),
        n_messages=int(messages),
        n_batches=int(n_batches),
        smallest_batch_users=None if smallest is None else int(smallest),
        pending_batches=int(pending),
    )


def analyzer_metrics(
    metric_rows: Iterable[Sequence[Any]], batches: Sequence[Any]
) -> dict[str, int]:
    """The analyzer store's metrics from its counters and its batches.

    Args:
        metric_rows: ``(name, value)`` rows of the ``metrics`` table.
        batches: ``(batches stored, users stored, batches aggregated, users aggregated)``.
    """
    out = {str(k): int(v) for k, v in metric_rows}
    stored, users, aggregated, users_aggregated = batches
    out.update(
        batches_stored=int(stored),
        users_stored=int(users),
        batches_pending=int(stored) - int(aggregated),
        users_aggregated=int(users_aggregated),
    )
    return out
