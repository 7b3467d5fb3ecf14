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

What the shuffler's files hold. SQLite writes a row where its page has room
(a new cell below the previous ones) and the WAL appends each commit's pages
after the previous commit's, so a table that receives one row per arrival
keeps arrival order in its bytes, whatever its keys: with arrivals 0.3 to 1 s
apart, the client ids of an earlier version's files followed arrival order
exactly (Spearman's ρ = −1.0 between arrival and byte offset). So nothing a
waiting submission leaves is written in arrival order any more:

* its id, its client id (with tokens) and each of its ciphertexts take a
  fixed-size slot each (:data:`SLOT_BYTES`), a uniformly random subset of
  the free slots in a uniformly random order, drawn by the OS CSPRNG (the
  free slots are kept in memory in an order given by a CSPRNG permutation,
  and taken from its end). A slot is overwritten in place (a same-size UPDATE
  rewrites the cell where it is), so its place in the file was fixed before
  the arrival. When the pool grows, every used slot's content moves to a
  random slot of the larger pool, lest the new part of the file hold the
  later arrivals. No slot says which others belong to the same submission.
* to find a waiting id, client id or ciphertext (a retry, a second
  submission from one client, a replayed ciphertext), the process keeps them
  in memory, read from the slots when the store opens (and again after a
  write that did not commit); no file holds a lookup, an index or a tag of
  them (the first slot version kept keyed tags in ``held_tags`` and the free
  slots' draws in ``free_slots``: those tables are dropped when such a store
  opens).
* the WAL is checkpointed and truncated within :data:`CHECKPOINT_SECONDS` of
  a commit that stores a submission (at once when no write waits), so it
  never holds one commit's pages after another's: which slots filled when.

Only at the cut do the waiting ids reach ``submissions`` (for deduplication,
with their batch id) and the client ids ``used_clients``, each in the order
of the (random) ids, in one transaction; the slots are zeroed in place and
freed, and the WAL truncated after the commit and again once
the analyzer has acknowledged the batch and its payload is erased.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from shuffledp.service._testhooks import crash_point
from shuffledp.service.store_common import (
    REPLAY_KEY_LENGTH,
    aggregation_changes,
    analyzer_metrics,
    batch_ids_from_rows,
    check_meta,
    content_digest,
    distinct_keys,
    expected_meta,
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
    CiphertextAlreadyHeldError,
    ClientAlreadySubmittedError,
    NewSubmission,
    OutboxBatch,
    ReceivedBatch,
    RecordedAggregation,
    StoreError,
    SubmitOutcome,
)
from shuffledp.service.wire import CIPHERTEXT_LENGTH
from shuffledp.shuffler.uniform import secure_permutation

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
#: Under load, the longest a requested WAL checkpoint waits (seconds; at once when idle).
CHECKPOINT_SECONDS = 0.05
#: The writer's page cache (KiB). Submission ids are random keys, so every insert
#: lands on a random page of a table that only grows: a cache that holds the
#: table saves a read per insert.
WRITER_CACHE_KIB = 64 * 1024
_CHUNK = 500  # SQL variables per statement (an IN (...) list, a multi-row INSERT); < 999

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
COUNTED_KEYS_META = "counted_messages"


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


#: Bytes of one slot: a kind byte and a ciphertext, or a client id padded with zeros.
SLOT_BYTES = 1 + CIPHERTEXT_LENGTH
_FREE = bytes(SLOT_BYTES)
_MESSAGE = b"M"
_CLIENT = b"C"
_SUBMISSION = b"S"
#: Slots created the first time the pool grows.
_MIN_SLOTS = 256
#: ``meta`` key recorded once the store keeps its waiting data in slots.
SLOTS_META = "slots"
#: Tables of earlier versions of the slot store (keyed tags of what waits, free slots with
#: their random draws): dropped when a store is opened, their pages zeroed (``secure_delete``).
_DROPPED_TABLES = ("held_tags", "free_slots")


def _id_slot(kind: bytes, text: str) -> bytes:
    """A slot holding an id (a submission's or a client's), padded with zeros."""
    raw = text.encode("ascii")
    if len(raw) >= SLOT_BYTES:  # pragma: no cover - ids are 32 hex digits
        raise StoreError(f"an id of {len(raw)} characters does not fit a slot")
    return kind + raw + bytes(SLOT_BYTES - 1 - len(raw))


def _slot_text(content: bytes) -> str:
    """The id an id slot holds."""
    return content[1:].rstrip(b"\0").decode("ascii")


def _slot_contents(subs: Sequence[NewSubmission]) -> list[bytes]:
    """What new submissions put in slots: each id, client id and ciphertext."""
    contents: list[bytes] = []
    for sub in subs:
        contents.append(_id_slot(_SUBMISSION, sub.submission_id))
        if sub.client_id is not None:
            contents.append(_id_slot(_CLIENT, sub.client_id))
        messages = sub.messages
        contents.extend(
            _MESSAGE + messages[start : start + CIPHERTEXT_LENGTH]
            for start in range(0, len(messages), CIPHERTEXT_LENGTH)
        )
    return contents


def _permuted(values: Sequence[int]) -> list[int]:
    """``values`` in a uniformly random order (OS CSPRNG keys, sorted)."""
    if len(values) < 2:
        return list(values)
    array = np.asarray(values, dtype=np.int64)
    return array[secure_permutation(array.size)].tolist()  # type: ignore[no-any-return]


class _Waiting:
    """What waits, held in this process's memory only: no file holds a lookup of it.

    The waiting submissions' ids, client ids and ciphertexts' replay keys (to
    find a retry, a second submission of a client, a copy of a held
    ciphertext) and the free slots, in a uniformly random order drawn by the
    OS CSPRNG: the last ``k`` of them are a uniformly random subset of the free
    slots in a uniformly random order, and those left are still in uniformly
    random order (whatever was taken); freed slots are mixed in by a new
    permutation.

    Derived from the slots (:meth:`load`) when the store opens and whenever a
    write that changed it did not commit: :attr:`valid` is False from the
    first change a write makes until the write has run to its end, and the
    database sets it False when a transaction fails
    (:attr:`SQLiteDatabase.after_rollback`); the next write then loads it
    again inside its own transaction, which sees exactly what committed
    (refusals are raised before any change, so they cost no load).
    """

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.clients: set[str] = set()
        self.keys: set[bytes] = set()
        self.free: list[int] = []
        self.slots = 0
        self.valid = False

    def invalidate(self) -> None:
        """Load again before the next write (a transaction failed)."""
        self.valid = False

    def load(self, conn: sqlite3.Connection) -> None:
        """Read every slot (inside the caller's transaction)."""
        ids: set[str] = set()
        clients: set[str] = set()
        keys: set[bytes] = set()
        free: list[int] = []
        rows = conn.execute("SELECT slot, content FROM slots").fetchall()
        for slot, raw in rows:
            content = bytes(raw)
            kind = content[:1]
            if content == _FREE:
                free.append(int(slot))
            elif kind == _MESSAGE:
                keys.add(content[1 : 1 + REPLAY_KEY_LENGTH])
            elif kind == _CLIENT:
                clients.add(_slot_text(content))
            else:
                ids.add(_slot_text(content))
        self.ids, self.clients, self.keys = ids, clients, keys
        self.free = _permuted(free)
        self.slots = len(rows)
        self.valid = True

    def take(self, count: int) -> list[int]:
        """Remove and return ``count`` free slots (a uniformly random subset, random order)."""
        if count == 0:
            return []
        taken = self.free[-count:]
        del self.free[-count:]
        return taken

    def release(self, slots: Sequence[int]) -> None:
        """Return slots to the free ones, all of them in a new uniformly random order."""
        self.free = _permuted(self.free + list(slots))


def _fill_slots(conn: sqlite3.Connection, waiting: _Waiting, contents: Sequence[bytes]) -> None:
    """Write ``contents`` to free slots: a uniformly random subset, in a uniformly random order.

    If the pool is short, it grows first (:func:`_grow`).
    """
    if len(contents) > len(waiting.free):
        _grow(conn, waiting, len(contents) - len(waiting.free))
    _write_slots(conn, waiting.take(len(contents)), contents)


def _write_slots(conn: sqlite3.Connection, slots: Sequence[int], contents: Sequence[bytes]) -> None:
    """Overwrite existing slots in place (same size: SQLite rewrites each cell where it is).

    A multi-row upsert per :data:`_CHUNK` variables: every slot exists, so each
    row takes the update path, which keeps a same-size cell in place.
    """
    params = [v for pair in zip(slots, contents, strict=True) for v in pair]
    for start in range(0, len(params), _CHUNK):
        chunk = params[start : start + _CHUNK]
        conn.execute(
            "INSERT INTO slots(slot, content) VALUES "
            + ",".join(["(?, ?)"] * (len(chunk) // 2))
            + " ON CONFLICT(slot) DO UPDATE SET content = excluded.content",
            chunk,
        )


def _zero_used_slots(conn: sqlite3.Connection) -> None:
    """Overwrite every used slot with zeros, in place (one statement, same-size cells)."""
    conn.execute("UPDATE slots SET content = ?1 WHERE content != ?1", (_FREE,))


def _grow(conn: sqlite3.Connection, waiting: _Waiting, missing: int) -> None:
    """Add slots (at least double the pool) and move every used slot's content to a random slot.

    New slots are appended to the table, so without the move what arrives
    after a growth would sit in the new part of the file and what came before
    in the old part; after it, every content sits in a uniformly random slot of
    the whole pool, whatever its arrival. The move costs the used slots once
    per doubling.
    """
    total = waiting.slots
    added = max(missing, total, _MIN_SLOTS)
    used = conn.execute("SELECT slot, content FROM slots WHERE content != ?", (_FREE,)).fetchall()
    conn.executemany(
        "INSERT INTO slots(slot, content) VALUES (?, ?)",
        [(slot, _FREE) for slot in range(total, total + added)],
    )
    _zero_used_slots(conn)
    waiting.slots = total + added
    waiting.free = _permuted(range(total + added))
    if used:
        moved = [bytes(used[i][1]) for i in secure_permutation(len(used))]
        _write_slots(conn, waiting.take(len(moved)), moved)


def _store_submissions(
    conn: sqlite3.Connection, subs: Sequence[NewSubmission], waiting: _Waiting
) -> int:
    """Store the submissions not stored yet; return how many (inside the caller's savepoint).

    A submission id is known if a cut batched it (``submissions``) or it waits
    (:class:`_Waiting`). A new submission's id, client id and ciphertexts go
    to random free slots; nothing else is written.

    Raises:
        ClientAlreadySubmittedError: If a new submission's client id was used
            before (by a batched or a waiting submission) or twice in ``subs``.
        CiphertextAlreadyHeldError: If a new submission's ciphertext has the
            replay key of a held one, or of another one in ``subs``.
    """
    unique = list({s.submission_id: s for s in reversed(subs)}.values())[::-1]
    unique = [s for s in unique if s.submission_id not in waiting.ids]  # waiting: a retry
    if not unique:
        return 0
    batched = _existing(conn, "submissions", "submission_id", [s.submission_id for s in unique])
    new = [s for s in unique if s.submission_id not in batched] if batched else unique
    if not new:
        return 0
    held_keys, held_clients = waiting.keys, waiting.clients
    clients: dict[str, None] = {}
    keys: set[bytes] = set()
    for sub in new:
        client = sub.client_id
        if client is not None:
            if client in held_clients or client in clients:
                raise ClientAlreadySubmittedError([client])
            clients[client] = None
        messages = sub.messages
        for start in range(0, len(messages), CIPHERTEXT_LENGTH):
            key = messages[start : start + REPLAY_KEY_LENGTH]
            if key in held_keys or key in keys:
                raise CiphertextAlreadyHeldError()
            keys.add(key)
    if clients:
        used = _existing(conn, "used_clients", "client_id", list(clients))
        if used:
            raise ClientAlreadySubmittedError(sorted(used))
    waiting.valid = False  # until the write has run to its end
    _fill_slots(conn, waiting, _slot_contents(new))
    waiting.ids.update(s.submission_id for s in new)
    held_clients.update(clients)
    held_keys.update(keys)
    return len(new)


def _cut(
    conn: sqlite3.Connection,
    waiting: _Waiting,
    min_users: int,
    permute: Callable[[bytes], bytes],
    n_waiting: int | None = None,
) -> OutboxBatch | None:
    """Batch every waiting submission if at least ``min_users`` wait.

    Runs inside the caller's transaction: the used slots' ciphertexts are
    permuted into the outbox; the slots are zeroed in place and freed; the
    batch's submission ids are written to ``submissions`` with the batch's id
    and its client ids to ``used_clients``, each in the order of the (random)
    ids. With ``secure_delete`` what is deleted is overwritten. ``n_waiting``
    is the unbatched counter when the caller has just read it in this
    transaction.
    """
    n_users = _waiting(conn) if n_waiting is None else n_waiting
    if n_users < min_users:
        return None
    used = conn.execute("SELECT slot, content FROM slots WHERE content != ?", (_FREE,)).fetchall()
    contents = [bytes(row[1]) for row in used]
    messages = b"".join(c[1:] for c in contents if c[:1] == _MESSAGE)
    clients = sorted(_slot_text(c) for c in contents if c[:1] == _CLIENT)
    ids = sorted(_slot_text(c) for c in contents if c[:1] == _SUBMISSION)
    if len(ids) != n_users:  # pragma: no cover - the counter is transactional
        raise StoreError(f"unbatched counter says {n_users}, found {len(ids)} waiting ids")
    batch = new_outbox_batch(messages, n_users, permute)
    waiting.valid = False  # until the write has run to its end
    conn.execute(
        "INSERT INTO batches(batch_id, payload, n_users, n_messages, sent) VALUES (?, ?, ?, ?, 0)",
        (batch.batch_id, batch.payload, batch.n_users, batch.n_messages),
    )
    _zero_used_slots(conn)
    slots = [int(row[0]) for row in used]
    per_statement = _CHUNK // 2
    for start in range(0, len(ids), per_statement):
        chunk = ids[start : start + per_statement]
        conn.execute(
            "INSERT INTO submissions(submission_id, messages, batch_id) VALUES "
            + ",".join(["(?, NULL, ?)"] * len(chunk)),
            [value for sid in chunk for value in (sid, batch.batch_id)],
        )
    conn.executemany("INSERT INTO used_clients(client_id) VALUES (?)", [(c,) for c in clients])
    conn.execute("UPDATE counters SET value = 0 WHERE name = 'unbatched'")
    crash_point("cut-before-commit")
    waiting.ids.clear()
    waiting.clients.clear()
    waiting.keys.clear()
    waiting.release(slots)
    return batch


def _rewrite_used_clients(conn: sqlite3.Connection) -> None:
    """Write the used client ids again, in the order of the ids (inside the caller's transaction).

    Rows inserted one request after another sit in their pages in arrival
    order; after this, in id order. Used once, when a store of an earlier
    version (which kept waiting client ids in this table) is opened.
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


def _open_slots(conn: sqlite3.Connection, waiting: _Waiting) -> None:
    """When the store is opened: read what waits into memory; move old data to slots.

    A store of an earlier version kept each waiting submission's ciphertexts
    in its row, in arrival order, and the waiting client ids among the used
    ones: the ciphertexts move to random slots, and the used client ids are
    written again in id order (the waiting ones cannot be told apart; they
    stay used). A store of the first slot version also kept keyed tags of
    what waits and the free slots' random draws in tables of their own: they
    are dropped.
    """
    for table in _DROPPED_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    waiting.load(conn)
    rows = conn.execute(
        "SELECT submission_id, messages FROM submissions WHERE batch_id IS NULL"
    ).fetchall()
    if rows:  # waiting rows of an earlier version: their ids and ciphertexts move to slots
        old = [NewSubmission(str(r[0]), b"" if r[1] is None else bytes(r[1])) for r in rows]
        contents = _slot_contents(old)
        conn.execute("DELETE FROM submissions WHERE batch_id IS NULL")
        _fill_slots(conn, waiting, [contents[i] for i in secure_permutation(len(contents))])
        waiting.load(conn)
    if not conn.execute("SELECT 1 FROM meta WHERE key = ?", (SLOTS_META,)).fetchone():
        _rewrite_used_clients(conn)
        conn.execute("DROP INDEX IF EXISTS submissions_unbatched")
        conn.execute("INSERT INTO meta(key, value) VALUES (?, '1')", (SLOTS_META,))


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


class SQLiteShufflerStore:
    """The shuffler's store in one SQLite file.

    Implements :class:`~shuffledp.service.store.ShufflerStore`. One store
    object per file, across processes (an exclusive ``flock`` on ``PATH.lock``):
    this object looks up the waiting ids, client ids and ciphertexts in its
    own memory (read from the slots when it opens the file), and a second
    object would not see what the first one stores.

    Args:
        path: The database file.
        task_id: The task it serves.

    Raises:
        StoreError: If the file is another role's or task's, or another shuffler has it open.
    """

    def __init__(self, path: Path, task_id: str) -> None:
        self.db = SQLiteDatabase(path, SHUFFLER_SCHEMA, "shuffler", task_id)
        try:
            self._lock: int | None = _lock_exclusively(self.db.path)
        except BaseException:
            self.db.close()
            raise
        self._waiting = _Waiting()
        self.db.after_rollback = self._waiting.invalidate
        try:
            self.db.write(lambda conn: _open_slots(conn, self._waiting), checkpoint_first=True)
        except BaseException:
            self.close()
            raise

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
        on the group commit without holding a worker thread. A write that
        stores a submission has the WAL checkpointed and truncated after its
        commit: the WAL does not keep one commit's pages after another's, which
        would tell which slots were filled when.

        Raises:
            StoreError: If the store is closed (later failures go to the future).
        """
        subs = list(submissions)

        def run(conn: sqlite3.Connection) -> SubmitOutcome:
            held = self._waiting
            if not held.valid:
                held.load(conn)
            accepted = _store_submissions(conn, subs, held)
            if not accepted:
                return SubmitOutcome(0, len(subs), _waiting(conn))
            ((waiting,),) = conn.execute(
                "UPDATE counters SET value = value + ? WHERE name = 'unbatched' RETURNING value",
                (accepted,),
            ).fetchall()
            crash_point("ingest-before-commit")
            batch = _cut(conn, held, min_batch_users, permute, int(waiting))
            self.db.request_checkpoint()
            held.valid = True  # every change of this write is made
            if batch is not None:
                waiting = 0
            return SubmitOutcome(accepted, len(subs) - accepted, int(waiting), batch)

        return self.db.write_future(run)

    def cut_batch(self, min_users: int, permute: Callable[[bytes], bytes]) -> OutboxBatch | None:
        """See :meth:`ShufflerStore.cut_batch`.

        Looks at the counter first with a reader: below ``min_users`` nothing is
        written (an idle shuffler's polls neither commit nor touch the WAL).
        """
        if self.db.read(_waiting) < min_users:
            return None
        held = self._waiting

        def run(conn: sqlite3.Connection) -> OutboxBatch | None:
            if not held.valid:
                held.load(conn)
            batch = _cut(conn, held, min_users, permute)
            held.valid = True  # every change of this write is made
            return batch

        return self.db.write(run, checkpoint_first=True)

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
            checkpoint_first=True,
        )

    def stats(self) -> dict[str, int]:
        """See :meth:`ShufflerStore.stats`."""

        def run(conn: sqlite3.Connection) -> dict[str, int]:
            (batched,) = conn.execute("SELECT COUNT(*) FROM submissions").fetchone()
            (waiting,) = conn.execute(
                "SELECT value FROM counters WHERE name = 'unbatched'"
            ).fetchone()
            stored = int(batched) + int(waiting)
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
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None


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
        if not read_only:
            self.db.write(_backfill_counted_keys)

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

    def record_aggregation(self, aggregation: Aggregation) -> RecordedAggregation | None:
        """See :meth:`AnalyzerStore.record_aggregation`."""
        keys = distinct_keys(aggregation)

        def run(conn: sqlite3.Connection) -> RecordedAggregation | None:
            cursor = conn.execute(
                "UPDATE batches SET aggregated = 1 WHERE batch_id = ? AND aggregated = 0",
                (aggregation.batch_id,),
            )
            if cursor.rowcount == 0:
                return None
            new = _insert_counted_keys(conn, keys)
            recorded, bins, deltas = aggregation_changes(aggregation, new)
            conn.execute(
                "UPDATE batches SET n_counted = ? WHERE batch_id = ?",
                (recorded.counted, aggregation.batch_id),
            )
            conn.executemany(
                "INSERT INTO batch_counts(batch_id, bin, count) VALUES (?, ?, ?)",
                [(aggregation.batch_id, j, c) for j, c in bins],
            )
            _add_metrics(conn, deltas)
            crash_point("aggregate-before-commit")
            return recorded

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


def _insert_counted_keys(conn: sqlite3.Connection, keys: Sequence[bytes]) -> set[bytes]:
    """Add the replay keys not counted before; return those (inside the caller's transaction)."""
    new: set[bytes] = set()
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        new.update(
            bytes(row[0])
            for row in conn.execute(
                "INSERT INTO counted_messages(enc) VALUES "
                + ",".join(["(?)"] * len(chunk))
                + " ON CONFLICT(enc) DO NOTHING RETURNING enc",
                chunk,
            )
        )
    return new


def _backfill_counted_keys(conn: sqlite3.Connection) -> None:
    """Keep the replay keys of batches aggregated by a version that kept none (once).

    Such a store (shuffledp 0.2) counted every message of its aggregated batches;
    their keys are added now, all of them (the store cannot tell which did not
    decrypt: a key of one that did not could only make a later message with the
    same key a copy, and only an attacker who saw that message first could
    have sent it), so that copies arriving from now on are dropped. Copies
    already counted stay counted: a warning says how many keys repeat.
    """
    if conn.execute("SELECT 1 FROM meta WHERE key = ?", (COUNTED_KEYS_META,)).fetchone():
        return
    repeated = 0
    for (payload,) in conn.execute("SELECT payload FROM batches WHERE aggregated = 1").fetchall():
        keys = replay_keys(bytes(payload))
        repeated += len(keys) - len(_insert_counted_keys(conn, keys))
    if repeated:
        _log.warning(
            "%d messages of batches aggregated before replay keys were kept repeat a key "
            "counted before: they were counted more than once",
            repeated,
        )
    conn.execute("INSERT INTO meta(key, value) VALUES (?, 'complete')", (COUNTED_KEYS_META,))


def _add_metrics(conn: sqlite3.Connection, deltas: Mapping[str, int]) -> None:
    conn.executemany(
        "INSERT INTO metrics(name, value) VALUES (?, ?) "
        "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
        [(name, int(value)) for name, value in deltas.items() if value],
    )
