"""The augmented protocol through real processes: one plain message per user, sealed dummies.

The shuffler draws its dummies and its β-coins from the operating system's
CSPRNG, which no test can seed: every statistical check has a tolerance from
the law's variance that an honest run exceeds with probability below about
10⁻⁶ (the dummy laws' tails are geometric or binomial).
"""

from __future__ import annotations

import base64
import json
import math
import signal
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import numpy as np
import pytest
from _deploy import DOMAIN, stored_counts, stored_payloads, wait_until
from _message_bounds import assert_release_delta
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shuffledp.accounting.certificates.augmented import augmented_delta
from shuffledp.schemas import schema_id, validate
from shuffledp.service._testhooks import KILL_ENV
from shuffledp.service.disk_audit import read_files
from shuffledp.service.task import new_id
from shuffledp.service.wire import (
    CIPHERTEXT_LENGTH,
    MessageOpener,
    MessageSealer,
    hpke_info,
    hpke_suite,
    public_key_from_b64,
)

pytestmark = pytest.mark.slow

D = len(DOMAIN)


def _rows(payload: bytes) -> list[bytes]:
    return [payload[i : i + CIPHERTEXT_LENGTH] for i in range(0, len(payload), CIPHERTEXT_LENGTH)]


@pytest.mark.parametrize(
    "options",
    [{}, {"beta": 0.7}, {"variant": "sbin"}],
    ids=["sageo", "sageo-beta-0.7", "sbin"],
)
def test_end_to_end_unbiased_certified_with_the_trust_model(deploy, options):
    dep = deploy("augmented", min_batch_users=100, task_options=options)
    task = dep.task
    law, beta = task.dummy_law(), task.spec.beta
    rng = np.random.default_rng(41)
    values = [DOMAIN[i] for i in rng.choice(D, size=300, p=[0.4, 0.3, 0.15, 0.1, 0.05])]
    subs = dep.client().submit_many(values, per_request=20)
    assert {len(s.ciphertexts) for s in subs} == {1}
    dep.wait_aggregated(300)
    an = dep.analyzer_metrics()
    assert an["batches_aggregated"] == 3
    # The dummies decrypt and decode exactly like the clients' messages.
    assert an.get("messages_undecryptable", 0) == an.get("messages_undecodable", 0) == 0

    truth = np.bincount([DOMAIN.index(v) for v in values], minlength=D)
    counts = stored_counts(dep)
    batches = 3
    release = dep.estimate().json()
    assert release["schema"] == schema_id("augmented-release")
    validate(release)
    # The estimate subtracts the three batches' E[z] and divides by beta.
    estimate = (counts - batches * law.mean) / beta
    np.testing.assert_allclose(release["estimate"]["counts"], estimate, rtol=1e-12)
    assert release["messages"] == counts.sum() and release["n"] == 300

    # Unbiased: the error has variance 3 Var z + beta(1 - beta) h_j, over beta^2.
    sd = np.sqrt(batches * law.variance + beta * (1 - beta) * truth) / beta
    error = estimate - truth
    assert np.all(np.abs(error) <= 10 * sd), (error, sd)
    assert abs(error.sum()) <= 10 * math.sqrt(np.sum(sd**2))
    if beta == 1.0:
        dummies = counts - truth  # every real message kept
        assert dummies.min() >= 0
        np.testing.assert_allclose(release["estimate"]["stderr"], sd, rtol=1e-12)

    # Certified by the exact accountant of the task's dummy law; the trust model stated.
    privacy = release["privacy"]
    certified = augmented_delta(1.0, law, beta)
    # SAGeo: the shuffler's one dummy draw per batch could exceed its bound (and is then
    # never published); SBin draws at most M per bin, no bound to exceed.
    parties = 0 if options.get("variant") == "sbin" else 1
    assert_release_delta(privacy["delta"], certified, epsilon=1.0, parties=parties)
    assert privacy["delta"] <= 1e-6
    assert privacy["n"] == 100 and privacy["method"] == "augmented-exact-pair"
    assert privacy["covers_release"]
    stated = " ".join(privacy["assumptions"])
    assert "the guarantee against the analyzer rests on the shuffler's dummies" in stated
    assert "protected by the encryption alone" in stated
    assert "does not collude with the analyzer" in stated
    assert "operating system's cryptographic generator" in stated
    assert any("subtracts 3 x E[z]" in note for note in release["notes"])
    assert release["parameters"]["variant"] == task.spec.variant


def test_the_analyzer_cannot_tell_dummies_and_the_shuffler_cannot_read(deploy):
    dep = deploy("augmented", min_batch_users=100)
    task = dep.task
    dep.analyzer.stop()  # the batch waits in the shuffler's outbox
    subs = dep.client().submit_many([DOMAIN[i % D] for i in range(100)], per_request=25)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 1, what="batch cut")

    # A reader of the shuffler's files sees the permuted batch: ciphertexts it cannot open.
    conn = sqlite3.connect(dep.shuffler_db)
    ((outbox, n_messages),) = conn.execute("SELECT payload, n_messages FROM batches").fetchall()
    conn.close()
    rows = _rows(bytes(outbox))
    real = [s.ciphertexts[0] for s in subs]
    assert set(real) <= set(rows) and len(rows) == n_messages > 100
    dummies = [r for r in rows if r not in set(real)]
    suite, info = hpke_suite(), hpke_info(task.task_id)
    for ciphertext in (real[0], dummies[0]):
        with pytest.raises(InvalidTag):
            suite.decrypt(ciphertext, X25519PrivateKey.generate(), info=info)
        with pytest.raises(TypeError):  # the public key, all the shuffler has
            suite.decrypt(ciphertext, public_key_from_b64(task.public_key), info=info)
    # ... nor does the shuffler's log or process hold the analyzer's key.
    raw = dep.key.private_bytes_raw()
    for secret in (raw, base64.b64encode(raw)):
        assert secret not in dep.shuffler.log_path.read_bytes()
        for name in ("cmdline", "environ"):
            with open(f"/proc/{dep.shuffler.process.pid}/{name}", "rb") as handle:
                assert secret not in handle.read()
    # Nothing in the shuffler's metrics or log speaks of the dummies.
    assert "dumm" not in dep.shuffler.log_path.read_text().lower()
    assert "dumm" not in str(dep.shuffler_metrics()).lower()

    dep.analyzer.start()
    dep.wait_aggregated(100)
    wait_until(lambda: dep.shuffler_metrics()["batches_acknowledged"] == 1, what="batch acked")
    (payload,) = stored_payloads(dep)
    assert sorted(_rows(payload)) == sorted(rows)  # forwarded as cut, dummies and all
    # What the analyzer can check of each message is the same for dummies and real ones:
    opener = MessageOpener(dep.key, task.task_id, task.domain_size)
    for ciphertext in rows:
        assert len(ciphertext) == CIPHERTEXT_LENGTH
        assert 0 <= opener.open(ciphertext) < D  # same key, info and plaintext format
    assert len({r[:32] for r in rows}) == len(rows)  # a fresh encapsulation each
    # ... and where they sit: the real messages spread over the batch (a uniform
    # permutation of all), their mean relative position within 6 sd of 1/2.
    positions = np.array([rows.index(c) for c in real]) / (len(rows) - 1)
    assert abs(positions.mean() - 0.5) <= 6 * math.sqrt(1 / 12 / 100)

    # Once the analyzer has the batch, the shuffler's files hold none of its messages.
    wal = dep.workdir / "shuffler.db-wal"
    wait_until(lambda: wal.stat().st_size == 0, what="the WAL checkpointed and truncated")
    files = read_files(dep.workdir / f"shuffler.db{s}" for s in ("", "-wal", "-shm"))
    assert not any(r in files for r in rows)


def test_hostile_submissions_and_batches(deploy):
    dep = deploy("augmented", min_batch_users=100)
    task = dep.task
    key = public_key_from_b64(task.public_key)
    sealer = MessageSealer(key, task.task_id, task.domain_size)
    # An augmented client sends exactly one message: two, or none, are refused.
    two = dep.post_ciphertexts([sealer.seal(0), sealer.seal(0)])
    assert two.status_code == 400 and two.json()["reason"] == "invalid_ciphertexts"
    assert "ciphertexts must be a list of 1 to 1 items" in two.json()["error"]
    none = dep.post_ciphertexts([])
    assert none.status_code == 400 and none.json()["reason"] == "invalid_ciphertexts"
    # An index outside the domain is sealed like any message: the analyzer drops it.
    outside = MessageSealer(key, task.task_id, D + 1).seal(D)
    assert dep.post_ciphertexts([outside]).status_code == 200
    subs = dep.client().submit_many([DOMAIN[i % D] for i in range(99)], per_request=33)
    dep.wait_aggregated(100)
    assert dep.analyzer_metrics()["messages_undecodable"] == 1
    assert dep.shuffler_metrics()["rejected"]["invalid_ciphertexts"] == 2
    truth = np.bincount([i % D for i in range(99)], minlength=D)
    assert np.all(stored_counts(dep) >= truth) and len(subs) == 99

    # The analyzer refuses a batch whose messages no honest shuffler sends.
    def batch(n_users: int, n_messages: int) -> dict:
        return {
            "format": "shuffledp-batch/1",
            "task_id": task.task_id,
            "batch_id": new_id(),
            "n_users": n_users,
            "n_messages": n_messages,
            "payload": base64.b64encode(bytes(CIPHERTEXT_LENGTH * n_messages)).decode(),
        }

    too_many = dep.post_batch(batch(100, 100 + task.max_dummies_per_batch() + 1))
    assert too_many.status_code == 422 and too_many.json()["reason"] == "implausible_batch"
    too_few = dep.post_batch(batch(100, 99))  # beta = 1: every user's message is kept
    assert too_few.status_code == 422 and too_few.json()["reason"] == "implausible_batch"


class _RecordingProxy:
    """What a curious analyzer keeps: every batch body it is sent, in front of the real one."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.target = ""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                proxy.bodies.append(json.loads(body))
                answer = httpx.post(
                    proxy.target + self.path,
                    content=body,
                    headers={
                        "Authorization": self.headers["Authorization"],
                        "Content-Type": "application/json",
                    },
                    timeout=60,
                )
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_batch_sent_again_after_a_crash_carries_the_same_dummies(deploy):
    """Fresh dummies on a resend would let the analyzer average them away: it never gets any."""
    proxy = _RecordingProxy()
    try:
        dep = deploy(
            "augmented",
            min_batch_users=100,
            shuffler_env={KILL_ENV: "forward-after-ack"},
            forward_url=proxy.url,
        )
        proxy.target = dep.analyzer.url
        dep.client().submit_many([DOMAIN[i % D] for i in range(100)], per_request=50)
        # the analyzer acknowledged the batch; the shuffler died before marking it sent
        assert dep.shuffler.wait_exit(timeout=60) == -signal.SIGKILL
        dep.shuffler.start(env={})
        wait_until(lambda: dep.shuffler_metrics()["batches_acknowledged"] == 1, what="acked")
        dep.wait_aggregated(100)
    finally:
        proxy.close()
    first, again = proxy.bodies
    assert again == first  # the stored batch, byte for byte: the same dummies
    assert dep.analyzer_metrics()["batches_duplicate"] == 1
    assert first["n_messages"] > 100
