"""Replayed ciphertexts through ``analyzer export`` and ``analyzer aggregate``: counted once.

The analyzer service counts each HPKE encapsulated key at most once for the
task's lifetime. The backends read the exported batches and must count the
same messages: a copy of a counted message is not counted (in a later batch,
or again in the same one), garbage carrying a victim's key does not block the
victim, and of two good messages under one key (which only the holder of the
ephemeral secret can make) the same one is counted as by the service.
Before the backends deduplicated, they counted every copy (these tests fail
there: the victims' bins grew by the copies).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from _stores import seal_with_ephemeral, task_and_key
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shuffledp.backends import LocalBackend, export_analyzer_store, open_dataset
from shuffledp.backends.analyzer import aggregate_dataset
from shuffledp.cli import main
from shuffledp.service.analyzer import Aggregator
from shuffledp.service.shuffler import SUBMISSIONS_FORMAT, permute_messages
from shuffledp.service.sqlite_store import COUNTED_KEYS_META, SQLiteAnalyzerStore
from shuffledp.service.store_common import content_digest
from shuffledp.service.store_protocols import ReceivedBatch
from shuffledp.service.task import Task, new_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH, b64encode, encode_plaintext

sys.path.insert(0, str(Path(__file__).parents[1] / "service"))
from _deploy import Deployment, make_deployment, stored_counts

USERS = 100
D = 5
PAIRS = 8


@dataclass
class Message:
    """One row of a batch and what the rule makes of it."""

    ciphertext: bytes
    value: int | None  # None: does not decrypt or decode
    counted: bool


def _plain(value: int) -> bytes:
    return encode_plaintext(value, D)


def fresh_messages(task: Task, rng: np.random.Generator, count: int) -> list[Message]:
    """Honest messages of random values (each counted)."""
    out = []
    for value in rng.integers(0, D, size=count).tolist():
        ct = seal_with_ephemeral(task, _plain(value), X25519PrivateKey.generate())
        out.append(Message(ct, value, True))
    return out


def replayed_batches(task: Task, rng: np.random.Generator) -> list[list[Message]]:
    """Three batches of 100 messages with every kind of repeated key.

    * batch 0: 98 honest messages; garbage with the key of a message L sent
      later (does not decrypt) and a message under L's ephemeral key that
      decrypts but does not decode: neither blocks L;
    * batch 1: copies of 10 messages of batch 0, one of them 5 times more;
      L; 8 pairs of good messages, each pair under one ephemeral key with
      values 0 and 4 (the smaller ciphertext of a pair counts); fillers;
    * batch 2: both messages of a pair again, L again, a copy of batch 0's
      first message; fillers.
    """

    def fresh(count: int) -> list[Message]:
        return fresh_messages(task, rng, count)

    def copy(message: Message) -> Message:
        return Message(message.ciphertext, message.value, False)

    honest = fresh(98)
    late_key = X25519PrivateKey.generate()
    late = seal_with_ephemeral(task, _plain(3), late_key)
    garbage = Message(late[:32] + os.urandom(CIPHERTEXT_LENGTH - 32), None, False)
    undecodable = Message(seal_with_ephemeral(task, bytes([2, 0, 0, 0, 1]), late_key), None, False)
    batch0 = [*honest, garbage, undecodable]

    pairs = []
    for _ in range(PAIRS):
        key = X25519PrivateKey.generate()
        a, b = (seal_with_ephemeral(task, _plain(v), key) for v in (0, 4))
        pairs += [Message(a, 0, a < b), Message(b, 4, b < a)]
    copies = [copy(m) for m in honest[:10]] + [copy(honest[10])] * 5
    original = Message(late, 3, True)
    batch1 = [*copies, original, *pairs]
    batch1 += fresh(USERS - len(batch1))
    batch2 = [copy(pairs[0]), copy(pairs[1]), copy(original), copy(honest[0])]
    batch2 += fresh(USERS - len(batch2))
    return [batch0, batch1, batch2]


def per_batch(batches: list[list[Message]]) -> np.ndarray:
    """The counts the rule gives, per batch and bin."""
    out = np.zeros((len(batches), D), dtype=np.int64)
    for i, batch in enumerate(batches):
        for m in batch:
            if m.counted:
                assert m.value is not None
                out[i, m.value] += 1
    return out


def store_batches(path: Path, task: Task, batches: list[list[Message]]) -> list[str]:
    """Store the batches (each permuted) in a new analyzer store, unaggregated; their ids."""
    store = SQLiteAnalyzerStore(path, task.task_id)
    ids = []
    try:
        for batch in batches:
            payload = permute_messages(b"".join(m.ciphertext for m in batch))
            received = ReceivedBatch(
                new_id(), payload, USERS, len(batch), content_digest(payload, CIPHERTEXT_LENGTH)
            )
            assert store.add_batch(received)
            ids.append(received.batch_id)
    finally:
        store.close()
    return ids


def service_batch_counts(path: Path, task: Task, ids: list[str]) -> np.ndarray:
    store = SQLiteAnalyzerStore(path, task.task_id, read_only=True)
    try:
        rows = store.db.read(
            lambda conn: conn.execute("SELECT batch_id, bin, count FROM batch_counts").fetchall()
        )
    finally:
        store.close()
    out = np.zeros((len(ids), D), dtype=np.int64)
    for batch_id, j, c in rows:
        out[ids.index(batch_id), j] = c
    return out


@pytest.fixture
def replayed(tmp_path: Path) -> Iterator[Any]:
    """A store holding :func:`replayed_batches`, aggregated by the service's aggregator."""
    task, key = task_and_key("krr")
    batches = replayed_batches(task, np.random.default_rng(7))
    path = tmp_path / "analyzer.db"
    ids = store_batches(path, task, batches)
    store = SQLiteAnalyzerStore(path, task.task_id)
    try:
        assert Aggregator(task, key, store).step()
        totals = store.totals(task.message_domain_size)
        metrics = store.metrics()
        export = export_analyzer_store(task, store, tmp_path / "ds", rows_per_file=60)
    finally:
        store.close()
    yield task, key, batches, path, ids, totals, metrics, export


def test_the_service_counts_each_key_once_and_the_smaller_of_a_pair(replayed):
    task, _, batches, path, ids, totals, metrics, _ = replayed
    expected = per_batch(batches)
    assert service_batch_counts(path, task, ids).tolist() == expected.tolist()
    assert metrics["messages_duplicate"] == 10 + 5 + PAIRS + 4
    assert metrics["messages_undecryptable"] == 1 and metrics["messages_undecodable"] == 1
    assert totals.counts.tolist() == expected.sum(axis=0).tolist()


@pytest.mark.parametrize("chunk_rows", [7, 1000])
def test_the_local_backend_counts_what_the_service_counted(replayed, chunk_rows):
    task, key, _, path, ids, totals, _, dataset = replayed
    counts = LocalBackend(chunk_rows=chunk_rows, show_progress=False).count(
        dataset, private_key=key.private_bytes_raw()
    )
    assert counts.batch_counts().tolist() == service_batch_counts(path, task, ids).tolist()
    assert counts.duplicates_per_batch.tolist() == [0, 10 + 5 + PAIRS, 4]
    assert counts.undecryptable_per_batch.tolist() == [1, 0, 0]
    assert counts.undecodable_per_batch.tolist() == [1, 0, 0]
    assert counts.messages_per_batch.tolist() == [USERS] * 3
    raw = key.private_bytes_raw()
    result = aggregate_dataset(task, dataset, LocalBackend(show_progress=False), raw)
    assert result.totals.counts.tolist() == totals.counts.tolist()
    assert result.totals.n_messages == totals.n_messages


@pytest.mark.slow
def test_spark_counts_what_the_local_backend_counts(spark, replayed):
    from shuffledp.backends.spark import SparkBackend

    _, key, _, _, _, _, _, dataset = replayed
    raw = key.private_bytes_raw()
    local = LocalBackend(show_progress=False).count(dataset, private_key=raw)
    assert SparkBackend(spark).count(dataset, private_key=raw).same_as(local)


def test_a_store_aggregated_before_replay_keys_publishes_its_copies_aggregate_does_not(
    tmp_path, caplog
):
    """A store whose batches an analyzer of 0.2 aggregated (every good message counted).

    Opened by this version it is backfilled with every key of those batches:
    copies arriving from now on are dropped, those counted then stay in
    ``publish``'s totals, and a later message whose key only a message that
    did not decrypt carried back then is dropped too. ``aggregate`` counts the
    exported batches afresh, each key once, garbage blocking nothing: the two
    differ by the copies 0.2 counted and by that message.
    """
    task, key = task_and_key("krr")
    batches = replayed_batches(task, np.random.default_rng(8))
    later = Message(seal_with_ephemeral(task, _plain(2), X25519PrivateKey.generate()), 2, True)
    assert batches[0][97].counted and batches[0][97] not in batches[1] + batches[2]
    batches[0][97] = Message(later.ciphertext[:32] + bytes(21), None, False)
    path = tmp_path / "old.db"
    ids = store_batches(path, task, batches)
    conn = sqlite3.connect(path)  # what 0.2's aggregator wrote
    for batch_id, batch in zip(ids, batches, strict=True):
        good = [m.value for m in batch if m.value is not None]
        bins = np.bincount(good, minlength=D)
        conn.executemany(
            "INSERT INTO batch_counts VALUES (?, ?, ?)",
            [(batch_id, int(j), int(bins[j])) for j in np.flatnonzero(bins)],
        )
        conn.execute(
            "UPDATE batches SET aggregated = 1, n_counted = ? WHERE batch_id = ?",
            (len(good), batch_id),
        )
    conn.execute("DELETE FROM meta WHERE key = ?", (COUNTED_KEYS_META,))
    conn.commit()
    conn.close()
    fourth = [later, *fresh_messages(task, np.random.default_rng(9), USERS - 1)]
    with caplog.at_level("WARNING", logger="shuffledp.service"):
        store = SQLiteAnalyzerStore(path, task.task_id)  # backfilled
    try:
        assert "repeat a key counted before" in caplog.text
        payload = b"".join(m.ciphertext for m in fourth)
        digest = content_digest(payload, CIPHERTEXT_LENGTH)
        assert store.add_batch(ReceivedBatch(new_id(), payload, USERS, USERS, digest))
        assert Aggregator(task, key, store).step()
        published = store.totals(task.message_domain_size)
        assert store.metrics()["messages_duplicate"] == 1  # the later message
        dataset = export_analyzer_store(task, store, tmp_path / "ds")
    finally:
        store.close()
    batches.append(fourth)
    raw = key.private_bytes_raw()
    result = aggregate_dataset(task, dataset, LocalBackend(show_progress=False), raw)
    assert result.totals.counts.tolist() == per_batch(batches).sum(axis=0).tolist()
    copies = [m.value for b in batches for m in b if m.value is not None and not m.counted]
    assert len(copies) == 10 + 5 + PAIRS + 4
    assert result.counts.duplicates == len(copies)
    difference = np.bincount(copies, minlength=D)
    difference[later.value] -= 1
    assert (published.counts - result.totals.counts).tolist() == difference.tolist()


# -- end to end: two services, replays, export, aggregate on both backends ----------------


@pytest.fixture
def deploy(tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    made: list[Deployment] = []

    def make(**kwargs: Any) -> Deployment:
        deployment = make_deployment(tmp_path / f"deployment{len(made)}", **kwargs)
        made.append(deployment)
        return deployment

    try:
        yield make
    finally:
        for deployment in made:
            deployment.stop()


def _post(http: httpx.Client, dep: Deployment, submissions: list[list[bytes]]) -> int:
    """One request of raw ciphertexts, each submission under a new id, without a token."""
    items = [
        {"submission_id": new_id(), "ciphertexts": [b64encode(c) for c in cts]}
        for cts in submissions
    ]
    answer = http.post(
        dep.submissions_url, json={"format": SUBMISSIONS_FORMAT, "submissions": items}
    )
    return answer.status_code


def _cli(argv: list[Any], capsys: Any) -> tuple[str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


@pytest.mark.slow
def test_export_and_aggregate_of_a_deployment_with_replays_equal_publish(
    deploy, spark, tmp_path, capsys
):
    """Copies through the shuffler and past it: publish, aggregate local and Spark agree.

    k-RR at d = 8, batches of 100 users: (1) 100 honest users; (2) garbage
    carrying the key of a message L not sent yet, and the attacker's own
    submissions; (3) one copy each of 4 honest users' messages, L itself, and
    the attacker's own; (4) posted with the forward token: 100 copies of one
    honest user's message. None of the copies may count anywhere, L must.
    """
    domain = [f"v{i}" for i in range(8)]
    dep = deploy(protocol="krr", min_batch_users=USERS, domain=domain)
    rng = np.random.default_rng(24)
    subs = dep.client(seed=5).submit_many(
        [domain[i] for i in rng.integers(0, 8, size=USERS)], per_request=25
    )
    dep.wait_aggregated(USERS)
    attacker = dep.client(seed=9)
    late = dep.client(seed=11).prepare(domain[2])
    with httpx.Client(timeout=120) as http:
        garbage = late.ciphertexts[0][:32] + os.urandom(CIPHERTEXT_LENGTH - 32)
        assert _post(http, dep, [[garbage]]) == 200
        own2 = attacker.prepare_many([domain[0]] * (USERS - 1))
        assert _post(http, dep, [list(s.ciphertexts) for s in own2]) == 200
        dep.wait_aggregated(2 * USERS)
        for victim in subs[:4]:  # one request each
            assert _post(http, dep, [list(victim.ciphertexts)]) == 200
        assert _post(http, dep, [list(late.ciphertexts)]) == 200
        own3 = attacker.prepare_many([domain[1]] * (USERS - 5))
        assert _post(http, dep, [list(s.ciphertexts) for s in own3]) == 200
        dep.wait_aggregated(3 * USERS)
    body = {
        "format": "shuffledp-batch/1",
        "task_id": dep.task.task_id,
        "batch_id": new_id(),
        "n_users": USERS,
        "n_messages": USERS,
        "payload": b64encode(subs[0].ciphertexts[0] * USERS),
    }
    assert dep.post_batch(body).status_code == 200
    dep.wait_aggregated(4 * USERS)
    copies = 4 + USERS
    assert dep.analyzer_metrics()["messages_duplicate"] == copies
    honest = [*subs, *own2, late, *own3]
    expected = np.bincount(np.concatenate([s.messages for s in honest]), minlength=8)
    assert stored_counts(dep).tolist() == expected.tolist()  # no victim's bin grew

    task, key, store = dep.workdir / "task.json", dep.workdir / "analyzer.key", dep.analyzer_store
    published, _ = _cli(["analyzer", "publish", "--task", task, "--store", store], capsys)
    data = tmp_path / "dataset"
    _cli(["analyzer", "export", "--task", task, "--store", store, "--output", data], capsys)
    assert open_dataset(data).n_messages == 4 * USERS
    aggregate = ["analyzer", "aggregate", "--task", task, "--key", key, "--input", data]
    local, err = _cli(aggregate, capsys)
    assert json.loads(local) == json.loads(published), err
    assert f"note: {copies} message(s) are copies of a message counted" in err
    assert "1 message(s) did not decrypt" in err
    on_spark, err = _cli([*aggregate, "--backend", "spark"], capsys)
    assert json.loads(on_spark) == json.loads(published), err
    assert f"note: {copies} message(s) are copies" in err
