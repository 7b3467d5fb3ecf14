"""The shuffler's and the analyzer's stores, written once over a SQL dialect.

:class:`SQLShufflerStore` and :class:`SQLAnalyzerStore` implement
:class:`~shuffledp.service.store_protocols.ShufflerStore` and
:class:`~shuffledp.service.store_protocols.AnalyzerStore` in SQL that SQLite
and PostgreSQL both run; how a transaction runs and the few statements that
differ come from a :class:`~shuffledp.service.sql_dialect.Dialect`, and where
the shuffler keeps the submissions that wait for a batch from a
:class:`~shuffledp.service.sql_dialect.WaitingPool`. The backends' modules
open them: :mod:`shuffledp.service.sqlite_store` (a file; its writer thread
group-commits) and :mod:`shuffledp.service.postgres_store` (a database; a pool
of connections).

Every operation is one transaction, so what a write reads and what it writes
go together: a submit reads the ``unbatched`` counter (locked in PostgreSQL,
behind SQLite's writer), stores the new submissions, adds them to the counter
and, when enough wait, cuts the batch, all before COMMIT.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Generic

from shuffledp.service._testhooks import crash_point
from shuffledp.service.sql_dialect import C, Dialect, WaitingPool
from shuffledp.service.store_common import (
    aggregation_changes,
    analyzer_metrics,
    batch_ids_from_rows,
    distinct_keys,
    new_outbox_batch,
    outbox_batch_from_row,
    received_batch_from_row,
    replay_keys,
    shuffler_stats,
    totals_from_rows,
)
from shuffledp.service.store_protocols import (
    AggregateTotals,
    Aggregation,
    BatchConflictError,
    NewSubmission,
    OutboxBatch,
    ReceivedBatch,
    RecordedAggregation,
    StoreError,
    SubmitOutcome,
)

__all__ = ["SQLAnalyzerStore", "SQLShufflerStore"]

_log = logging.getLogger("shuffledp.service")

_WAITING = "SELECT value FROM counters WHERE name = 'unbatched'"


class SQLShufflerStore(Generic[C]):
    """The shuffler's store: implements :class:`~shuffledp.service.store.ShufflerStore`.

    Args:
        dialect: How the database runs transactions and the statements that differ.
        pool: Where the submissions that wait for a batch are kept.

    Raises:
        StoreError: If the pool cannot open the store (the store is closed then).
    """

    def __init__(self, dialect: Dialect[C], pool: WaitingPool[C]) -> None:
        self.dialect = dialect
        self.pool = pool
        try:
            pool.open()
        except BaseException:
            self.close()
            raise

    def _waiting(self, tx: C, *, lock: bool = False) -> int:
        """The ``unbatched`` counter (``lock``: its row locked until COMMIT)."""
        (value,) = tx.execute(_WAITING + (self.dialect.for_update if lock else "")).fetchone()
        return int(value)

    def submit(
        self,
        submissions: Sequence[NewSubmission],
        *,
        min_batch_users: int,
        permute: Callable[[bytes], bytes],
    ) -> SubmitOutcome:
        """See :meth:`ShufflerStore.submit`."""
        return self.dialect.write(self.submit_job(submissions, min_batch_users, permute))

    def submit_job(
        self,
        submissions: Sequence[NewSubmission],
        min_batch_users: int,
        permute: Callable[[bytes], bytes],
    ) -> Callable[[C], SubmitOutcome]:
        """What :meth:`submit` runs in its write transaction (a store may queue it itself).

        The counter's row is locked first, so submits and cuts are serialised
        (in PostgreSQL across processes too): a submission is counted once and
        two transactions cannot both cut a batch.
        """
        subs = list(submissions)

        def run(tx: C) -> SubmitOutcome:
            self.pool.begin(tx)
            waiting = self._waiting(tx, lock=True)
            accepted = self.pool.add(tx, subs)
            if not accepted:
                return SubmitOutcome(0, len(subs), waiting)
            waiting += accepted
            tx.execute("UPDATE counters SET value = ? WHERE name = 'unbatched'", (waiting,))
            crash_point("ingest-before-commit")
            batch = self._cut(tx, waiting, min_batch_users, permute)
            self.pool.end(stored=True)
            return SubmitOutcome(accepted, len(subs) - accepted, 0 if batch else waiting, batch)

        return run

    def cut_batch(self, min_users: int, permute: Callable[[bytes], bytes]) -> OutboxBatch | None:
        """See :meth:`ShufflerStore.cut_batch`.

        Looks at the counter first in a read transaction: below ``min_users``
        nothing is written (an idle shuffler's polls neither lock, commit nor
        touch SQLite's WAL).
        """
        if self.dialect.read(self._waiting) < min_users:
            return None

        def run(tx: C) -> OutboxBatch | None:
            self.pool.begin(tx)
            batch = self._cut(tx, self._waiting(tx, lock=True), min_users, permute)
            self.pool.end(stored=False)
            return batch

        return self.dialect.write(run, checkpoint_first=True)

    def _cut(
        self, tx: C, waiting: int, min_users: int, permute: Callable[[bytes], bytes]
    ) -> OutboxBatch | None:
        """Batch every waiting submission if at least ``min_users`` wait.

        Runs inside the caller's transaction, which holds the counter's lock
        (``waiting`` is its value): the permuted messages go to the outbox, the
        pool records the submissions as batched and erases their ciphertexts.
        """
        if waiting < min_users:
            return None

        def outbox(messages: bytes, n_users: int) -> OutboxBatch:
            if n_users != waiting:  # pragma: no cover - the counter is transactional
                raise StoreError(f"unbatched counter says {waiting}, found {n_users} waiting")
            batch = new_outbox_batch(messages, n_users, permute)
            tx.execute(
                "INSERT INTO batches(batch_id, payload, n_users, n_messages) VALUES (?, ?, ?, ?)",
                (batch.batch_id, batch.payload, batch.n_users, batch.n_messages),
            )
            return batch

        batch = self.pool.cut(tx, outbox)
        tx.execute("UPDATE counters SET value = 0 WHERE name = 'unbatched'")
        crash_point("cut-before-commit")
        return batch

    def unsent_batches(self) -> list[str]:
        """See :meth:`ShufflerStore.unsent_batches`."""
        sql = f"SELECT batch_id FROM batches WHERE NOT sent ORDER BY {self.dialect.arrival}"
        return self.dialect.read(lambda tx: batch_ids_from_rows(tx.execute(sql)))

    def load_outbox_batch(self, batch_id: str) -> OutboxBatch:
        """See :meth:`ShufflerStore.load_outbox_batch`."""
        row = self.dialect.read(
            lambda tx: tx.execute(
                "SELECT payload, n_users, n_messages FROM batches WHERE batch_id = ?", (batch_id,)
            ).fetchone()
        )
        return outbox_batch_from_row(batch_id, row)

    def mark_sent(self, batch_id: str) -> None:
        """See :meth:`ShufflerStore.mark_sent`."""
        # Checkpointed, so that SQLite zeroes the payload's pages in the database file
        # itself, not only in the WAL.
        self.dialect.write(
            lambda tx: tx.execute(
                "UPDATE batches SET sent = true, payload = NULL WHERE batch_id = ?", (batch_id,)
            ),
            checkpoint_first=True,
        )

    def stats(self) -> dict[str, int]:
        """See :meth:`ShufflerStore.stats`."""

        def run(tx: C) -> dict[str, int]:
            rows, waiting, cut, sent = tx.execute(
                f"SELECT (SELECT COUNT(*) FROM submissions), ({_WAITING}), "
                "COUNT(*), COUNT(*) FILTER (WHERE sent) FROM batches"
            ).fetchone()
            stored = int(rows) + (0 if self.pool.waiting_in_submissions else int(waiting))
            return shuffler_stats(stored, waiting, cut, sent)

        return self.dialect.read(run)

    def ping(self) -> None:
        """See :meth:`ShufflerStore.ping`."""
        self.dialect.ping()

    def close(self) -> None:
        """See :meth:`ShufflerStore.close`."""
        self.dialect.close()
        self.pool.close()


class SQLAnalyzerStore(Generic[C]):
    """The analyzer's store: implements :class:`~shuffledp.service.store.AnalyzerStore`.

    Opening a store for writing keeps, once, the replay keys of the batches a
    version that kept none aggregated (:meth:`_backfill_counted_keys`).

    Args:
        dialect: How the database runs transactions and the statements that differ.
        read_only: The database was opened for reading (publishing) only.

    Raises:
        StoreError: If the keys cannot be backfilled (the store is closed then).
    """

    def __init__(self, dialect: Dialect[C], *, read_only: bool = False) -> None:
        self.dialect = dialect
        if not read_only:
            try:
                dialect.upgrade_once(dialect.counted_keys_meta, self._backfill_counted_keys)
            except BaseException:
                dialect.close()
                raise

    def add_batch(self, batch: ReceivedBatch) -> bool:
        """See :meth:`AnalyzerStore.add_batch`."""

        def run(tx: C) -> bool:
            # No conflict target: a known batch id and a known content both skip the row,
            # and (PostgreSQL) a concurrent insert of either is waited for, then skipped.
            inserted = tx.execute(
                "INSERT INTO batches(batch_id, n_users, n_messages, payload, content_digest) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    batch.batch_id,
                    batch.n_users,
                    batch.n_messages,
                    batch.payload,
                    batch.content_digest,
                ),
            ).rowcount
            if inserted == 1:
                return True
            if tx.execute("SELECT 1 FROM batches WHERE batch_id = ?", (batch.batch_id,)).fetchone():
                return False
            raise BatchConflictError(batch.batch_id)

        return self.dialect.write(run)

    def unaggregated_batches(self) -> list[str]:
        """See :meth:`AnalyzerStore.unaggregated_batches`."""
        sql = f"SELECT batch_id FROM batches WHERE NOT aggregated ORDER BY {self.dialect.arrival}"
        return self.dialect.read(lambda tx: batch_ids_from_rows(tx.execute(sql)))

    def batch_ids(self) -> list[str]:
        """See :meth:`AnalyzerStore.batch_ids`."""
        sql = f"SELECT batch_id FROM batches ORDER BY {self.dialect.arrival}"
        return self.dialect.read(lambda tx: batch_ids_from_rows(tx.execute(sql)))

    def load_batch(self, batch_id: str) -> ReceivedBatch:
        """See :meth:`AnalyzerStore.load_batch`."""
        row = self.dialect.read(
            lambda tx: tx.execute(
                "SELECT payload, n_users, n_messages, content_digest FROM batches "
                "WHERE batch_id = ?",
                (batch_id,),
            ).fetchone()
        )
        return received_batch_from_row(batch_id, row)

    def record_aggregation(self, aggregation: Aggregation) -> RecordedAggregation | None:
        """See :meth:`AnalyzerStore.record_aggregation`."""
        keys = distinct_keys(aggregation)

        def run(tx: C) -> RecordedAggregation | None:
            if not tx.execute(
                "UPDATE batches SET aggregated = true WHERE batch_id = ? AND NOT aggregated",
                (aggregation.batch_id,),
            ).rowcount:
                return None
            new = self.dialect.insert_new_keys(tx, "counted_messages", keys)
            recorded, bins, deltas = aggregation_changes(aggregation, new)
            tx.execute(
                "UPDATE batches SET n_counted = ? WHERE batch_id = ?",
                (recorded.counted, aggregation.batch_id),
            )
            self.dialect.insert_many(
                tx,
                "batch_counts",
                (("batch_id", "text"), ("bin", "integer"), ("count", "bigint")),
                [(aggregation.batch_id, j, c) for j, c in bins],
            )
            self._add_metrics(tx, deltas)
            crash_point("aggregate-before-commit")
            return recorded

        return self.dialect.write(run)

    def add_metrics(self, deltas: Mapping[str, int]) -> None:
        """See :meth:`AnalyzerStore.add_metrics`."""
        self.dialect.write(lambda tx: self._add_metrics(tx, deltas))

    def _add_metrics(self, tx: C, deltas: Mapping[str, int]) -> None:
        # Sorted names: concurrent upserts lock the rows in one order (no deadlock).
        self.dialect.insert_many(
            tx,
            "metrics",
            (("name", "text"), ("value", "bigint")),
            sorted((str(name), int(value)) for name, value in deltas.items() if value),
            conflict="ON CONFLICT (name) DO UPDATE SET value = metrics.value + excluded.value",
        )

    def totals(self, domain_size: int) -> AggregateTotals:
        """See :meth:`AnalyzerStore.totals`."""

        def run(tx: C) -> AggregateTotals:
            bins = tx.execute(
                "SELECT c.bin, SUM(c.count) FROM batch_counts c JOIN batches b "
                "ON b.batch_id = c.batch_id WHERE b.aggregated GROUP BY c.bin"
            ).fetchall()
            *aggregated, pending = tx.execute(
                "SELECT COUNT(*) FILTER (WHERE aggregated), "
                "COALESCE(SUM(n_users) FILTER (WHERE aggregated), 0), "
                "COALESCE(SUM(n_counted) FILTER (WHERE aggregated), 0), "
                "MIN(n_users) FILTER (WHERE aggregated), "
                "COUNT(*) FILTER (WHERE NOT aggregated) FROM batches"
            ).fetchone()
            return totals_from_rows(domain_size, bins, aggregated, pending)

        return self.dialect.read(run)

    def metrics(self) -> dict[str, int]:
        """See :meth:`AnalyzerStore.metrics`."""

        def run(tx: C) -> dict[str, int]:
            metric_rows = tx.execute("SELECT name, value FROM metrics").fetchall()
            batches = tx.execute(
                "SELECT COUNT(*), COALESCE(SUM(n_users), 0), COUNT(*) FILTER (WHERE aggregated), "
                "COALESCE(SUM(n_users) FILTER (WHERE aggregated), 0) FROM batches"
            ).fetchone()
            return analyzer_metrics(metric_rows, batches)

        return self.dialect.read(run)

    def ping(self) -> None:
        """See :meth:`AnalyzerStore.ping`."""
        self.dialect.ping()

    def close(self) -> None:
        """See :meth:`AnalyzerStore.close`."""
        self.dialect.close()

    def _backfill_counted_keys(self, tx: C) -> None:
        """Keep the replay keys of batches aggregated by a version that kept none (once).

        Such a store (shuffledp 0.2) counted every message of its aggregated
        batches; their keys are added now, all of them (the store cannot tell
        which did not decrypt: a key of one that did not could only make a
        later message with the same key a copy, and only an attacker who saw
        that message first could have sent it), so that copies arriving from
        now on are dropped. Copies already counted stay counted: a warning says
        how many keys repeat.
        """
        repeated = 0
        for (payload,) in tx.execute("SELECT payload FROM batches WHERE aggregated").fetchall():
            keys = replay_keys(bytes(payload))
            new = self.dialect.insert_new_keys(tx, "counted_messages", list(dict.fromkeys(keys)))
            repeated += len(keys) - len(new)
        if repeated:
            _log.warning(
                "%d messages of batches aggregated before replay keys were kept repeat a key "
                "counted before: they were counted more than once",
                repeated,
            )
