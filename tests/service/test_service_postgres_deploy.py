"""Both services on PostgreSQL, as real processes: end to end, outages, kill -9, publish."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx
import numpy as np
import psycopg
import pytest
from _deploy import (
    DOMAIN,
    expected_counts,
    kill_at_crash_point_and_restart,
    kill_at_random_times,
    stored_counts,
    wait_until,
)

from shuffledp.cli import main
from shuffledp.schemas import validate
from shuffledp.service.shuffler import SUBMISSIONS_FORMAT

pytestmark = pytest.mark.slow


def _dbname(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


@pytest.fixture
def pg_deploy(deploy, postgres_database):
    """``deploy`` with each service on its own new PostgreSQL database."""

    def make(*args, **kwargs):
        return deploy(
            *args, shuffler_store=postgres_database(), analyzer_store=postgres_database(), **kwargs
        )

    return make


def test_end_to_end_and_publish(pg_deploy, tmp_path, capsys):
    dep = pg_deploy("krr", min_batch_users=100)
    rng = np.random.default_rng(11)
    values = [DOMAIN[i] for i in rng.choice(5, size=300, p=[0.4, 0.3, 0.15, 0.1, 0.05])]
    subs = dep.client(seed=5).submit_many(values, per_request=20)
    dep.wait_aggregated(300)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="all batches sent")

    sh = dep.shuffler_metrics()
    assert sh["submissions_accepted"] == 300 == sh["submissions_stored"]
    assert sh["batches_cut"] == 3 == sh["batches_forwarded"] and sh["users_waiting"] == 0
    an = dep.analyzer_metrics()
    assert an["batches_aggregated"] == 3 and an["users_aggregated"] == 300
    assert stored_counts(dep).tolist() == expected_counts(subs).tolist()
    with psycopg.connect(dep.shuffler_store) as conn:
        assert conn.execute(
            "SELECT COUNT(*) FROM submissions WHERE messages IS NOT NULL"
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT COUNT(*) FROM batches WHERE payload IS NOT NULL"
        ).fetchone() == (0,)

    release = dep.estimate().json()
    assert release["n"] == 300 and release["service"]["batches"] == 3

    # the offline publisher reads the analyzer's database while the analyzer serves
    task_file = str(dep.workdir / "task.json")
    out = tmp_path / "release.json"
    code = main(
        ["analyzer", "publish", "--task", task_file, "--store", dep.analyzer_store,
         "--output", str(out)]
    )  # fmt: skip
    assert code == 0
    assert json.loads(out.read_text()) == release
    assert "300 users in 3 batch(es)" in capsys.readouterr().err
    # ... and refuses the shuffler's, with one line and exit code 2
    code = main(["analyzer", "publish", "--task", task_file, "--store", dep.shuffler_store])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1
    assert "belongs to the shuffler" in captured.err and "Traceback" not in captured.err


@pytest.mark.parametrize("protocol", ["correlated", "augmented"])
def test_correlated_and_augmented_end_to_end(pg_deploy, protocol):
    """The two protocols whose batches differ most: many messages per user, or dummies."""
    dep = pg_deploy(protocol, min_batch_users=100)
    subs = dep.client(seed=6).submit_many([DOMAIN[i % 5] for i in range(200)], per_request=25)
    dep.wait_aggregated(200)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="all batches sent")
    counts = stored_counts(dep)
    clients = expected_counts(subs, dep.task.message_domain_size)
    if protocol == "correlated":
        assert counts.tolist() == clients.tolist()
    else:  # the clients' messages and, in every bin, the shuffler's dummies
        assert np.all(counts >= clients) and counts.sum() > clients.sum()
    with psycopg.connect(dep.shuffler_store) as conn:
        assert conn.execute(
            "SELECT COUNT(*) FROM batches WHERE payload IS NOT NULL"
        ).fetchone() == (0,)
        (stored,) = conn.execute("SELECT SUM(n_messages) FROM batches").fetchone()
    assert int(stored) == int(counts.sum())  # what the shuffler forwarded, dummies included
    release = dep.estimate().json()
    validate(release)
    assert release["protocol"] == protocol and release["n"] == 200
    assert release["privacy"]["n"] == 100 and release["service"]["batches"] == 2


def test_database_outages_are_503_and_lose_nothing(pg_deploy, postgres_server):
    dep = pg_deploy("flip", min_batch_users=20)
    client = dep.client(seed=2)
    subs = client.submit_many([DOMAIN[i % 5] for i in range(10)], per_request=5)

    # the shuffler's database goes away: 503, then the client's retry is stored once
    late = client.prepare("red")
    body = json.dumps({"format": SUBMISSIONS_FORMAT, "submissions": [late.to_json()]})
    postgres_server.block(_dbname(dep.shuffler_store))
    try:
        response = httpx.post(
            dep.submissions_url,
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        metrics = httpx.get(f"{dep.shuffler.url}/v1/metrics", timeout=60)
    finally:
        postgres_server.unblock(_dbname(dep.shuffler_store))
    assert metrics.status_code == 503 and metrics.json()["reason"] == "store_unavailable"
    assert response.status_code == 503, response.text
    assert response.json()["reason"] == "store_unavailable"
    assert response.headers["retry-after"] == "1"
    client.post([late])
    subs.append(late)
    assert dep.shuffler_metrics()["submissions_stored"] == 11

    # the analyzer's database goes away: the batch waits in the outbox, then arrives
    postgres_server.block(_dbname(dep.analyzer_store))
    try:
        subs += client.submit_many([DOMAIN[i % 3] for i in range(9)], per_request=3)
        wait_until(
            lambda: dep.shuffler_metrics().get("forward_failures", 0) >= 1,
            what="a forward refused",
        )
        assert dep.shuffler_metrics()["batches_unsent"] == 1
        for path in ("/v1/metrics", "/v1/estimate"):
            refused = httpx.get(f"{dep.analyzer.url}{path}", timeout=60)
            assert refused.status_code == 503, (path, refused.text)
            assert refused.json()["reason"] == "store_unavailable"
    finally:
        postgres_server.unblock(_dbname(dep.analyzer_store))
    dep.wait_aggregated(20)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="batch sent")
    assert stored_counts(dep).tolist() == expected_counts(subs).tolist()
    assert dep.analyzer_metrics()["rejected"].get("store_unavailable", 0) >= 1
    for service in (dep.shuffler, dep.analyzer):  # no request answered 500
        assert "Exception in ASGI application" not in service.log_tail(10_000)


@pytest.mark.parametrize(
    ("role", "point", "check"),
    [
        # killed holding the counter's row lock: the server must release it
        ("shuffler", "ingest-before-commit@7", {"shuffler": {"submissions_duplicate": 0}}),
        ("shuffler", "cut-before-commit@2", {"shuffler": {"submissions_duplicate": 0}}),
        ("analyzer", "aggregate-before-commit@1", {"analyzer": {"batches_aggregated": 3}}),
    ],
)
def test_kill_at_a_crash_point_and_restart(pg_deploy, role, point, check):
    """As test_service_crashes: every acknowledged submission is counted exactly once."""
    kill_at_crash_point_and_restart(pg_deploy, role, point, check)


def test_kills_at_random_times(pg_deploy):
    """test_service_crashes' SIGKILLs from outside at random moments, on PostgreSQL."""
    kill_at_random_times(pg_deploy)
