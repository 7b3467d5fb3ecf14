"""Which settings of a large property parametrization a run checks.

A few property tests draw more settings than a run can afford (some cost seconds
each). Such a test runs every cheap setting and a fixed subset of the expensive
ones, chosen to cover every method and corner the test names (each test says
which); the same settings in every run, so a failure reproduces. With
``SHUFFLEDP_TEST_FULL=1`` in the environment every drawn setting runs.
"""

from __future__ import annotations

import os

#: The environment variable that makes the sampled parametrizations run in full.
FULL_ENV = "SHUFFLEDP_TEST_FULL"


def full() -> bool:
    """Whether this run checks every setting (``SHUFFLEDP_TEST_FULL`` set, not ``0``)."""
    return os.environ.get(FULL_ENV, "") not in ("", "0")
