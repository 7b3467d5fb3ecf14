"""Fixtures that run the shuffler and the analyzer as real processes on loopback.

Every deployment gets its own task, key, SQLite files and free ports under the
test's tmp_path; services are started as ``python -m shuffledp serve ROLE``
and stopped (SIGTERM, then SIGKILL) at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _deploy import Deployment, make_deployment


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
