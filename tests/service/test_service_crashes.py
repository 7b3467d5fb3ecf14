"""kill -9 of either service at the worst moments, then a restart: every acknowledged
submission is counted exactly once.

Crash points are deterministic: ``SHUFFLEDP_TEST_KILL_AT`` (test-only, see
:mod:`shuffledp.service._testhooks`) makes a service SIGKILL itself at a named
point. Clients keep retrying with the same submission ids while the service
is down, so every submission ends up acknowledged, and the published counts
must equal those of exactly the clients' messages.
"""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest
from _deploy import DOMAIN, expected_counts, stored_counts, wait_until

from shuffledp.service._testhooks import KILL_ENV

pytestmark = pytest.mark.slow

USERS = 300
VALUES = [DOMAIN[i] for i in np.random.default_rng(8).choice(5, size=USERS)]


def _submit_in_background(dep, per_request=10):
    result: dict = {}

    def run():
        try:
            result["subs"] = dep.client(seed=3, retry_seconds=120).submit_many(
                VALUES, per_request=per_request
            )
        except Exception as exc:  # reported by the test
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def _finish(dep, thread, result):
    thread.join(timeout=180)
    assert not thread.is_alive() and "error" not in result, result.get("error")
    subs = result["subs"]
    assert len({s.submission_id for s in subs}) == USERS
    dep.wait_aggregated(USERS, timeout=90)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="all batches sent")
    assert stored_counts(dep).tolist() == expected_counts(subs).tolist()
    analyzer = dep.analyzer_metrics()
    assert analyzer["users_aggregated"] == USERS == analyzer["users_stored"]
    assert analyzer["batches_pending"] == 0
    release = dep.estimate().json()
    assert release["n"] == USERS
    return subs


@pytest.mark.parametrize(
    ("role", "point", "check"),
    [
        ("shuffler", "ingest-before-commit@7", {"shuffler": {"submissions_duplicate": 0}}),
        ("shuffler", "ingest-after-commit@7", {"shuffler": {"submissions_duplicate": 10}}),
        ("shuffler", "cut-before-commit@2", {"shuffler": {"submissions_duplicate": 0}}),
        ("shuffler", "forward-after-ack@1", {"analyzer": {"batches_duplicate": 1}}),
        ("analyzer", "store-batch-after-commit@2", {"analyzer": {"batches_duplicate": 1}}),
        ("analyzer", "aggregate-before-commit@1", {"analyzer": {"batches_aggregated": 3}}),
    ],
)
def test_kill_at_a_crash_point_and_restart(deploy, role, point, check):
    env = {KILL_ENV: point}
    dep = deploy(
        "krr",
        min_batch_users=100,
        shuffler_env=env if role == "shuffler" else None,
        analyzer_env=env if role == "analyzer" else None,
    )
    victim = dep.shuffler if role == "shuffler" else dep.analyzer
    thread, result = _submit_in_background(dep)
    assert victim.wait_exit(timeout=60) == -signal.SIGKILL
    victim.start(env={})  # same port, same store, no crash point
    _finish(dep, thread, result)
    for service, expected in check.items():
        metrics = dep.shuffler_metrics() if service == "shuffler" else dep.analyzer_metrics()
        for name, value in expected.items():
            assert metrics.get(name, 0) == value, (name, metrics)


def test_kills_at_random_times(deploy):
    """SIGKILL from outside at random moments (fixed seed), both services, several times."""
    rng = np.random.default_rng(20240611)
    dep = deploy("flip", min_batch_users=100)
    # 5 per request: batches of exactly 100 users, so all 300 are forwarded.
    thread, result = _submit_in_background(dep, per_request=5)
    for _ in range(4):
        time.sleep(float(rng.uniform(0.1, 0.8)))
        victim = dep.shuffler if rng.random() < 0.7 else dep.analyzer
        victim.kill()
        victim.start(env={})
    _finish(dep, thread, result)
