"""The PostgreSQL stores against a real server: the checks test_service_store runs for SQLite,
plus what only a server has (settings, several processes, lost connections)."""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter
from urllib.parse import urlsplit

import numpy as np
import psycopg
import pytest
from _deploy import free_port, make_deployment
from _store_checks import (
    check_analyzer_counts_each_replay_key_once,
    check_analyzer_records_each_batch_once,
    check_shuffler_refuses_copies_it_holds,
    key,
)
from test_service_store import TASK, _sub, _submit

from shuffledp._optional import MissingExtraError
from shuffledp._validation import InvalidParameterError
from shuffledp.cli import main
from shuffledp.service.postgres_store import (
    PostgresAnalyzerStore,
    PostgresShufflerStore,
    redact_url,
)
from shuffledp.service.shuffler import permute_messages
from shuffledp.service.store import (
    Aggregation,
    ClientAlreadySubmittedError,
    NewSubmission,
    ReceivedBatch,
    StoreError,
    check_store_url,
    open_analyzer_store,
    open_shuffler_store,
)
from shuffledp.service.store_common import content_digest
from shuffledp.service.store_protocols import CiphertextAlreadyHeldError
from shuffledp.service.task import new_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH


def _dbname(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def _rows(url: str, query: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def _messages(payload: bytes) -> list[bytes]:
    return sorted(payload[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(payload), 53))


def _in_threads(n: int, target) -> None:
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.fixture
def postgres_url(postgres_database):
    return postgres_database()


@pytest.fixture
def shuffler_store(postgres_url):
    store = PostgresShufflerStore(postgres_url, TASK)
    yield store
    store.close()


def test_store_settings_are_durable(shuffler_store, postgres_server, postgres_database):
    settings = "SELECT current_setting('synchronous_commit'), current_setting('fsync'), "
    isolation = "current_setting('transaction_isolation'), current_setting('transaction_read_only')"
    write = shuffler_store.db.write(lambda c: c.execute(settings + isolation).fetchone())
    assert write == ("on", "on", "read committed", "off")
    read = shuffler_store.db.read(lambda c: c.execute(settings + isolation).fetchone())
    assert read == ("on", "on", "repeatable read", "on")

    # a database default cannot weaken durability: each session sets it again
    url = postgres_database()
    with postgres_server.connect() as conn:
        conn.execute(f'ALTER DATABASE "{_dbname(url)}" SET synchronous_commit = off')
    assert _rows(url, "SHOW synchronous_commit") == [("off",)]
    store = PostgresShufflerStore(url, TASK)
    try:
        assert store.db.write(lambda c: c.execute("SHOW synchronous_commit").fetchone()) == ("on",)
    finally:
        store.close()

    # a server that does not fsync is refused
    with postgres_server.setting("fsync", "off"), pytest.raises(StoreError, match="fsync = off"):
        PostgresShufflerStore(postgres_database(), TASK)


def test_concurrent_submissions_are_all_stored(shuffler_store):
    subs = [_sub() for _ in range(400)]
    _in_threads(16, lambda i: [_submit(shuffler_store, [sub]) for sub in subs[i::16]])
    stats = shuffler_store.stats()
    assert stats["submissions_stored"] == 400 == stats["users_waiting"]


def test_concurrent_cuts_never_overlap_or_double_count(postgres_url):
    """Two stores (as two processes would) and 12 threads submit and cut at once."""
    stores = [PostgresShufflerStore(postgres_url, TASK) for _ in range(2)]
    subs = [_sub(n) for _ in range(60) for n in (1, 2, 0, 3, 1)]  # 300 users
    try:

        def work(i: int) -> None:
            store = stores[i % 2]
            if i >= 10:  # two threads only cut (the dispatcher's recovery path)
                for _ in range(30):
                    store.cut_batch(10, permute_messages)
                return
            for sub in subs[i::10]:
                outcome = _submit(store, [sub], min_batch_users=10)
                assert outcome.accepted == 1

        _in_threads(12, work)
        store = stores[0]
        batches = [store.load_outbox_batch(b) for b in store.unsent_batches()]
        # one submission per request: every cut happens exactly at the minimum
        assert [b.n_users for b in batches] == [10] * 30
        assert sum(b.n_messages for b in batches) == sum(len(s.messages) // 53 for s in subs)
        payloads = b"".join(b.payload for b in batches)
        assert _messages(payloads) == _messages(b"".join(s.messages for s in subs))
        assert store.stats()["users_waiting"] == 0
        per_batch = Counter(
            row[0] for row in _rows(postgres_url, "SELECT batch_id FROM submissions")
        )
        assert per_batch == {b.batch_id: 10 for b in batches}
    finally:
        for s in stores:
            s.close()


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
    assert _submit(shuffler_store, []).unbatched == 3  # an empty request changes nothing
    with pytest.raises(ClientAlreadySubmittedError):  # twice in one request
        _submit(shuffler_store, [_sub(client="c4" * 16), _sub(client="c4" * 16)])

    # the same submission retried from many threads at once is stored once
    retried = _sub(client="c5" * 16)
    accepted: list[int] = []
    _in_threads(8, lambda i: accepted.append(_submit(shuffler_store, [retried]).accepted))
    assert sorted(accepted) == [0] * 7 + [1]
    assert shuffler_store.stats()["submissions_stored"] == 4


def test_shuffler_refuses_copies_it_holds(postgres_url):
    def reopen(store):
        store.close()
        return PostgresShufflerStore(postgres_url, TASK)

    store = PostgresShufflerStore(postgres_url, TASK)
    check_shuffler_refuses_copies_it_holds(store, reopen).close()


def test_cut_batch_takes_everything_permutes_and_forgets(shuffler_store, postgres_url):
    subs = [_sub(n) for n in (0, 1, 2, 3, 1, 1)]
    assert _submit(shuffler_store, subs[:3], 6).batch is None
    assert shuffler_store.cut_batch(6, permute_messages) is None
    outcome = _submit(shuffler_store, subs[3:], 6)
    batch = outcome.batch  # the request that completes the batch cuts it
    assert batch is not None and batch.n_users == 6 and batch.n_messages == 8
    assert outcome.unbatched == 0
    assert _messages(batch.payload) == _messages(b"".join(s.messages for s in subs))
    assert shuffler_store.cut_batch(1, permute_messages) is None  # nothing waits now
    assert shuffler_store.unsent_batches() == [batch.batch_id]
    assert _rows(postgres_url, "SELECT COUNT(*) FROM submissions WHERE messages IS NOT NULL") == [
        (0,)
    ]
    assert _rows(postgres_url, "SELECT COUNT(DISTINCT batch_id) FROM submissions") == [(1,)]
    # a duplicate of a batched submission is still recognised
    assert _submit(shuffler_store, [subs[0]]).duplicates == 1
    assert shuffler_store.load_outbox_batch(batch.batch_id) == batch
    shuffler_store.mark_sent(batch.batch_id)
    assert shuffler_store.unsent_batches() == []
    with pytest.raises(KeyError):  # its payload is dropped once acknowledged
        shuffler_store.load_outbox_batch(batch.batch_id)
    stats = shuffler_store.stats()
    assert (stats["batches_stored"], stats["batches_acknowledged"], stats["batches_unsent"]) == (
        1,
        1,
        0,
    )

    # the dispatcher's cut: more than the minimum waiting, all are taken
    more = [_sub() for _ in range(5)]
    assert _submit(shuffler_store, more, 10).batch is None
    late = shuffler_store.cut_batch(3, permute_messages)
    assert late is not None and late.n_users == 5
    assert shuffler_store.unsent_batches() == [late.batch_id]


def test_only_the_listed_columns_are_stored(postgres_url, shuffler_store):
    columns = _rows(
        postgres_url,
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position",
    )
    assert columns == [
        ("batches", "seq"),
        ("batches", "batch_id"),
        ("batches", "payload"),
        ("batches", "n_users"),
        ("batches", "n_messages"),
        ("batches", "sent"),
        ("counters", "name"),
        ("counters", "value"),
        ("held_keys", "enc"),
        ("meta", "key"),
        ("meta", "value"),
        ("submissions", "submission_id"),
        ("submissions", "messages"),
        ("submissions", "batch_id"),
        ("used_clients", "client_id"),
    ]


def test_store_is_bound_to_its_task_and_role(postgres_url, postgres_database):
    PostgresShufflerStore(postgres_url, TASK).close()
    PostgresShufflerStore(postgres_url, TASK).close()  # reopening is fine
    with pytest.raises(StoreError, match="belongs to task"):
        PostgresShufflerStore(postgres_url, "cd" * 16)
    with pytest.raises(StoreError, match="belongs to the shuffler"):
        PostgresAnalyzerStore(postgres_url, TASK)
    with pytest.raises(StoreError, match="belongs to the shuffler"):
        PostgresAnalyzerStore(postgres_url, TASK, read_only=True)
    # refusing created nothing of the analyzer's in the shuffler's database
    assert _rows(postgres_url, "SELECT to_regclass('batch_counts')") == [(None,)]
    empty = postgres_database()
    with pytest.raises(StoreError, match="does not exist"):
        PostgresAnalyzerStore(empty, TASK, read_only=True)
    assert _rows(empty, "SELECT to_regclass('meta')") == [(None,)]  # read-only created nothing
    missing = postgres_url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(StoreError, match=r"cannot connect.*no_such_database"):
        open_analyzer_store(missing, TASK, read_only=True)


def test_a_role_that_cannot_create_tables_gets_a_store_error(postgres_server, postgres_url):
    role = f"limited_{new_id()[:12]}"
    with postgres_server.connect() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
    url = postgres_url.replace("postgres@", f"{role}@", 1)
    with pytest.raises(StoreError, match="permission denied for schema public"):
        PostgresShufflerStore(url, TASK)


def test_store_urls():
    for good in ("postgresql://u@h/db", "postgres://h:5433/db?sslmode=require"):
        check_store_url(good)
    for bad in ("postgresql://h", "postgresql://h/db?colour=blue", "mysql://u@h/db"):
        with pytest.raises(InvalidParameterError, match="store URL"):
            check_store_url(bad)
    with pytest.raises(InvalidParameterError) as info:
        check_store_url("postgresql://u:hunter2@h/db?nonsense=1")
    assert "hunter2" not in str(info.value) and "u:***@h" in str(info.value)
    assert redact_url("postgres://h/db?user=u&password=x&sslmode=disable") == (
        "postgres://h/db?user=u&password=***&sslmode=disable"
    )


def test_without_psycopg_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"shuffledp\[service\]"):
        check_store_url("postgresql://h/db")
    check_store_url("sqlite:///x.db")  # SQLite does not need it


def test_an_unreachable_server_is_a_store_error(tmp_path, capsys):
    url = f"postgresql://postgres:secret@127.0.0.1:{free_port()}/db?connect_timeout=5"
    with pytest.raises(StoreError, match="cannot connect"):
        open_shuffler_store(url, TASK)
    # serve: one line on stderr, exit code 2, no password, nothing started
    dep = make_deployment(tmp_path / "dep", start=False)
    code = main(
        ["serve", "shuffler", "--task", str(dep.workdir / "task.json"), "--store", url,
         "--forward", "http://127.0.0.1:9", "--forward-token-file",
         str(dep.workdir / "forward.token"), "--listen", "127.0.0.1:0"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert "cannot connect" in captured.err and "secret" not in captured.err


def test_lost_connections_are_replaced_and_outages_are_store_errors(
    shuffler_store, postgres_server, postgres_url, caplog
):
    dbname = _dbname(postgres_url)
    _in_threads(4, lambda i: _submit(shuffler_store, [_sub()]))  # several pooled connections
    assert postgres_server.terminate(dbname) >= 1  # as a server restart would
    with caplog.at_level(logging.WARNING, logger="shuffledp.service"):
        assert _submit(shuffler_store, [_sub()]).accepted == 1  # transparently reconnected
    assert "replacing a lost connection" in caplog.text
    assert shuffler_store.stats()["submissions_stored"] == 5

    postgres_server.block(dbname)
    try:
        pending = _sub()
        with pytest.raises(StoreError, match="cannot connect"):
            _submit(shuffler_store, [pending])
        with pytest.raises(StoreError):
            shuffler_store.stats()
        with pytest.raises(StoreError):
            shuffler_store.cut_batch(1, permute_messages)
    finally:
        postgres_server.unblock(dbname)
    outcome = _submit(shuffler_store, [pending], 6)  # the client's retry
    assert (outcome.accepted, outcome.batch is not None) == (1, True)
    assert outcome.batch is not None and outcome.batch.n_users == 6


def test_analyzer_records_each_batch_once(postgres_url):
    store = PostgresAnalyzerStore(postgres_url, TASK)
    try:
        check_analyzer_records_each_batch_once(store)
        check_analyzer_counts_each_replay_key_once(store)
    finally:
        store.close()


def test_analyzer_deduplicates_concurrent_calls(postgres_url):
    stores = [PostgresAnalyzerStore(postgres_url, TASK) for _ in range(2)]
    try:
        payloads = [bytes([i]) * (CIPHERTEXT_LENGTH * 4) for i in range(5)]
        batches = [
            ReceivedBatch(new_id(), p, 4, 4, content_digest(p, CIPHERTEXT_LENGTH)) for p in payloads
        ]
        added: list[bool] = []
        _in_threads(8, lambda i: added.extend(stores[i % 2].add_batch(b) for b in batches))
        assert added.count(True) == 5
        aggregated: list[bool] = []

        def aggregate(i: int) -> None:
            for j, b in enumerate(batches):
                # three keys of its own and one every batch shares: counted once in all
                keys = (key(100 + j), key(200 + j), key(300 + j), key(7))
                indices = np.zeros(4, dtype=np.int64)
                agg = Aggregation(b.batch_id, indices, keys, 4, undecryptable=1)
                aggregated.append(stores[i % 2].record_aggregation(agg))
                stores[i % 2].add_metrics({"batches_duplicate": 1, "unused": 0})

        _in_threads(8, aggregate)
        recorded = [r for r in aggregated if r is not None]
        assert len(recorded) == 5 and sum(r.duplicates for r in recorded) == 4
        totals = stores[0].totals(4)
        assert totals.counts.tolist() == [16, 0, 0, 0] and totals.n_batches == 5
        metrics = stores[1].metrics()
        assert metrics["batches_aggregated"] == 5 and metrics["messages_undecryptable"] == 5
        assert metrics["messages_duplicate"] == 4
        assert metrics["batches_duplicate"] == 40 and "unused" not in metrics
        assert (metrics["users_aggregated"], metrics["batches_pending"]) == (20, 0)
    finally:
        for s in stores:
            s.close()


def test_read_only_store_refuses_writes(postgres_url):
    PostgresAnalyzerStore(postgres_url, TASK).close()
    store = open_analyzer_store(postgres_url, TASK, read_only=True)
    try:
        assert store.totals(3).n_batches == 0
        payload = bytes(CIPHERTEXT_LENGTH)
        with pytest.raises(StoreError, match="read-only"):
            store.add_batch(
                ReceivedBatch(new_id(), payload, 1, 1, content_digest(payload, CIPHERTEXT_LENGTH))
            )
    finally:
        store.close()
    with pytest.raises(StoreError, match="closed"):
        store.metrics()


def _old_store(url: str, role: str, schema: str, rows: list[tuple[str, list[tuple]]]) -> None:
    """A database as shuffledp 0.2 left it: its tables (schema 1), its meta rows and ``rows``."""
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(schema)
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO meta VALUES (%s, %s)",
                [("role", role), ("task_id", TASK), ("schema_version", "1")],
            )
            for sql, params in rows:
                cursor.executemany(sql, params)


def test_stores_of_an_earlier_version_gain_the_replay_keys(postgres_database, caplog):
    shuffler_url, analyzer_url = postgres_database(), postgres_database()
    waiting = _sub(2)
    _old_store(
        shuffler_url,
        "shuffler",
        "CREATE TABLE submissions(submission_id TEXT PRIMARY KEY, messages BYTEA, batch_id TEXT);"
        "CREATE TABLE used_clients(client_id TEXT PRIMARY KEY);"
        "CREATE TABLE batches(seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, batch_id TEXT "
        "PRIMARY KEY, payload BYTEA, n_users BIGINT NOT NULL, n_messages BIGINT NOT NULL, "
        "sent BOOLEAN NOT NULL DEFAULT false);"
        "CREATE TABLE counters(name TEXT PRIMARY KEY, value BIGINT NOT NULL);",
        [
            (
                "INSERT INTO submissions VALUES (%s, %s, NULL)",
                [(waiting.submission_id, waiting.messages)],
            ),
            ("INSERT INTO counters VALUES (%s, %s)", [("unbatched", 1)]),
        ],
    )  # fmt: skip
    store = PostgresShufflerStore(shuffler_url, TASK)
    try:
        with pytest.raises(CiphertextAlreadyHeldError):
            _submit(store, [NewSubmission(new_id(), waiting.messages[:CIPHERTEXT_LENGTH])])
        assert _submit(store, [waiting]).duplicates == 1
    finally:
        store.close()

    keys = [bytes([k]) * 32 for k in (1, 2, 2)]  # the 0.2 analyzer counted the repeat twice
    payload = b"".join(k + bytes(21) for k in keys)
    _old_store(
        analyzer_url,
        "analyzer",
        "CREATE TABLE batches(seq BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, batch_id TEXT "
        "PRIMARY KEY, n_users BIGINT NOT NULL, n_messages BIGINT NOT NULL, payload BYTEA NOT "
        "NULL, content_digest TEXT NOT NULL UNIQUE, aggregated BOOLEAN NOT NULL DEFAULT false, "
        "n_counted BIGINT);"
        "CREATE TABLE batch_counts(batch_id TEXT NOT NULL, bin INTEGER NOT NULL, count BIGINT "
        "NOT NULL, PRIMARY KEY (batch_id, bin));"
        "CREATE TABLE metrics(name TEXT PRIMARY KEY, value BIGINT NOT NULL);",
        [
            (
                "INSERT INTO batches(batch_id, n_users, n_messages, payload, content_digest, "
                "aggregated, n_counted) VALUES (%s, 3, 3, %s, %s, true, 3)",
                [(new_id(), payload, content_digest(payload, CIPHERTEXT_LENGTH))],
            )
        ],
    )
    with caplog.at_level("WARNING", logger="shuffledp.service"):
        analyzer = PostgresAnalyzerStore(analyzer_url, TASK)
    try:
        assert "1 messages of batches aggregated before replay keys were kept" in caplog.text
        second = bytes([7]) * (CIPHERTEXT_LENGTH * 2)
        batch = ReceivedBatch(new_id(), second, 2, 2, content_digest(second, CIPHERTEXT_LENGTH))
        assert analyzer.add_batch(batch)
        agg = Aggregation(batch.batch_id, np.array([0, 1]), (keys[0], bytes([3]) * 32), 3)
        recorded = analyzer.record_aggregation(agg)
        assert recorded is not None and (recorded.counted, recorded.duplicates) == (1, 1)
    finally:
        analyzer.close()
