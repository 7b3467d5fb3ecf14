"""kill -9 of either service at the worst moments, then a restart: every acknowledged
submission is counted exactly once.

Crash points are deterministic: ``SHUFFLEDP_TEST_KILL_AT`` (test-only, see
:mod:`shuffledp.service._testhooks`) makes a service SIGKILL itself at a named
point. Clients keep retrying with the same submission ids while the service
is down, so every submission ends up acknowledged, and the published counts
must equal those of exactly the clients' messages.
"""

from __future__ import annotations

import pytest
from _deploy import kill_at_crash_point_and_restart, kill_at_random_times

pytestmark = pytest.mark.slow


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
    kill_at_crash_point_and_restart(deploy, role, point, check)


def test_kills_at_random_times(deploy):
    """SIGKILL from outside at random moments (fixed seed), both services, several times."""
    kill_at_random_times(deploy)
