"""The minimum batch size and one submission per client."""

from __future__ import annotations

import sqlite3
import time

import httpx
import pytest
from _deploy import DOMAIN, expected_counts, stored_counts

from shuffledp.cli import main
from shuffledp.service.client import SubmissionRejectedError
from shuffledp.service.shuffler import SUBMISSIONS_FORMAT
from shuffledp.service.tokens import issue_token, issue_tokens, new_token_key

pytestmark = pytest.mark.slow


def test_nothing_is_forwarded_or_published_below_the_minimum(deploy, capsys):
    dep = deploy("flip", min_batch_users=100)
    client = dep.client(seed=4)
    subs = client.submit_many([DOMAIN[i % 5] for i in range(99)], per_request=33)
    time.sleep(1.5)  # give a (wrong) dispatcher every chance to forward
    sh = dep.shuffler_metrics()
    assert sh["users_waiting"] == 99
    assert sh["batches_stored"] == 0 and sh.get("batches_forwarded", 0) == 0
    an = dep.analyzer_metrics()
    assert an["batches_stored"] == 0 and an["users_stored"] == 0
    response = dep.estimate()
    assert response.status_code == 409 and response.json()["reason"] == "nothing_to_publish"
    code = main(
        ["analyzer", "publish", "--task", str(dep.workdir / "task.json"),
         "--store", f"sqlite:///{dep.analyzer_db}"]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "no batch" in err

    subs.append(client.submit("red"))  # the 100th user completes the batch
    dep.wait_aggregated(100)
    assert dep.estimate().status_code == 200
    assert stored_counts(dep).tolist() == expected_counts(subs).tolist()


def test_one_submission_per_client(deploy):
    dep = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    task = dep.task
    alice_token = issue_token(dep.token_key, task.task_id)
    alice = dep.client(token=alice_token)
    first = alice.prepare("red")
    alice.post([first])
    # A retry of the same submission is a no-op ...
    alice.post([first])
    # ... but the same client with another submission is refused.
    with pytest.raises(SubmissionRejectedError) as refused:
        alice.submit("blue")
    assert refused.value.status == 409 and refused.value.reason == "client_already_submitted"

    def post(items):
        return httpx.post(
            dep.submissions_url, json={"format": SUBMISSIONS_FORMAT, "submissions": items}
        )

    bob = dep.client(token=issue_token(dep.token_key, task.task_id))
    item = bob.prepare("green").to_json()
    no_token = {k: v for k, v in item.items() if k != "token"}
    assert post([no_token]).json()["reason"] == "missing_token"
    assert post([no_token]).status_code == 401
    for bad in (
        issue_token(new_token_key(), task.task_id),  # another key
        issue_token(dep.token_key, "0" * 32),  # another task
        item["token"][:-1] + ("0" if item["token"][-1] != "0" else "1"),  # forged MAC
        "not-a-token",
    ):
        response = post([{**item, "token": bad}])
        assert response.status_code == 403 and response.json()["reason"] == "invalid_token"
    # Two submissions of one client in one request: refused, and neither is stored.
    twin = bob.prepare("pink").to_json()
    response = post([item, twin])
    assert response.status_code == 409
    assert dep.shuffler_metrics()["users_waiting"] == 1

    tokens = issue_tokens(dep.token_key, task.task_id, 99)
    subs = dep.client(token=tokens[0]).submit_many(
        [DOMAIN[i % 5] for i in range(99)], per_request=33, tokens=tokens
    )
    dep.wait_aggregated(100)
    assert stored_counts(dep).tolist() == expected_counts([first, *subs]).tolist()
    metrics = dep.shuffler_metrics()
    assert metrics["rejected"] == {
        "client_already_submitted": 2,
        "missing_token": 2,
        "invalid_token": 4,
    }
    assert metrics["submissions_duplicate"] == 1
    release = dep.estimate().json()
    assert any("one submission per client token" in a for a in release["privacy"]["assumptions"])
    # The shuffler keeps used client ids (not linked to submissions), never the tokens' MACs.
    conn = sqlite3.connect(dep.shuffler_db)
    assert conn.execute("SELECT COUNT(*) FROM used_clients").fetchone() == (100,)
    conn.close()
    stored = b"".join(p.read_bytes() for p in dep.workdir.glob("shuffler.db*"))
    assert all(t.split(".")[1].encode() not in stored for t in [alice_token, *tokens])
