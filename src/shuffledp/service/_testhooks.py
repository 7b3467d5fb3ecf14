"""Crash points for the fault-injection tests. TEST-ONLY: never set these in production.

A service calls :func:`crash_point` at a few named places (for example just
before a transaction commits). When the environment variable
``SHUFFLEDP_TEST_KILL_AT`` names that point, the process sends itself SIGKILL
there, which is what ``kill -9`` from outside would do, but at a deterministic
moment. ``NAME@N`` kills on the N-th time the point is reached (default 1);
several points may be given, separated by commas.

Points used by the services:

* shuffler: ``ingest-before-commit`` (submissions written, not committed),
  ``ingest-after-commit`` (committed, not yet acknowledged),
  ``cut-before-commit`` (batch built, not committed),
  ``forward-after-ack`` (the analyzer acknowledged a batch, not yet marked sent);
* analyzer: ``store-batch-after-commit`` (batch stored, not yet acknowledged),
  ``aggregate-before-commit`` (batch decrypted and counted, not committed).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

__all__ = ["KILL_ENV", "crash_point"]

#: The environment variable that arms the crash points (tests only).
KILL_ENV = "SHUFFLEDP_TEST_KILL_AT"

_reached: Counter[str] = Counter()
_lock = threading.Lock()


def _armed() -> dict[str, int]:
    spec = os.environ.get(KILL_ENV, "")
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, count = item.partition("@")
        armed[name] = int(count) if count.isdigit() else 1
    return armed


def crash_point(name: str) -> None:
    """SIGKILL this process if ``SHUFFLEDP_TEST_KILL_AT`` arms ``name`` (tests only)."""
    if KILL_ENV not in os.environ:  # the usual case: nothing to parse
        return
    armed = _armed()
    if name not in armed:
        return
    with _lock:
        _reached[name] += 1
        hit = _reached[name] == armed[name]
    if hit:
        os.kill(os.getpid(), signal.SIGKILL)
