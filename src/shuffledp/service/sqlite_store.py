"""SQLite stores for the shuffler and the analyzer (stdlib :mod:`sqlite3`).

The stores are :class:`~shuffledp.service.sql_store.SQLShufflerStore` and
:class:`~shuffledp.service.sql_store.SQLAnalyzerStore` (written once for
SQLite and PostgreSQL) over :class:`~shuffledp.service.sql_dialect.SQLiteDialect`
and the layer this module keeps underneath, :class:`SQLiteDatabase`; the
shuffler's waiting submissions sit in random slots
(:class:`~shuffledp.service.sqlite_slots.SlotPool`).

Durability and throughput. The database runs in WAL mode with
``synchronous=FULL``: a transaction is on disk when COMMIT returns. All writes
go through ONE writer thread, which takes every write queued while it was busy,
runs them in one transaction (each inside its own SAVEPOINT, so one failing
write does not undo the others), commits once, and only then wakes each
caller: a group commit, one fsync for many requests. A caller on an event loop
awaits the write's future (:meth:`SQLiteDatabase.write_future`) instead of
blocking a thread. Readers use their own short-lived connections and see the
last committed state.

What the shuffler's files hold. Nothing a waiting submission leaves is
written in arrival order: its id, client id and ciphertexts take fixed-size
slots drawn at random and overwritten in place, found through lookups held in
the process's memory (:mod:`shuffledp.service.sqlite_slots` says why and how).
The WAL is checkpointed and truncated within :data:`CHECKPOINT_SECONDS` of a
commit that stores a submission (at once when no write waits), so it never
holds one commit's pages after another's: which slots filled when; and
after a cut, and again once the analyzer has acknowledged the batch and its
payload is erased, before the call returns.
``secure_delete`` is on, so what is deleted is overwritten with zeros, not
left in free pages. Savepoint journals stay in memory (``temp_store =
MEMORY``), never in temporary files. An idle shuffler writes nothing (the
dispatcher's poll reads the waiting count first). :mod:`shuffledp.service.disk_audit`
reads the files as an attacker would; ``tests/service/test_service_disk.py``
and ``benchmarks/service_disk_order.py`` measure them. Files are created with
mode 0600 (and ``-wal``/``-shm`` with them); an existing store's files are set
to 0600 when it is opened. One process per store (what waits is looked up in
the process's memory).

Every database records its role and task id in a ``meta`` table and refuses to
be opened for another role or task.
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from shuffledp.service.sql_dialect import SQLiteDialect
from shuffledp.service.sql_store import SQLAnalyzerStore, SQLShufflerStore
from shuffledp.service.sqlite_slots import SlotPool
from shuffledp.service.store_common import (
    aggregation_changes,
    check_meta,
    content_digest,
    expected_meta,
    new_outbox_batch,
)
from shuffledp.service.store_protocols import NewSubmission, StoreError, SubmitOutcome

__all__ = [
    "COUNTED_KEYS_META",
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
#: Under load, the longest a requested WAL checkpoint waits (seconds; at once when idle).
CHECKPOINT_SECONDS = 0.05
#: The writer's page cache (KiB). Submission ids are random keys, so every insert
#: lands on a random page of a table that only grows: a cache that holds the
#: table saves a read per insert.
WRITER_CACHE_KIB = 64 * 1024

_META = "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;"

#: The shuffler's tables. ``submissions`` keeps the id of every batched submission
#: (deduplication) with its batch (``messages`` is NULL: stores of earlier versions
#: kept waiting submissions there); what waits (ids, client ids, ciphertexts) sits
#: in fixed-size ``slots``, drawn at random among the free ones (the lookups of what
#: waits are in the process's memory only); ``used_clients`` the client ids of
#: batched submissions.
SHUFFLER_SCHEMA = (
    _META
    + """
CREATE TABLE IF NOT EXISTS submissions(
    submission_id TEXT PRIMARY KEY,
    messages BLOB,
    batch_id TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS used_clients(client_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS slots(slot INTEGER PRIMARY KEY, content BLOB NOT NULL);
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
CREATE TABLE IF NOT EXISTS counted_messages(enc BLOB PRIMARY KEY) WITHOUT ROWID;
"""
)

#: ``meta`` key recorded once every aggregated batch's replay keys are in
#: ``counted_messages`` (at creation, or once a store of an earlier version is backfilled).
COUNTED_KEYS_META = SQLiteDialect.counted_keys_meta


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
    #: Checkpoint before the caller hears of the commit (what it wrote over is gone
    #: from the database file by the time the call returns), not only soon after.
    checkpoint_first: bool = False


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
        #: Called on the writer thread when a transaction is rolled back (its commit
        #: failed): state kept in memory beside the file must be read again.
        self.after_rollback: Callable[[], None] | None = None
        self._checkpoint_due: float | None = None
        self._checkpoint_busy = False
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

    def write(
        self,
        run: Callable[[sqlite3.Connection], T],
        *,
        checkpoint: bool = False,
        checkpoint_first: bool = False,
    ) -> T:
        """Run ``run(conn)`` in the writer's next transaction; return once it is committed.

        ``run`` executes inside a SAVEPOINT: if it raises, its own changes are
        undone, the exception reaches the caller and the group's other writes
        still commit. With ``checkpoint`` the WAL is checkpointed and truncated
        soon after the commit; with ``checkpoint_first``, before this call returns.

        Raises:
            StoreError: If the store is closed or the commit failed.
        """
        future = self.write_future(run, checkpoint=checkpoint, checkpoint_first=checkpoint_first)
        return future.result()

    def write_future(
        self,
        run: Callable[[sqlite3.Connection], T],
        *,
        checkpoint: bool = False,
        checkpoint_first: bool = False,
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
        job: _Job[T] = _Job(
            run, concurrent.futures.Future(), checkpoint or checkpoint_first, checkpoint_first
        )
        self._queue.put(job)
        return job.future

    def request_checkpoint(self) -> None:
        """From inside a write: checkpoint and truncate the WAL soon after this group commits.

        At once if no write waits; under load within :data:`CHECKPOINT_SECONDS`
        (a checkpoint after every group would cost two more fsyncs per commit),
        so the WAL never holds more than that much of the commits' history.
        """
        due = time.monotonic() + CHECKPOINT_SECONDS
        if self._checkpoint_due is None or due < self._checkpoint_due:
            self._checkpoint_due = due

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
                due = self._checkpoint_due
                try:  # a requested checkpoint runs by its deadline, work or no work
                    first = self._queue.get(
                        timeout=None if due is None else max(0.0, due - time.monotonic())
                    )
                except queue.Empty:
                    self._checkpoint(conn)
                    continue
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
            if self.after_rollback is not None:
                self.after_rollback()
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            failed = StoreError(f"store write failed: {exc}")
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(failed)
            return
        first = any(job.checkpoint_first for job in jobs)
        if first:  # the whole group's commit, checkpointed before anyone hears of it
            self._checkpoint(conn)
        for job, result, failure in outcomes:
            if failure is None:
                job.future.set_result(result)
            else:
                job.future.set_exception(failure)
        if not first and any(job.checkpoint for job in jobs):
            self._checkpoint_due = time.monotonic()
        due = self._checkpoint_due
        if due is not None and (time.monotonic() >= due or self._queue.empty()):
            self._checkpoint(conn)

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """Checkpoint and truncate the WAL; if a reader keeps it from completing, retry soon."""
        self._checkpoint_due = None
        try:
            (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:  # pragma: no cover - best effort
            _log.warning("WAL checkpoint failed: %s", exc)
            busy = 1
        if busy:  # pragma: no cover - a reader held the WAL
            if not self._checkpoint_busy:
                _log.warning("WAL checkpoint incomplete (a reader holds the WAL); retrying")
            self._checkpoint_busy = True
            self._checkpoint_due = time.monotonic() + CHECKPOINT_SECONDS
        else:
            self._checkpoint_busy = False


def _lock_exclusively(path: Path) -> int:
    """Hold ``PATH.lock`` (created 0600) with ``flock``; return its descriptor.

    A lock file of its own, not the database: closing a descriptor of the
    database would drop SQLite's own (POSIX) locks on it.

    Raises:
        StoreError: If another store object, in this process or another, holds it.
    """
    lock = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, STORE_FILE_MODE)
    except OSError as exc:
        raise StoreError(f"cannot create {str(lock)!r}: {exc.strerror}") from None
    try:
        os.fchmod(fd, STORE_FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"store {str(path)!r} is open in another shuffler (one shuffler per store file: "
            "it looks up what waits in its own memory)"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"cannot lock {str(lock)!r}: {exc.strerror}") from None
    return fd


class SQLiteShufflerStore(SQLShufflerStore[sqlite3.Connection]):
    """The shuffler's store in one SQLite file.

    :class:`~shuffledp.service.sql_store.SQLShufflerStore` over
    :class:`~shuffledp.service.sql_dialect.SQLiteDialect`; implements
    :class:`~shuffledp.service.store.ShufflerStore`. One store
    object per file, across processes (an exclusive ``flock`` on ``PATH.lock``):
    this object looks up the waiting ids, client ids and ciphertexts in its
    own memory (read from the slots when it opens the file,
    :class:`~shuffledp.service.sqlite_slots.SlotPool`), and a second object
    would not see what the first one stores.

    Args:
        path: The database file.
        task_id: The task it serves.

    Raises:
        StoreError: If the file is another role's or task's, or another shuffler has it open.
    """

    def __init__(self, path: Path, task_id: str) -> None:
        self.db = SQLiteDatabase(path, SHUFFLER_SCHEMA, "shuffler", task_id)
        try:
            lock = _lock_exclusively(self.db.path)
        except BaseException:
            self.db.close()
            raise
        dialect = SQLiteDialect(self.db)
        super().__init__(dialect, SlotPool(dialect, lock))

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
        on the group commit without holding a worker thread. A write that
        stores a submission has the WAL checkpointed and truncated after its
        commit: the WAL does not keep one commit's pages after another's, which
        would tell which slots were filled when.

        Raises:
            StoreError: If the store is closed (later failures go to the future).
        """
        return self.db.write_future(self.submit_job(submissions, min_batch_users, permute))


class SQLiteAnalyzerStore(SQLAnalyzerStore[sqlite3.Connection]):
    """The analyzer's store in one SQLite file.

    :class:`~shuffledp.service.sql_store.SQLAnalyzerStore` over
    :class:`~shuffledp.service.sql_dialect.SQLiteDialect`; implements
    :class:`~shuffledp.service.store.AnalyzerStore`.

    Args:
        path: The database file.
        task_id: The task it serves.
        read_only: Open an existing store for reading (publishing) only.
    """

    def __init__(self, path: Path, task_id: str, *, read_only: bool = False) -> None:
        self.db = SQLiteDatabase(path, ANALYZER_SCHEMA, "analyzer", task_id, read_only=read_only)
        super().__init__(SQLiteDialect(self.db), read_only=read_only)
