"""Shared test fixtures, and what a run on several pytest-xdist workers reports at its end."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

# Plots are written without a display.
os.environ.setdefault("MPLBACKEND", "Agg")

# A run started with SIGINT ignored (a background job of a shell without job control) would
# pass that on to every command a test starts (an ignored signal stays ignored across exec),
# and the Ctrl-C tests would see commands that never hear it: Ctrl-C is restored here, in the
# pytest process and in each xdist worker, whatever started the run.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: How ``--dist loadfile`` (what ``make test`` runs) groups the tests it sends to its workers:
#: a file's tests go to one worker (its module fixtures are made once), except that these
#: directories go whole to one worker, their session fixture being costly to start twice
#: (tests/backends: one Spark session, a JVM that takes ~10 s of both cores to start) ...
ONE_WORKER_DIRECTORIES = ("tests/backends/",)
#: ... and these go test by test (quick tests with cheap module fixtures, collected last: the
#: end of the run is shared out test by test, no worker waiting long for the other's file).
TEST_BY_TEST_DIRECTORIES = ("tests/unit/",)

#: Lines a worker's session-end checks left for the controller (see tests/service/conftest.py,
#: which writes them under this key of ``workeroutput``).
SURVIVORS_KEY = "shuffledp_serve_survivors"
_WORKER_PROBLEMS: list[str] = []


def pytest_configure(config: object) -> None:
    """Measure every figure the package writes during the tests (tests/figure_checks.py)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # no figure can be drawn
        return
    import figure_checks

    figure_checks.install()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: keep what a finished worker's session-end checks found."""
    lines = getattr(node, "workeroutput", {}).get(SURVIVORS_KEY)
    if lines:
        worker = getattr(node, "workerinput", {}).get("workerid", "a worker")
        _WORKER_PROBLEMS.extend(f"[{worker}] {line}" for line in lines)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """On the xdist controller: print what the workers' checks found and fail the run."""
    if not _WORKER_PROBLEMS:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.line("")  # after the progress line
    for line in _WORKER_PROBLEMS:
        if reporter is not None:
            reporter.write_line(line, red=True, bold=True)
        else:  # pragma: no cover - run without the terminal plugin
            print(line)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the units of :data:`ONE_WORKER_DIRECTORIES` and
    :data:`TEST_BY_TEST_DIRECTORIES` (sent in collection order with --no-loadscope-reorder)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(TEST_BY_TEST_DIRECTORIES):
                return nodeid
            path = super()._split_scope(nodeid)
            return next((d for d in ONE_WORKER_DIRECTORIES if path.startswith(d)), path)

    return FileScheduling(config, log)
