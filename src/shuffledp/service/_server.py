"""Run a service's Starlette app under uvicorn, and the HTTP helpers both services share.

Logging: uvicorn's access log is off, so no client address or request line is
ever written; the services log batch-level events only. Connections are
served by :class:`~shuffledp.service._http.GuardedProtocol` (header size and
deadlines, body deadline, connection cap); a client that goes away while
sending its body is counted (``client_disconnected``), not logged.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from shuffledp._validation import InvalidParameterError
from shuffledp.service.limits import ConnectionLimits

__all__ = [
    "BackgroundWorker",
    "BodyTooLargeError",
    "RejectedError",
    "UTCFormatter",
    "WorkerHealth",
    "check_json_content_type",
    "configure_logging",
    "connection_stats",
    "error_response",
    "parse_json",
    "parse_listen",
    "read_body",
    "serve",
]

_log = logging.getLogger("shuffledp.service")


class RejectedError(Exception):
    """A request refused with an HTTP status and a metrics reason.

    Args:
        status: HTTP status (4xx).
        reason: Short machine-readable reason, also the metrics key.
        message: One line for the caller.
    """

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


class BodyTooLargeError(RejectedError):
    """The request body exceeds the limit (HTTP 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, "body_too_large", f"request body exceeds {limit} bytes")


@dataclass(frozen=True)
class WorkerHealth:
    """What a :class:`BackgroundWorker` says about itself (for ``GET /v1/ready``).

    Attributes:
        alive: The thread runs.
        failing_for: Seconds since the first of the failed steps in a row (None: the
            last step succeeded).
        failures: Failed steps in a row.
        reason: The last failure, one line (None when not failing).
    """

    alive: bool
    failing_for: float | None
    failures: int
    reason: str | None


class BackgroundWorker:
    """A daemon thread that runs a step of work again and again, woken early on demand.

    A subclass defines :meth:`_run`, which calls :meth:`_loop` with its step.
    The step returns True when no work is left: the thread then sleeps
    ``idle_seconds`` (or until :meth:`wake`); otherwise (False, or an
    exception) it retries after :meth:`_retry_delay`.

    Failures are logged once per outage, not once per attempt: the first
    failed step logs one line with the reason (a
    :class:`~shuffledp.service.store_protocols.StoreError`: the store is down
    or unusable) or with its traceback (any other exception: a bug), repeats
    are counted, not logged, unless the reason changes, and the first step that
    succeeds again logs one line with how long the failures lasted and how
    many steps failed. :meth:`health` says the same to the readiness endpoint.

    Args:
        name: The thread's name.
        idle_seconds: How often to look for work when nobody wakes the thread.
        join_seconds: How long :meth:`stop` waits for the thread.
    """

    def __init__(self, name: str, *, idle_seconds: float, join_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        self._join_seconds = join_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._failing_since: float | None = None
        self._failures = 0
        self._reason: str | None = None

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def wake(self) -> None:
        """Ask the thread to look for work now."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread after the step in progress (waits at most ``join_seconds``)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self._join_seconds)

    def health(self) -> WorkerHealth:
        """Whether the thread runs, and whether (and since when) its steps fail."""
        since = self._failing_since  # one read: the thread may change it meanwhile
        return WorkerHealth(
            alive=self._thread.is_alive(),
            failing_for=None if since is None else time.monotonic() - since,
            failures=self._failures,
            reason=self._reason,
        )

    def _run(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _retry_delay(self, previous: float) -> float:
        """Seconds to wait after a step that left work (``previous``: the last such wait, or 0)."""
        return 1.0

    def _loop(self, step: Callable[[], bool], what: str) -> None:
        """Run ``step`` until stopped; ``what`` names it in the log when it fails."""
        delay = 0.0
        while not self._stop.is_set():
            self._wake.clear()
            try:
                done = step()
            except Exception as exc:  # keep the thread alive; retried later
                self._failed(what, exc)
                done = False
            else:
                self._succeeded(what)
            delay = 0.0 if done else self._retry_delay(delay)
            self._wake.wait(self.idle_seconds if done else delay)

    def _failed(self, what: str, exc: Exception) -> None:
        from shuffledp.service.store_protocols import StoreError

        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        first = self._failing_since is None
        self._failures += 1
        if first:
            self._failing_since = time.monotonic()
        if not first and reason == self._reason:
            return  # the same failure again: counted, not logged
        self._reason = reason
        if isinstance(exc, StoreError):
            _log.warning("%s failed, retrying until it succeeds: %s", what, exc)
        else:
            _log.exception("%s failed, retrying until it succeeds", what)

    def _succeeded(self, what: str) -> None:
        since = self._failing_since
        if since is None:
            return
        _log.warning(
            "%s succeeds again after %.1f s (%d failed attempts)",
            what,
            time.monotonic() - since,
            self._failures,
        )
        self._failing_since = None
        self._failures = 0
        self._reason = None


def error_response(exc: RejectedError) -> JSONResponse:
    """The JSON answer to a refused request."""
    return JSONResponse({"error": exc.message, "reason": exc.reason}, status_code=exc.status)


def store_unavailable_response() -> JSONResponse:
    """The answer when the store cannot be reached: 503, retry later (never a 500)."""
    return JSONResponse(
        {"error": "store unavailable, retry later", "reason": "store_unavailable"},
        status_code=503,
        headers={"Retry-After": "1"},
    )


def connection_stats(request: Request) -> dict[str, int]:
    """What the connection limits did (``{}`` when the app is not run by :func:`serve`)."""
    stats = getattr(request.app.state, "connections", None)
    return {} if stats is None else dict(stats.snapshot())


def check_json_content_type(content_type: str | None) -> None:
    """Refuse (415) a request body whose ``Content-Type`` is not ``application/json``.

    The media type is compared without regard to case and may carry parameters
    (``application/json; charset=utf-8``); a ``charset`` other than UTF-8 is
    refused too, since the body is read as UTF-8 (:func:`parse_json`).

    Why: a browser sends a ``POST`` whose type is ``text/plain``,
    ``application/x-www-form-urlencoded`` or ``multipart/form-data`` from any
    page, to any site, without asking the site first (no CORS preflight: a
    form, or ``fetch`` in ``no-cors`` mode); only the answer is kept from the
    page. Were such a body parsed, any web page a user visits could make the
    user's browser submit reports. ``application/json`` needs a preflight,
    which only the origins the shuffler lists pass (:mod:`~shuffledp.service.cors`).

    Raises:
        RejectedError: 415 ``unsupported_media_type``, saying what came.
    """
    media, _, parameters = (content_type or "").partition(";")
    problem = None
    if media.strip().lower() != "application/json":
        problem = f"got {content_type!r}" if content_type else "got none"
    else:
        for parameter in parameters.split(";"):
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "charset" and value.strip().strip('"').lower() != "utf-8":
                problem = f"got charset {value.strip()!r}; the body must be UTF-8"
    if problem is not None:
        raise RejectedError(
            415,
            "unsupported_media_type",
            f"Content-Type must be application/json ({problem}): a body of another type "
            "needs no CORS preflight, so any web page could make a browser send it",
        )


async def read_body(request: Request, limit: int) -> bytes:
    """Read a JSON request body, refusing more than ``limit`` bytes without buffering them.

    Its ``Content-Type`` is checked first (:func:`check_json_content_type`),
    before its length or any byte of it.

    Raises:
        RejectedError: 415 if the Content-Type is not ``application/json``.
        BodyTooLargeError: If Content-Length or the bytes received exceed ``limit``.
        RejectedError: On an unreadable Content-Length (400), or when the client
            disconnects or misses the body deadline before the body is complete
            (400 ``client_disconnected``; nobody reads the answer, the metrics count it).
    """
    check_json_content_type(request.headers.get("content-type"))
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise RejectedError(
                400, "bad_content_length", "Content-Length is not a number"
            ) from None
        if size > limit:
            raise BodyTooLargeError(limit)
    chunks: list[bytes] = []
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise BodyTooLargeError(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise RejectedError(
            400, "client_disconnected", "the client went away before its body was complete"
        ) from None
    return b"".join(chunks)


def parse_json(body: bytes) -> Any:
    """Parse a JSON body, which must be UTF-8 without a byte-order mark (RFC 8259 §8.1).

    The body is decoded strictly as UTF-8 before it is parsed: ``json.loads``
    given bytes would guess UTF-16 or UTF-32 from the first bytes and accept
    them, and skip a UTF-8 byte-order mark. Neither is what the services
    document, and no client of this package sends them.

    Raises:
        RejectedError: 400 ``malformed_json`` if the body is not UTF-8, starts
            with a byte-order mark or is not JSON (the message says which).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RejectedError(
            400,
            "malformed_json",
            f"request body is not UTF-8 (byte {exc.start} is 0x{body[exc.start]:02x}): "
            "send JSON encoded as UTF-8",
        ) from None
    if "\x00" in text:  # valid UTF-8, but no JSON text holds a NUL: UTF-16 or UTF-32
        raise RejectedError(
            400,
            "malformed_json",
            "request body holds NUL bytes (UTF-16 or UTF-32?): send JSON encoded as UTF-8",
        )
    if text.startswith("\ufeff"):
        raise RejectedError(
            400,
            "malformed_json",
            "request body starts with a byte-order mark: send JSON encoded as UTF-8 without one",
        )
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise RejectedError(400, "malformed_json", "request body is not valid JSON") from None


def parse_listen(text: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[::1]:PORT`` for IPv6); port 0 picks a free one.

    Raises:
        InvalidParameterError: If it is not of that form.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise InvalidParameterError(f"--listen must be HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port_text)


def serve(
    app: Any,
    listen: str,
    *,
    port_file: Path | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    limits: ConnectionLimits | None = None,
) -> None:
    """Serve ``app`` on ``listen`` until SIGINT/SIGTERM (graceful: the app's shutdown runs).

    The connection limits' counters are put in ``app.state.connections``
    (a :class:`~shuffledp.service._http.ConnectionStats`) for the metrics.
    The soft limit on open files is raised so that ``limits.max_connections``
    fit (the cap is lowered, with a warning, where the hard limit does not allow it).

    Args:
        app: The ASGI (Starlette) application.
        listen: ``HOST:PORT``; port 0 binds a free port.
        port_file: Written with the bound port once the socket is bound (for
            scripts and tests that started the service on port 0).
        ssl_certfile: Serve HTTPS with this certificate chain.
        ssl_keyfile: Its private key.
        limits: Header, body and connection limits (default :class:`ConnectionLimits`).
    """
    import uvicorn

    from shuffledp.service._http import ConnectionStats, guarded_protocol, raise_fd_limit

    limits = limits or ConnectionLimits()
    allowed = raise_fd_limit(limits.max_connections)
    if allowed < limits.max_connections:
        _log.warning(
            "the open-file limit allows %d connections, not %d: the cap is %d",
            allowed,
            limits.max_connections,
            allowed,
        )
        limits = replace(limits, max_connections=allowed)
    stats = ConnectionStats()
    app.state.connections = stats

    host, port = parse_listen(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidParameterError(f"--listen {listen}: cannot bind ({exc.strerror})") from None
    bound = sock.getsockname()[1]
    if port_file is not None:
        from shuffledp._files import write_text_atomically

        write_text_atomically(port_file, f"{bound}\n")
    config = uvicorn.Config(
        app,
        log_config=None,  # uvicorn's loggers propagate to ours (configure_logging)
        log_level="warning",
        access_log=False,
        proxy_headers=False,
        server_header=False,
        lifespan="on",
        http=guarded_protocol(limits, stats),
        ws="none",
        timeout_graceful_shutdown=10,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    _stop_on_stdin_eof()
    _log.info("listening on %s:%d", host, bound)
    # Everything imported and built so far lives as long as the process: move it out
    # of the garbage collector's reach, so that a full collection does not walk
    # it (tens of milliseconds with the GIL held, a stall for every request).
    gc.collect()
    gc.freeze()
    uvicorn.Server(config).run(sockets=[sock])


def _stop_on_stdin_eof() -> None:
    """When started by :class:`~shuffledp.service.processes.ServiceProcess`, end with the parent.

    Its standard input is then a pipe from the parent: a daemon thread waits
    for end of file (the parent ended, however it ended) and sends this
    process SIGTERM, which uvicorn answers with a graceful shutdown.
    """
    from shuffledp.service.processes import STOP_ON_STDIN_EOF_ENV

    if os.environ.get(STOP_ON_STDIN_EOF_ENV) != "1":
        return

    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:  # no usable stdin: nothing to watch
            return
        _log.warning("the parent process ended (stdin closed): shutting down")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stop-on-stdin-eof", daemon=True).start()


class UTCFormatter(logging.Formatter):
    """Log lines that start with the time in ISO 8601, UTC, to the millisecond.

    ``2024-06-11T09:30:00.123Z shuffledp.service.shuffler INFO cut batch …``
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(name)s %(levelname)s %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        """The record's time as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{seconds}.{int(record.msecs):03d}Z"


def configure_logging() -> None:
    """Log the services' events (batch level only) to stderr, each line with its UTC time.

    uvicorn's own loggers are left unconfigured by :func:`serve` (``log_config=None``),
    so their lines go through the same handler and carry the same timestamp.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(UTCFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per forwarded request
