"""Fixtures that run the shuffler and the analyzer as real processes on loopback.

Every deployment gets its own task, key, SQLite files and free ports under the
test's tmp_path (``deploy``), or under the module's for the tests of a module
that share one and do not interact through it (``shared_deploy``); services are
started as ``python -m shuffledp serve ROLE`` and stopped (SIGTERM, then
SIGKILL, to the service's process group) at teardown, also when the test failed
or was interrupted.

Processes that end whatever happens. A service is started by
:class:`~shuffledp.service.processes.ServiceProcess`: its own process group,
stdin a pipe from this process (it shuts down when the pipe closes, so even
``kill -9`` of pytest ends it), and an ``atexit`` hook. Every process this
session starts carries :data:`SESSION_ENV` in its environment; at the end of
the session :func:`pytest_sessionfinish` lists every ``shuffledp serve``
process that carries this session's value and is still running, kills it and
fails the run. Other sessions' services (other people's test runs on the same
machine) carry another value and are left alone. Under pytest-xdist each worker
is a session of its own (its own value, its own check); a worker hands its
lines to the controller, which prints them and fails the run.

PostgreSQL: the first test that asks for ``postgres_server`` (or
``postgres_database``) starts one real server for the session, so one per
xdist worker that runs such a test (see ``_postgres.py``); the test fails,
never skips, if it cannot be started. Each test creates its own databases.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _deploy import SESSION_ENV, Deployment, make_deployment
from _postgres import PostgresServer, PostgresStartError, start_postgres


def session_processes(*words: str) -> dict[int, str]:
    """Running processes started by this session whose command line holds ``words``, by PID.

    Found through :data:`SESSION_ENV` in ``/proc/PID/environ`` (the environment
    a process was started with), so a child of a child counts, and a process
    of another session does not.
    """
    marker = f"{SESSION_ENV}={os.environ[SESSION_ENV]}".encode()
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().decode(errors="replace").split("\0")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        names = {arg.rsplit("/", 1)[-1] for arg in argv}  # .venv/bin/shuffledp counts too
        if all(word in names for word in words):
            found[int(entry)] = " ".join(argv).strip()
    return found


#: Where an xdist worker leaves the survivors' lines for the controller (tests/conftest.py).
SURVIVORS_KEY = "shuffledp_serve_survivors"


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a ``shuffledp serve`` process this session started still runs.

    Runs after every fixture's teardown. Survivors are listed and killed.
    """
    survivors = session_processes("shuffledp", "serve")
    if not survivors:
        return
    for pid in survivors:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    lines = [f"{len(survivors)} `shuffledp serve` process(es) started by this session survived:"]
    lines += [f"  pid {pid}: {command}" for pid, command in sorted(survivors.items())]
    lines.append("(killed now; a fixture or test did not stop what it started)")
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        # A pytest-xdist worker: its exit status and terminal do not reach the run's; the
        # controller reports these lines and fails the run (tests/conftest.py).
        workeroutput[SURVIVORS_KEY] = lines
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, red=True, bold=True)
        else:  # pragma: no cover - run without the terminal plugin
            print(line)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def deploy(tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    """Factory: ``deploy(protocol="krr", min_batch_users=100, ...)`` starts both services."""
    made: list[Deployment] = []

    def make(*args: Any, **kwargs: Any) -> Deployment:
        deployment = make_deployment(tmp_path / f"deployment{len(made)}", *args, **kwargs)
        made.append(deployment)
        return deployment

    try:
        yield make
    finally:
        with contextlib.ExitStack() as stack:  # every deployment is stopped, even if one fails
            for deployment in made:
                stack.callback(deployment.stop)


@pytest.fixture(scope="module")
def shared_deploy(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Deployment]]:
    """Like ``deploy``, for a module: the tests that ask for the same arguments share one
    deployment, started once (stopped at the module's end, or when the worker is killed).

    Only for tests that do not interact through it: each checks what it did (a count
    before and after), never a total that another test's requests change.
    """
    made: dict[str, Deployment] = {}
    root = tmp_path_factory.mktemp("shared")

    def make(*args: Any, **kwargs: Any) -> Deployment:
        key = repr((args, sorted(kwargs.items())))
        if key not in made:
            made[key] = make_deployment(root / f"deployment{len(made)}", *args, **kwargs)
        return made[key]

    try:
        yield make
    finally:
        with contextlib.ExitStack() as stack:
            for deployment in made.values():
                stack.callback(deployment.stop)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL 15 server on 127.0.0.1 for the whole session (stopped at its end)."""
    try:
        server = start_postgres()
    except PostgresStartError as exc:
        pytest.fail(f"cannot start the PostgreSQL test server: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Callable[[], str]:
    """Factory: each call creates a new empty database and returns its URL."""
    return postgres_server.create_database
