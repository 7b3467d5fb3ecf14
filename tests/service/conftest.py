"""Fixtures that run the shuffler and the analyzer as real processes on loopback.

Every deployment gets its own task, key, SQLite files and free ports under the
test's tmp_path; services are started as ``python -m shuffledp serve ROLE``
and stopped (SIGTERM, then SIGKILL) at teardown.

PostgreSQL: the first test that asks for ``postgres_server`` (or
``postgres_database``) starts one real server for the session (see
``_postgres.py``); the test fails, never skips, if it cannot be started. Each
test creates its own databases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _deploy import Deployment, make_deployment
from _postgres import PostgresServer, PostgresStartError, start_postgres


@pytest.fixture
def deploy(tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    """Factory: ``deploy(protocol="krr", min_batch_users=100, ...)`` starts both services."""
    made: list[Deployment] = []

    def make(*args: Any, **kwargs: Any) -> Deployment:
        deployment = make_deployment(tmp_path / f"deployment{len(made)}", *args, **kwargs)
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL 15 server on 127.0.0.1 for the whole session (stopped at its end)."""
    try:
        server = start_postgres()
    except PostgresStartError as exc:
        pytest.fail(f"cannot start the PostgreSQL test server: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Callable[[], str]:
    """Factory: each call creates a new empty database and returns its URL."""
    return postgres_server.create_database
