"""The SQLite shuffler store looks up what waits in memory: it must agree with its file.

The waiting ids, client ids and replay keys and the free slots are kept in
the process's memory (no table of tags, draws or indexes on disk). A write
that changed them and then failed (its savepoint rolled back, or the disk
full) must leave no trace there: the store reads them again from what
committed. Stores of the first slot version kept keyed tags and the free
slots' draws in tables: opening one drops them and their bytes.
"""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

from shuffledp.service.shuffler import permute_messages
from shuffledp.service.sqlite_store import SQLiteShufflerStore
from shuffledp.service.store_protocols import (
    CiphertextAlreadyHeldError,
    ClientAlreadySubmittedError,
    NewSubmission,
    StoreError,
)
from shuffledp.service.task import new_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH

TASK = "cd" * 16


def _sub(n_messages: int = 1, client: str | None = None) -> NewSubmission:
    return NewSubmission(new_id(), os.urandom(CIPHERTEXT_LENGTH * n_messages), client)


def _submit(store, subs, min_batch_users=10**9, permute=permute_messages):
    return store.submit(subs, min_batch_users=min_batch_users, permute=permute)


def _rows(payload: bytes) -> list[bytes]:
    return sorted(payload[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(payload), 53))


def _tables(path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def test_a_write_that_fails_at_the_cut_leaves_nothing_in_memory(tmp_path):
    """The cut's permutation raises: the submission that completed the batch is not stored."""
    store = SQLiteShufflerStore(tmp_path / "s.db", TASK)
    try:
        held = [_sub(2, client=f"{i:032x}") for i in range(3)]
        assert _submit(store, held).accepted == 3
        last = _sub(2, client="f" * 32)

        def broken(payload: bytes) -> bytes:
            raise RuntimeError("the permutation failed")

        with pytest.raises(RuntimeError, match="permutation failed"):
            _submit(store, [last], min_batch_users=4, permute=broken)
        assert store.stats()["users_waiting"] == 3
        # Not taken for a retry, its client id and ciphertexts not held: stored now.
        again = _submit(store, [last])
        assert (again.accepted, again.duplicates, again.unbatched) == (1, 0, 4)
        with pytest.raises(CiphertextAlreadyHeldError):
            _submit(store, [NewSubmission(new_id(), last.messages[:CIPHERTEXT_LENGTH])])
        with pytest.raises(ClientAlreadySubmittedError):
            _submit(store, [_sub(1, client="f" * 32)])
        batch = store.cut_batch(4, permute_messages)
        assert batch is not None and batch.n_users == 4
        assert _rows(batch.payload) == _rows(b"".join(s.messages for s in [*held, last]))
    finally:
        store.close()


def test_a_transaction_that_fills_the_disk_leaves_nothing_in_memory(tmp_path):
    """The file may not grow: SQLITE_FULL aborts the group's transaction, both its writes fail.

    One write (A) fits and ran to its end; the next in the same group (B)
    needs new pages. SQLite rolls back the whole transaction, A included, so
    the store must forget A as well as B (it reads the slots again).
    """
    path = tmp_path / "s.db"
    store = SQLiteShufflerStore(path, TASK)
    try:
        first = [_sub() for _ in range(10)]
        _submit(store, first)
        (pages,) = store.db.write(lambda conn: conn.execute("PRAGMA page_count").fetchone())
        store.db.write(lambda conn: conn.execute(f"PRAGMA max_page_count = {pages}"))
        started, go = threading.Event(), threading.Event()
        blocker = store.db.write_future(lambda conn: (started.set(), go.wait(30)))
        assert started.wait(30)  # the writer is busy: A and B go into its next group
        a, b = [_sub()], [_sub() for _ in range(2000)]
        future_a = store.submit_future(a, min_batch_users=10**9, permute=permute_messages)
        future_b = store.submit_future(b, min_batch_users=10**9, permute=permute_messages)
        go.set()
        blocker.result(30)
        for future in (future_a, future_b):
            with pytest.raises(StoreError):
                future.result(30)
        assert store.stats()["users_waiting"] == 10
        with pytest.raises(CiphertextAlreadyHeldError):  # what committed is still held
            _submit(store, [NewSubmission(new_id(), first[3].messages)])
        store.db.write(lambda conn: conn.execute("PRAGMA max_page_count = 1073741823"))
        again = _submit(store, a + b)  # neither is taken for a retry
        assert (again.accepted, again.duplicates, again.unbatched) == (2001, 0, 2011)
        batch = store.cut_batch(2011, permute_messages)
        assert batch is not None
        assert _rows(batch.payload) == _rows(b"".join(s.messages for s in first + a + b))
    finally:
        store.close()


def test_a_group_rolled_back_after_a_write_ran_to_its_end_leaves_nothing_in_memory(tmp_path):
    """A write (A) ran to its end, then its group's transaction was rolled back.

    The rollback here is a later write of the same group that rolls the
    transaction back (as a failed COMMIT would): A's submission is not
    stored, and the store must not take it for a waiting one.
    """
    store = SQLiteShufflerStore(tmp_path / "s.db", TASK)
    try:
        started, go = threading.Event(), threading.Event()
        blocker = store.db.write_future(lambda conn: (started.set(), go.wait(30)))
        assert started.wait(30)  # the writer is busy: A and the rollback share its next group
        a = [_sub(2, client="e" * 32)]
        future_a = store.submit_future(a, min_batch_users=10**9, permute=permute_messages)
        rollback = store.db.write_future(lambda conn: conn.execute("ROLLBACK"))
        go.set()
        blocker.result(30)
        for future in (future_a, rollback):
            with pytest.raises(StoreError):
                future.result(30)
        assert store.stats()["users_waiting"] == 0
        again = _submit(store, a)
        assert (again.accepted, again.duplicates, again.unbatched) == (1, 0, 1)
    finally:
        store.close()


def test_a_store_of_the_first_slot_version_loses_its_tags_and_draws(tmp_path):
    """``held_tags`` and ``free_slots`` are dropped, their bytes overwritten; what waits stays."""
    path = tmp_path / "s.db"
    store = SQLiteShufflerStore(path, TASK)
    waiting = [_sub(3, client=f"{i:032x}") for i in range(5)]
    _submit(store, waiting)
    store.close()
    marks = [os.urandom(16) for _ in range(300)]
    conn = sqlite3.connect(path)  # what the first slot version also kept
    conn.executescript(
        "CREATE TABLE held_tags(tag BLOB PRIMARY KEY) WITHOUT ROWID;"
        "CREATE TABLE free_slots(draw BLOB PRIMARY KEY, slot INTEGER NOT NULL) WITHOUT ROWID;"
    )
    conn.executemany("INSERT INTO held_tags VALUES (?)", [(m,) for m in marks[:150]])
    conn.executemany("INSERT INTO free_slots VALUES (?, 0)", [(m,) for m in marks[150:]])
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert all(m in path.read_bytes() for m in marks)

    store = SQLiteShufflerStore(path, TASK)
    try:
        assert not {"held_tags", "free_slots"} & _tables(path)
        files = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
        assert not [m for m in marks if m in files]
        assert _submit(store, waiting).duplicates == 5  # retries
        with pytest.raises(CiphertextAlreadyHeldError):
            _submit(store, [NewSubmission(new_id(), waiting[4].messages[53:106])])
        with pytest.raises(ClientAlreadySubmittedError):
            _submit(store, [_sub(1, client=f"{2:032x}")])
    finally:
        store.close()
    assert _tables(path) == {"meta", "submissions", "used_clients", "slots", "batches", "counters"}
