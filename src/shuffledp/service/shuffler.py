"""The shuffler service: collect submissions it cannot read, batch, permute, forward.

HTTP API (JSON):

* ``POST /v1/tasks/{task_id}/submissions`` with ``{"format": "shuffledp-submissions/1",
  "submissions": [{"submission_id": HEX32, "ciphertexts": [B64, ...], "token": T?}, ...]}``:
  one or many submissions; all-or-nothing. ``200 {"status": "accepted",
  "submission_ids": [...]}`` once they are durable; a submission id already
  stored is a no-op with the same answer. Refusals: 400 (malformed JSON,
  malformed submission, a ciphertext of the wrong length, too many
  ciphertexts), 401/403 (token missing/invalid when the task admits one
  submission per client), 403 (an ``Origin`` not in ``allow_origins``), 404
  (other task), 409 (the client already submitted under another id, or a
  ciphertext the shuffler holds already), 413 (body too large), 415 (a
  ``Content-Type`` other than ``application/json``, checked before the body
  is read), 503 (store unavailable; retry).
* ``GET /v1/tasks/{task_id}``: the public task document.
* Both answer web pages of the origins in ``allow_origins`` (CORS: preflights,
  ``Access-Control-Allow-Origin``; :mod:`~shuffledp.service.cors`).
* ``GET /v1/health`` and ``GET /v1/metrics`` (counters, rejections by reason);
  ``GET /v1/ready``, ``GET /v1/version`` and ``GET /metrics`` (Prometheus) from
  :mod:`~shuffledp.service.operations`.

Batching. When a request brings the submissions waiting to
``min_batch_users`` (or past it), the transaction that stores it also takes
them all, applies one uniformly random permutation (OS CSPRNG keys,
sorted) to all their messages, stores the batch in an outbox and sets the
submissions' messages to NULL (their ids stay, for deduplication only). A
background thread POSTs unsent batches to the analyzer with a bearer secret
and marks a batch sent only after the analyzer's 2xx, so after a crash unsent
batches are sent again (the analyzer treats a known batch id as a no-op).
Below the minimum nothing leaves the shuffler.

Augmented tasks. For a task whose protocol is ``augmented`` the permutation
is :class:`~shuffledp.service.augment.DummyAugmenter`: the same transaction
keeps each real message with probability β, adds the task's dummies sealed
to the analyzer's key and permutes them all together (:func:`batch_permutation`).

What the shuffler learns. It holds no key: ciphertexts are sealed to the
analyzer. It does see when each submission arrives and how many ciphertexts
it carries. For k-RR and the augmented protocol that is always one. For FLIP
the count is Ber(1 − q) + Bin(d − 1, q) + Bin(kd, q), for the correlated
protocol 1 + NB(2d/m, α) + 2·NB(d·r/m, q) (its noise shares): laws that do not
depend on the value, but per-user side information that the shuffle-model
certificate (which assumes the adversary sees only the shuffled multiset)
does not cover (a correlated submission's count tells how much noise its user
drew): the shuffler must keep it to itself, and a network observer sees it in
the request size (TLS hides content, not length). Protocols whose message
count depends on the data (the segmented protocol) will need padding with
dummy messages.
"""

from __future__ import annotations

import asyncio
import binascii
import concurrent.futures
import contextlib
import json
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import httpx
import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shuffledp._validation import check_int
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
from shuffledp.service.cors import CorsMiddleware, check_origins
from shuffledp.service.operations import install_operations
from shuffledp.service.store_common import REPLAY_KEY_LENGTH, replay_keys
from shuffledp.service.store_protocols import (
    CiphertextAlreadyHeldError,
    ClientAlreadySubmittedError,
    NewSubmission,
    OutboxBatch,
    ShufflerStore,
    StoreError,
    SubmitOutcome,
)
from shuffledp.service.task import Task, is_id
from shuffledp.service.tokens import TokenError, verify_token
from shuffledp.service.wire import (
    CIPHERTEXT_B64_LENGTH,
    CIPHERTEXT_LENGTH,
    WireError,
    b64decode_exact,
    b64encode,
)
from shuffledp.shuffler.uniform import secure_permutation
from shuffledp.specs import AugmentedSpec

__all__ = [
    "BATCH_FORMAT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_SUBMISSIONS_PER_REQUEST",
    "SUBMISSIONS_FORMAT",
    "Dispatcher",
    "ShufflerMetrics",
    "SubmitsWithoutBlocking",
    "batch_document",
    "batch_permutation",
    "create_shuffler_app",
    "default_max_body_bytes",
    "parse_submissions",
    "permute_messages",
    "submission_body_bytes",
]

_log = logging.getLogger("shuffledp.service.shuffler")

#: ``format`` of a submissions request.
SUBMISSIONS_FORMAT = "shuffledp-submissions/1"
#: ``format`` of a batch the shuffler forwards.
BATCH_FORMAT = "shuffledp-batch/1"
#: Default request body limit (HTTP 413 above), unless one submission at a task's
#: ``max_messages_per_submission`` is larger (:func:`default_max_body_bytes`).
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
#: Default most submissions per request.
DEFAULT_MAX_SUBMISSIONS_PER_REQUEST = 1000
#: Bodies up to this size are checked on the event loop, larger ones in a worker thread.
INLINE_PARSE_BYTES = 64 * 1024
_SUBMISSION_KEYS = frozenset({"submission_id", "ciphertexts", "token"})
_HEX_DIGITS = re.compile("[0-9a-f]*")


def permute_messages(payload: bytes) -> bytes:
    """Apply one uniformly random permutation (OS CSPRNG) to fixed-length ciphertexts.

    Vectorized: the payload is viewed as an (m, :data:`CIPHERTEXT_LENGTH`) byte
    matrix whose rows are reordered by :func:`secure_permutation` (64-bit
    ``secrets`` keys, argsort; keys drawn again on a collision).
    """
    rows = np.frombuffer(payload, dtype=np.uint8).reshape(-1, CIPHERTEXT_LENGTH)
    return rows[secure_permutation(rows.shape[0])].tobytes()


def submission_body_bytes(n_messages: int) -> int:
    """The body of a request holding one submission of ``n_messages`` ciphertexts, with a token.

    As :class:`~shuffledp.service.client.Client` writes it (``json.dumps``'s
    separators): a 32-digit submission id, ``n_messages`` base64 ciphertexts
    and a 97-character client token.
    """
    n_messages = check_int(n_messages, "n_messages", minimum=0)
    item = {"submission_id": "0" * 32, "ciphertexts": [], "token": "0" * 32 + "." + "0" * 64}
    empty = len(json.dumps({"format": SUBMISSIONS_FORMAT, "submissions": [item]}))
    quoted = 2 + 4 * math.ceil(CIPHERTEXT_LENGTH / 3)
    return empty + n_messages * quoted + 2 * max(0, n_messages - 1)


def default_max_body_bytes(task: Task) -> int:
    """The shuffler's default body limit: :data:`DEFAULT_MAX_BODY_BYTES`, or more if needed.

    A submission may carry up to the task's ``max_messages_per_submission``
    ciphertexts; with a correlated task over many bins for few users (d = 10⁴,
    ``min_batch_users`` 100: 81,641) even one honest user's submission passes
    4 MiB, so the default is the larger of the two.
    """
    return max(DEFAULT_MAX_BODY_BYTES, submission_body_bytes(task.max_messages_per_submission))


def batch_permutation(task: Task) -> Callable[[bytes], bytes]:
    """What the store applies to a batch's ciphertexts when it cuts it.

    :func:`permute_messages` for FLIP, k-RR and the correlated protocol; for the
    augmented protocol a :class:`~shuffledp.service.augment.DummyAugmenter`
    (β-sampling, the dummies sealed to the analyzer, then the permutation).
    """
    if isinstance(task.spec, AugmentedSpec):
        from shuffledp.service.augment import DummyAugmenter

        return DummyAugmenter(task)
    return permute_messages


@runtime_checkable
class SubmitsWithoutBlocking(Protocol):
    """A store that also offers :meth:`ShufflerStore.submit` as a future (optional).

    :class:`~shuffledp.service.sqlite_store.SQLiteShufflerStore` does: the
    app then awaits the group commit on the event loop instead of blocking a
    worker thread per request. Other stores are called in a worker thread.
    """

    def submit_future(
        self,
        submissions: Sequence[NewSubmission],
        *,
        min_batch_users: int,
        permute: Callable[[bytes], bytes],
    ) -> concurrent.futures.Future[SubmitOutcome]:
        """Queue :meth:`ShufflerStore.submit`; the future completes once it is durable."""
        ...


class ShufflerMetrics:
    """Counters since the process started (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()

    def add(self, name: str, value: int = 1) -> None:
        """Add to a counter."""
        with self._lock:
            self.counters[name] += value

    def add_many(self, **values: int) -> None:
        """Add to several counters at once."""
        with self._lock:
            self.counters.update(values)

    def reject(self, reason: str) -> None:
        """Count a refused request."""
        with self._lock:
            self.rejected[reason] += 1

    def snapshot(self) -> dict[str, Any]:
        """Return the counters as JSON."""
        with self._lock:
            return {**self.counters, "rejected": dict(self.rejected)}


def parse_submissions(
    data: Any,
    task: Task,
    *,
    max_submissions: int,
    token_key: bytes | None,
) -> list[NewSubmission]:
    """Check a parsed submissions request; return what to store (tokens dropped).

    Raises:
        RejectedError: With the status and reason of the first problem found.
    """
    if not isinstance(data, dict) or data.get("format") != SUBMISSIONS_FORMAT:
        raise RejectedError(
            400, "invalid_request", f"body must be an object with format {SUBMISSIONS_FORMAT!r}"
        )
    items = data.get("submissions")
    if not isinstance(items, list) or not items:
        raise RejectedError(400, "invalid_request", "submissions must be a non-empty list")
    if len(items) > max_submissions:
        raise RejectedError(
            413, "too_many_submissions", f"at most {max_submissions} submissions per request"
        )
    low = task.spec.fewest_messages_per_submission()  # FLIP: none; the others: the value
    high = task.max_messages_per_submission
    needs_token = task.one_submission_per_client
    if not needs_token:
        checked = _parse_well_formed(items, low, high)
        if checked is not None:
            return checked
    out: list[NewSubmission] = []
    seen: set[str] = set()
    keys: set[bytes] = set()
    for item in items:
        if not isinstance(item, dict) or not item.keys() <= _SUBMISSION_KEYS:
            raise RejectedError(
                400,
                "invalid_submission",
                "each submission must be an object with "
                "submission_id, ciphertexts and optionally token",
            )
        sid = item.get("submission_id")
        if not is_id(sid):
            raise RejectedError(400, "invalid_submission", "submission_id must be 32 lowercase hex")
        assert isinstance(sid, str)
        if sid in seen:
            raise RejectedError(400, "invalid_submission", "a submission id repeats in the request")
        seen.add(sid)
        cts = item.get("ciphertexts")
        if not isinstance(cts, list) or not low <= len(cts) <= high:
            raise RejectedError(
                400, "invalid_ciphertexts", f"ciphertexts must be a list of {low} to {high} items"
            )
        try:
            messages = b"".join(
                [b64decode_exact(ct, CIPHERTEXT_LENGTH, "ciphertext") for ct in cts]
            )
        except WireError as exc:
            raise RejectedError(400, "invalid_ciphertexts", str(exc)) from None
        client_id = None
        if needs_token:
            assert token_key is not None
            token = item.get("token")
            if token is None:
                raise RejectedError(401, "missing_token", "this task needs a client token")
            try:
                client_id = verify_token(token_key, task.task_id, token)
            except TokenError as exc:
                raise RejectedError(403, "invalid_token", str(exc)) from None
        before = len(keys)
        keys.update(replay_keys(messages))
        if len(keys) != before + len(messages) // CIPHERTEXT_LENGTH:
            raise RejectedError(
                400,
                "invalid_ciphertexts",
                "a ciphertext repeats in the request (every message is sealed afresh)",
            )
        out.append(NewSubmission(sid, messages, client_id))
    return out


def _parse_well_formed(items: list[Any], low: int, high: int) -> list[NewSubmission] | None:
    """Check a request without tokens in bulk (a few C-level passes, not one per field).

    Returns None as soon as anything differs from a well-formed request: the
    item-by-item checks of :func:`parse_submissions` then find and report the
    first problem. What this accepts, they accept too, with the same result.
    """
    if any(type(item) is not dict or len(item) != 2 for item in items):
        return None  # not an object, or a token or another key present
    try:
        ids = [item["submission_id"] for item in items]
        lists = [item["ciphertexts"] for item in items]
    except KeyError:
        return None
    if any(type(sid) is not str for sid in ids) or set(map(len, ids)) != {32}:
        return None
    if _HEX_DIGITS.fullmatch("".join(ids)) is None or len(set(ids)) != len(ids):
        return None
    if any(type(cts) is not list for cts in lists):
        return None
    counts = set(map(len, lists))
    if min(counts) < low or max(counts) > high:
        return None
    texts = [ct for cts in lists for ct in cts]
    if any(type(ct) is not str for ct in texts):
        return None
    if texts and set(map(len, texts)) != {CIPHERTEXT_B64_LENGTH}:
        return None
    decode = binascii.a2b_base64
    try:  # as b64decode_exact does, one call per ciphertext
        raw = [decode(ct, strict_mode=True) for ct in texts]
    except ValueError:  # binascii.Error included
        return None
    if raw and set(map(len, raw)) != {CIPHERTEXT_LENGTH}:
        return None
    if len({ct[:REPLAY_KEY_LENGTH] for ct in raw}) != len(raw):
        return None  # a ciphertext repeats
    if counts == {1}:
        return [NewSubmission(sid, message) for sid, message in zip(ids, raw, strict=True)]
    out: list[NewSubmission] = []
    start = 0
    for sid, cts in zip(ids, lists, strict=True):
        out.append(NewSubmission(sid, b"".join(raw[start : start + len(cts)])))
        start += len(cts)
    return out


def batch_document(task: Task, batch: OutboxBatch) -> dict[str, Any]:
    """The JSON body of a forwarded batch: ids, sizes and the permuted ciphertexts only."""
    return {
        "format": BATCH_FORMAT,
        "task_id": task.task_id,
        "batch_id": batch.batch_id,
        "n_users": batch.n_users,
        "n_messages": batch.n_messages,
        "payload": b64encode(batch.payload),
    }


class Dispatcher(BackgroundWorker):
    """Background thread: cut batches when enough users wait, forward unsent batches.

    :meth:`start` first cuts what waits and resends what is unsent; :meth:`stop`
    lets an in-flight POST finish or time out. A failed step is retried after
    0.2 s, doubling up to 5 s.

    Args:
        task: The task.
        store: The shuffler's store.
        forward_url: The analyzer's base URL (batches go to ``{url}/v1/batches``);
            None: batches are cut but kept in the outbox.
        forward_token: Bearer secret the analyzer expects.
        metrics: Where to count batches cut and forwarded.
        idle_seconds: How often to look for work when nobody wakes the thread.
        permute: What a cut applies to the batch's ciphertexts (default
            :func:`batch_permutation` of the task).
    """

    def __init__(
        self,
        task: Task,
        store: ShufflerStore,
        forward_url: str | None,
        forward_token: str | None,
        metrics: ShufflerMetrics,
        *,
        idle_seconds: float = 5.0,
        permute: Callable[[bytes], bytes] | None = None,
    ) -> None:
        self.task = task
        self.store = store
        self.permute = batch_permutation(task) if permute is None else permute
        self.url = None if forward_url is None else forward_url.rstrip("/") + "/v1/batches"
        self.headers = {} if forward_token is None else {"Authorization": f"Bearer {forward_token}"}
        self.metrics = metrics
        super().__init__("shuffler-dispatcher", idle_seconds=idle_seconds, join_seconds=60)

    def _run(self) -> None:
        with httpx.Client(timeout=httpx.Timeout(60.0, connect=5.0)) as http:
            self._loop(lambda: self.step(http), "dispatcher step")

    def _retry_delay(self, previous: float) -> float:
        return min(5.0, max(0.2, 2 * previous))

    def step(self, http: httpx.Client) -> bool:
        """Cut a batch if enough users wait, then forward every unsent batch.

        (The request that completes a batch normally cuts it; this cut is for
        recovery.)

        Returns:
            True if nothing is left to send.
        """
        batch = self.store.cut_batch(self.task.min_batch_users, self.permute)
        if batch is not None:
            self.metrics.add("batches_cut")
            _log.info("cut batch %s: %d users", batch.batch_id, batch.n_users)
        if self.url is None:
            return True
        for batch_id in self.store.unsent_batches():
            if self._stop.is_set():
                return False
            outbox = self.store.load_outbox_batch(batch_id)
            body = json.dumps(batch_document(self.task, outbox)).encode("ascii")
            try:
                response = http.post(
                    self.url,
                    content=body,
                    headers={**self.headers, "Content-Type": "application/json"},
                )
            except httpx.HTTPError as exc:
                self.metrics.add("forward_failures")
                _log.warning("forwarding batch %s failed: %s", batch_id, type(exc).__name__)
                return False
            if not response.is_success:
                self.metrics.add("forward_failures")
                _log.warning(
                    "analyzer refused batch %s: HTTP %d %s",
                    batch_id,
                    response.status_code,
                    response.text[:200],
                )
                return False
            crash_point("forward-after-ack")
            self.store.mark_sent(batch_id)
            self.metrics.add("batches_forwarded")
            _log.info("forwarded batch %s", batch_id)
        return True


def create_shuffler_app(
    task: Task,
    store: ShufflerStore,
    *,
    forward_url: str | None,
    forward_token: str | None,
    token_key: bytes | None = None,
    max_body_bytes: int | None = None,
    max_submissions_per_request: int = DEFAULT_MAX_SUBMISSIONS_PER_REQUEST,
    allow_origins: Sequence[str] = (),
) -> Starlette:
    """Return the shuffler's Starlette application (see the module docstring).

    The application owns ``store`` and closes it on shutdown.

    Args:
        task: The task it collects for.
        store: Its state.
        forward_url: The analyzer's base URL.
        forward_token: The bearer secret shared with the analyzer.
        token_key: The token key; required when the task admits one submission per client.
        max_body_bytes: Largest request body (413 above; default
            :func:`default_max_body_bytes` of the task).
        max_submissions_per_request: Most submissions in one request.
        allow_origins: The origins of the web pages that may submit and read the
            task (``https://survey.example.org``; :class:`~shuffledp.service.cors.CorsMiddleware`).
            None by default: a ``POST`` from a browser, which carries ``Origin``, is refused.

    Raises:
        InvalidParameterError: If the task needs client tokens and no key is given, or
            an origin is malformed (:func:`~shuffledp.service.cors.check_origin`).
    """
    from shuffledp._validation import InvalidParameterError

    origins = check_origins(allow_origins)
    if task.one_submission_per_client and token_key is None:
        raise InvalidParameterError(
            "the task admits one submission per client: give the token key (--token-key-file)"
        )
    if max_body_bytes is None:
        max_body_bytes = default_max_body_bytes(task)
    body_limit = max_body_bytes
    metrics = ShufflerMetrics()
    permute = batch_permutation(task)
    dispatcher = Dispatcher(task, store, forward_url, forward_token, metrics, permute=permute)
    task_json = task.to_dict()

    nonblocking = store if isinstance(store, SubmitsWithoutBlocking) else None

    def parse(body: bytes) -> list[NewSubmission]:
        return parse_submissions(
            parse_json(body), task, max_submissions=max_submissions_per_request, token_key=token_key
        )

    def parse_and_submit(body: bytes) -> tuple[list[NewSubmission], SubmitOutcome]:
        subs = parse(body)
        return subs, store.submit(subs, min_batch_users=task.min_batch_users, permute=permute)

    async def ingest(body: bytes) -> tuple[list[NewSubmission], SubmitOutcome]:
        """Check and store a request's submissions; return once they are durable."""
        if nonblocking is None:  # the store blocks: parse and submit in a worker thread
            return await run_in_threadpool(parse_and_submit, body)
        # Small bodies are checked on the event loop (cheaper than a thread hop);
        # the request then waits on the group commit without holding a thread.
        subs = (
            parse(body) if len(body) <= INLINE_PARSE_BYTES else await run_in_threadpool(parse, body)
        )
        future = nonblocking.submit_future(
            subs, min_batch_users=task.min_batch_users, permute=permute
        )
        return subs, await asyncio.wrap_future(future)

    async def submissions(request: Request) -> Response:
        if request.path_params["task_id"] != task.task_id:
            metrics.reject("unknown_task")
            return error_response(RejectedError(404, "unknown_task", "no such task"))
        try:
            body = await read_body(request, body_limit)
            subs, outcome = await ingest(body)
        except RejectedError as exc:
            metrics.reject(exc.reason)
            return error_response(exc)
        except ClientAlreadySubmittedError:
            metrics.reject("client_already_submitted")
            return JSONResponse(
                {
                    "error": "this client already submitted (one submission per client)",
                    "reason": "client_already_submitted",
                },
                status_code=409,
            )
        except CiphertextAlreadyHeldError:
            metrics.reject("ciphertext_replayed")
            return JSONResponse(
                {
                    "error": "a ciphertext of this request is held already (a copy of a "
                    "waiting submission's message): every message is sealed afresh",
                    "reason": "ciphertext_replayed",
                },
                status_code=409,
            )
        except StoreError as exc:
            metrics.reject("store_unavailable")
            _log.error("store unavailable: %s", exc)
            return store_unavailable_response()
        if outcome.accepted:
            crash_point("ingest-after-commit")
        metrics.add_many(
            requests_accepted=1,
            submissions_accepted=outcome.accepted,
            submissions_duplicate=outcome.duplicates,
        )
        if outcome.batch is not None:
            metrics.add("batches_cut")
            _log.info("cut batch %s: %d users", outcome.batch.batch_id, outcome.batch.n_users)
            dispatcher.wake()
        return JSONResponse(
            {"status": "accepted", "submission_ids": [s.submission_id for s in subs]}
        )

    async def get_task(request: Request) -> Response:
        if request.path_params["task_id"] != task.task_id:
            metrics.reject("unknown_task")
            return error_response(RejectedError(404, "unknown_task", "no such task"))
        return JSONResponse(task_json)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "role": "shuffler", "task_id": task.task_id})

    async def get_metrics(request: Request) -> Response:
        try:
            stats = await run_in_threadpool(store.stats)
        except StoreError as exc:
            _log.error("store unavailable: %s", exc)
            return store_unavailable_response()
        return JSONResponse(
            {**metrics.snapshot(), **stats, "connections": connection_stats(request)}
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        dispatcher.start()
        try:
            yield
        finally:
            dispatcher.stop()
            store.close()

    browser_routes = [
        Route("/v1/tasks/{task_id}/submissions", submissions, methods=["POST"]),
        Route("/v1/tasks/{task_id}", get_task, methods=["GET"]),
    ]
    app = Starlette(
        routes=[
            *browser_routes,
            Route("/v1/health", health, methods=["GET"]),
            Route("/v1/metrics", get_metrics, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    # Added before the operations' middleware, so inside it: preflights and refusals are timed.
    app.add_middleware(
        CorsMiddleware, origins=origins, routes=browser_routes, refused=metrics.reject
    )
    app.state.dispatcher = dispatcher
    install_operations(
        app,
        role="shuffler",
        task=task,
        worker=dispatcher,
        ping=store.ping,
        counters=metrics.snapshot,
        store_stats=store.stats,
        formats={"submissions": SUBMISSIONS_FORMAT, "batch": BATCH_FORMAT},
    )
    app.state.metrics = metrics
    return app
