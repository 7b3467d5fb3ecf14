"""What the services leave on disk: file modes, and the shuffler's files read as an attacker would.

Tolerances of the no-leak checks come from the statistics' laws when byte
offsets do not depend on arrival order (see :mod:`shuffledp.service.disk_audit`):
|ρ| ≤ 5/√(n − 1) and |z| ≤ 5 (each exceeded with probability below 10⁻⁶ under
that law), and at most 8 right pairs (9 or more: about 10⁻⁶).
"""

from __future__ import annotations

import math
import os
import sqlite3
import stat

import pytest
from _deploy import DOMAIN, wait_until

from shuffledp.cli import main
from shuffledp.service.disk_audit import linked_pairs, order_leak, read_files
from shuffledp.service.tokens import issue_tokens

pytestmark = pytest.mark.slow


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
def test_stores_are_0600_and_releases_0644_whatever_the_umask(deploy, tmp_path, capsys, umask):
    previous = os.umask(umask)  # the services inherit it, and so does publish
    try:
        dep = deploy("krr", min_batch_users=100)
        dep.client(seed=2).submit_many([DOMAIN[i % 5] for i in range(100)], per_request=25)
        dep.wait_aggregated(100)
        out = tmp_path / "release.json"
        code = main(
            ["analyzer", "publish", "--task", str(dep.workdir / "task.json"),
             "--store", f"sqlite:///{dep.analyzer_db}", "--output", str(out), "--quiet"]
        )  # fmt: skip
    finally:
        os.umask(previous)
    assert code == 0
    stores = sorted(dep.workdir.glob("shuffler.db*")) + sorted(dep.workdir.glob("analyzer.db*"))
    names = {p.name for p in stores}
    assert {"shuffler.db", "shuffler.db-wal", "shuffler.db-shm", "analyzer.db"} <= names
    assert {p.name: _mode(p) for p in stores} == {name: 0o600 for name in names}
    assert _mode(out) == 0o644
    assert _mode(dep.workdir / "task.json") == 0o644
    assert _mode(dep.workdir / "analyzer.key") == 0o600


def test_a_store_left_0644_by_an_earlier_version_is_narrowed_when_opened(tmp_path):
    from shuffledp.service.sqlite_store import SQLiteShufflerStore
    from shuffledp.service.store import NewSubmission

    path = tmp_path / "old.db"
    store = SQLiteShufflerStore(path, "a" * 32)
    store.submit([NewSubmission("b" * 32, b"x" * 53)], min_batch_users=10, permute=bytes)
    reader = sqlite3.connect(path)  # keeps -wal and -shm once the store is closed
    reader.execute("SELECT COUNT(*) FROM meta").fetchone()
    store.close()  # (one shuffler per store file: the first must close)
    files = sorted(tmp_path.glob("old.db*"))
    assert {p.name for p in files} == {"old.db", "old.db-wal", "old.db-shm", "old.db.lock"}
    for p in files:
        p.chmod(0o644)
    reopened = SQLiteShufflerStore(path, "a" * 32)
    try:
        assert {p.name: _mode(p) for p in files} == {p.name: 0o600 for p in files}
    finally:
        reopened.close()
        reader.close()


def _no_order(leak, users: int) -> None:
    """The null law's 1e-6 bounds: nothing in the byte offsets follows arrival order."""
    assert leak.found == users, leak
    assert abs(leak.spearman) <= 5 / math.sqrt(users - 1), leak
    assert leak.pages < leak.found and abs(leak.within_page_z) <= 5, leak


def test_the_shuffler_files_hold_no_arrival_order_before_the_cut_or_after(deploy):
    """Waiting ids, client ids and ciphertexts sit in random slots; the cut writes id order.

    (The files of the code before issue 24 held them in arrival order until the
    cut: the benchmark's old figures, in docs/deployment.md.)
    """
    users = 150
    dep = deploy("krr", min_batch_users=users, one_submission_per_client=True)
    tokens = issue_tokens(dep.token_key, dep.task.task_id, users)
    client = dep.client(token=tokens[0])
    subs = []
    for i in range(users - 1):  # one request per user, as devices send them
        subs += client.submit_many([DOMAIN[i % 5]], per_request=1, tokens=[tokens[i]])
    files = [dep.workdir / f"shuffler.db{suffix}" for suffix in ("", "-wal", "-shm")]
    sids = [s.submission_id for s in subs]
    clients = [t.split(".")[0] for t in tokens]
    ciphertexts = [s.ciphertexts[0] for s in subs]

    # Before the cut: every waiting id, client id and ciphertext is there, in no order.
    before = read_files(files)
    for ids in (sids, clients[: users - 1], ciphertexts):
        _no_order(order_leak(before, ids), users - 1)
    for left, right in ((sids, clients), (clients, ciphertexts), (sids, ciphertexts)):
        assert linked_pairs(before, left[: users - 1], right[: users - 1]) <= 8

    # The last user completes the batch; once it is cut, sent and the WAL truncated ...
    subs += client.submit_many(["red"], per_request=1, tokens=[tokens[-1]])
    sids.append(subs[-1].submission_id)
    wait_until(lambda: dep.shuffler_metrics()["batches_acknowledged"] == 1, what="batch sent")
    wal = dep.workdir / "shuffler.db-wal"
    wait_until(lambda: wal.stat().st_size == 0, what="the WAL checkpointed and truncated")
    after = read_files(files)  # (the service runs: a copy of a live disk)
    # ... the ids are there (deduplication needs them), no ciphertext is, ...
    assert not any(c in after for c in [*ciphertexts, subs[-1].ciphertexts[0]])
    for ids in (sids, clients):
        _no_order(order_leak(after, ids), users)
    # ... nor pair a client id with its submission.
    assert linked_pairs(after, sids, clients) <= 8
