"""The SQLite stores on real files: group commit, deduplication, batching, exactly-once."""

from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest
from _store_checks import (
    check_analyzer_counts_each_replay_key_once,
    check_analyzer_records_each_batch_once,
    check_shuffler_refuses_copies_it_holds,
)

from shuffledp.service.shuffler import permute_messages
from shuffledp.service.sqlite_store import SQLiteAnalyzerStore, SQLiteShufflerStore
from shuffledp.service.store import (
    Aggregation,
    ClientAlreadySubmittedError,
    NewSubmission,
    ReceivedBatch,
    StoreError,
    open_shuffler_store,
    sqlite_path,
)
from shuffledp.service.store_common import content_digest
from shuffledp.service.store_protocols import CiphertextAlreadyHeldError
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


def test_one_shuffler_per_store_file(tmp_path):
    """It looks up what waits in the memory of the process that opened it: a second is refused."""
    first = SQLiteShufflerStore(tmp_path / "s.db", TASK)
    try:
        with pytest.raises(StoreError, match="open in another shuffler"):
            SQLiteShufflerStore(tmp_path / "s.db", TASK)
    finally:
        first.close()
    SQLiteShufflerStore(tmp_path / "s.db", TASK).close()  # once it is closed, it opens


def test_shuffler_refuses_copies_it_holds(tmp_path):
    path = tmp_path / "s.db"

    def reopen(store):
        store.close()
        return SQLiteShufflerStore(path, TASK)

    check_shuffler_refuses_copies_it_holds(SQLiteShufflerStore(path, TASK), reopen).close()


#: The shuffler's and the analyzer's tables as shuffledp 0.2 created them (schema 1).
OLD_SHUFFLER_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE submissions(submission_id TEXT PRIMARY KEY, messages BLOB, batch_id TEXT)
    WITHOUT ROWID;
CREATE INDEX submissions_unbatched ON submissions(submission_id) WHERE batch_id IS NULL;
CREATE TABLE used_clients(client_id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE batches(batch_id TEXT PRIMARY KEY, payload BLOB, n_users INTEGER NOT NULL,
    n_messages INTEGER NOT NULL, sent INTEGER NOT NULL DEFAULT 0);
CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""
OLD_ANALYZER_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE batches(batch_id TEXT PRIMARY KEY, n_users INTEGER NOT NULL,
    n_messages INTEGER NOT NULL, payload BLOB NOT NULL, content_digest TEXT NOT NULL UNIQUE,
    aggregated INTEGER NOT NULL DEFAULT 0, n_counted INTEGER);
CREATE TABLE batch_counts(batch_id TEXT NOT NULL, bin INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (batch_id, bin)) WITHOUT ROWID;
CREATE TABLE metrics(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""


def _old_store(path, schema, role, rows):
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    conn.executemany(
        "INSERT INTO meta VALUES (?, ?)",
        [("role", role), ("task_id", TASK), ("schema_version", "1")],
    )
    for sql, params in rows:
        conn.executemany(sql, params)
    conn.commit()
    conn.close()


def test_a_shuffler_store_of_an_earlier_version_is_moved_to_slots(tmp_path):
    """Waiting rows (ids, ciphertexts) of a 0.2 store: retries, copies, clients still known."""
    path = tmp_path / "old.db"
    waiting = [_sub(n) for n in (1, 2, 0)]
    batched = _sub(1)
    _old_store(
        path,
        OLD_SHUFFLER_SCHEMA,
        "shuffler",
        [
            (
                "INSERT INTO submissions VALUES (?, ?, NULL)",
                [(s.submission_id, s.messages) for s in waiting],
            ),
            ("INSERT INTO submissions VALUES (?, NULL, ?)", [(batched.submission_id, new_id())]),
            ("INSERT INTO used_clients VALUES (?)", [("c9" * 16,)]),
            ("INSERT INTO counters VALUES (?, ?)", [("unbatched", 3)]),
        ],
    )  # fmt: skip
    store = SQLiteShufflerStore(path, TASK)
    try:
        again = _submit(store, [*waiting, batched])  # every id is still known
        assert (again.accepted, again.duplicates) == (0, 4)
        with pytest.raises(CiphertextAlreadyHeldError):  # a copy of a waiting ciphertext
            _submit(store, [NewSubmission(new_id(), waiting[1].messages[:CIPHERTEXT_LENGTH])])
        with pytest.raises(ClientAlreadySubmittedError):
            _submit(store, [_sub(1, client="c9" * 16)])
        assert store.stats()["users_waiting"] == 3 and store.stats()["submissions_stored"] == 4
        batch = store.cut_batch(3, permute_messages)
        assert batch is not None and batch.n_users == 3
        rows = lambda p: sorted(p[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(p), 53))  # noqa: E731
        assert rows(batch.payload) == rows(b"".join(s.messages for s in waiting))
    finally:
        store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM submissions WHERE batch_id IS NULL").fetchone() == (
        0,
    )
    assert "submissions_unbatched" not in _tables(path)
    conn.close()


def test_an_analyzer_store_of_an_earlier_version_keeps_the_keys_it_counted(tmp_path, caplog):
    """Backfilled when opened: a copy of a message counted before the upgrade is dropped."""
    path = tmp_path / "old.db"
    keys = [bytes([k]) * 32 for k in (1, 2, 2)]  # the 0.2 analyzer counted the repeat twice
    payload = b"".join(k + bytes(21) for k in keys)
    digest = content_digest(payload, CIPHERTEXT_LENGTH)
    _old_store(
        path,
        OLD_ANALYZER_SCHEMA,
        "analyzer",
        [
            ("INSERT INTO batches VALUES (?, 3, 3, ?, ?, 1, 3)", [(new_id(), payload, digest)]),
            ("INSERT INTO batch_counts VALUES (?, ?, ?)", []),
        ],
    )
    with caplog.at_level("WARNING", logger="shuffledp.service"):
        store = SQLiteAnalyzerStore(path, TASK)
    try:
        assert "1 messages of batches aggregated before replay keys were kept" in caplog.text
        second = bytes([7]) * (CIPHERTEXT_LENGTH * 2)
        batch = ReceivedBatch(new_id(), second, 2, 2, content_digest(second, CIPHERTEXT_LENGTH))
        assert store.add_batch(batch)
        agg = Aggregation(batch.batch_id, np.array([0, 1]), (keys[0], bytes([3]) * 32), 3)
        recorded = store.record_aggregation(agg)
        assert recorded is not None and (recorded.counted, recorded.duplicates) == (1, 1)
    finally:
        store.close()
    reopened = SQLiteAnalyzerStore(path, TASK)  # backfilled once: no second warning
    reopened.close()
