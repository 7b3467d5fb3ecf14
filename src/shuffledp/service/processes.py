"""Start, stop and kill a service as a child process (the deploy demo and the tests use it).

Each service runs as ``python -m shuffledp serve ROLE …`` on a loopback port.
The first start binds port 0 and reads the port the service wrote to its
``--port-file``; a restart reuses that port, so clients and the other service
keep their URL.

A child never outlives its parent by more than its graceful shutdown:

* it runs in a process group of its own (a new session: Ctrl-C in the
  parent's terminal reaches the parent only, which stops it), and
  :meth:`ServiceProcess.stop` and :meth:`ServiceProcess.kill` signal the whole
  group;
* its standard input is a pipe from the parent and it is started with
  :data:`STOP_ON_STDIN_EOF_ENV` set: when the parent ends, however it ends
  (``kill -9`` included), the pipe closes and the service shuts down as on
  SIGTERM;
* an :mod:`atexit` hook of the parent stops every child still running when
  the interpreter exits (after an uncaught exception or Ctrl-C too).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import httpx

from shuffledp._validation import ShuffleDPError

__all__ = ["STOP_ON_STDIN_EOF_ENV", "ServiceProcess", "ServiceStartError", "stop_all"]

#: Set to ``1`` in a service's environment: the service shuts down (as on SIGTERM) when
#: its standard input reaches end of file, i.e. when the process holding the pipe ends.
STOP_ON_STDIN_EOF_ENV = "SHUFFLEDP_STOP_ON_STDIN_EOF"

_running: set[ServiceProcess] = set()
_running_lock = threading.Lock()
_atexit_installed = False


def stop_all(timeout: float = 10.0) -> list[int]:
    """Stop every service this process started that is still running; return their PIDs.

    Registered with :mod:`atexit` when the first service is launched.
    """
    with _running_lock:
        running = list(_running)
    stopped = []
    for service in running:
        if service.alive() and service.process is not None:
            stopped.append(service.process.pid)
        service.stop(timeout=timeout)
    return stopped


def _install_atexit() -> None:
    global _atexit_installed
    with _running_lock:
        if not _atexit_installed:
            atexit.register(stop_all)
            _atexit_installed = True


class ServiceStartError(ShuffleDPError):
    """A service did not come up (its log's last lines are in the message)."""


class ServiceProcess:
    """One service child process.

    Args:
        role: ``"shuffler"`` or ``"analyzer"``.
        args: Options after ``serve ROLE`` (everything but ``--listen`` and ``--port-file``).
        workdir: Where the port file and the log go.
        env: Extra environment variables for the first start.
        host: The loopback address to bind.
        port: The port (default 0: a free one, kept across restarts).
    """

    def __init__(
        self,
        role: str,
        args: Sequence[str],
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.role = role
        self.args = list(args)
        self.workdir = Path(workdir)
        self.host = host
        self.port = port
        self._port_file = self.workdir / f"{role}.port"
        self.env = dict(env or {})
        self.log_path = self.workdir / f"{role}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """The service's base URL (after :meth:`start`)."""
        return f"http://{self.host}:{self.port}"

    def start(self, *, env: Mapping[str, str] | None = None, timeout: float = 30.0) -> None:
        """Start the process and wait until ``/v1/health`` answers.

        Args:
            env: Extra environment variables for this start (default: those of the constructor).
            timeout: Seconds to wait.

        Raises:
            ServiceStartError: If it exits or does not answer in time.
        """
        self.launch(env=env)
        self.wait_started(timeout)

    def launch(self, *, env: Mapping[str, str] | None = None) -> None:
        """Start the process without waiting (see :meth:`wait_started`).

        Raises:
            ServiceStartError: If this object's process is still running (stop it first).
        """
        if self.alive():
            raise ServiceStartError(f"{self.role} is already running (pid {self.pid})")
        self._close_log()
        self._port_file.unlink(missing_ok=True)
        command = [
            sys.executable, "-m", "shuffledp", "serve", self.role, *self.args,
            "--listen", f"{self.host}:{self.port}", "--port-file", str(self._port_file),
        ]  # fmt: skip
        full_env = {**os.environ, **(self.env if env is None else env), STOP_ON_STDIN_EOF_ENV: "1"}
        _install_atexit()
        self._log = open(self.log_path, "ab")  # closed in stop() / kill()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )
        with _running_lock:
            _running.add(self)

    @property
    def pid(self) -> int | None:
        """The process id of the last start (None before the first)."""
        return None if self.process is None else self.process.pid

    def wait_started(self, timeout: float = 30.0) -> None:
        """Wait until the launched process has bound its port and answers ``/v1/health``.

        A process that does not come up in time is killed before the error is raised.

        Raises:
            ServiceStartError: If it exits or does not answer in time.
        """
        deadline = time.monotonic() + timeout
        try:
            while not self._port_file.exists():
                self._check_alive(deadline)
                time.sleep(0.02)
            self.port = int(self._port_file.read_text().strip())
            self.wait_healthy(deadline - time.monotonic())
        except BaseException:
            self.kill()
            raise

    def _check_alive(self, deadline: float) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise ServiceStartError(
                f"{self.role} exited with code {self.process.returncode}: {self.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise ServiceStartError(f"{self.role} did not start in time: {self.log_tail()}")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until ``GET /v1/health`` answers 200.

        Raises:
            ServiceStartError: If the process exits or the time runs out.
        """
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive(deadline)
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the service's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def alive(self) -> bool:
        """Whether the process is running."""
        return self.process is not None and self.process.poll() is None

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the process to end by itself; return its exit code."""
        assert self.process is not None
        code = self.process.wait(timeout=timeout)
        self._finished()
        return code

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it takes too long; return the code.

        Both signals go to the service's process group. After a graceful
        shutdown uvicorn re-raises the signal, so the code is ``-SIGTERM``
        (-15) then, as for any process ended by SIGTERM.
        """
        if self.process is None:
            return None
        try:
            if self.process.poll() is None:
                self._signal_group(signal.SIGTERM)
                try:
                    self.process.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self._signal_group(signal.SIGKILL)
                    self.process.wait()
        except BaseException:  # interrupted while waiting: do not leave it running
            self.kill()
            raise
        finally:
            self._finished()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL to the process group, as ``kill -9``: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self._signal_group(signal.SIGKILL)
            self.process.wait()
        self._finished()

    def _signal_group(self, signum: int) -> None:
        """Signal the service's process group (the process is not reaped yet: its id is ours)."""
        assert self.process is not None
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:  # exited meanwhile
            pass
        except PermissionError:  # pragma: no cover - not our group after all
            self.process.send_signal(signum)

    def _finished(self) -> None:
        """Release what the ended process held: its log, its stdin pipe, its registration."""
        if self.process is not None and self.process.poll() is not None:
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
            with _running_lock:
                _running.discard(self)
            self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
