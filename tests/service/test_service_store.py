"""The SQLite stores on real files: group commit, deduplication, batching, exactly-once."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from _store_checks import (
    check_analyzer_counts_each_replay_key_once,
    check_analyzer_records_each_batch_once,
    check_shuffler_refuses_copies_it_holds,
)

from shuffledp.service.shuffler import permute_messages
from shuffledp.service.sqlite_store import SQLiteAnalyzerStore, SQLiteShufflerStore
from shuffledp.service.store import (
    ClientAlreadySubmittedError,
    NewSubmission,
    StoreError,
    open_shuffler_store,
    sqlite_path,
)
from shuffledp.service.store_common import content_digest
from shuffledp.service.task import new_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH

TASK = "ab" * 16


def _sub(n_messages: int = 1, client: str | None = None) -> NewSubmission:
    import os

    return NewSubmission(new_id(), os.urandom(CIPHERTEXT_LENGTH * n_messages), client)


def _submit(store, subs, min_batch_users=10**9):
    return store.submit(subs, min_batch_users=min_batch_users, permute=permute_messages)


@pytest.fixture
def shuffler_store(tmp_path):
    store = SQLiteShufflerStore(tmp_path / "s.db", TASK)
    yield store
    store.close()


def test_store_settings_are_durable(shuffler_store, tmp_path):
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_concurrent_submissions_are_group_committed(shuffler_store):
    subs = [_sub() for _ in range(400)]

    def worker(part):
        for sub in part:
            _submit(shuffler_store, [sub])

    threads = [threading.Thread(target=worker, args=(subs[i::16],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = shuffler_store.stats()
    assert stats["submissions_stored"] == 400 == stats["users_waiting"]


def test_duplicates_are_no_ops_and_clients_are_unique(shuffler_store):
    a, b = _sub(client="c1" * 16), _sub(client="c2" * 16)
    assert _submit(shuffler_store, [a, b]).accepted == 2
    again = _submit(shuffler_store, [a])
    assert (again.accepted, again.duplicates, again.unbatched) == (0, 1, 2)
    fresh_same_client = _sub(client="c1" * 16)
    other = _sub(client="c3" * 16)
    with pytest.raises(ClientAlreadySubmittedError):
        _submit(shuffler_store, [other, fresh_same_client])
    # all or nothing: the request's other submission was not stored either
    assert shuffler_store.stats()["submissions_stored"] == 2
    assert _submit(shuffler_store, [other]).accepted == 1


def test_cut_batch_takes_everything_permutes_and_forgets(shuffler_store, tmp_path):
    subs = [_sub(n) for n in (0, 1, 2, 3, 1, 1)]
    assert _submit(shuffler_store, subs[:3], 6).batch is None
    assert shuffler_store.cut_batch(6, permute_messages) is None
    outcome = _submit(shuffler_store, subs[3:], 6)
    batch = outcome.batch  # the request that completes the batch cuts it
    assert batch is not None and batch.n_users == 6 and batch.n_messages == 8
    assert outcome.unbatched == 0
    rows = lambda p: sorted(p[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(p), 53))  # noqa: E731
    assert rows(batch.payload) == rows(b"".join(s.messages for s in subs))
    assert shuffler_store.cut_batch(1, permute_messages) is None  # nothing waits now
    assert shuffler_store.unsent_batches() == [batch.batch_id]
    conn = sqlite3.connect(tmp_path / "s.db")
    assert conn.execute(
        "SELECT COUNT(*) FROM submissions WHERE messages IS NOT NULL"
    ).fetchone() == (0,)
    assert conn.execute("SELECT COUNT(DISTINCT batch_id) FROM submissions").fetchone() == (1,)
    conn.close()
    # a duplicate of a batched submission is still recognised
    assert _submit(shuffler_store, [subs[0]]).duplicates == 1
    shuffler_store.mark_sent(batch.batch_id)
    assert shuffler_store.unsent_batches() == []


def _tables(path):
    conn = sqlite3.connect(path)
    try:
        return sorted(row[0] for row in conn.execute("SELECT name FROM sqlite_master"))
    finally:
        conn.close()


def test_store_is_bound_to_its_task_and_role(tmp_path):
    SQLiteShufflerStore(tmp_path / "s.db", TASK).close()
    with pytest.raises(StoreError, match="belongs to task"):
        SQLiteShufflerStore(tmp_path / "s.db", "cd" * 16)
    tables_before = _tables(tmp_path / "s.db")
    with pytest.raises(StoreError, match="belongs to the shuffler"):
        SQLiteAnalyzerStore(tmp_path / "s.db", TASK)
    # refused before any of the analyzer's tables was created in the shuffler's file
    assert _tables(tmp_path / "s.db") == tables_before
    with pytest.raises(StoreError, match="does not exist"):
        SQLiteAnalyzerStore(tmp_path / "missing.db", TASK, read_only=True)


def test_store_urls(tmp_path):
    assert str(sqlite_path("sqlite:///rel/x.db")) == "rel/x.db"
    assert str(sqlite_path("sqlite:////abs/x.db")) == "/abs/x.db"
    from shuffledp._validation import InvalidParameterError

    for bad in ("x.db", "sqlite://x.db", "sqlite:///", "postgresql://u@h"):
        with pytest.raises(InvalidParameterError):
            open_shuffler_store(bad, TASK)


def test_analyzer_records_each_batch_once(tmp_path):
    store = SQLiteAnalyzerStore(tmp_path / "a.db", TASK)
    try:
        check_analyzer_records_each_batch_once(store)
        check_analyzer_counts_each_replay_key_once(store)
    finally:
        store.close()


def test_content_digest_ignores_order():
    rows = [bytes([i]) * CIPHERTEXT_LENGTH for i in range(5)]
    assert content_digest(b"".join(rows), 53) == content_digest(b"".join(rows[::-1]), 53)
    assert content_digest(b"".join(rows), 53) != content_digest(b"".join(rows[:4]), 53)


def test_shuffler_refuses_copies_it_holds(tmp_path):
    path = tmp_path / "s.db"

    def reopen(store):
        store.close()
        return SQLiteShufflerStore(path, TASK)

    check_shuffler_refuses_copies_it_holds(SQLiteShufflerStore(path, TASK), reopen).close()
