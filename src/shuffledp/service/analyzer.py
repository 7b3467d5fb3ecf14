"""The analyzer service: store batches durably, decrypt and count each exactly once, publish.

HTTP API (JSON):

* ``POST /v1/batches`` (``Authorization: Bearer <forward secret>``), body
  ``{"format": "shuffledp-batch/1", "task_id", "batch_id", "n_users",
  "n_messages", "payload": B64}``: stored durably, then ``200 {"status":
  "stored"}``; a batch id already stored is a no-op with the same answer.
  Refusals: 401/403 (no or wrong bearer), 400 (malformed), 404 (other task),
  409 (the same messages already stored under another batch id), 413 (body too
  large), 415 (a ``Content-Type`` other than ``application/json``, checked
  after the bearer and before the body is read), 422 (fewer than
  ``min_batch_users`` users, a number of messages that many users cannot
  send, or an augmented batch without its dummies).
* ``GET /v1/estimate``: the release (:mod:`~shuffledp.service.release`), 409
  while no batch is aggregated.
* ``GET /v1/task``, ``GET /v1/health``, ``GET /v1/metrics``; ``GET /v1/ready``,
  ``GET /v1/version`` and ``GET /metrics`` (Prometheus) from
  :mod:`~shuffledp.service.operations`.

Aggregation. A worker thread decrypts and decodes every message of each stored
batch (what does not decrypt or decode is counted in the metrics and skipped,
never fatal) and, in ONE transaction, keeps the replay key (the HPKE
encapsulated key) of every good message not counted before, records the
counts of those messages and marks the batch aggregated; a restart resumes
the batches not yet marked. Each batch is therefore counted exactly once
whatever crashes, and each ciphertext at most once for the task's lifetime:
a copy, in a later batch or the same one, is dropped (``messages_duplicate``
in the metrics, and a warning). Of several good messages of one batch with
the same key (copies, or messages their sender sealed under one ephemeral
key), the smallest ciphertext (bytewise) counts, not the first in the
shuffler's order: ``analyzer aggregate``, which reads no order, counts the
same one (:mod:`shuffledp.backends.replays`).

What the analyzer can check. The number of users in a batch is the
shuffler's word (as in the shuffle model, n is public; the release's
guarantee does not depend on it, see :mod:`~shuffledp.service.release`). The
analyzer checks that it is between ``min_batch_users`` and the most users a
shuffler that follows the protocol puts in one batch (``max_batch_users``: it
cuts a batch as soon as ``min_batch_users`` wait, so a batch holds at most
``min_batch_users`` − 1 plus one request's submissions, 1000 by default), that
the messages are as many as that many users can send (:func:`batch_message_bounds`:
for k-RR exactly one each; for the correlated protocol at least one and at
most ``max_messages_per_submission`` each; for the augmented protocol at most
one each plus the shuffler's dummies, and at least one each when β = 1), and,
for the augmented protocol, that the batch holds the shuffler's dummies: at
least the count an honest batch of that many users falls below with
probability 10⁻³⁰ (:mod:`~shuffledp.service.dummy_check`; 422
``missing_dummies``, logged, nothing published from it).
Bodies larger than such a batch can be are refused on their Content-Length,
or as soon as they pass it.

Messages. A message carries an index below the task's
:attr:`~shuffledp.service.task.Task.message_domain_size`: a bin, or for the
correlated protocol 2·bin + (1 if its sign is −1); the stored counts are per
index, and the release turns them into the protocol's statistic.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import math
import threading
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shuffledp.service._server import (
    BackgroundWorker,
    RejectedError,
    connection_stats,
    error_response,
    parse_json,
    read_body,
    store_unavailable_response,
)
from shuffledp.service._testhooks import crash_point
from shuffledp.service.operations import install_operations
from shuffledp.service.shuffler import BATCH_FORMAT, DEFAULT_MAX_SUBMISSIONS_PER_REQUEST
from shuffledp.service.store_common import REPLAY_KEY_LENGTH, content_digest
from shuffledp.service.store_protocols import (
    Aggregation,
    AnalyzerStore,
    BatchConflictError,
    ReceivedBatch,
    StoreError,
)
from shuffledp.service.task import MAX_BATCH_USERS, Task, is_id
from shuffledp.service.wire import CIPHERTEXT_LENGTH, MessageOpener, WireError, b64decode_exact
from shuffledp.specs import AugmentedSpec

__all__ = [
    "Aggregator",
    "batch_body_bytes",
    "batch_message_bounds",
    "create_analyzer_app",
    "default_max_batch_users",
    "parse_batch",
]

_log = logging.getLogger("shuffledp.service.analyzer")

#: Bytes of a batch document besides its base64 payload (format, ids, numbers), rounded up.
_BATCH_JSON_OVERHEAD = 4096


def default_max_batch_users(task: Task) -> int:
    """The most users a shuffler with the default request limit puts in one batch.

    The shuffler cuts a batch in the transaction that brings the users waiting
    to ``min_batch_users``: before it, at most ``min_batch_users`` − 1 wait,
    and one request adds at most ``--max-submissions-per-request`` (default
    :data:`~shuffledp.service.shuffler.DEFAULT_MAX_SUBMISSIONS_PER_REQUEST`).
    """
    return min(MAX_BATCH_USERS, task.min_batch_users - 1 + DEFAULT_MAX_SUBMISSIONS_PER_REQUEST)


def batch_message_bounds(task: Task, n_users: int) -> tuple[int, int]:
    """The fewest and the most messages a batch of ``n_users`` submissions can hold.

    Every submission the shuffler admits holds 0 (FLIP) or 1 (the others) to
    ``max_messages_per_submission`` ciphertexts; an augmented shuffler keeps
    each with probability β and adds at most
    :meth:`~shuffledp.service.task.Task.max_dummies_per_batch` dummies (a
    bound exceeded with probability 1e-30: such a batch would be refused).
    """
    most = n_users * task.max_messages_per_submission + task.max_dummies_per_batch()
    return n_users * task.spec.fewest_messages_per_user(), most


def batch_body_bytes(task: Task, n_users: int) -> int:
    """The largest request body of a batch of ``n_users`` users that follow the protocol.

    The most messages :func:`batch_message_bounds` admits, base64-encoded, plus
    the document's other fields.
    """
    payload = batch_message_bounds(task, n_users)[1] * CIPHERTEXT_LENGTH
    return 4 * math.ceil(payload / 3) + _BATCH_JSON_OVERHEAD


def parse_batch(data: Any, task: Task, *, max_batch_users: int | None = None) -> ReceivedBatch:
    """Check a batch document; return what to store.

    Args:
        data: The parsed JSON body.
        task: The task.
        max_batch_users: Most users a batch may state (default
            :func:`default_max_batch_users`).

    Raises:
        RejectedError: With the status and reason of the first problem found
            (422 ``batch_too_small`` / ``batch_too_large`` for a number of
            users outside ``[min_batch_users, max_batch_users]``).
    """
    most_users = default_max_batch_users(task) if max_batch_users is None else max_batch_users
    if not isinstance(data, dict) or data.get("format") != BATCH_FORMAT:
        raise RejectedError(
            400, "invalid_batch", f"body must be an object with format {BATCH_FORMAT!r}"
        )
    if data.get("task_id") != task.task_id:
        raise RejectedError(404, "unknown_task", "the batch is for another task")
    batch_id = data.get("batch_id")
    if not is_id(batch_id):
        raise RejectedError(400, "invalid_batch", "batch_id must be 32 lowercase hex digits")
    assert isinstance(batch_id, str)
    n_users = data.get("n_users")
    n_messages = data.get("n_messages")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n_users, n_messages)):
        raise RejectedError(400, "invalid_batch", "n_users and n_messages must be integers")
    assert isinstance(n_users, int) and isinstance(n_messages, int)
    if n_users < task.min_batch_users:
        raise RejectedError(
            422,
            "batch_too_small",
            f"a batch needs at least {task.min_batch_users} users, this one states {n_users}",
        )
    if n_users > most_users:
        raise RejectedError(
            422,
            "batch_too_large",
            f"n_users must be at most {most_users} (max_batch_users), this batch states {n_users}",
        )
    try:
        payload = b64decode_exact(data.get("payload"), None, "payload")
    except WireError as exc:
        raise RejectedError(400, "invalid_batch", str(exc)) from None
    if len(payload) != n_messages * CIPHERTEXT_LENGTH or n_messages < 0:
        raise RejectedError(
            400,
            "invalid_batch",
            f"payload must hold n_messages {CIPHERTEXT_LENGTH}-byte ciphertexts",
        )
    fewest, most = batch_message_bounds(task, n_users)
    if not fewest <= n_messages <= most:
        raise RejectedError(
            422, "implausible_batch", f"{n_messages} messages cannot come from {n_users} users"
        )
    if isinstance(task.spec, AugmentedSpec):
        from shuffledp.service.dummy_check import DUMMY_CHECK_TAIL, task_fewest_messages

        with_dummies = task_fewest_messages(task, n_users)
        if n_messages < with_dummies:
            raise RejectedError(
                422,
                "missing_dummies",
                f"{n_messages} messages for {n_users} users: an honest shuffler's batch of "
                f"that many users holds at least {with_dummies} (their sampled messages and "
                f"its dummies) except with probability {DUMMY_CHECK_TAIL:g}; nothing of it is "
                "stored or published",
            )
    return ReceivedBatch(
        batch_id, payload, n_users, n_messages, content_digest(payload, CIPHERTEXT_LENGTH)
    )


class Aggregator(BackgroundWorker):
    """Background thread: decrypt, decode and count every stored batch not yet aggregated.

    :meth:`start` first resumes batches left unaggregated; :meth:`stop` stops
    after the batch in progress. A failed step is retried after a second.

    Args:
        task: The task.
        private_key: The analyzer's key.
        store: The analyzer's store.
        idle_seconds: How often to look for work when nobody wakes the thread.
    """

    def __init__(
        self,
        task: Task,
        private_key: X25519PrivateKey,
        store: AnalyzerStore,
        *,
        idle_seconds: float = 5.0,
    ) -> None:
        self.task = task
        self.opener = MessageOpener(private_key, task.task_id, task.message_domain_size)
        self.store = store
        super().__init__("analyzer-aggregator", idle_seconds=idle_seconds, join_seconds=120)

    def _run(self) -> None:
        self._loop(self.step, "aggregation step")

    def aggregate(self, batch: ReceivedBatch) -> Aggregation:
        """Decrypt and decode one batch: each good message's index and replay key (no effect).

        The good messages are listed by their ciphertexts' bytes, so that of
        several with one key the store counts the smallest, whatever the
        shuffler's order (see the module docstring).
        """
        opened = self.opener.open_payload(batch.payload)
        texts = [
            batch.payload[start : start + CIPHERTEXT_LENGTH]
            for start in (opened.positions * CIPHERTEXT_LENGTH).tolist()
        ]
        order = sorted(range(len(texts)), key=texts.__getitem__)
        keys = tuple(texts[i][:REPLAY_KEY_LENGTH] for i in order)
        return Aggregation(
            batch.batch_id,
            opened.indices[np.asarray(order, dtype=np.int64)],
            keys,
            self.task.message_domain_size,
            opened.undecryptable,
            opened.undecodable,
        )

    def step(self) -> bool:
        """Aggregate every pending batch; return True when none is left."""
        for batch_id in self.store.unaggregated_batches():
            if self._stop.is_set():
                return False
            result = self.aggregate(self.store.load_batch(batch_id))
            recorded = self.store.record_aggregation(result)
            if recorded is None:
                continue
            bad = result.undecryptable + result.undecodable
            _log.info("aggregated batch %s (%d messages rejected)", batch_id, bad)
            if recorded.duplicates:
                _log.warning(
                    "batch %s: %d messages are copies of messages counted before (a replay); "
                    "dropped",
                    batch_id,
                    recorded.duplicates,
                )
        return True


def _bearer_ok(request: Request, secret: str) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value:
        raise RejectedError(
            401, "missing_bearer", "this endpoint needs the shuffler's bearer secret"
        )
    return hmac.compare_digest(value.strip().encode(), secret.encode())


def create_analyzer_app(
    task: Task,
    private_key: X25519PrivateKey,
    store: AnalyzerStore,
    *,
    forward_token: str,
    max_batch_users: int | None = None,
    max_body_bytes: int | None = None,
) -> Starlette:
    """Return the analyzer's Starlette application (see the module docstring).

    The application owns ``store`` and closes it on shutdown.

    Args:
        task: The task.
        private_key: The analyzer's private key (checked against the task by the caller).
        store: Its state.
        forward_token: The bearer secret the shuffler sends with every batch.
        max_batch_users: Most users a batch may state (422 above; default
            :func:`default_max_batch_users`).
        max_body_bytes: Largest batch request (413 above; default
            :func:`batch_body_bytes` of ``max_batch_users``).
    """
    if max_batch_users is None:
        max_batch_users = default_max_batch_users(task)
    if max_body_bytes is None:
        max_body_bytes = batch_body_bytes(task, max_batch_users)
    aggregator = Aggregator(task, private_key, store)
    rejected: Counter[str] = Counter()
    counters: Counter[str] = Counter()
    lock = threading.Lock()
    task_json = task.to_dict()

    def count(name: str, reason: bool = False) -> None:
        with lock:
            (rejected if reason else counters)[name] += 1

    def ingest(body: bytes) -> tuple[int, dict[str, Any]]:
        try:
            batch = parse_batch(parse_json(body), task, max_batch_users=max_batch_users)
            new = store.add_batch(batch)
        except RejectedError as exc:
            count(exc.reason, reason=True)
            if exc.reason == "missing_dummies":
                _log.warning("refused a batch without the shuffler's dummies: %s", exc.message)
            return exc.status, {"error": exc.message, "reason": exc.reason}
        except BatchConflictError:
            count("replayed_content", reason=True)
            return 409, {
                "error": "these messages are already stored under another batch id",
                "reason": "replayed_content",
            }
        if new:
            crash_point("store-batch-after-commit")
            count("batches_received")
            aggregator.wake()
        else:
            count("batches_duplicate")
        return 200, {"status": "stored", "batch_id": batch.batch_id}

    async def batches(request: Request) -> Response:
        try:
            if not _bearer_ok(request, forward_token):
                raise RejectedError(403, "wrong_bearer", "wrong bearer secret")
            body = await read_body(request, max_body_bytes)
        except RejectedError as exc:
            count(exc.reason, reason=True)
            return error_response(exc)
        try:
            status, answer = await run_in_threadpool(ingest, body)
        except StoreError as exc:
            count("store_unavailable", reason=True)
            _log.error("store unavailable: %s", exc)
            return store_unavailable_response()
        return JSONResponse(answer, status_code=status)

    async def estimate(request: Request) -> Response:
        # The release loads the accountant and the protocols: on the first estimate,
        # not before the service listens.
        from shuffledp.service.release import NothingToPublishError, publish

        try:
            result = await run_in_threadpool(publish, task, store)
        except NothingToPublishError as exc:
            return JSONResponse({"error": str(exc), "reason": "nothing_to_publish"}, 409)
        except StoreError as exc:
            count("store_unavailable", reason=True)
            _log.error("store unavailable: %s", exc)
            return store_unavailable_response()
        return JSONResponse(result)

    async def get_task(request: Request) -> Response:
        return JSONResponse(task_json)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "role": "analyzer", "task_id": task.task_id})

    async def get_metrics(request: Request) -> Response:
        try:
            stored = await run_in_threadpool(store.metrics)
        except StoreError as exc:
            _log.error("store unavailable: %s", exc)
            return store_unavailable_response()
        with lock:
            snapshot = {**counters, "rejected": dict(rejected)}
        return JSONResponse({**snapshot, **stored, "connections": connection_stats(request)})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        aggregator.start()
        try:
            yield
        finally:
            aggregator.stop()
            store.close()

    app = Starlette(
        routes=[
            Route("/v1/batches", batches, methods=["POST"]),
            Route("/v1/estimate", estimate, methods=["GET"]),
            Route("/v1/task", get_task, methods=["GET"]),
            Route("/v1/health", health, methods=["GET"]),
            Route("/v1/metrics", get_metrics, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.aggregator = aggregator

    def counter_snapshot() -> dict[str, Any]:
        with lock:
            return {**counters, "rejected": dict(rejected)}

    install_operations(
        app,
        role="analyzer",
        task=task,
        worker=aggregator,
        ping=store.ping,
        counters=counter_snapshot,
        store_stats=store.metrics,
        formats={"batch": BATCH_FORMAT},
    )
    return app
