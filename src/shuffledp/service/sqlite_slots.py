"""The SQLite shuffler's waiting submissions: fixed-size slots drawn at random, rewritten in place.

SQLite writes a row where its page has room (a new cell below the previous
ones) and the WAL appends each commit's pages after the previous commit's, so
a table that receives one row per arrival keeps arrival order in its bytes,
whatever its keys: with arrivals 0.3 to 1 s apart, the client ids of an
earlier version's files followed arrival order exactly (Spearman's ρ = −1.0
between arrival and byte offset). So nothing a waiting submission leaves is
written in arrival order (:class:`SlotPool`):

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
  opens). Hence one process per store file (an exclusive lock, taken by
  :class:`~shuffledp.service.sqlite_store.SQLiteShufflerStore`).
* a write that stores a submission has the WAL checkpointed and truncated
  soon after its commit (:meth:`SQLiteDatabase.request_checkpoint`), so the
  WAL never holds one commit's pages after another's: which slots filled when.

Only at the cut do the waiting ids reach ``submissions`` (for deduplication,
with their batch id) and the client ids ``used_clients``, each in the order
of the (random) ids, in one transaction; the slots are zeroed in place and
freed.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from shuffledp.service.sql_dialect import SQLITE_CHUNK, SQLiteDialect, WaitingPool
from shuffledp.service.store_common import REPLAY_KEY_LENGTH
from shuffledp.service.store_protocols import (
    CiphertextAlreadyHeldError,
    ClientAlreadySubmittedError,
    NewSubmission,
    OutboxBatch,
    StoreError,
)
from shuffledp.service.wire import CIPHERTEXT_LENGTH
from shuffledp.shuffler.uniform import secure_permutation

if TYPE_CHECKING:
    from shuffledp.service.sqlite_store import SQLiteDatabase

__all__ = ["SLOTS_META", "SLOT_BYTES", "SlotPool"]

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

    A multi-row upsert per :data:`~shuffledp.service.sql_dialect.SQLITE_CHUNK`
    variables: every slot exists, so each row takes the update path, which
    keeps a same-size cell in place.
    """
    params = [v for pair in zip(slots, contents, strict=True) for v in pair]
    for start in range(0, len(params), SQLITE_CHUNK):
        chunk = params[start : start + SQLITE_CHUNK]
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


class SlotPool(WaitingPool[sqlite3.Connection]):
    """The SQLite shuffler's waiting submissions in random slots (see the module docstring).

    Args:
        dialect: The store's SQLite dialect (its database's writer runs every write).
        lock: A descriptor holding the store file's exclusive lock (closed by
            :meth:`close`): this pool looks up what waits in its own memory, so
            a second pool on the same file would not see what this one stores.
    """

    waiting_in_submissions = False  # only batched ids reach ``submissions``

    def __init__(self, dialect: SQLiteDialect, lock: int) -> None:
        self.dialect = dialect
        self.db: SQLiteDatabase = dialect.db
        self._lock: int | None = lock
        self.waiting = _Waiting()

    def open(self) -> None:
        """Read what waits into memory; move an earlier version's data to slots.

        Checkpointed before it returns: a store of the first slot version does
        not show its dropped tags in the database file once the store is open.
        """
        self.db.after_rollback = self.waiting.invalidate
        self.db.write(lambda conn: _open_slots(conn, self.waiting), checkpoint_first=True)

    def begin(self, tx: sqlite3.Connection) -> None:
        """Read the slots again if a write that changed them did not commit."""
        if not self.waiting.valid:
            self.waiting.load(tx)

    def add(self, tx: sqlite3.Connection, subs: Sequence[NewSubmission]) -> int:
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
        waiting = self.waiting
        unique = list({s.submission_id: s for s in reversed(subs)}.values())[::-1]
        unique = [s for s in unique if s.submission_id not in waiting.ids]  # waiting: a retry
        if not unique:
            return 0
        batched = self.dialect.existing(
            tx, "submissions", "submission_id", [s.submission_id for s in unique]
        )
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
            used = self.dialect.existing(tx, "used_clients", "client_id", list(clients))
            if used:
                raise ClientAlreadySubmittedError(sorted(used))
        waiting.valid = False  # until the write has run to its end
        _fill_slots(tx, waiting, _slot_contents(new))
        waiting.ids.update(s.submission_id for s in new)
        held_clients.update(clients)
        held_keys.update(keys)
        return len(new)

    def cut(
        self, tx: sqlite3.Connection, outbox: Callable[[bytes, int], OutboxBatch]
    ) -> OutboxBatch:
        """Batch every waiting submission (inside the caller's transaction).

        The used slots' ciphertexts go to the outbox; the slots are zeroed in
        place and freed; the batch's submission ids are written to
        ``submissions`` with the batch's id and its client ids to
        ``used_clients``, each in the order of the (random) ids. With
        ``secure_delete`` what is deleted is overwritten.
        """
        waiting = self.waiting
        used = tx.execute("SELECT slot, content FROM slots WHERE content != ?", (_FREE,)).fetchall()
        contents = [bytes(row[1]) for row in used]
        messages = b"".join(c[1:] for c in contents if c[:1] == _MESSAGE)
        clients = sorted(_slot_text(c) for c in contents if c[:1] == _CLIENT)
        ids = sorted(_slot_text(c) for c in contents if c[:1] == _SUBMISSION)
        batch = outbox(messages, len(ids))
        waiting.valid = False  # until the write has run to its end
        _zero_used_slots(tx)
        slots = [int(row[0]) for row in used]
        per_statement = SQLITE_CHUNK // 2
        for start in range(0, len(ids), per_statement):
            chunk = ids[start : start + per_statement]
            tx.execute(
                "INSERT INTO submissions(submission_id, messages, batch_id) VALUES "
                + ",".join(["(?, NULL, ?)"] * len(chunk)),
                [value for sid in chunk for value in (sid, batch.batch_id)],
            )
        tx.executemany("INSERT INTO used_clients(client_id) VALUES (?)", [(c,) for c in clients])
        waiting.ids.clear()
        waiting.clients.clear()
        waiting.keys.clear()
        waiting.release(slots)
        return batch

    def end(self, *, stored: bool) -> None:
        """What is in memory matches the slots again; after a store, checkpoint soon."""
        if stored:
            self.db.request_checkpoint()
        self.waiting.valid = True

    def close(self) -> None:
        """Release the store file's lock."""
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None
