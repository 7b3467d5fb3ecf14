"""Replays: copies of a user's sealed messages, sent again under new submission ids.

Whoever sees one user's ciphertexts (a network observer before TLS, a proxy,
a compromised app server) can submit copies of them. Before replay keys, the
analyzer counted every copy and the bin that grew gave the value away
(issue 24: 8 of 8 victims' values for ``augmented`` and ``correlated`` at
d = 3, 8 of 8 k-RR reports at d = 8, with 100 copies each). Now the analyzer
counts each ciphertext at most once for the task's lifetime (keyed by its
HPKE encapsulated key) and the shuffler refuses a copy of a ciphertext it
holds. Every test runs both services as real processes on loopback with
SQLite stores.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from _deploy import Deployment, stored_counts, wait_until

from shuffledp.service.shuffler import SUBMISSIONS_FORMAT
from shuffledp.service.store import open_analyzer_store
from shuffledp.service.task import new_id
from shuffledp.service.wire import b64encode

pytestmark = pytest.mark.slow

USERS = 100
VICTIMS = 8
COPIES = 100


_HTTP = httpx.Client(timeout=120)  # one client: making one costs about 60 ms


def _post(dep: Deployment, submissions: list[list[bytes]]) -> httpx.Response:
    """One request of submissions of raw ciphertexts, each under a new id and without a token."""
    items = [
        {"submission_id": new_id(), "ciphertexts": [b64encode(c) for c in cts]}
        for cts in submissions
    ]
    return _HTTP.post(
        dep.submissions_url, json={"format": SUBMISSIONS_FORMAT, "submissions": items}
    )


def _counted_messages(dep: Deployment) -> int:
    store = open_analyzer_store(dep.analyzer_store, dep.task.task_id, read_only=True)
    try:
        return store.totals(dep.task.message_domain_size).n_messages
    finally:
        store.close()


def _batch_messages(dep: Deployment) -> list[int]:
    """Messages of every batch the analyzer stored, in arrival order."""
    store = open_analyzer_store(dep.analyzer_store, dep.task.task_id, read_only=True)
    try:
        return [store.load_batch(b).n_messages for b in store.batch_ids()]
    finally:
        store.close()


def _guess(protocol: str, growth: np.ndarray) -> int:
    """The attacker's guess: the bin that grew most (correlated: N+ - N- per bin)."""
    if protocol == "correlated":
        growth = growth[0::2] - growth[1::2]
    return int(np.argmax(growth))


@pytest.mark.parametrize(
    ("protocol", "d"), [("krr", 8), ("correlated", 3), ("augmented", 3)], ids=str
)
def test_copies_of_a_victims_messages_are_not_counted(deploy, protocol, d):
    """100 copies of each of 8 victims' messages, after their batch: none of them is counted.

    The attacker posts each copy in its own request under a new id, then fills
    the batch with submissions of its own (whose messages it knows and takes
    off the counts). The shuffler takes one copy per batch (it refuses a copy
    of one it holds) and the analyzer drops that one.
    """
    domain = [f"v{i}" for i in range(d)]
    dep = deploy(protocol, min_batch_users=USERS, domain=domain)
    size = dep.task.message_domain_size
    rng = np.random.default_rng(24)
    values = [domain[i] for i in rng.integers(0, d, size=USERS)]
    subs = dep.client(seed=5).submit_many(values, per_request=25)
    dep.wait_aggregated(USERS)
    assert dep.analyzer_metrics().get("messages_duplicate", 0) == 0  # honest: no copy
    attacker = dep.client(seed=9)

    recovered, accepted_copies = 0, 0
    dropped, expected_dropped, counted_copies = [], [], []
    growths = []
    for round_, (victim, value) in enumerate(zip(subs[:VICTIMS], values, strict=False)):
        before = stored_counts(dep)
        counted_before = _counted_messages(dep)
        duplicates_before = dep.analyzer_metrics().get("messages_duplicate", 0)
        accepted = 0
        for _ in range(COPIES):  # one request each (copies in one request are refused)
            answer = _post(dep, [list(victim.ciphertexts)])
            assert answer.status_code in (200, 409), answer.text
            if answer.status_code == 409:
                assert answer.json()["reason"] == "ciphertext_replayed"
            accepted += answer.status_code == 200
        accepted_copies += accepted
        waiting = dep.shuffler_metrics()["users_waiting"]
        own = attacker.prepare_many([domain[0]] * (USERS - waiting) if waiting else [])
        if own:
            assert _post(dep, [list(sub.ciphertexts) for sub in own]).status_code == 200
        dep.wait_aggregated(USERS * (round_ + 2))
        known = np.bincount(
            np.concatenate([s.messages for s in own] or [np.empty(0, np.int64)]), minlength=size
        )
        growth = stored_counts(dep) - before - known
        growths.append(growth.tolist())
        # The victim's report: k-RR its randomized bin, the others its value.
        report = int(victim.messages[0]) if protocol == "krr" else domain.index(value)
        recovered += _guess(protocol, growth) == report
        copies = accepted * len(victim.ciphertexts)
        expected_dropped.append(copies)
        dropped.append(dep.analyzer_metrics().get("messages_duplicate", 0) - duplicates_before)
        # What the analyzer counted of the attack batch beyond the attacker's own messages
        # (augmented: and the dummies, d E[z] of them on average): the copies it let through.
        added = _counted_messages(dep) - counted_before - int(known.sum())
        if protocol == "augmented":
            added -= _batch_messages(dep)[-1] - copies - int(known.sum())
        counted_copies.append(added)
    attack = (
        f"{recovered} of {VICTIMS} victims' reports recovered; copies accepted by the "
        f"shuffler {accepted_copies}, counted {counted_copies}, dropped {dropped}; growth "
        f"per message index beyond the attacker's own messages {growths}"
    )
    assert counted_copies == [0] * VICTIMS, attack
    assert dropped == expected_dropped, attack
    if protocol != "augmented":
        assert growths == [[0] * size] * VICTIMS, attack
    # The shuffler took one copy per batch (it refuses a copy of one it holds).
    assert accepted_copies == VICTIMS, attack
    assert dep.estimate().status_code == 200


@pytest.mark.parametrize(("protocol", "d"), [("krr", 8), ("correlated", 3)], ids=str)
def test_a_batch_of_copies_sent_with_the_forward_token_counts_none(deploy, protocol, d):
    """Past the shuffler (its bearer secret stolen): 100 copies in one batch, all dropped."""
    domain = [f"v{i}" for i in range(d)]
    dep = deploy(protocol, min_batch_users=USERS, domain=domain)
    subs = dep.client(seed=10).submit_many([domain[i % d] for i in range(USERS)], per_request=50)
    dep.wait_aggregated(USERS)
    before = stored_counts(dep)
    victim = subs[0]
    payload = b"".join(victim.ciphertexts) * COPIES
    body = {
        "format": "shuffledp-batch/1",
        "task_id": dep.task.task_id,
        "batch_id": new_id(),
        "n_users": COPIES,
        "n_messages": COPIES * len(victim.ciphertexts),
        "payload": b64encode(payload),
    }
    assert dep.post_batch(body).status_code == 200
    dep.wait_aggregated(2 * USERS)
    assert stored_counts(dep).tolist() == before.tolist()
    assert dep.analyzer_metrics()["messages_duplicate"] == COPIES * len(victim.ciphertexts)
    log = dep.analyzer.log_path.read_text()
    assert f"{COPIES * len(victim.ciphertexts)} messages are copies of messages counted" in log


def test_the_shuffler_refuses_a_copy_of_a_ciphertext_it_holds(deploy):
    dep = deploy("krr", min_batch_users=USERS)
    waiting = dep.client(seed=6).submit_many(["red"] * 50, per_request=25)
    copy = waiting[0].ciphertexts[0]

    answer = _post(dep, [[copy]])
    assert answer.status_code == 409 and answer.json()["reason"] == "ciphertext_replayed"
    # twice in one request: refused before the store is asked
    fresh = dep.client(seed=7).prepare("red").ciphertexts[0]
    twice = _post(dep, [[fresh], [fresh]])
    assert twice.status_code == 400 and twice.json()["reason"] == "invalid_ciphertexts"
    assert "a ciphertext repeats" in twice.json()["error"]
    metrics = dep.shuffler_metrics()
    assert metrics["rejected"] == {"ciphertext_replayed": 1, "invalid_ciphertexts": 1}
    assert metrics["users_waiting"] == 50  # all or nothing: none of them was stored

    # After a restart the shuffler still holds them (its lookup is rebuilt from its files).
    dep.shuffler.stop()
    dep.shuffler.start()
    answer = _post(dep, [[copy]])
    assert answer.status_code == 409 and answer.json()["reason"] == "ciphertext_replayed"


def test_a_copy_sent_before_the_original_is_counted_instead_of_it_once(deploy):
    """An attacker who sees a message before it arrives counts it first: once, not twice."""
    dep = deploy("krr", min_batch_users=USERS)
    client = dep.client(seed=8)
    victim = client.prepare("red")
    assert _post(dep, [list(victim.ciphertexts)]).status_code == 200  # the copy, first
    # The original arrives while the copy waits: refused, the client is told why.
    answer = _post(dep, [list(victim.ciphertexts)])
    assert answer.status_code == 409 and answer.json()["reason"] == "ciphertext_replayed"
    others = client.submit_many(["green"] * (USERS - 1), per_request=33)
    dep.wait_aggregated(USERS)
    # The original again after the cut: stored by the shuffler, dropped by the analyzer.
    assert _post(dep, [list(victim.ciphertexts)]).status_code == 200
    more = client.submit_many(["blue"] * (USERS - 1), per_request=33)
    dep.wait_aggregated(2 * USERS)
    wait_until(lambda: dep.analyzer_metrics().get("messages_duplicate", 0) == 1, what="dropped")
    expected = np.bincount(
        [int(s.messages[0]) for s in [victim, *others, *more]], minlength=len(dep.task.domain)
    )
    assert stored_counts(dep).tolist() == expected.tolist()
