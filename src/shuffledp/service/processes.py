"""Start, stop and kill a service as a child process (the deploy demo and the tests use it).

Each service runs as ``python -m shuffledp serve ROLE …`` on a loopback port.
The first start binds port 0 and reads the port the service wrote to its
``--port-file``; a restart reuses that port, so clients and the other service
keep their URL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

import httpx

from shuffledp._validation import ShuffleDPError

__all__ = ["ServiceProcess", "ServiceStartError"]


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
        """Start the process without waiting (see :meth:`wait_started`)."""
        self._port_file.unlink(missing_ok=True)
        command = [
            sys.executable, "-m", "shuffledp", "serve", self.role, *self.args,
            "--listen", f"{self.host}:{self.port}", "--port-file", str(self._port_file),
        ]  # fmt: skip
        full_env = {**os.environ, **(self.env if env is None else env)}
        self._log = open(self.log_path, "ab")  # closed in stop() / kill()
        self.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=full_env
        )

    def wait_started(self, timeout: float = 30.0) -> None:
        """Wait until the launched process has bound its port and answers ``/v1/health``.

        Raises:
            ServiceStartError: If it exits or does not answer in time.
        """
        deadline = time.monotonic() + timeout
        while not self._port_file.exists():
            self._check_alive(deadline)
            time.sleep(0.02)
        self.port = int(self._port_file.read_text().strip())
        self.wait_healthy(deadline - time.monotonic())

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
        self._close_log()
        return code

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it takes too long; return the code.

        After a graceful shutdown uvicorn re-raises the signal, so the code is
        ``-SIGTERM`` (-15) then, as for any process ended by SIGTERM.
        """
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._close_log()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL, as ``kill -9``: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
