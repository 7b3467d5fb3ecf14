"""PostgreSQL stores for the shuffler and the analyzer (psycopg 3, the ``service`` extra).

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
:mod:`shuffledp.service.store`): no IP address, header or timestamp, and a
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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from shuffledp._optional import require
from shuffledp._validation import InvalidParameterError
from shuffledp.service._testhooks import crash_point
from shuffledp.service.store_common import (
    aggregation_changes,
    analyzer_metrics,
    batch_ids_from_rows,
    check_meta,
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

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = [
    "PostgresAnalyzerStore",
    "PostgresDatabase",
    "PostgresShufflerStore",
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
#: Advisory lock taken while a store's tables are created.
_SCHEMA_LOCK = 0x5D5F_5D5F
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
REPLAY_KEYS_META = "replay_keys"

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
        """Create the tables and record role and task, or check the recorded ones."""

        def run(conn: Connection[Any]) -> dict[str, str]:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
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
            if REPLAY_KEYS_META not in found:
                _backfill_replay_keys(conn, role)
                conn.execute(
                    "INSERT INTO meta(key, value) VALUES (%s, 'complete')", (REPLAY_KEYS_META,)
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


def _one(conn: Connection[Any], sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...]:
    row = conn.execute(sql, params).fetchone()
    if row is None:  # pragma: no cover - the queries always return a row
        raise StoreError(f"query returned no row: {sql}")
    return tuple(row)


def _insert_keys(conn: Connection[Any], table: str, keys: Sequence[bytes]) -> list[bytes]:
    """Insert the replay keys ``table`` does not hold; return those (``ON CONFLICT DO NOTHING``).

    A key another transaction is inserting is waited for, then skipped if it
    committed: two transactions never both insert one.
    """
    if not keys:
        return []
    rows = conn.execute(
        f"INSERT INTO {table}(enc) SELECT unnest(%s::bytea[]) ON CONFLICT DO NOTHING RETURNING enc",
        (list(keys),),
    ).fetchall()
    return [bytes(row[0]) for row in rows]


def _backfill_replay_keys(conn: Connection[Any], role: str) -> None:
    """Keep the replay keys a store of an earlier version did not (inside the opening transaction).

    Analyzer: every message of every aggregated batch (the store cannot tell
    which did not decrypt: such a key could only make a later message with the
    same key a copy, and only an attacker who saw that message first could have
    sent it); copies counted before stay counted, and a warning says how many
    keys repeat. Shuffler: every waiting ciphertext's key.
    """
    if role == "analyzer":
        repeated = 0
        for (payload,) in conn.execute("SELECT payload FROM batches WHERE aggregated").fetchall():
            keys = replay_keys(bytes(payload))
            repeated += len(keys) - len(_insert_keys(conn, "counted_messages", list(set(keys))))
        if repeated:
            _log.warning(
                "%d messages of batches aggregated before replay keys were kept repeat a key "
                "counted before: they were counted more than once",
                repeated,
            )
        return
    rows = conn.execute(
        "SELECT messages FROM submissions WHERE batch_id IS NULL AND messages IS NOT NULL"
    ).fetchall()
    _insert_keys(conn, "held_keys", [k for row in rows for k in replay_keys(bytes(row[0]))])


def _lock_waiting(conn: Connection[Any]) -> int:
    """Lock the ``unbatched`` counter's row until COMMIT (serialises submits and cuts)."""
    return int(_one(conn, "SELECT value FROM counters WHERE name = 'unbatched' FOR UPDATE")[0])


def _cut(
    conn: Connection[Any], waiting: int, min_users: int, permute: Callable[[bytes], bytes]
) -> OutboxBatch | None:
    """Batch every waiting submission if at least ``min_users`` wait.

    Runs inside the caller's transaction, which holds the counter's lock
    (``waiting`` is its value): the permuted messages go to the outbox and the
    submissions' messages are set to NULL.
    """
    if waiting < min_users:
        return None
    rows = conn.execute("SELECT messages FROM submissions WHERE batch_id IS NULL").fetchall()
    if len(rows) < min_users:  # pragma: no cover - the counter is transactional
        raise StoreError(f"unbatched counter says {waiting}, found {len(rows)} rows")
    batch = new_outbox_batch(b"".join(bytes(row[0]) for row in rows), len(rows), permute)
    conn.execute(
        "INSERT INTO batches(batch_id, payload, n_users, n_messages) VALUES (%s, %s, %s, %s)",
        (batch.batch_id, batch.payload, batch.n_users, batch.n_messages),
    )
    conn.execute(
        "UPDATE submissions SET messages = NULL, batch_id = %s WHERE batch_id IS NULL",
        (batch.batch_id,),
    )
    conn.execute("DELETE FROM held_keys")
    conn.execute("UPDATE counters SET value = 0 WHERE name = 'unbatched'")
    crash_point("cut-before-commit")
    return batch


class PostgresShufflerStore:
    """The shuffler's store in one PostgreSQL database.

    Implements :class:`~shuffledp.service.store.ShufflerStore`.

    Args:
        url: The database's URL.
        task_id: The task it serves.
        max_connections: Most connections held at once.
    """

    def __init__(self, url: str, task_id: str, *, max_connections: int = MAX_CONNECTIONS) -> None:
        self.db = PostgresDatabase(
            url, SHUFFLER_SCHEMA, "shuffler", task_id, max_connections=max_connections
        )

    def submit(
        self,
        submissions: Sequence[NewSubmission],
        *,
        min_batch_users: int,
        permute: Callable[[bytes], bytes],
    ) -> SubmitOutcome:
        """See :meth:`ShufflerStore.submit`."""
        subs = list(submissions)

        def run(conn: Connection[Any]) -> SubmitOutcome:
            waiting = _lock_waiting(conn)
            ids = [s.submission_id for s in subs]
            known = {
                row[0]
                for row in conn.execute(
                    "SELECT submission_id FROM submissions WHERE submission_id = ANY(%s::text[])",
                    (ids,),
                )
            }
            new = [s for s in subs if s.submission_id not in known]
            clients = [s.client_id for s in new if s.client_id is not None]
            if clients:
                used = {
                    row[0]
                    for row in conn.execute(
                        "SELECT client_id FROM used_clients WHERE client_id = ANY(%s::text[])",
                        (clients,),
                    )
                }
                if used or len(set(clients)) != len(clients):
                    raise ClientAlreadySubmittedError(sorted(used) or clients)
                conn.execute(
                    "INSERT INTO used_clients(client_id) SELECT unnest(%s::text[])", (clients,)
                )
            if not new:
                return SubmitOutcome(0, len(subs), waiting, None)
            keys = [k for s in new for k in replay_keys(s.messages)]
            if len(_insert_keys(conn, "held_keys", keys)) != len(keys):
                raise CiphertextAlreadyHeldError()
            cursor = conn.execute(
                "INSERT INTO submissions(submission_id, messages) "
                "SELECT * FROM unnest(%s::text[], %s::bytea[]) "
                "ON CONFLICT (submission_id) DO NOTHING",
                ([s.submission_id for s in new], [s.messages for s in new]),
            )
            accepted = cursor.rowcount
            waiting += accepted
            conn.execute("UPDATE counters SET value = %s WHERE name = 'unbatched'", (waiting,))
            crash_point("ingest-before-commit")
            batch = _cut(conn, waiting, min_batch_users, permute)
            if batch is not None:
                waiting = 0
            return SubmitOutcome(accepted, len(subs) - accepted, waiting, batch)

        return self.db.write(run)

    def cut_batch(self, min_users: int, permute: Callable[[bytes], bytes]) -> OutboxBatch | None:
        """See :meth:`ShufflerStore.cut_batch`."""

        def run(conn: Connection[Any]) -> OutboxBatch | None:
            # A look without the lock first: the dispatcher polls, and a lock is a write.
            (unlocked,) = _one(conn, "SELECT value FROM counters WHERE name = 'unbatched'")
            if int(unlocked) < min_users:
                return None
            return _cut(conn, _lock_waiting(conn), min_users, permute)

        return self.db.write(run)

    def unsent_batches(self) -> list[str]:
        """See :meth:`ShufflerStore.unsent_batches`."""
        return self.db.read(
            lambda conn: batch_ids_from_rows(
                conn.execute("SELECT batch_id FROM batches WHERE NOT sent ORDER BY seq")
            )
        )

    def load_outbox_batch(self, batch_id: str) -> OutboxBatch:
        """See :meth:`ShufflerStore.load_outbox_batch`."""
        row = self.db.read(
            lambda conn: conn.execute(
                "SELECT payload, n_users, n_messages FROM batches WHERE batch_id = %s",
                (batch_id,),
            ).fetchone()
        )
        return outbox_batch_from_row(batch_id, row)

    def mark_sent(self, batch_id: str) -> None:
        """See :meth:`ShufflerStore.mark_sent`."""
        self.db.write(
            lambda conn: conn.execute(
                "UPDATE batches SET sent = true, payload = NULL WHERE batch_id = %s", (batch_id,)
            )
        )

    def stats(self) -> dict[str, int]:
        """See :meth:`ShufflerStore.stats`."""

        def run(conn: Connection[Any]) -> dict[str, int]:
            stored, waiting, cut, sent = _one(
                conn,
                "SELECT (SELECT COUNT(*) FROM submissions), "
                "(SELECT value FROM counters WHERE name = 'unbatched'), "
                "COUNT(*), COUNT(*) FILTER (WHERE sent) FROM batches",
            )
            return shuffler_stats(stored, waiting, cut, sent)

        return self.db.read(run)

    def ping(self) -> None:
        """See :meth:`ShufflerStore.ping`."""
        self.db.ping()

    def close(self) -> None:
        """See :meth:`ShufflerStore.close`."""
        self.db.close()


class PostgresAnalyzerStore:
    """The analyzer's store in one PostgreSQL database.

    Implements :class:`~shuffledp.service.store.AnalyzerStore`.

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

    def add_batch(self, batch: ReceivedBatch) -> bool:
        """See :meth:`AnalyzerStore.add_batch`."""

        def run(conn: Connection[Any]) -> bool:
            # No conflict target: a known batch id and a known content both skip the row,
            # and a concurrent insert of either is waited for, then skipped.
            cursor = conn.execute(
                "INSERT INTO batches(batch_id, n_users, n_messages, payload, content_digest) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (
                    batch.batch_id,
                    batch.n_users,
                    batch.n_messages,
                    batch.payload,
                    batch.content_digest,
                ),
            )
            if cursor.rowcount == 1:
                return True
            if conn.execute(
                "SELECT 1 FROM batches WHERE batch_id = %s", (batch.batch_id,)
            ).fetchone():
                return False
            raise BatchConflictError(batch.batch_id)

        return self.db.write(run)

    def unaggregated_batches(self) -> list[str]:
        """See :meth:`AnalyzerStore.unaggregated_batches`."""
        return self.db.read(
            lambda conn: batch_ids_from_rows(
                conn.execute("SELECT batch_id FROM batches WHERE NOT aggregated ORDER BY seq")
            )
        )

    def batch_ids(self) -> list[str]:
        """See :meth:`AnalyzerStore.batch_ids`."""
        return self.db.read(
            lambda conn: batch_ids_from_rows(
                conn.execute("SELECT batch_id FROM batches ORDER BY seq")
            )
        )

    def load_batch(self, batch_id: str) -> ReceivedBatch:
        """See :meth:`AnalyzerStore.load_batch`."""
        row = self.db.read(
            lambda conn: conn.execute(
                "SELECT payload, n_users, n_messages, content_digest FROM batches "
                "WHERE batch_id = %s",
                (batch_id,),
            ).fetchone()
        )
        return received_batch_from_row(batch_id, row)

    def record_aggregation(self, aggregation: Aggregation) -> RecordedAggregation | None:
        """See :meth:`AnalyzerStore.record_aggregation`."""
        keys = distinct_keys(aggregation)

        def run(conn: Connection[Any]) -> RecordedAggregation | None:
            cursor = conn.execute(
                "UPDATE batches SET aggregated = true WHERE batch_id = %s AND NOT aggregated",
                (aggregation.batch_id,),
            )
            if cursor.rowcount == 0:
                return None
            new = set(_insert_keys(conn, "counted_messages", keys))
            recorded, bins, deltas = aggregation_changes(aggregation, new)
            conn.execute(
                "UPDATE batches SET n_counted = %s WHERE batch_id = %s",
                (recorded.counted, aggregation.batch_id),
            )
            if bins:
                conn.execute(
                    "INSERT INTO batch_counts(batch_id, bin, count) "
                    "SELECT %s, * FROM unnest(%s::integer[], %s::bigint[])",
                    (aggregation.batch_id, [j for j, _ in bins], [c for _, c in bins]),
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

        def run(conn: Connection[Any]) -> AggregateTotals:
            bins = conn.execute(
                "SELECT c.bin, SUM(c.count) FROM batch_counts c JOIN batches b "
                "ON b.batch_id = c.batch_id WHERE b.aggregated GROUP BY c.bin"
            ).fetchall()
            *aggregated, pending = _one(
                conn,
                "SELECT COUNT(*) FILTER (WHERE aggregated), "
                "COALESCE(SUM(n_users) FILTER (WHERE aggregated), 0), "
                "COALESCE(SUM(n_counted) FILTER (WHERE aggregated), 0), "
                "MIN(n_users) FILTER (WHERE aggregated), "
                "COUNT(*) FILTER (WHERE NOT aggregated) FROM batches",
            )
            return totals_from_rows(domain_size, bins, aggregated, pending)

        return self.db.read(run)

    def metrics(self) -> dict[str, int]:
        """See :meth:`AnalyzerStore.metrics`."""

        def run(conn: Connection[Any]) -> dict[str, int]:
            metric_rows = conn.execute("SELECT name, value FROM metrics").fetchall()
            batches = _one(
                conn,
                "SELECT COUNT(*), COALESCE(SUM(n_users), 0), COUNT(*) FILTER (WHERE aggregated), "
                "COALESCE(SUM(n_users) FILTER (WHERE aggregated), 0) FROM batches",
            )
            return analyzer_metrics(metric_rows, batches)

        return self.db.read(run)

    def ping(self) -> None:
        """See :meth:`AnalyzerStore.ping`."""
        self.db.ping()

    def close(self) -> None:
        """See :meth:`AnalyzerStore.close`."""
        self.db.close()


def _add_metrics(conn: Connection[Any], deltas: Mapping[str, int]) -> None:
    # Sorted names: concurrent upserts lock the rows in one order (no deadlock).
    items = sorted((str(name), int(value)) for name, value in deltas.items() if value)
    if items:
        conn.execute(
            "INSERT INTO metrics(name, value) SELECT * FROM unnest(%s::text[], %s::bigint[]) "
            "ON CONFLICT (name) DO UPDATE SET value = metrics.value + excluded.value",
            ([name for name, _ in items], [value for _, value in items]),
        )
