"""SQLite stores for the shuffler and the analyzer (stdlib :mod:`sqlite3`).

Durability and throughput. The database runs in WAL mode with
``synchronous=FULL``: a transaction is on disk when COMMIT returns. All writes
go through ONE writer thread, which takes every write queued while it was busy,
runs them in one transaction (each inside its own SAVEPOINT, so one failing
write does not undo the others), commits once, and only then wakes each
caller: a group commit, one fsync for many requests. A caller on an event loop
awaits the write's future (:meth:`SQLiteDatabase.write_future`) instead of
blocking a thread. Readers use their own short-lived connections and see the
last committed state.

What the shuffler's files hold. Until a batch is cut, the files hold every
waiting submission (id and ciphertexts) and, with tokens, its client id, in
arrival order: the WAL appends each commit's pages after the previous ones,
and a commit holds a request's submissions together with their client ids,
so whoever reads the files can order the submissions and link each client id
to its submission (:mod:`shuffledp.service.disk_audit` does it;
``tests/service/test_service_disk.py`` checks it). The cut erases that:
``secure_delete`` is on, so what it deletes is overwritten with zeros, not
left in free pages; it deletes the waiting submissions' rows and writes their
ids back in id order without ciphertexts, writes the table of used client ids
again in id order (inside a page, rows otherwise keep the order in which they
were inserted), and the WAL is checkpointed and truncated after the commit,
and again once the analyzer has acknowledged the batch and its payload is
erased. Savepoint journals stay in memory (``temp_store = MEMORY``), never in
temporary files. Files are created with mode 0600 (and ``-wal``/``-shm`` with
them); an existing store's files are set to 0600 when it is opened.

Every database records its role and task id in a ``meta`` table and refuses to
be opened for another role or task.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from shuffledp.service._testhooks import crash_point
from shuffledp.service.store_common import (
    aggregation_changes,
    analyzer_metrics,
    batch_ids_from_rows,
    check_meta,
    content_digest,
    expected_meta,
    new_outbox_batch,
    outbox_batch_from_row,
    received_batch_from_row,
    shuffler_stats,
    totals_from_rows,
)
from shuffledp.service.store_protocols import (
    AggregateTotals,
    Aggregation,
    BatchConflictError,
    ClientAlreadySubmittedError,
    NewSubmission,
    OutboxBatch,
    ReceivedBatch,
    StoreError,
    SubmitOutcome,
)

__all__ = [
    "SQLiteAnalyzerStore",
    "SQLiteDatabase",
    "SQLiteShufflerStore",
    "aggregation_changes",
    "check_meta",
    "content_digest",
    "expected_meta",
    "new_outbox_batch",
]

T = TypeVar("T")
_log = logging.getLogger("shuffledp.service")

#: Most queued writes committed together.
MAX_GROUP = 1024
#: The writer's page cache (KiB). Submission ids are random keys, so every insert
#: lands on a random page of a table that only grows: a cache that holds the
#: table saves a read per insert.
WRITER_CACHE_KIB = 64 * 1024
_CHUNK = 500  # SQL variables per statement (an IN (...) list, a multi-row INSERT); < 999

_META = "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"

#: The shuffler's tables. WITHOUT ROWID: rows are ordered by their random ids,
#: so the file does not keep the order in which submissions arrived.
SHUFFLER_SCHEMA = (
    _META
    + """
CREATE TABLE IF NOT EXISTS submissions(
    submission_id TEXT PRIMARY KEY,
    messages BLOB,
    batch_id TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS submissions_unbatched ON submissions(submission_id)
    WHERE batch_id IS NULL;
CREATE TABLE IF NOT EXISTS used_clients(client_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batches(
    batch_id TEXT PRIMARY KEY,
    payload BLOB,
    n_users INTEGER NOT NULL,
    n_messages INTEGER NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT OR IGNORE INTO counters(name, value) VALUES ('unbatched', 0);
"""
)

#: The analyzer's tables.
ANALYZER_SCHEMA = (
    _META
    + """
CREATE TABLE IF NOT EXISTS batches(
    batch_id TEXT PRIMARY KEY,
    n_users INTEGER NOT NULL,
    n_messages INTEGER NOT NULL,
    payload BLOB NOT NULL,
    content_digest TEXT NOT NULL UNIQUE,
    aggregated INTEGER NOT NULL DEFAULT 0,
    n_counted INTEGER
);
CREATE TABLE IF NOT EXISTS batch_counts(
    batch_id TEXT NOT NULL,
    bin INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (batch_id, bin)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS metrics(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""
)


#: Mode of a store's files: the owner's only (SQLite creates ``-wal`` and ``-shm``
#: with the database file's mode).
STORE_FILE_MODE = 0o600


def _create_private(path: Path) -> None:
    """Create a missing database file with mode 0600 (SQLite would make it 0644).

    Raises:
        StoreError: If it cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, STORE_FILE_MODE)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreError(f"cannot create store {str(path)!r}: {exc.strerror}") from None
    try:
        os.fchmod(fd, STORE_FILE_MODE)  # exactly 0600, whatever the umask
    finally:
        os.close(fd)


def _restrict_mode(path: Path) -> None:
    """Set mode 0600 on a store's file and its ``-wal`` and ``-shm`` (once it is known ours).

    SQLite creates ``-wal`` and ``-shm`` with the database file's mode, so a
    store created 0600 keeps them 0600; this also narrows a store created
    0644 by an earlier version.

    Raises:
        StoreError: If a mode cannot be set.
    """
    for suffix in ("", "-wal", "-shm"):
        companion = path.with_name(path.name + suffix)
        try:
            if companion.exists() and companion.stat().st_mode & 0o777 != STORE_FILE_MODE:
                companion.chmod(STORE_FILE_MODE)
        except OSError as exc:
            raise StoreError(f"cannot set the mode of {str(companion)!r}: {exc.strerror}") from None


@dataclass
class _Job(Generic[T]):
    run: Callable[[sqlite3.Connection], T]
    future: concurrent.futures.Future[T]
    checkpoint: bool = False


class SQLiteDatabase:
    """One SQLite file: a group-committing writer thread and per-call readers.

    Args:
        path: The database file (created with its tables if missing).
        schema: ``CREATE … IF NOT EXISTS`` statements.
        role: ``"shuffler"`` or ``"analyzer"``, recorded and checked.
        task_id: The task, recorded and checked.
        read_only: Open an existing file for reading only (no writer thread).

    Raises:
        StoreError: If the file belongs to another role or task, or (read-only) is missing.
    """

    def __init__(
        self, path: Path, schema: str, role: str, task_id: str, *, read_only: bool = False
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            if not self.path.is_file():
                raise StoreError(f"store {str(self.path)!r} does not exist")
        else:
            if not (self.path.parent if str(self.path.parent) else Path(".")).is_dir():
                raise StoreError(f"directory of store {str(self.path)!r} does not exist")
            _create_private(self.path)
            self._initialise(schema, role, task_id)
        self._check_meta(role, task_id)
        if not read_only:
            _restrict_mode(self.path)
        self._queue: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._checkpoint_requested = False
        self._writer: threading.Thread | None = None
        if not read_only:
            self._writer = threading.Thread(target=self._write_loop, name="sqlite-writer")
            self._writer.daemon = True
            self._writer.start()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    def _initialise(self, schema: str, role: str, task_id: str) -> None:
        try:
            conn = self._connect()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {str(self.path)!r}: {exc}") from None
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"store {str(self.path)!r} cannot use WAL mode (got {mode})")
            conn.execute("PRAGMA synchronous = FULL")
            # Whose file is it? Checked before any table is created, so opening
            # another role's or task's store leaves it exactly as it was.
            conn.executescript(_META)
            found = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            if found:
                check_meta(found, str(self.path), role, task_id)
            conn.executescript(schema)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {str(self.path)!r} is not usable: {exc}") from None
        finally:
            conn.close()

    def _check_meta(self, role: str, task_id: str) -> None:
        expected = expected_meta(role, task_id)
        try:
            conn = self._connect()
            try:
                rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                if not rows and not self.read_only:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.executemany(
                        "INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", expected.items()
                    )
                    conn.execute("COMMIT")
                    rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"store {str(self.path)!r} is not usable: {exc}") from None
        check_meta(rows, str(self.path), role, task_id)

    def write(self, run: Callable[[sqlite3.Connection], T], *, checkpoint: bool = False) -> T:
        """Run ``run(conn)`` in the writer's next transaction; return once it is committed.

        ``run`` executes inside a SAVEPOINT: if it raises, its own changes are
        undone, the exception reaches the caller and the group's other writes
        still commit. With ``checkpoint`` the WAL is checkpointed and truncated
        after the commit.

        Raises:
            StoreError: If the store is closed or the commit failed.
        """
        return self.write_future(run, checkpoint=checkpoint).result()

    def write_future(
        self, run: Callable[[sqlite3.Connection], T], *, checkpoint: bool = False
    ) -> concurrent.futures.Future[T]:
        """Queue ``run(conn)`` as :meth:`write` does, without waiting for the commit.

        The future completes once the transaction is committed: with what
        ``run`` returned, or with the exception :meth:`write` would raise. (An
        event loop awaits it with :func:`asyncio.wrap_future` instead of
        blocking a thread: one thread hand-off per write instead of two.)

        Raises:
            StoreError: If the store is read-only or closed.
        """
        if self._writer is None:
            raise StoreError("store is read-only")
        if not self._writer.is_alive():
            raise StoreError("store is closed")
        job: _Job[T] = _Job(run, concurrent.futures.Future(), checkpoint)
        self._queue.put(job)
        return job.future

    def request_checkpoint(self) -> None:
        """From inside a write: checkpoint and truncate the WAL after this group commits."""
        self._checkpoint_requested = True

    def read(self, run: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``run(conn)`` in one read transaction (a consistent snapshot) on a new connection.

        Raises:
            StoreError: If the database cannot be read (locked, gone, corrupt).
        """
        try:
            conn = self._connect()
            try:
                conn.execute("PRAGMA query_only = 1")
                conn.execute("BEGIN")
                try:
                    return run(conn)
                finally:
                    conn.execute("COMMIT")
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the store {str(self.path)!r}: {exc}") from exc

    def ping(self) -> None:
        """Check, cheaply, that the store can work: its writer runs and the file reads.

        Raises:
            StoreError: If the writer has stopped or the ``meta`` table cannot be read.
        """
        if self._writer is not None and not self._writer.is_alive():
            raise StoreError(f"store {str(self.path)!r}: its writer thread has stopped")
        self.read(lambda conn: conn.execute("SELECT COUNT(*) FROM meta").fetchone())

    def close(self) -> None:
        """Commit what is queued, stop the writer and release the file."""
        if self._writer is not None and self._writer.is_alive():
            self._queue.put(None)
            self._writer.join()

    def _write_loop(self) -> None:
        conn = self._connect()
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")
        # Each write runs in a SAVEPOINT, whose journal holds the original of every
        # page it changes. In memory, not in a temporary file: no page images (with
        # ciphertexts) on disk outside the database and its WAL, and no file writes
        # (they were most of the bytes written per submission). The price: while a
        # batch is cut, up to one page (4 KiB) per user of the batch in memory.
        conn.execute("PRAGMA temp_store = MEMORY")
        stopping = False
        try:
            while not stopping:
                first = self._queue.get()
                if first is None:
                    break
                jobs: list[_Job[Any]] = [first]
                while len(jobs) < MAX_GROUP:
                    try:
                        job = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if job is None:
                        stopping = True
                        break
                    jobs.append(job)
                self._commit_group(conn, jobs)
        finally:
            conn.close()
            # Anything still queued (a write racing with close) fails rather than hangs.
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is not None and job.future.set_running_or_notify_cancel():
                    job.future.set_exception(StoreError("store is closed"))

    def _commit_group(self, conn: sqlite3.Connection, jobs: list[_Job[Any]]) -> None:
        # A job whose caller cancelled its future before the write began is
        # dropped; the others can no longer be cancelled.
        jobs = [job for job in jobs if job.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        outcomes: list[tuple[_Job[Any], Any, BaseException | None]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            for job in jobs:
                conn.execute("SAVEPOINT job")
                try:
                    result = job.run(conn)
                except BaseException as exc:  # handed to the caller
                    conn.execute("ROLLBACK TO job")
                    conn.execute("RELEASE job")
                    error: BaseException = exc
                    if isinstance(exc, sqlite3.Error):
                        error = StoreError(f"store write failed: {exc}")
                    outcomes.append((job, None, error))
                else:
                    conn.execute("RELEASE job")
                    outcomes.append((job, result, None))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _log.error("store commit failed: %s", exc)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            failed = StoreError(f"store write failed: {exc}")
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(failed)
            return
        for job, result, failure in outcomes:
            if failure is None:
                job.future.set_result(result)
            else:
                job.future.set_exception(failure)
        if self._checkpoint_requested or any(job.checkpoint for job in jobs):
            self._checkpoint_requested = False
            try:
                (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error as exc:  # pragma: no cover - best effort
                _log.warning("WAL checkpoint failed: %s", exc)
                busy = 1
            if busy:  # pragma: no cover - a reader outlived the busy timeout
                _log.warning("WAL checkpoint incomplete; retried after the next write")
                self._checkpoint_requested = True


def _placeholders(count: int) -> str:
    return ",".join("?" * count)


def _existing(conn: sqlite3.Connection, table: str, column: str, keys: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        sql = f"SELECT {column} FROM {table} WHERE {column} IN ({_placeholders(len(chunk))})"
        found.update(row[0] for row in conn.execute(sql, chunk))
    return found


def _waiting(conn: sqlite3.Connection) -> int:
    (value,) = conn.execute("SELECT value FROM counters WHERE name = 'unbatched'").fetchone()
    return int(value)


def _insert_new(conn: sqlite3.Connection, params: Sequence[str | bytes]) -> int:
    """Insert submissions given as flat ``(id, messages, id, messages, …)``; skip known ids.

    Returns how many were new. One multi-row INSERT per :data:`_CHUNK` variables
    rather than ``executemany``: one SQLite call (and one release of the GIL)
    for many rows, so the writer does not wait for the GIL row after row while
    the event loop is busy.
    """
    accepted = 0
    for start in range(0, len(params), _CHUNK):
        chunk = params[start : start + _CHUNK]
        accepted += conn.execute(
            "INSERT INTO submissions(submission_id, messages, batch_id) VALUES "
            + ",".join(["(?, ?, NULL)"] * (len(chunk) // 2))
            + " ON CONFLICT(submission_id) DO NOTHING",
            chunk,
        ).rowcount
    return accepted


def _insert_with_clients(conn: sqlite3.Connection, subs: Sequence[NewSubmission]) -> int:
    """Insert the submissions not stored yet and their client ids; return how many.

    Raises:
        ClientAlreadySubmittedError: If a new submission's client id was used
            before or twice in ``subs`` (nothing is inserted).
    """
    known = _existing(conn, "submissions", "submission_id", [s.submission_id for s in subs])
    new = [s for s in subs if s.submission_id not in known]
    clients = [s.client_id for s in new if s.client_id is not None]
    if clients:
        used = _existing(conn, "used_clients", "client_id", clients)
        if used or len(set(clients)) != len(clients):
            raise ClientAlreadySubmittedError(sorted(used) or clients)
        conn.executemany("INSERT INTO used_clients(client_id) VALUES (?)", [(c,) for c in clients])
    conn.executemany(
        "INSERT INTO submissions(submission_id, messages, batch_id) VALUES (?, ?, NULL)",
        [(s.submission_id, s.messages) for s in new],
    )
    return len(new)


def _cut(
    conn: sqlite3.Connection,
    min_users: int,
    permute: Callable[[bytes], bytes],
    waiting: int | None = None,
) -> OutboxBatch | None:
    """Batch every waiting submission if at least ``min_users`` wait.

    Runs inside the caller's transaction: the permuted messages go to the
    outbox, and the waiting submissions' rows are deleted and written again in
    the order of their (random) ids, without messages; with ``secure_delete``
    the old rows are overwritten. The table of used client ids is written
    again in the order of the ids too (:func:`_rewrite_used_clients`). So once
    the WAL is checkpointed and truncated after the commit, the order in which
    rows were written inside a page no longer follows arrival order. ``waiting``
    is the unbatched counter when the caller has just read it in this transaction.
    """
    if (_waiting(conn) if waiting is None else waiting) < min_users:
        return None
    rows = conn.execute(
        "SELECT submission_id, messages FROM submissions WHERE batch_id IS NULL"
    ).fetchall()
    if len(rows) < min_users:  # pragma: no cover - the counter is transactional
        raise StoreError(f"unbatched counter says {_waiting(conn)}, found {len(rows)} rows")
    batch = new_outbox_batch([row[1] for row in rows], permute)
    conn.execute(
        "INSERT INTO batches(batch_id, payload, n_users, n_messages, sent) VALUES (?, ?, ?, ?, 0)",
        (batch.batch_id, batch.payload, batch.n_users, batch.n_messages),
    )
    conn.execute("DELETE FROM submissions WHERE batch_id IS NULL")
    ids = sorted(str(row[0]) for row in rows)
    per_statement = _CHUNK // 2
    for start in range(0, len(ids), per_statement):
        chunk = ids[start : start + per_statement]
        conn.execute(
            "INSERT INTO submissions(submission_id, messages, batch_id) VALUES "
            + ",".join(["(?, NULL, ?)"] * len(chunk)),
            [value for sid in chunk for value in (sid, batch.batch_id)],
        )
    _rewrite_used_clients(conn)
    conn.execute("UPDATE counters SET value = 0 WHERE name = 'unbatched'")
    crash_point("cut-before-commit")
    return batch


def _rewrite_used_clients(conn: sqlite3.Connection) -> None:
    """Write the used client ids again, in the order of the ids (inside the caller's transaction).

    Rows inserted one request after another sit in their pages in arrival
    order; after this, in id order. The cost grows with the number of used ids.
    """
    if conn.execute("SELECT 1 FROM used_clients LIMIT 1").fetchone() is None:
        return
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS cut_clients(client_id TEXT) ")
    conn.execute("DELETE FROM temp.cut_clients")
    conn.execute("INSERT INTO temp.cut_clients SELECT client_id FROM used_clients")
    conn.execute("DELETE FROM used_clients")
    conn.execute(
        "INSERT INTO used_clients(client_id) SELECT client_id FROM temp.cut_clients "
        "ORDER BY client_id"
    )
    conn.execute("DELETE FROM temp.cut_clients")


class SQLiteShufflerStore:
    """The shuffler's store in one SQLite file.

    Implements :class:`~shuffledp.service.store.ShufflerStore`.

    Args:
        path: The database file.
        task_id: The task it serves.
    """

    def __init__(self, path: Path, task_id: str) -> None:
        self.db = SQLiteDatabase(path, SHUFFLER_SCHEMA, "shuffler", task_id)

    def submit(
        self,
        submissions: Sequence[NewSubmission],
        *,
        min_batch_users: int,
        permute: Callable[[bytes], bytes],
    ) -> SubmitOutcome:
        """See :meth:`ShufflerStore.submit`."""
        return self.submit_future(
            submissions, min_batch_users=min_batch_users, permute=permute
        ).result()

    def submit_future(
        self,
        submissions: Sequence[NewSubmission],
        *,
        min_batch_users: int,
        permute: Callable[[bytes], bytes],
    ) -> concurrent.futures.Future[SubmitOutcome]:
        """:meth:`submit` without waiting: the future completes once the write is durable.

        Not part of :class:`~shuffledp.service.store.ShufflerStore`: the
        shuffler's app uses it when a store offers it, so that a request waits
        on the group commit without holding a worker thread.

        Raises:
            StoreError: If the store is closed (later failures go to the future).
        """
        subs = list(submissions)
        with_clients = any(s.client_id is not None for s in subs)
        params = [] if with_clients else [v for s in subs for v in (s.submission_id, s.messages)]

        def run(conn: sqlite3.Connection) -> SubmitOutcome:
            if with_clients:
                accepted = _insert_with_clients(conn, subs)
            else:  # known ids are no-ops; the insert counts the new ones
                accepted = _insert_new(conn, params)
            ((waiting,),) = conn.execute(
                "UPDATE counters SET value = value + ? WHERE name = 'unbatched' RETURNING value",
                (accepted,),
            ).fetchall()
            if accepted:
                crash_point("ingest-before-commit")
            batch = _cut(conn, min_batch_users, permute, int(waiting)) if accepted else None
            if batch is not None:
                self.db.request_checkpoint()
                waiting = 0
            return SubmitOutcome(accepted, len(subs) - accepted, int(waiting), batch)

        return self.db.write_future(run)

    def cut_batch(self, min_users: int, permute: Callable[[bytes], bytes]) -> OutboxBatch | None:
        """See :meth:`ShufflerStore.cut_batch`."""
        return self.db.write(lambda conn: _cut(conn, min_users, permute), checkpoint=True)

    def unsent_batches(self) -> list[str]:
        """See :meth:`ShufflerStore.unsent_batches`."""
        return self.db.read(
            lambda conn: batch_ids_from_rows(
                conn.execute("SELECT batch_id FROM batches WHERE sent = 0 ORDER BY rowid")
            )
        )

    def load_outbox_batch(self, batch_id: str) -> OutboxBatch:
        """See :meth:`ShufflerStore.load_outbox_batch`."""
        row = self.db.read(
            lambda conn: conn.execute(
                "SELECT payload, n_users, n_messages FROM batches WHERE batch_id = ?", (batch_id,)
            ).fetchone()
        )
        return outbox_batch_from_row(batch_id, row)

    def mark_sent(self, batch_id: str) -> None:
        """See :meth:`ShufflerStore.mark_sent`."""
        # Checkpointed, so that the payload's pages are zeroed in the database file
        # itself, not only in the WAL.
        self.db.write(
            lambda conn: conn.execute(
                "UPDATE batches SET sent = 1, payload = NULL WHERE batch_id = ?", (batch_id,)
            ),
            checkpoint=True,
        )

    def stats(self) -> dict[str, int]:
        """See :meth:`ShufflerStore.stats`."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            (stored,) = conn.execute("SELECT COUNT(*) FROM submissions").fetchone()
            (waiting,) = conn.execute(
                "SELECT value FROM counters WHERE name = 'unbatched'"
            ).fetchone()
            cut, sent = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(sent), 0) FROM batches"
            ).fetchone()
            return shuffler_stats(stored, waiting, cut, sent)

        return self.db.read(run)

    def ping(self) -> None:
        """See :meth:`ShufflerStore.ping`."""
        self.db.ping()

    def close(self) -> None:
        """See :meth:`ShufflerStore.close`."""
        self.db.close()


class SQLiteAnalyzerStore:
    """The analyzer's store in one SQLite file.

    Implements :class:`~shuffledp.service.store.AnalyzerStore`.

    Args:
        path: The database file.
        task_id: The task it serves.
        read_only: Open an existing store for reading (publishing) only.
    """

    def __init__(self, path: Path, task_id: str, *, read_only: bool = False) -> None:
        self.db = SQLiteDatabase(path, ANALYZER_SCHEMA, "analyzer", task_id, read_only=read_only)

    def add_batch(self, batch: ReceivedBatch) -> bool:
        """See :meth:`AnalyzerStore.add_batch`."""

        def run(conn: sqlite3.Connection) -> bool:
            if conn.execute(
                "SELECT 1 FROM batches WHERE batch_id = ?", (batch.batch_id,)
            ).fetchone():
                return False
            if conn.execute(
                "SELECT 1 FROM batches WHERE content_digest = ?", (batch.content_digest,)
            ).fetchone():
                raise BatchConflictError(batch.batch_id)
            conn.execute(
                "INSERT INTO batches(batch_id, n_users, n_messages, payload, content_digest, "
                "aggregated) VALUES (?, ?, ?, ?, ?, 0)",
                (
                    batch.batch_id,
                    batch.n_users,
                    batch.n_messages,
                    batch.payload,
                    batch.content_digest,
                ),
            )
            return True

        return self.db.write(run)

    def unaggregated_batches(self) -> list[str]:
        """See :meth:`AnalyzerStore.unaggregated_batches`."""
        return self.db.read(
            lambda conn: batch_ids_from_rows(
                conn.execute("SELECT batch_id FROM batches WHERE aggregated = 0 ORDER BY rowid")
            )
        )

    def batch_ids(self) -> list[str]:
        """See :meth:`AnalyzerStore.batch_ids`."""
        return self.db.read(
            lambda conn: batch_ids_from_rows(
                conn.execute("SELECT batch_id FROM batches ORDER BY rowid")
            )
        )

    def load_batch(self, batch_id: str) -> ReceivedBatch:
        """See :meth:`AnalyzerStore.load_batch`."""
        row = self.db.read(
            lambda conn: conn.execute(
                "SELECT payload, n_users, n_messages, content_digest FROM batches "
                "WHERE batch_id = ?",
                (batch_id,),
            ).fetchone()
        )
        return received_batch_from_row(batch_id, row)

    def record_aggregation(self, aggregation: Aggregation) -> bool:
        """See :meth:`AnalyzerStore.record_aggregation`."""
        counted, bins, deltas = aggregation_changes(aggregation)
        rows = [(aggregation.batch_id, j, c) for j, c in bins]

        def run(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "UPDATE batches SET aggregated = 1, n_counted = ? "
                "WHERE batch_id = ? AND aggregated = 0",
                (counted, aggregation.batch_id),
            )
            if cursor.rowcount == 0:
                return False
            conn.executemany(
                "INSERT INTO batch_counts(batch_id, bin, count) VALUES (?, ?, ?)", rows
            )
            _add_metrics(conn, deltas)
            crash_point("aggregate-before-commit")
            return True

        return self.db.write(run)

    def add_metrics(self, deltas: Mapping[str, int]) -> None:
        """See :meth:`AnalyzerStore.add_metrics`."""
        self.db.write(lambda conn: _add_metrics(conn, deltas))

    def totals(self, domain_size: int) -> AggregateTotals:
        """See :meth:`AnalyzerStore.totals`."""

        def run(conn: sqlite3.Connection) -> AggregateTotals:
            bins = conn.execute(
                "SELECT c.bin, SUM(c.count) FROM batch_counts c JOIN batches b "
                "ON b.batch_id = c.batch_id WHERE b.aggregated = 1 GROUP BY c.bin"
            ).fetchall()
            aggregated = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(n_users), 0), COALESCE(SUM(n_counted), 0), "
                "MIN(n_users) FROM batches WHERE aggregated = 1"
            ).fetchone()
            (pending,) = conn.execute(
                "SELECT COUNT(*) FROM batches WHERE aggregated = 0"
            ).fetchone()
            return totals_from_rows(domain_size, bins, aggregated, pending)

        return self.db.read(run)

    def metrics(self) -> dict[str, int]:
        """See :meth:`AnalyzerStore.metrics`."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            metric_rows = conn.execute("SELECT name, value FROM metrics").fetchall()
            batches = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(n_users), 0), COALESCE(SUM(aggregated), 0), "
                "COALESCE(SUM(n_users * aggregated), 0) FROM batches"
            ).fetchone()
            return analyzer_metrics(metric_rows, batches)

        return self.db.read(run)

    def ping(self) -> None:
        """See :meth:`AnalyzerStore.ping`."""
        self.db.ping()

    def close(self) -> None:
        """See :meth:`AnalyzerStore.close`."""
        self.db.close()


def _add_metrics(conn: sqlite3.Connection, deltas: Mapping[str, int]) -> None:
    conn.executemany(
        "INSERT INTO metrics(name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
        [(name, int(value)) for name, value in deltas.items() if value],
    )
