"""What each role can learn: the shuffler reads no report, the analyzer links none to a client."""

from __future__ import annotations

import base64
import sqlite3

import numpy as np
import pytest
from _deploy import DOMAIN
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shuffledp.service.tokens import issue_tokens
from shuffledp.service.wire import (
    CIPHERTEXT_LENGTH,
    MessageOpener,
    hpke_info,
    hpke_suite,
    public_key_from_b64,
)

pytestmark = pytest.mark.slow


def _secret_forms(key: X25519PrivateKey) -> list[bytes]:
    raw = key.private_bytes_raw()
    return [raw, base64.b64encode(raw), raw.hex().encode(), base64.urlsafe_b64encode(raw)]


@pytest.mark.parametrize("protocol", ["krr", "correlated", "augmented"])
def test_the_shuffler_cannot_read_a_report(deploy, protocol):
    dep = deploy(protocol, min_batch_users=100)
    subs = dep.client().submit_many([DOMAIN[i % 5] for i in range(60)], per_request=20)
    assert dep.shuffler_metrics()["users_waiting"] == 60

    # No form of the private key anywhere the shuffler reads or writes ...
    shuffler_files = [
        *dep.workdir.glob("shuffler.db*"),
        dep.workdir / "task.json",
        dep.workdir / "forward.token",
        dep.shuffler.log_path,
    ]
    for path in shuffler_files:
        data = path.read_bytes()
        for secret in _secret_forms(dep.key):
            assert secret not in data, path
    # ... nor in its process arguments or environment.
    pid = dep.shuffler.process.pid
    for name in ("cmdline", "environ"):
        data = open(f"/proc/{pid}/{name}", "rb").read()
        for secret in _secret_forms(dep.key):
            assert secret not in data
        assert b"analyzer.key" not in data

    # What the shuffler stores does not decrypt without the analyzer's key.
    conn = sqlite3.connect(dep.shuffler_db)
    # (a waiting ciphertext sits in a slot, after its one-byte kind)
    query = "SELECT content FROM slots WHERE substr(content, 1, 1) = X'4D' LIMIT 1"
    (content,) = conn.execute(query).fetchone()
    conn.close()
    ciphertext = bytes(content[1 : 1 + CIPHERTEXT_LENGTH])
    assert ciphertext in {c for s in subs for c in s.ciphertexts}
    suite, info = hpke_suite(), hpke_info(dep.task.task_id)
    with pytest.raises(InvalidTag):
        suite.decrypt(ciphertext, X25519PrivateKey.generate(), info=info)
    with pytest.raises(TypeError):  # the public key, all the shuffler has, is no decryption key
        suite.decrypt(ciphertext, public_key_from_b64(dep.task.public_key), info=info)
    with pytest.raises(TypeError):
        suite.decrypt(ciphertext, None, info=info)
    # (the analyzer's key does decrypt it)
    opener = MessageOpener(dep.key, dep.task.task_id, dep.task.message_domain_size)
    assert 0 <= opener.open(ciphertext) < dep.task.message_domain_size


def test_the_analyzer_gets_no_client_id_token_address_or_order(deploy):
    dep = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    tokens = issue_tokens(dep.token_key, dep.task.task_id, 100)
    client = dep.client(token=tokens[0])
    subs = client.submit_many([DOMAIN[i % 5] for i in range(100)], per_request=10, tokens=tokens)
    dep.wait_aggregated(100)

    database = b"".join(p.read_bytes() for p in dep.workdir.glob("analyzer.db*"))
    stored = database + dep.analyzer.log_path.read_bytes()
    for sub in subs:
        assert sub.submission_id.encode() not in stored
        assert sub.token is not None
        client_id, mac = sub.token.split(".")
        assert client_id.encode() not in stored and mac.encode() not in stored
    assert b"127.0.0.1" not in database  # (the log names the analyzer's own address)

    conn = sqlite3.connect(dep.analyzer_db)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(batches)")]
    (payload,) = conn.execute("SELECT payload FROM batches").fetchone()
    conn.close()
    assert columns == [
        "batch_id", "n_users", "n_messages", "payload", "content_digest", "aggregated", "n_counted"
    ]  # fmt: skip
    received = [payload[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(payload), 53)]
    sent = [s.ciphertexts[0] for s in subs]  # k-RR: one message each, in submission order
    assert sorted(received) == sorted(sent)
    positions = np.array([received.index(c) for c in sent])
    assert not np.array_equal(positions, np.arange(100))
    # A uniform permutation of 100 has >= 10 fixed points with probability < 1e-6.
    assert int(np.sum(positions == np.arange(100))) < 10
    # and no trace of the order either: positions are not increasing in long runs
    assert np.mean(np.diff(positions) > 0) < 0.8
