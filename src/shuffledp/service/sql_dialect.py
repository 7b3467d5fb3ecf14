"""What the stores' SQL backends differ in: the dialect interface, SQLite's and PostgreSQL's.

:mod:`shuffledp.service.sql_store` writes the shuffler's and the analyzer's
stores once, in SQL both backends run, against :class:`Dialect`. What the
store writes once:

* ``?`` placeholders (:class:`PostgresDialect` hands psycopg ``%s``);
* booleans as ``SET col = true`` and ``WHERE col`` / ``WHERE NOT col``: in
  SQLite the columns are integers 0 and 1 (``true`` is 1), in PostgreSQL
  ``BOOLEAN``;
* aggregate ``FILTER (WHERE …)`` clauses, ``INSERT … ON CONFLICT`` and
  ``RETURNING`` (SQLite 3.30, 3.24 and 3.35; the store needs 3.35).

What differs lives in a dialect: how a transaction runs (SQLite: the one
writer thread of :class:`~shuffledp.service.sqlite_store.SQLiteDatabase`
and its job queue, group-committed; PostgreSQL: a connection of the pool of
:class:`~shuffledp.service.postgres_store.PostgresDatabase`, one
transaction per call), the column that orders batches by arrival (``rowid``,
``seq``), locking the row a write reads (PostgreSQL's ``FOR UPDATE``; SQLite's
writer holds the database's write lock), the statements that take many values
(SQLite: a statement per row or per 500 variables; PostgreSQL: arrays and
``unnest``), and the ``meta`` key each backend's stores record once their
replay keys are complete. Each backend keeps its own tables (the ``CREATE``
statements differ in types) and its own :class:`WaitingPool`, where the
shuffler keeps the submissions that wait for a batch: SQLite in random slots
(:mod:`shuffledp.service.sqlite_slots`), PostgreSQL in rows
(:mod:`shuffledp.service.postgres_store`).
"""

from __future__ import annotations

import functools
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from shuffledp.service.store_protocols import NewSubmission, OutboxBatch

if TYPE_CHECKING:
    from psycopg import Connection, Cursor

    from shuffledp.service.postgres_store import PostgresDatabase
    from shuffledp.service.sqlite_store import SQLiteDatabase

__all__ = [
    "SCHEMA_LOCK",
    "SQLITE_CHUNK",
    "Dialect",
    "PostgresDialect",
    "PostgresTransaction",
    "Rows",
    "SQLiteDialect",
    "Transaction",
    "WaitingPool",
]

T = TypeVar("T")

#: SQL variables per SQLite statement (an ``IN (…)`` list, a multi-row INSERT); below 999.
SQLITE_CHUNK = 500
#: PostgreSQL advisory lock held while a store's tables are created or upgraded.
SCHEMA_LOCK = 0x5D5F_5D5F


class Rows(Protocol):
    """What a statement returns: a DB-API cursor (:mod:`sqlite3`'s or psycopg's)."""

    @property
    def rowcount(self) -> int:
        """Rows an INSERT, UPDATE or DELETE changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """The rows left."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """The rows left, one by one."""
        ...


class Transaction(Protocol):
    """The connection a store's job gets, inside its transaction: statements with ``?``."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Rows:
        """Run one statement."""
        ...


C = TypeVar("C", bound=Transaction)


class Dialect(ABC, Generic[C]):
    """How a store runs its transactions and the few statements that differ between backends.

    Type parameter ``C`` is the connection its jobs get (:class:`Transaction`).
    """

    #: The ``batches`` column that orders batches by arrival.
    arrival: str
    #: Appended to a ``SELECT`` of one row: lock it until COMMIT ('' where the
    #: writer already holds the database's write lock).
    for_update: str
    #: ``meta`` key recorded once every aggregated batch's replay keys are in
    #: ``counted_messages`` (at creation, or once a store of an earlier version is backfilled).
    counted_keys_meta: str

    @abstractmethod
    def read(self, run: Callable[[C], T]) -> T:
        """Run ``run(tx)`` in one read-only transaction (a consistent snapshot).

        Raises:
            StoreError: If the database cannot be read.
        """

    @abstractmethod
    def write(self, run: Callable[[C], T], *, checkpoint_first: bool = False) -> T:
        """Run ``run(tx)`` in a write transaction; return once it is committed.

        If ``run`` raises, its changes are undone and the exception reaches the
        caller. ``checkpoint_first``: SQLite's WAL is checkpointed and truncated
        before the call returns (nothing to do in PostgreSQL).

        Raises:
            StoreError: If the store is read-only or closed, or the commit failed.
        """

    @abstractmethod
    def insert_many(
        self,
        tx: C,
        table: str,
        columns: Sequence[tuple[str, str]],
        rows: Sequence[Sequence[Any]],
        *,
        conflict: str = "",
    ) -> int:
        """Insert ``rows`` into ``table``; return how many were inserted.

        Args:
            tx: The transaction.
            table: The table.
            columns: Each column's name and PostgreSQL type (``text``, ``bytea``,
                ``integer``, ``bigint``), in the order of the rows' values.
            rows: The rows.
            conflict: An ``ON CONFLICT …`` clause, or ''.
        """

    @abstractmethod
    def insert_new_keys(self, tx: C, table: str, keys: Sequence[bytes]) -> set[bytes]:
        """Insert the replay keys that ``table``'s ``enc`` lacks; return those (each once).

        A key listed twice is inserted once. A key another transaction is
        inserting is waited for, then skipped if it committed: two transactions
        never both insert one.
        """

    @abstractmethod
    def existing(self, tx: C, table: str, column: str, values: Sequence[str]) -> set[str]:
        """Which of the text ``values`` the ``column`` of ``table`` holds."""

    @abstractmethod
    def lock_upgrades(self, tx: C) -> None:
        """Serialise, until COMMIT, the writes that create or upgrade a store's tables."""

    @abstractmethod
    def ping(self) -> None:
        """Check cheaply that the store can work.

        Raises:
            StoreError: If it cannot.
        """

    @abstractmethod
    def close(self) -> None:
        """Finish pending writes and release the database."""

    def upgrade_once(self, key: str, upgrade: Callable[[C], None]) -> None:
        """Run ``upgrade`` and record ``key`` in ``meta``, in one write, unless ``key`` is there.

        Raises:
            StoreError: If the write fails.
        """

        def run(tx: C) -> None:
            self.lock_upgrades(tx)
            if tx.execute("SELECT 1 FROM meta WHERE key = ?", (key,)).fetchone():
                return
            upgrade(tx)
            tx.execute("INSERT INTO meta(key, value) VALUES (?, 'complete')", (key,))

        self.write(run)


class WaitingPool(ABC, Generic[C]):
    """Where a shuffler's store keeps the submissions that wait for a batch.

    The one part of the shuffler's store that each backend writes its own way
    (the module docstrings of :mod:`~shuffledp.service.sqlite_slots` and
    :mod:`~shuffledp.service.postgres_store` say what their files show). The
    store calls :meth:`begin`, then :meth:`add` and/or :meth:`cut`, then
    :meth:`end` inside one write; if the write raises, :meth:`end` is not called.
    """

    #: Whether waiting submissions have rows in ``submissions`` (or only batched ones).
    waiting_in_submissions: bool

    def open(self) -> None:
        """When the store opens (its tables exist): upgrade what an earlier version left.

        Raises:
            StoreError: If the store cannot be used.
        """

    def begin(self, tx: C) -> None:
        """At the start of a write that adds or cuts (inside its transaction)."""

    @abstractmethod
    def add(self, tx: C, subs: Sequence[NewSubmission]) -> int:
        """Store the submissions not stored yet (waiting or batched); return how many.

        Raises:
            ClientAlreadySubmittedError: If a new submission's client id was used
                before or twice in ``subs``; nothing is stored.
            CiphertextAlreadyHeldError: If a new submission's ciphertext has the
                replay key of a waiting one, or of another one in ``subs``;
                nothing is stored.
        """

    @abstractmethod
    def cut(self, tx: C, outbox: Callable[[bytes, int], OutboxBatch]) -> OutboxBatch:
        """Batch every waiting submission (inside the caller's transaction).

        ``outbox(messages, n_users)`` gets every waiting ciphertext
        (concatenated) and the number of waiting submissions, and stores the
        batch; the pool then records the submissions as batched and erases
        their ciphertexts.
        """

    def end(self, *, stored: bool) -> None:
        """A write that began ran to its end (``stored``: it stored submissions)."""

    def close(self) -> None:
        """Release what the pool holds (after the database is closed)."""


# -- SQLite ----------------------------------------------------------------------------------


class SQLiteDialect(Dialect[sqlite3.Connection]):
    """SQLite: every write a job of the writer thread, every read a new connection.

    Args:
        db: The database (its writer thread group-commits the writes).
    """

    arrival = "rowid"
    for_update = ""  # the writer's transaction (BEGIN IMMEDIATE) holds the write lock
    counted_keys_meta = "counted_messages"

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db

    def read(self, run: Callable[[sqlite3.Connection], T]) -> T:
        """See :meth:`Dialect.read`."""
        return self.db.read(run)

    def write(self, run: Callable[[sqlite3.Connection], T], *, checkpoint_first: bool = False) -> T:
        """See :meth:`Dialect.write` (:meth:`SQLiteDatabase.write`: in a SAVEPOINT of a group)."""
        return self.db.write(run, checkpoint_first=checkpoint_first)

    def insert_many(
        self,
        tx: sqlite3.Connection,
        table: str,
        columns: Sequence[tuple[str, str]],
        rows: Sequence[Sequence[Any]],
        *,
        conflict: str = "",
    ) -> int:
        """See :meth:`Dialect.insert_many` (one prepared statement, run per row)."""
        if not rows:
            return 0
        names = ", ".join(name for name, _ in columns)
        marks = ", ".join("?" * len(columns))
        sql = f"INSERT INTO {table}({names}) VALUES ({marks}) {conflict}"
        return tx.executemany(sql, rows).rowcount

    def insert_new_keys(
        self, tx: sqlite3.Connection, table: str, keys: Sequence[bytes]
    ) -> set[bytes]:
        """See :meth:`Dialect.insert_new_keys` (:data:`SQLITE_CHUNK` keys per statement)."""
        new: set[bytes] = set()
        for start in range(0, len(keys), SQLITE_CHUNK):
            chunk = keys[start : start + SQLITE_CHUNK]
            new.update(
                bytes(row[0])
                for row in tx.execute(
                    f"INSERT INTO {table}(enc) VALUES "
                    + ",".join(["(?)"] * len(chunk))
                    + " ON CONFLICT(enc) DO NOTHING RETURNING enc",
                    chunk,
                )
            )
        return new

    def existing(
        self, tx: sqlite3.Connection, table: str, column: str, values: Sequence[str]
    ) -> set[str]:
        """See :meth:`Dialect.existing` (``IN`` lists of :data:`SQLITE_CHUNK` values)."""
        found: set[str] = set()
        for start in range(0, len(values), SQLITE_CHUNK):
            chunk = values[start : start + SQLITE_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT {column} FROM {table} WHERE {column} IN ({marks})"
            found.update(row[0] for row in tx.execute(sql, chunk))
        return found

    def lock_upgrades(self, tx: sqlite3.Connection) -> None:
        """Nothing to take: the writer's transaction holds the database's write lock."""

    def ping(self) -> None:
        """See :meth:`SQLiteDatabase.ping`."""
        self.db.ping()

    def close(self) -> None:
        """See :meth:`SQLiteDatabase.close`."""
        self.db.close()


# -- PostgreSQL ------------------------------------------------------------------------------


@functools.cache
def _pyformat(sql: str) -> str:
    """``sql`` with psycopg's ``%s`` for each ``?`` (store SQL holds no other ``?`` or ``%``)."""
    if "%" in sql:  # pragma: no cover - a programming error
        raise ValueError(f"a store statement with '%' cannot be converted: {sql}")
    return sql.replace("?", "%s")


class PostgresTransaction:
    """A psycopg connection inside a store's transaction, taking statements with ``?``.

    Args:
        conn: The connection (its transaction begun by :class:`PostgresDatabase`).
    """

    __slots__ = ("conn",)

    def __init__(self, conn: Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Cursor[Any]:
        """Run one statement (its ``?`` as ``%s``)."""
        return self.conn.execute(_pyformat(sql), params)


class PostgresDialect(Dialect[PostgresTransaction]):
    """PostgreSQL: every call a transaction on a connection of the pool.

    Args:
        db: The database (its pool of connections).
    """

    arrival = "seq"
    for_update = " FOR UPDATE"
    counted_keys_meta = "replay_keys"

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def read(self, run: Callable[[PostgresTransaction], T]) -> T:
        """See :meth:`Dialect.read` (REPEATABLE READ READ ONLY)."""
        return self.db.read(lambda conn: run(PostgresTransaction(conn)))

    def write(
        self, run: Callable[[PostgresTransaction], T], *, checkpoint_first: bool = False
    ) -> T:
        """See :meth:`Dialect.write` (READ COMMITTED; ``checkpoint_first`` has nothing to do)."""
        return self.db.write(lambda conn: run(PostgresTransaction(conn)))

    def insert_many(
        self,
        tx: PostgresTransaction,
        table: str,
        columns: Sequence[tuple[str, str]],
        rows: Sequence[Sequence[Any]],
        *,
        conflict: str = "",
    ) -> int:
        """See :meth:`Dialect.insert_many` (one statement: an array per column, ``unnest``)."""
        if not rows:
            return 0
        names = ", ".join(name for name, _ in columns)
        arrays = ", ".join(f"?::{kind}[]" for _, kind in columns)
        sql = f"INSERT INTO {table}({names}) SELECT * FROM unnest({arrays}) {conflict}"
        return tx.execute(sql, [list(column) for column in zip(*rows, strict=True)]).rowcount

    def insert_new_keys(
        self, tx: PostgresTransaction, table: str, keys: Sequence[bytes]
    ) -> set[bytes]:
        """See :meth:`Dialect.insert_new_keys` (one statement, ``ON CONFLICT DO NOTHING``)."""
        if not keys:
            return set()
        rows = tx.execute(
            f"INSERT INTO {table}(enc) SELECT unnest(?::bytea[]) ON CONFLICT DO NOTHING "
            "RETURNING enc",
            (list(keys),),
        ).fetchall()
        return {bytes(row[0]) for row in rows}

    def existing(
        self, tx: PostgresTransaction, table: str, column: str, values: Sequence[str]
    ) -> set[str]:
        """See :meth:`Dialect.existing` (``= ANY`` of an array)."""
        sql = f"SELECT {column} FROM {table} WHERE {column} = ANY(?::text[])"
        return {str(row[0]) for row in tx.execute(sql, (list(values),))}

    def lock_upgrades(self, tx: PostgresTransaction) -> None:
        """Take the advisory lock :class:`PostgresDatabase` holds while it creates tables."""
        tx.execute("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))

    def ping(self) -> None:
        """See :meth:`PostgresDatabase.ping`."""
        self.db.ping()

    def close(self) -> None:
        """See :meth:`PostgresDatabase.close`."""
        self.db.close()
