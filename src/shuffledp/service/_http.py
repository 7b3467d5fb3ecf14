"""The services' HTTP/1.1 connections: uvicorn's httptools protocol with limits on every client.

uvicorn's httptools protocol (0.54, as installed here) reads a request's
headers for as long as the client keeps sending them, however slowly and
however many bytes they take, with a cost that grows faster than their size
and the event loop blocked meanwhile (``benchmarks/service_abuse.py``
measures it). Nor does it bound the number of connections: a process that
runs out of file descriptors stops accepting, health checks included.
:class:`GuardedProtocol` adds, per connection:

* at most :data:`MAX_HEADER_BYTES` of request line and headers, counted as they
  arrive: a request that goes past is answered 431 and the connection closed
  before the parser sees more;
* a header deadline: the request line and headers must arrive within
  ``header_timeout`` seconds of the connection being opened or of the
  request's first byte (408, closed), however they trickle in;
* a body deadline: a request's body must be complete ``body_timeout`` seconds
  after its headers (408 and closed if no answer was sent; closed otherwise);
* after an answer sent before the body was complete (an early 413 or 401),
  :data:`DISCARD_SECONDS` to finish sending it, then the connection is closed;

and, per server, at most ``max_connections`` connections: a new connection
beyond the cap closes the connection that has been waiting on its client the
longest (one idle between requests, or still sending a request's headers or
body). A connection whose request the application is answering is never
closed that way; when every connection is answering, the new one is refused
(503). So slow clients cannot keep a prompt one out: a health check that sends
its request at once gets in while thousands of slow connections are open.

What this does not cover: the TLS handshake (when the service serves HTTPS
itself, asyncio's default of 60 s applies and such connections are not counted);
put a TLS proxy in front for that.

Nothing is logged per connection (an attack would fill the log); the counts
are in :class:`ConnectionStats`, which the services' ``/v1/metrics`` show
under ``connections``.
"""

from __future__ import annotations

import asyncio
import json
import resource
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from shuffledp.service.limits import FD_RESERVE, ConnectionLimits

__all__ = [
    "DISCARD_SECONDS",
    "ConnectionStats",
    "GuardedProtocol",
    "guarded_protocol",
    "raise_fd_limit",
]

#: Seconds a connection may keep sending a body its answer did not wait for.
DISCARD_SECONDS = 2.0


class ConnectionStats:
    """Counts of what the limits did since the process started (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self.open = 0

    def add(self, name: str) -> None:
        """Count one event."""
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> dict[str, int]:
        """The counts, with the connections open now."""
        with self._lock:
            return {"open": self.open, **self._counts}


def raise_fd_limit(wanted: int) -> int:
    """Raise the soft limit on open files towards the hard one; return the connections it allows.

    Args:
        wanted: The connection cap asked for.

    Returns:
        ``wanted``, or less if the file limit cannot hold it plus :data:`FD_RESERVE`.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < target:
        new_soft = target if hard == resource.RLIM_INFINITY else min(target, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
            soft = new_soft
        except (ValueError, OSError):  # pragma: no cover - depends on the system
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FD_RESERVE))


def _response(status: int, phrase: str, reason: str, message: str) -> bytes:
    body = json.dumps({"error": message, "reason": reason}).encode("ascii")
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header, deadline and connection limits.

    Use :func:`guarded_protocol` to get a subclass bound to its limits; uvicorn
    builds one instance per connection.
    """

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()
    stats: ClassVar[ConnectionStats] = ConnectionStats()
    #: The connections waiting on their client, longest-waiting first (one per server).
    waiting: ClassVar[OrderedDict[GuardedProtocol, None]] = OrderedDict()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._headers_done = False
        self._header_bytes = 0
        self._request_started: float | None = None
        self._headers_at = 0.0
        self._deadline: asyncio.TimerHandle | None = None
        self._counted = False

    # -- connections ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Register the connection (closing the longest-waiting one above the cap)."""
        super().connection_made(transport)
        self._counted = True
        self.stats.open += 1
        if len(self.connections) > self.limits.max_connections and not self._evict_one():
            self.stats.add("refused")
            self._reject(503, "Service Unavailable", "too_many_connections", "too many connections")
            return
        self._wait_on_client(restart=True)
        self._request_started = self.loop.time()
        self._arm_at(self._request_started + self.limits.header_timeout, self._header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection and its deadline."""
        self._disarm()
        self.waiting.pop(self, None)
        if self._counted:
            self._counted = False
            self.stats.open -= 1
        super().connection_lost(exc)

    def _wait_on_client(self, *, restart: bool = False) -> None:
        """Keep :attr:`waiting` up to date: is the connection idle or still sending a request?

        With ``restart``, its wait starts now (it goes last in the eviction order).
        """
        cycle = self.cycle
        idle = cycle is None or cycle.response_complete or cycle.more_body
        if not idle or self.transport.is_closing():
            self.waiting.pop(self, None)
        elif restart or self not in self.waiting:
            self.waiting[self] = None
            self.waiting.move_to_end(self)

    def _evict_one(self) -> bool:
        """Close the connection waiting on its client the longest; False if there is none."""
        while self.waiting:
            victim, _ = self.waiting.popitem(last=False)
            if victim is not self and not victim.transport.is_closing():
                self.stats.add("evicted")
                victim._close()
                return True
        return False

    # -- deadlines --------------------------------------------------------------------

    def _arm_at(self, when: float, callback: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_at(when, callback)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _header_timeout(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.stats.add("header_timeouts")
        self._reject(408, "Request Timeout", "header_timeout", "request headers took too long")

    def _body_timeout(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        self.stats.add("body_timeouts")
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            # The application is waiting for the body: it will see a disconnect.
            cycle.disconnected = True
            cycle.message_event.set()
            self._reject(408, "Request Timeout", "body_timeout", "request body took too long")
        else:
            self._close()

    def _reject(self, status: int, phrase: str, reason: str, message: str) -> None:
        """Answer ``status`` (unless an answer is in progress) and close the connection."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete or cycle.disconnected:
            self.transport.write(_response(status, phrase, reason, message))
        self._close()

    def _close(self) -> None:
        self._disarm()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self.transport.close()

    # -- reading ----------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        """Feed the parser, counting header bytes; then set the deadline still missing.

        A request that arrives whole in one read sets no timer: its deadlines
        are armed only if its headers or its body are still incomplete once
        the bytes received are parsed.
        """
        while data:
            if self.transport.is_closing():
                return
            if self._headers_done:
                super().data_received(data)
                break
            room = self.limits.max_header_bytes - self._header_bytes
            if room <= 0:
                self.stats.add("headers_too_large")
                self._reject(
                    431,
                    "Request Header Fields Too Large",
                    "headers_too_large",
                    f"request line and headers exceed {self.limits.max_header_bytes} bytes",
                )
                return
            if self._request_started is None:
                self._request_started = self.loop.time()
            if len(data) <= room:
                piece, data = data, b""
            else:
                piece, data = data[:room], data[room:]
            self._header_bytes += len(piece)
            super().data_received(piece)
        if self._deadline is not None or self.transport.is_closing():
            return
        if not self._headers_done:
            if self._request_started is not None:
                when = self._request_started + self.limits.header_timeout
                self._arm_at(when, self._header_timeout)
        elif self.cycle is not None and self.cycle.more_body:
            self._arm_at(self._headers_at + self.limits.body_timeout, self._body_timeout)

    def on_message_begin(self) -> None:
        """A request's first byte (also one pipelined behind another): its headers' clock starts."""
        if self._request_started is None:
            self._request_started = self.loop.time()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        """Headers in: their deadline is over; the body's counts from now."""
        self._disarm()
        self._headers_done = True
        self._headers_at = self.loop.time()
        super().on_headers_complete()
        self._wait_on_client()

    def on_message_complete(self) -> None:
        """Body in: no deadline until the next request's first byte."""
        self._disarm()
        self._headers_done = False
        self._header_bytes = 0
        self._request_started = None
        super().on_message_complete()
        self._wait_on_client()

    def on_response_complete(self) -> None:
        """An answer was sent: the connection now waits on its client again.

        If the answer came before the request's body was complete (413, 401, …),
        the rest of the body is read and dropped for at most
        :data:`DISCARD_SECONDS`, long enough for the client to read the answer,
        then the connection is closed.
        """
        cycle = self.cycle
        if cycle is not None and cycle.more_body and not self.transport.is_closing():
            self._arm_at(self.loop.time() + DISCARD_SECONDS, self._close)
        super().on_response_complete()
        self._wait_on_client(restart=True)


def guarded_protocol(limits: ConnectionLimits, stats: ConnectionStats) -> type[GuardedProtocol]:
    """Return a :class:`GuardedProtocol` subclass bound to ``limits`` and ``stats``.

    Pass it as uvicorn's ``http`` setting.
    """

    class BoundGuardedProtocol(GuardedProtocol):
        pass

    BoundGuardedProtocol.limits = limits
    BoundGuardedProtocol.stats = stats
    BoundGuardedProtocol.waiting = OrderedDict()
    return BoundGuardedProtocol
