"""PostgreSQL stores for the shuffler and the analyzer (psycopg 3, the ``service`` extra).

The stores are :class:`~shuffledp.service.sql_store.SQLShufflerStore` and
:class:`~shuffledp.service.sql_store.SQLAnalyzerStore` (written once for
SQLite and PostgreSQL) over :class:`~shuffledp.service.sql_dialect.PostgresDialect`
and the layer this module keeps underneath, :class:`PostgresDatabase` (the
pool); the shuffler's waiting submissions are rows (:class:`RowPool`).

A store is one database named by a libpq URL,
``postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DBNAME[?PARAM=VALUE&...]``
(``postgres://`` too; a password is better given by ``~/.pgpass`` or
``PGPASSWORD`` than in the URL). The shuffler and the analyzer must use
different databases (they are different parties): every database records its
role and task id in a ``meta`` table and refuses to be opened for another role
or task, as the SQLite stores do.

Durability. Every call is one transaction, committed before the call returns.
Each session sets ``synchronous_commit = on`` (PostgreSQL's default, set
explicitly so a database or role default cannot weaken it): COMMIT returns
only once the transaction's WAL is flushed to disk, so an acknowledged request
survives ``kill -9`` of the service and a crash of the database server.
Opening a store refuses a server that runs with ``fsync = off``. If a COMMIT
fails because the connection broke, its outcome is unknown: the caller gets a
:class:`~shuffledp.service.store.StoreError` (HTTP 503), retries with the same
submission or batch id, and the retry is a no-op if the first one committed.

Concurrency. Each store holds a small lock-protected set of connections (at
most ``max_connections``, default 4); a call takes one, runs its transaction
and gives it back. Writes run at READ COMMITTED, reads at REPEATABLE READ READ
ONLY (one consistent snapshot). Every write of the shuffler that adds
submissions or cuts a batch first locks the row of the ``unbatched`` counter
(``SELECT … FOR UPDATE``), so the database serialises them, across threads and
across processes: two transactions cannot both cut a batch, and a submission
is counted once (its id is the primary key; ``INSERT … ON CONFLICT DO
NOTHING``). The price is one WAL flush per request, where SQLite's writer
thread commits many requests at once; clients that send many submissions per
request amortise it. The analyzer deduplicates batches with ``ON CONFLICT DO
NOTHING`` on the batch id and the content digest, and marks a batch aggregated
with a conditional UPDATE, so concurrent calls cannot count one twice.

Errors. Every psycopg error (server down, connection lost, disk full, …)
becomes :class:`~shuffledp.service.store.StoreError`, which the services
answer with 503 (retry later). A pooled connection found dead when its
transaction begins is replaced once, transparently.

What is stored is what the SQLite stores hold (see
:mod:`shuffledp.service.store_protocols`): no IP address, header or timestamp, and a
submission's ciphertexts are set to NULL in the transaction that batches it.
What PostgreSQL keeps beyond that, and SQLite with ``secure_delete`` does not:
the old version of a row stays in the table's pages until VACUUM removes it and
its space is reused (there is no ``secure_delete``), the WAL holds recent
changes until its segments are recycled (do not archive the shuffler's WAL),
and a table's rows keep their insertion order and inserting transaction id
(``xmin``). So on disk the rows reveal the order in which submissions and
client ids arrived, and a used client id can be linked to the submission of
the same request: to its ciphertexts until the batch is cut and the old row
versions are vacuumed, to its (random) id afterwards. Ciphertexts are sealed to
the analyzer's key; keep the shuffler's database on an encrypted volume that
only the shuffler's operator can read, and prefer SQLite where this matters.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from shuffledp._optional import require
from shuffledp._validation import InvalidParameterError
from shuffledp.service.sql_dialect import (
    SCHEMA_LOCK,
    PostgresDialect,
    PostgresTransaction,
    WaitingPool,
)
from shuffledp.service.sql_store import SQLAnalyzerStore, SQLShufflerStore
from shuffledp.service.store_common import check_meta, expected_meta, replay_keys
from shuffledp.service.store_protocols import (
    CiphertextAlreadyHeldError,
    ClientAlreadySubmittedError,
    NewSubmission,
    OutboxBatch,
    StoreError,
)

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = [
    "PostgresAnalyzerStore",
    "PostgresDatabase",
    "PostgresShufflerStore",
    "RowPool",
    "check_postgres_url",
    "redact_url",
]

T = TypeVar("T")
_log = logging.getLogger("shuffledp.service")

#: URL schemes of a PostgreSQL store.
SCHEMES = ("postgresql://", "postgres://")
#: Default most connections one store holds.
MAX_CONNECTIONS = 4
#: Seconds a call waits for a free connection before giving up (StoreError).
WAIT_SECONDS = 30.0
#: ``connect_timeout`` (seconds) when the URL does not set one.
CONNECT_TIMEOUT = 10
_BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
#: Every session: durable commits whatever the server's, database's or role's default;
#: a transaction left open by a hung client ends (and frees its locks) after 10 minutes,
#: far more than any transaction of ours stays idle (the longest gap is one permutation).
_SESSION = (
    "SET synchronous_commit = on; SET idle_in_transaction_session_timeout = '10min'; "
    "SET client_encoding = 'UTF8'"
)

_META = "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"

#: The shuffler's tables (see :data:`shuffledp.service.sqlite_store.SHUFFLER_SCHEMA`).
SHUFFLER_SCHEMA = """
CREATE TABLE IF NOT EXISTS submissions(
    submission_id TEXT PRIMARY KEY,
    messages BYTEA,
    batch_id TEXT
);
CREATE INDEX IF NOT EXISTS submissions_unbatched ON submissions(submission_id)
    WHERE batch_id IS NULL;
CREATE TABLE IF NOT EXISTS used_clients(client_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS held_keys(enc BYTEA PRIMARY KEY);
CREATE TABLE IF NOT EXISTS batches(
    seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    batch_id TEXT PRIMARY KEY,
    payload BYTEA,
    n_users BIGINT NOT NULL,
    n_messages BIGINT NOT NULL,
    sent BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS counters(name TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO counters(name, value) VALUES ('unbatched', 0) ON CONFLICT (name) DO NOTHING;
"""

#: The analyzer's tables (see :data:`shuffledp.service.sqlite_store.ANALYZER_SCHEMA`).
ANALYZER_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches(
    seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE,
    batch_id TEXT PRIMARY KEY,
    n_users BIGINT NOT NULL,
    n_messages BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    content_digest TEXT NOT NULL UNIQUE,
    aggregated BOOLEAN NOT NULL DEFAULT false,
    n_counted BIGINT
);
CREATE TABLE IF NOT EXISTS batch_counts(
    batch_id TEXT NOT NULL,
    bin INTEGER NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (batch_id, bin)
);
CREATE TABLE IF NOT EXISTS metrics(name TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS counted_messages(enc BYTEA PRIMARY KEY);
"""

#: ``meta`` key recorded once every aggregated batch's replay keys are in
#: ``counted_messages`` (and, for the shuffler, every waiting ciphertext's in ``held_keys``).
REPLAY_KEYS_META = PostgresDialect.counted_keys_meta

_URL_FORM = "postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DBNAME[?PARAM=VALUE&...]"


def _require_psycopg() -> None:
    """Raise :class:`~shuffledp.MissingExtraError` naming the ``service`` extra without psycopg."""
    require("psycopg", extra="service")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and logs)."""
    url = re.sub(r"(://[^/@:?]*:)[^/@?]*@", r"\1***@", url)
    return re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", url)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def check_postgres_url(url: str) -> dict[str, str]:
    """Parse a PostgreSQL store URL without connecting; return its libpq parameters.

    Raises:
        MissingExtraError: If psycopg (the ``service`` extra) is not installed.
        InvalidParameterError: If ``url`` is not a libpq URL naming a database.
    """
    _require_psycopg()
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    shown = redact_url(url)
    if not url.startswith(SCHEMES):
        raise InvalidParameterError(f"store URL must look like {_URL_FORM}, got {shown!r}")
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise InvalidParameterError(
            f"store URL {shown!r} is not a valid PostgreSQL URL ({_one_line(exc)}); "
            f"expected {_URL_FORM}"
        ) from None
    if not params.get("dbname"):
        raise InvalidParameterError(
            f"store URL {shown!r} must name its database: postgresql://HOST/DBNAME"
        )
    return {str(k): str(v) for k, v in params.items()}


class PostgresDatabase:
    """One PostgreSQL database: a lock-protected set of connections, one transaction per call.

    Args:
        url: The database's URL (see the module docstring).
        schema: ``CREATE … IF NOT EXISTS`` statements of the role's tables.
        role: ``"shuffler"`` or ``"analyzer"``, recorded and checked.
        task_id: The task, recorded and checked.
        read_only: Open an existing store for reading only (no table is created).
        max_connections: Most connections held at once (at least 1).
        wait_seconds: How long a call waits for a free connection.

    Raises:
        InvalidParameterError: If ``url`` is not a PostgreSQL URL or
            ``max_connections`` is below 1.
        MissingExtraError: If psycopg (the ``service`` extra) is not installed.
        StoreError: If the server cannot be reached, runs with ``fsync = off``
            (unless read-only), the tables cannot be created (the role needs
            CREATE on the schema, e.g. as the database's owner), or the
            database belongs to another role or task or (read-only) holds no store.
    """

    def __init__(
        self,
        url: str,
        schema: str,
        role: str,
        task_id: str,
        *,
        read_only: bool = False,
        max_connections: int = MAX_CONNECTIONS,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        params = check_postgres_url(url)
        if max_connections < 1:
            raise InvalidParameterError(
                f"max_connections must be at least 1, got {max_connections!r}"
            )
        self.url = url
        self.where = redact_url(url)
        self.read_only = read_only
        self.max_connections = max_connections
        self.wait_seconds = wait_seconds
        self._connect_args: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            self._connect_args["connect_timeout"] = CONNECT_TIMEOUT
        self._idle: list[Connection[Any]] = []
        self._open = 0
        self._closed = False
        self._cond = threading.Condition()
        try:
            if read_only:
                self._check_meta(role, task_id)
            else:
                self._check_durability()
                self._initialise(schema, role, task_id)
        except BaseException:
            self.close()
            raise

    # -- connections -------------------------------------------------------------------------

    def _connect(self) -> Connection[Any]:
        import psycopg

        try:
            conn = psycopg.connect(self.url, **self._connect_args)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to store {self.where!r}: {_one_line(exc)}") from None
        try:
            conn.execute(_SESSION)
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(f"store {self.where!r} is not usable: {_one_line(exc)}") from None
        return conn

    def _acquire(self) -> tuple[Connection[Any], bool]:
        """A connection for one transaction, and whether it was used before."""
        deadline = time.monotonic() + self.wait_seconds
        with self._cond:
            while True:
                if self._closed:
                    raise StoreError("store is closed")
                if self._idle:
                    return self._idle.pop(), True
                if self._open < self.max_connections:
                    self._open += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StoreError(
                        f"store {self.where!r}: all {self.max_connections} connections "
                        f"stayed busy for {self.wait_seconds:g} s"
                    )
                self._cond.wait(remaining)
        try:
            return self._connect(), False
        except BaseException:
            with self._cond:
                self._open -= 1
                self._cond.notify()
            raise

    def _release(self, conn: Connection[Any], keep: bool) -> None:
        with self._cond:
            keep = keep and not self._closed and not conn.closed
            if keep:
                self._idle.append(conn)
            else:
                self._open -= 1
            self._cond.notify()
        if not keep:
            conn.close()

    def _drop_idle(self) -> None:
        """Close the idle connections (after one was found dead, the others likely are)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            conn.close()

    @staticmethod
    def _rollback(conn: Connection[Any]) -> bool:
        """End a failed transaction; return whether the connection can be used again."""
        import psycopg
        from psycopg.pq import TransactionStatus

        if conn.closed or conn.broken:
            return False
        try:
            if conn.info.transaction_status != TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
        except psycopg.Error:
            return False
        return conn.info.transaction_status == TransactionStatus.IDLE

    def _transaction(self, run: Callable[[Connection[Any]], T], begin: str, what: str) -> T:
        import psycopg
        from psycopg.pq import TransactionStatus

        for attempt in range(2):
            conn, reused = self._acquire()
            keep = False
            try:
                try:
                    conn.execute(begin)
                except psycopg.OperationalError as exc:
                    if reused and attempt == 0:  # died while idle: nothing was sent, retry
                        _log.warning(
                            "store %s: replacing a lost connection (%s)",
                            self.where,
                            _one_line(exc),
                        )
                        self._drop_idle()
                        continue
                    raise
                try:
                    result = run(conn)
                except psycopg.Error:
                    raise
                except BaseException:
                    keep = self._rollback(conn)
                    raise
                if conn.info.transaction_status != TransactionStatus.INTRANS:
                    # COMMIT of a failed transaction would silently roll back.
                    raise psycopg.OperationalError("the transaction failed before COMMIT")
                conn.execute("COMMIT")
                keep = True
                return result
            except psycopg.Error as exc:
                keep = self._rollback(conn)
                raise StoreError(f"store {self.where!r}: {what} failed: {_one_line(exc)}") from None
            finally:
                self._release(conn, keep)
        raise StoreError(f"store {self.where!r}: {what} failed: connection lost twice")

    # -- the interface the stores use --------------------------------------------------------

    def write(self, run: Callable[[Connection[Any]], T]) -> T:
        """Run ``run(conn)`` in one READ COMMITTED transaction; return once it is committed.

        If ``run`` raises, the transaction is rolled back and the exception
        reaches the caller (a psycopg error as :class:`StoreError`).

        Raises:
            StoreError: If the store is read-only or closed, or the database fails.
        """
        if self.read_only:
            raise StoreError("store is read-only")
        return self._transaction(run, _BEGIN_WRITE, "write")

    def read(self, run: Callable[[Connection[Any]], T]) -> T:
        """Run ``run(conn)`` in one read-only REPEATABLE READ transaction (a consistent snapshot).

        Raises:
            StoreError: If the store is closed or the database fails.
        """
        return self._transaction(run, _BEGIN_READ, "read")

    def ping(self) -> None:
        """Check, cheaply, that the database answers (``SELECT 1`` in a read transaction).

        Raises:
            StoreError: If it does not.
        """
        self.read(lambda conn: conn.execute("SELECT 1").fetchone())

    def close(self) -> None:
        """Close the connections (those in use are closed when their call ends)."""
        with self._cond:
            self._closed = True
        self._drop_idle()

    # -- opening -----------------------------------------------------------------------------

    def _check_durability(self) -> None:
        def settings(conn: Connection[Any]) -> dict[str, str]:
            rows = conn.execute(
                "SELECT name, setting FROM pg_settings "
                "WHERE name IN ('fsync', 'synchronous_commit')"
            ).fetchall()
            return {str(name): str(value) for name, value in rows}

        found = self.read(settings)
        if found.get("fsync") != "on":
            raise StoreError(
                f"store {self.where!r}: the server runs with fsync = {found.get('fsync')}, "
                "so commits would not survive a crash; it must be on"
            )
        if found.get("synchronous_commit") != "on":  # pragma: no cover - set by every session
            raise StoreError(
                f"store {self.where!r}: synchronous_commit is {found.get('synchronous_commit')}"
            )

    def _initialise(self, schema: str, role: str, task_id: str) -> None:
        """Create the tables and record role and task, or check the recorded ones.

        Under an advisory lock (:data:`~shuffledp.service.sql_dialect.SCHEMA_LOCK`),
        which the stores' one-time upgrades take too
        (:meth:`~shuffledp.service.sql_dialect.Dialect.upgrade_once`).
        """

        def run(conn: Connection[Any]) -> dict[str, str]:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            conn.execute(_META)
            found = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
            if found:  # another role's or task's database is refused before it is changed
                check_meta(found, self.where, role, task_id)
            # Every open: a store of an earlier version gains the tables added since.
            conn.execute(schema)
            if not found:
                found = expected_meta(role, task_id)
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO meta(key, value) VALUES (%s, %s)", list(found.items())
                    )
            return found

        self.write(run)

    def _check_meta(self, role: str, task_id: str) -> None:
        def run(conn: Connection[Any]) -> dict[str, str] | None:
            (exists,) = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone() or (0,)
            if not exists:
                return None
            return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}

        found = self.read(run)
        if not found:
            raise StoreError(f"store {self.where!r} does not exist (the database holds no store)")
        check_meta(found, self.where, role, task_id)


class RowPool(WaitingPool[PostgresTransaction]):
    """The PostgreSQL shuffler's waiting submissions: rows of ``submissions`` (module docstring).

    A waiting submission's row holds its ciphertexts until the cut sets them to
    NULL; ``held_keys`` the waiting ciphertexts' replay keys; ``used_clients``
    every client id, from the request that used it. The caller's transaction
    holds the ``unbatched`` counter's lock (``SELECT … FOR UPDATE``), so the
    database serialises adds and cuts across threads and processes.

    Args:
        dialect: The store's PostgreSQL dialect.
    """

    waiting_in_submissions = True

    def __init__(self, dialect: PostgresDialect) -> None:
        self.dialect = dialect

    def open(self) -> None:
        """Keep the waiting ciphertexts' replay keys once (stores of earlier versions kept none)."""
        self.dialect.upgrade_once(REPLAY_KEYS_META, self._backfill_held_keys)

    def _backfill_held_keys(self, tx: PostgresTransaction) -> None:
        rows = tx.execute(
            "SELECT messages FROM submissions WHERE batch_id IS NULL AND messages IS NOT NULL"
        ).fetchall()
        keys = [k for row in rows for k in replay_keys(bytes(row[0]))]
        self.dialect.insert_new_keys(tx, "held_keys", keys)

    def add(self, tx: PostgresTransaction, subs: Sequence[NewSubmission]) -> int:
        """See :meth:`WaitingPool.add`: a row per new submission, ``ON CONFLICT DO NOTHING``."""
        dialect = self.dialect
        known = dialect.existing(
            tx, "submissions", "submission_id", [s.submission_id for s in subs]
        )
        new = [s for s in subs if s.submission_id not in known]
        clients = [s.client_id for s in new if s.client_id is not None]
        if clients:
            used = dialect.existing(tx, "used_clients", "client_id", clients)
            if used or len(set(clients)) != len(clients):
                raise ClientAlreadySubmittedError(sorted(used) or clients)
            dialect.insert_many(
                tx, "used_clients", (("client_id", "text"),), [(c,) for c in clients]
            )
        if not new:
            return 0
        keys = [k for s in new for k in replay_keys(s.messages)]
        if len(dialect.insert_new_keys(tx, "held_keys", keys)) != len(keys):
            raise CiphertextAlreadyHeldError()
        return dialect.insert_many(
            tx,
            "submissions",
            (("submission_id", "text"), ("messages", "bytea")),
            [(s.submission_id, s.messages) for s in new],
            conflict="ON CONFLICT (submission_id) DO NOTHING",
        )

    def cut(
        self, tx: PostgresTransaction, outbox: Callable[[bytes, int], OutboxBatch]
    ) -> OutboxBatch:
        """See :meth:`WaitingPool.cut`: the rows' ciphertexts set to NULL, their batch set."""
        rows = tx.execute("SELECT messages FROM submissions WHERE batch_id IS NULL").fetchall()
        batch = outbox(b"".join(bytes(row[0]) for row in rows), len(rows))
        tx.execute(
            "UPDATE submissions SET messages = NULL, batch_id = ? WHERE batch_id IS NULL",
            (batch.batch_id,),
        )
        tx.execute("DELETE FROM held_keys")
        return batch


class PostgresShufflerStore(SQLShufflerStore[PostgresTransaction]):
    """The shuffler's store in one PostgreSQL database.

    :class:`~shuffledp.service.sql_store.SQLShufflerStore` over
    :class:`~shuffledp.service.sql_dialect.PostgresDialect` and a
    :class:`RowPool`; implements :class:`~shuffledp.service.store.ShufflerStore`.

    Args:
        url: The database's URL.
        task_id: The task it serves.
        max_connections: Most connections held at once.
    """

    def __init__(self, url: str, task_id: str, *, max_connections: int = MAX_CONNECTIONS) -> None:
        self.db = PostgresDatabase(
            url, SHUFFLER_SCHEMA, "shuffler", task_id, max_connections=max_connections
        )
        dialect = PostgresDialect(self.db)
        super().__init__(dialect, RowPool(dialect))


class PostgresAnalyzerStore(SQLAnalyzerStore[PostgresTransaction]):
    """The analyzer's store in one PostgreSQL database.

    :class:`~shuffledp.service.sql_store.SQLAnalyzerStore` over
    :class:`~shuffledp.service.sql_dialect.PostgresDialect`; implements
    :class:`~shuffledp.service.store.AnalyzerStore`.

    Args:
        url: The database's URL.
        task_id: The task it serves.
        read_only: Open an existing store for reading (publishing) only.
        max_connections: Most connections held at once.
    """

    def __init__(
        self,
        url: str,
        task_id: str,
        *,
        read_only: bool = False,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.db = PostgresDatabase(
            url,
            ANALYZER_SCHEMA,
            "analyzer",
            task_id,
            read_only=read_only,
            max_connections=max_connections,
        )
        super().__init__(PostgresDialect(self.db), read_only=read_only)
