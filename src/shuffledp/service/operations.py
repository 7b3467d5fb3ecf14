"""What an operator asks a running service: is it ready, what has it done, which version is it.

Both services get these routes from :func:`install_operations`:

* ``GET /v1/ready`` (readiness): 200 ``{"status": "ready"}`` only when the
  store answers a cheap query (``ping``: ``SELECT 1`` on PostgreSQL, the
  ``meta`` table and the writer thread on SQLite) within
  :data:`READY_TIMEOUT` seconds and the service's background worker (the
  shuffler's dispatcher, the analyzer's aggregator) runs and its last step
  succeeded; otherwise 503 ``{"status": "not_ready", "reason": …,
  "problems": [...]}`` with a reason code and one line each (no store address,
  no exception text: those go to the log, one line when readiness is lost and
  one when it is back). ``GET /v1/health`` stays liveness: it answers as long as
  the process serves HTTP.
* ``GET /v1/version``: the package version and the formats the service
  speaks (task document, message format, request and batch formats), and
  the task's id and the version that created it.
* ``GET /metrics``: the Prometheus text exposition format (version 0.0.4),
  from a registry of the application's own (never ``prometheus_client``'s
  global one): every counter of the JSON ``GET /v1/metrics`` (the service's
  counters as ``shuffledp_<name>_total``, refusals as
  ``shuffledp_rejected_requests_total{reason}``, the store's figures as
  ``shuffledp_store_<name>`` gauges, the connection limits' counts as
  ``shuffledp_connection_events_total{event}`` and
  ``shuffledp_connections_open``), ``shuffledp_store_up``, the background
  worker's state, request latency histograms
  ``shuffledp_http_request_duration_seconds{route, status_class}``, and the
  process's CPU, memory and file descriptors. Every label value is chosen
  by the server: ``route`` is the route's template
  (``/v1/tasks/{task_id}/submissions``, or ``unmatched``), ``status_class``
  ``2xx``…``5xx``, ``reason`` and ``event`` come from fixed lists in the code;
  nothing a client sends becomes a label.

Who may read the metrics. The shuffler's counters move with every arrival,
so whoever polls them learns when submissions arrive, which the shuffle
model leaves to the shuffler alone. Both metrics endpoints, ``/metrics`` and
``/v1/metrics``, are therefore guarded alike: with
:func:`set_metrics_token` (``serve --metrics-token-file``) they need
``Authorization: Bearer <token>`` (401 without, 403 with another token);
without it they are open, as ``/v1/metrics`` always was, and the service
should listen on loopback only (``serve`` warns otherwise).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shuffledp import __version__
from shuffledp.service._server import BackgroundWorker
from shuffledp.service.store_protocols import StoreError
from shuffledp.service.task import TASK_FORMAT, Task
from shuffledp.service.wire import SUITE_NAMES, WIRE_VERSION

__all__ = [
    "CONTENT_TYPE",
    "LATENCY_BUCKETS",
    "METRICS_PATHS",
    "READY_TIMEOUT",
    "Operations",
    "install_operations",
    "set_metrics_token",
]

_log = logging.getLogger("shuffledp.service.operations")

#: Seconds the readiness check waits for the store.
READY_TIMEOUT = 5.0
#: Upper bounds (seconds) of the latency histograms' buckets (a batch may take minutes).
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0,
)  # fmt: skip
#: The paths that show the service's counters (guarded alike by :func:`set_metrics_token`).
METRICS_PATHS = frozenset({"/metrics", "/v1/metrics"})
#: The text exposition format's media type (what ``generate_latest`` writes for names
#: without UTF-8: every name here). Spelled out: newer ``prometheus_client`` versions'
#: ``CONTENT_TYPE_LATEST`` announce 1.0.0, which older Prometheus servers do not know.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: ``route`` label of a request no route matches.
UNMATCHED = "unmatched"
_NAME = re.compile(r"[^a-zA-Z0-9_]")


@dataclass
class Operations:
    """What the operational endpoints of one application share (``app.state.operations``).

    Attributes:
        role: ``"shuffler"`` or ``"analyzer"``.
        task: The task.
        worker: The background worker whose state readiness reports.
        ping: Raises :class:`~shuffledp.service.store_protocols.StoreError` unless
            the store can do its work.
        counters: The service's counters, as in the JSON metrics (with ``rejected``).
        store_stats: The store's figures, as in the JSON metrics.
        formats: The request and batch formats the service speaks (for ``/v1/version``).
        metrics_token: Bearer token the metrics endpoints need (None: open).
        registry: The application's Prometheus registry.
    """

    role: str
    task: Task
    worker: BackgroundWorker
    ping: Callable[[], object]
    counters: Callable[[], Mapping[str, Any]]
    store_stats: Callable[[], Mapping[str, int]]
    formats: Mapping[str, str]
    metrics_token: str | None = None
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry())
    connections: Callable[[], Mapping[str, int]] = dict
    _ready: bool | None = None
    _ready_lock: threading.Lock = field(default_factory=threading.Lock)

    def note_readiness(self, ready: bool, problems: list[dict[str, str]]) -> None:
        """Log one line when readiness changes (never one per probe)."""
        with self._ready_lock:
            previous, self._ready = self._ready, ready
        if previous is None or previous == ready:
            if previous is None and not ready:
                _log.warning("not ready: %s", "; ".join(p["message"] for p in problems))
            return
        if ready:
            _log.warning("ready again")
        else:
            _log.warning("not ready: %s", "; ".join(p["message"] for p in problems))


def _metric_name(name: str) -> str:
    return _NAME.sub("_", name)


class _SnapshotCollector(Collector):
    """Turns the JSON metrics into Prometheus families at every scrape."""

    def __init__(self, operations: Operations) -> None:
        self.operations = operations

    def collect(self) -> Iterator[Metric]:
        ops = self.operations
        counters = dict(ops.counters())
        rejected = counters.pop("rejected", {})
        for name, value in sorted(counters.items()):
            family = CounterMetricFamily(
                f"shuffledp_{_metric_name(name)}", f"{name} since the process started"
            )
            family.add_metric([], float(value))
            yield family
        family = CounterMetricFamily(
            "shuffledp_rejected_requests",
            "requests refused since the process started, by reason",
            labels=["reason"],
        )
        for reason, value in sorted(rejected.items()):
            family.add_metric([reason], float(value))
        yield family
        up = GaugeMetricFamily("shuffledp_store_up", "1 if the store answered this scrape")
        try:
            stats = dict(ops.store_stats())
        except StoreError:
            up.add_metric([], 0.0)
        else:
            up.add_metric([], 1.0)
            for name, value in sorted(stats.items()):
                gauge = GaugeMetricFamily(
                    f"shuffledp_store_{_metric_name(name)}", f"{name} (read from the store)"
                )
                gauge.add_metric([], float(value))
                yield gauge
        yield up
        connections = dict(ops.connections())
        open_now = connections.pop("open", None)
        if open_now is not None:
            gauge = GaugeMetricFamily("shuffledp_connections_open", "open HTTP connections")
            gauge.add_metric([], float(open_now))
            yield gauge
        events = CounterMetricFamily(
            "shuffledp_connection_events",
            "what the connection limits did since the process started",
            labels=["event"],
        )
        for name, value in sorted(connections.items()):
            events.add_metric([name], float(value))
        yield events
        health = ops.worker.health()
        alive = GaugeMetricFamily("shuffledp_worker_alive", "1 if the background worker runs")
        alive.add_metric([], 1.0 if health.alive else 0.0)
        yield alive
        failing = GaugeMetricFamily(
            "shuffledp_worker_failing_seconds",
            "seconds the background worker's steps have been failing (0: the last succeeded)",
        )
        failing.add_metric([], health.failing_for or 0.0)
        yield failing
        failures = GaugeMetricFamily(
            "shuffledp_worker_failures", "the background worker's failed steps in a row"
        )
        failures.add_metric([], float(health.failures))
        yield failures
        info = GaugeMetricFamily(
            "shuffledp_service_info", "the service's role and version", labels=["role", "version"]
        )
        info.add_metric([ops.role, __version__], 1.0)
        yield info


class _RequestTimer:
    """ASGI middleware: observe every request's duration by route template and status class."""

    def __init__(self, app: ASGIApp, histogram: Histogram, routes: list[BaseRoute]) -> None:
        self.app = app
        self.histogram = histogram
        self.routes = routes

    def _route(self, scope: Scope) -> str:
        for route in self.routes:
            match, _ = route.matches(scope)
            if match != Match.NONE and isinstance(route, Route):
                return route.path  # the template, never the client's path
        return UNMATCHED

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless an answer starts: an exception becomes a 500

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            self.histogram.labels(self._route(scope), f"{status // 100}xx").observe(
                time.perf_counter() - started
            )


class _MetricsGuard:
    """ASGI middleware: the metrics paths need the bearer token when one is set."""

    def __init__(self, app: ASGIApp, operations: Operations) -> None:
        self.app = app
        self.operations = operations

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = self.operations.metrics_token
        if token is not None and scope["type"] == "http" and scope["path"] in METRICS_PATHS:
            refusal = _check_bearer(Request(scope).headers.get("authorization", ""), token)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _check_bearer(header: str, token: str) -> Response | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return JSONResponse(
            {"error": "the metrics need the metrics bearer token", "reason": "missing_bearer"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(value.strip().encode(), token.encode()):
        return JSONResponse(
            {"error": "wrong metrics bearer token", "reason": "wrong_bearer"}, status_code=403
        )
    return None


def install_operations(
    app: Starlette,
    *,
    role: str,
    task: Task,
    worker: BackgroundWorker,
    ping: Callable[[], object],
    counters: Callable[[], Mapping[str, Any]],
    store_stats: Callable[[], Mapping[str, int]],
    formats: Mapping[str, str],
) -> Operations:
    """Add ``/v1/ready``, ``/v1/version`` and ``/metrics`` and time every request.

    Args:
        app: The service's application (before it starts).
        role: ``"shuffler"`` or ``"analyzer"``.
        task: The task.
        worker: The background worker (readiness reports whether it runs and succeeds).
        ping: The store's cheap query (raises ``StoreError`` when the store cannot work).
        counters: The service's counters as the JSON metrics show them.
        store_stats: The store's figures as the JSON metrics show them.
        formats: The formats the service speaks, by name (``/v1/version``).

    Returns:
        The shared state, also in ``app.state.operations``.
    """
    operations = Operations(role, task, worker, ping, counters, store_stats, formats)
    registry = operations.registry
    histogram = Histogram(
        "shuffledp_http_request_duration_seconds",
        "time from a request's arrival at the application to the end of its answer",
        labelnames=["route", "status_class"],
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    registry.register(_SnapshotCollector(operations))
    ProcessCollector(registry=registry)
    operations.connections = lambda: _connections(app)

    async def ready(request: Request) -> Response:
        problems = await _readiness_problems(operations)
        operations.note_readiness(not problems, problems)
        if not problems:
            return JSONResponse({"status": "ready", "role": role, "task_id": task.task_id})
        return JSONResponse(
            {
                "status": "not_ready",
                "role": role,
                "reason": problems[0]["reason"],
                "problems": problems,
            },
            status_code=503,
            headers={"Retry-After": "1"},
        )

    version_json = {
        "role": role,
        "shuffledp_version": __version__,
        "formats": {
            "task": TASK_FORMAT,
            "message": WIRE_VERSION,
            "hpke": dict(SUITE_NAMES),
            **formats,
        },
        "task_id": task.task_id,
        "task_shuffledp_version": task.shuffledp_version,
    }

    async def version(request: Request) -> Response:
        return JSONResponse(version_json)

    async def metrics(request: Request) -> Response:
        body = await run_in_threadpool(generate_latest, registry)  # the store is read
        return Response(body, headers={"Content-Type": CONTENT_TYPE})

    app.router.routes.extend(
        [
            Route("/v1/ready", ready, methods=["GET"]),
            Route("/v1/version", version, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ]
    )
    app.add_middleware(_MetricsGuard, operations=operations)
    app.add_middleware(_RequestTimer, histogram=histogram, routes=app.router.routes)
    app.state.operations = operations
    return operations


def _connections(app: Starlette) -> Mapping[str, int]:
    stats = getattr(app.state, "connections", None)
    return {} if stats is None else stats.snapshot()


async def _readiness_problems(operations: Operations) -> list[dict[str, str]]:
    """Why the service cannot do its job now (empty: it can)."""
    problems: list[dict[str, str]] = []
    try:
        await asyncio.wait_for(run_in_threadpool(operations.ping), READY_TIMEOUT)
    except StoreError:
        problems.append({"reason": "store_unavailable", "message": "the store did not answer"})
    except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
        problems.append(
            {
                "reason": "store_unavailable",
                "message": f"the store did not answer within {READY_TIMEOUT:g} s",
            }
        )
    health = operations.worker.health()
    if not health.alive:
        problems.append(
            {"reason": "worker_stopped", "message": "the background worker is not running"}
        )
    elif health.failing_for is not None:
        problems.append(
            {
                "reason": "worker_failing",
                "message": f"the background worker's last {health.failures} step(s) failed "
                f"(for {health.failing_for:.0f} s)",
            }
        )
    return problems


def set_metrics_token(app: Starlette, token: str | None) -> None:
    """Require ``Authorization: Bearer <token>`` on ``/metrics`` and ``/v1/metrics`` (None: open).

    Raises:
        ValueError: If ``app`` has no operational endpoints (:func:`install_operations`).
    """
    operations = getattr(app.state, "operations", None)
    if not isinstance(operations, Operations):
        raise ValueError("the application has no operational endpoints (install_operations)")
    operations.metrics_token = token
