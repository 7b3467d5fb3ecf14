"""Bad input to both services: a 4xx or a no-op, counted, never a 500 or a crash."""

from __future__ import annotations

import json
import sqlite3

import httpx
import numpy as np
import pytest
from _deploy import DOMAIN, expected_counts, stored_counts
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shuffledp.service.shuffler import SUBMISSIONS_FORMAT
from shuffledp.service.task import new_id
from shuffledp.service.wire import (
    MessageSealer,
    b64encode,
    encode_plaintext,
    hpke_suite,
    public_key_from_b64,
)

pytestmark = pytest.mark.slow


def _body(*items):
    return {"format": SUBMISSIONS_FORMAT, "submissions": list(items)}


def _item(ciphertexts, sid=None):
    return {"submission_id": sid or new_id(), "ciphertexts": [b64encode(c) for c in ciphertexts]}


def _healthy(dep):
    for service in (dep.shuffler, dep.analyzer):
        assert service.alive()
        assert httpx.get(f"{service.url}/v1/health", timeout=5).status_code == 200


def test_bad_submissions(deploy):
    dep = deploy(
        "krr",
        min_batch_users=100,
        shuffler_args=["--max-body-bytes", "65536", "--max-submissions-per-request", "5"],
    )
    url = dep.submissions_url
    sealer = MessageSealer(public_key_from_b64(dep.task.public_key), dep.task.task_id, 5)
    good = sealer.seal(1)
    expected_rejections: dict[str, int] = {}

    def refuse(status, reason, **request):
        request.setdefault("headers", {"Content-Type": "application/json"})  # 415 without
        response = httpx.post(request.pop("url", url), timeout=30, **request)
        assert response.status_code == status, response.text
        assert response.json()["reason"] == reason
        expected_rejections[reason] = expected_rejections.get(reason, 0) + 1
        _healthy(dep)

    refuse(400, "malformed_json", content=b'{"format": "shuffledp-submissions/1", ')
    refuse(400, "malformed_json", content=b"\xff\xfe not utf-8")
    refuse(400, "malformed_json", content=b"[" * 50_000)  # nesting deeper than the parser goes
    refuse(400, "invalid_request", json=[1, 2])
    refuse(400, "invalid_request", json={"format": "other", "submissions": []})
    refuse(400, "invalid_request", json=_body())
    refuse(413, "body_too_large", content=b"x" * 70_000)
    refuse(413, "body_too_large", content=iter([b"x" * 10_000] * 8))  # chunked, no length
    refuse(413, "too_many_submissions", json=_body(*[_item([good]) for _ in range(6)]))
    refuse(404, "unknown_task", url=url.replace(dep.task.task_id, "0" * 32), json=_body())
    refuse(400, "invalid_submission", json=_body({"submission_id": "XYZ", "ciphertexts": []}))
    refuse(400, "invalid_submission", json=_body({**_item([good]), "sender": "alice"}))
    refuse(400, "invalid_submission", json=_body(_item([good], "a" * 32), _item([good], "a" * 32)))
    refuse(400, "invalid_submission", json=_body("not an object"))
    refuse(400, "invalid_ciphertexts", json=_body(_item([good[:-1]])))
    refuse(400, "invalid_ciphertexts", json=_body(_item([good + b"\x00"])))
    refuse(400, "invalid_ciphertexts", json=_body(_item([good, good])))  # k-RR: exactly one
    refuse(400, "invalid_ciphertexts", json=_body(_item([])))
    refuse(
        400,
        "invalid_ciphertexts",
        json=_body({"submission_id": new_id(), "ciphertexts": ["*" * 72]}),
    )
    refuse(400, "invalid_ciphertexts", json=_body({"submission_id": new_id(), "ciphertexts": [7]}))
    refuse(400, "invalid_ciphertexts", json=_body({"submission_id": new_id(), "ciphertexts": "x"}))
    assert (
        httpx.get(url.replace(dep.task.task_id, "0" * 32)[: -len("/submissions")]).status_code
        == 404
    )
    expected_rejections["unknown_task"] += 1

    # A replayed submission: a no-op with the same answer.
    replay = _body(_item([good]))
    first = httpx.post(url, json=replay)
    second = httpx.post(url, json=replay)
    assert first.status_code == second.status_code == 200 and first.json() == second.json()

    # Ciphertexts the shuffler cannot check: another key, another task's info. Accepted
    # (the shuffler cannot read them), then rejected and counted by the analyzer.
    stranger = MessageSealer(X25519PrivateKey.generate().public_key(), dep.task.task_id, 5)
    other_info = hpke_suite().encrypt(
        encode_plaintext(2, 5),
        public_key_from_b64(dep.task.public_key),
        info=b"shuffledp/1 task=" + new_id().encode(),
    )
    assert (
        httpx.post(url, json=_body(_item([stranger.seal(2)]), _item([other_info]))).status_code
        == 200
    )

    metrics = dep.shuffler_metrics()
    assert metrics["rejected"] == expected_rejections
    assert metrics["submissions_duplicate"] == 1 and metrics["submissions_accepted"] == 3
    assert metrics["users_waiting"] == 3

    # Fill the batch with honest clients: only their messages and the replayed one count.
    subs = dep.client(seed=1).submit_many([DOMAIN[i % 5] for i in range(97)], per_request=5)
    dep.wait_aggregated(100)
    an = dep.analyzer_metrics()
    assert an["messages_undecryptable"] == 2 and an.get("messages_undecodable", 0) == 0
    expected = expected_counts(subs)
    expected[1] += 1  # the replayed submission, counted once
    assert stored_counts(dep).tolist() == expected.tolist()
    _healthy(dep)


def test_bad_batches(deploy):
    dep = deploy("krr", min_batch_users=100)
    dep.client(seed=2).submit_many([DOMAIN[i % 5] for i in range(100)], per_request=50)
    dep.wait_aggregated(100)
    conn = sqlite3.connect(dep.analyzer_db)
    batch_id, n_users, n_messages, payload = conn.execute(
        "SELECT batch_id, n_users, n_messages, payload FROM batches"
    ).fetchone()
    conn.close()
    real = {
        "format": "shuffledp-batch/1",
        "task_id": dep.task.task_id,
        "batch_id": batch_id,
        "n_users": n_users,
        "n_messages": n_messages,
        "payload": b64encode(payload),
    }
    url = f"{dep.analyzer.url}/v1/batches"
    expected_rejections: dict[str, int] = {}

    def refuse(status, reason, response):
        assert response.status_code == status, response.text
        assert response.json()["reason"] == reason
        expected_rejections[reason] = expected_rejections.get(reason, 0) + 1
        _healthy(dep)

    refuse(401, "missing_bearer", httpx.post(url, json=real))
    refuse(401, "missing_bearer", httpx.post(url, json=real, headers={"Authorization": "Basic x"}))
    refuse(403, "wrong_bearer", dep.post_batch(real, token="guess"))
    refuse(400, "malformed_json", dep.post_batch(None, content=b"{]"))
    refuse(400, "invalid_batch", dep.post_batch({**real, "format": "x"}))
    refuse(404, "unknown_task", dep.post_batch({**real, "task_id": "0" * 32}))
    refuse(400, "invalid_batch", dep.post_batch({**real, "batch_id": "../../etc"}))
    refuse(400, "invalid_batch", dep.post_batch({**real, "n_users": "100"}))
    refuse(422, "batch_too_small", dep.post_batch({**real, "batch_id": new_id(), "n_users": 99}))
    refuse(400, "invalid_batch", dep.post_batch({**real, "batch_id": new_id(), "n_messages": 99}))
    refuse(400, "invalid_batch", dep.post_batch({**real, "batch_id": new_id(), "payload": "%%"}))
    refuse(
        422,
        "implausible_batch",
        dep.post_batch({**real, "batch_id": new_id(), "n_users": 101}),  # k-RR: one message each
    )

    # A replayed batch: same id -> a no-op; same messages under a new id (in any order) -> 409.
    again = dep.post_batch(real)
    assert again.status_code == 200 and again.json() == {"status": "stored", "batch_id": batch_id}
    rows = [payload[i : i + 53] for i in range(0, len(payload), 53)]
    reordered = {**real, "batch_id": new_id(), "payload": b64encode(b"".join(rows[::-1]))}
    refuse(409, "replayed_content", dep.post_batch(reordered))

    metrics = dep.analyzer_metrics()
    assert metrics["rejected"] == expected_rejections
    assert metrics["batches_duplicate"] == 1
    assert metrics["batches_aggregated"] == 1 and metrics["users_aggregated"] == 100
    release = dep.estimate().json()
    assert release["n"] == 100 and release["service"]["batches"] == 1
    assert np.sum(release["estimate"]["counts"]) == pytest.approx(100)
    _healthy(dep)


def test_unknown_routes_and_methods(deploy):
    dep = deploy("flip", min_batch_users=100)
    assert httpx.get(f"{dep.shuffler.url}/v1/nothing").status_code == 404
    assert httpx.get(dep.submissions_url).status_code == 405
    assert httpx.get(f"{dep.analyzer.url}/v1/batches").status_code == 405
    task = httpx.get(f"{dep.shuffler.url}/v1/tasks/{dep.task.task_id}").json()
    assert task == json.loads((dep.workdir / "task.json").read_text())
    assert httpx.get(f"{dep.analyzer.url}/v1/task").json() == task
    _healthy(dep)
