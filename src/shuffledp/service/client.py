"""The client: randomize one user's value, seal every message, post to the shuffler.

:meth:`Client.submit` is what one user's device runs: the task's randomizer
for ONE user (for FLIP this includes that user's fake users' messages; for the
correlated protocol its value message (x, +1) and its noise shares, a number
of (j, ±1) messages that does not depend on the value; for the augmented
protocol the value alone), every message sealed separately to the analyzer
(:class:`~shuffledp.service.wire.MessageSealer`), all posted in one request
with a random 128-bit ``submission_id``.

Retries. A connection error, a timeout, HTTP 429 or a 5xx is retried with
exponential backoff and jitter, with the SAME submission id and ciphertexts:
the shuffler stores a submission id once, so a retry of a request that did
reach it is a no-op, and the user is counted once whatever the network did.
An answer's ``Retry-After`` (in seconds; both services send ``1`` with a 503)
lengthens the pause to at least that long, up to :data:`MAX_RETRY_AFTER_SECONDS`.
Other 4xx answers are final (:class:`SubmissionRejectedError`).

Trust. The client encrypts to the public key in the task document. Fetching
that document from the shuffler means trusting the shuffler for the analyzer's
key; pin it instead (a file shipped with the client, or its
:meth:`~shuffledp.service.task.Task.digest`, ``expected_digest``).

HTTPS. An ``https://`` shuffler's certificate is checked against httpx's
default CA bundle (certifi's, or the file named by ``SSL_CERT_FILE``), or
against ``ca_file`` alone when given (a private CA, a self-signed certificate).
"""

from __future__ import annotations

import json
import os
import random
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, ShuffleDPError, check_int
from shuffledp.service.shuffler import DEFAULT_MAX_BODY_BYTES, SUBMISSIONS_FORMAT
from shuffledp.service.task import Task, TaskError, build_randomizer, load_task, new_id
from shuffledp.service.wire import (
    CIPHERTEXT_LENGTH,
    MessageSealer,
    b64decode_exact,
    b64encode,
    public_key_from_b64,
)

__all__ = [
    "MAX_RETRY_AFTER_SECONDS",
    "Client",
    "ShufflerUnavailableError",
    "Submission",
    "SubmissionRejectedError",
    "fetch_task",
    "request_body_text",
    "retry_after_seconds",
    "submissions_from_body",
    "tls_verification",
]


#: The longest pause a ``Retry-After`` answer can impose on one retry.
MAX_RETRY_AFTER_SECONDS = 30.0


def retry_after_seconds(value: str | None) -> float:
    """The pause an answer's ``Retry-After`` asks for (RFC 9110 §10.2.3), in seconds.

    Its delay-seconds form (digits), at most :data:`MAX_RETRY_AFTER_SECONDS`; 0 when it is
    absent or another form (an HTTP date: the services never send one).
    """
    if value is None or not value.isascii() or not value.isdigit():
        return 0.0
    return min(float(value), MAX_RETRY_AFTER_SECONDS)


class SubmissionRejectedError(ShuffleDPError):
    """The shuffler refused a submission (a final 4xx answer).

    Attributes:
        status: The HTTP status.
        reason: The shuffler's reason (e.g. ``client_already_submitted``).
    """

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"shuffler refused the submission (HTTP {status}, {reason}): {message}")
        self.status = status
        self.reason = reason


class ShufflerUnavailableError(ShuffleDPError):
    """The shuffler could not be reached (or kept failing) until the retry deadline."""


@dataclass(frozen=True)
class Submission:
    """One user's submission as the client built it.

    Attributes:
        submission_id: The idempotency key.
        ciphertexts: The sealed messages, as sent.
        messages: The plaintext bin indices. They stay on the client: kept here
            for tests and audits only, never sent.
        token: The client token, if any.
    """

    submission_id: str
    ciphertexts: tuple[bytes, ...]
    messages: NDArray[np.int64] = field(repr=False)
    token: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The submission as it appears in a request."""
        item: dict[str, Any] = {
            "submission_id": self.submission_id,
            "ciphertexts": [b64encode(c) for c in self.ciphertexts],
        }
        if self.token is not None:
            item["token"] = self.token
        return item


def _request_body(submissions: Sequence[Submission]) -> bytes:
    """A submissions request's body, as :meth:`Client.post` sends it."""
    return json.dumps(
        {"format": SUBMISSIONS_FORMAT, "submissions": [s.to_json() for s in submissions]}
    ).encode("ascii")


def request_body_text(submissions: Sequence[Submission]) -> str:
    """The body of one request carrying ``submissions`` (what :meth:`Client.post` sends).

    Posting it again, or :func:`submissions_from_body` then :meth:`Client.post`,
    cannot count anyone twice: the shuffler stores a submission id once.
    """
    return _request_body(submissions).decode("ascii")


def submissions_from_body(text: str, what: str = "request body") -> list[Submission]:
    """The submissions of a request body written by :func:`request_body_text`, as sent.

    Their ids, ciphertexts and tokens are kept exactly (the plaintexts are not
    in a body: ``messages`` is empty).

    Raises:
        DataError: Naming ``what`` if the text is not such a body.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DataError(f"{what} is not JSON: {exc}") from None
    items = data.get("submissions") if isinstance(data, dict) else None
    if (
        not (
            isinstance(data, dict)
            and data.get("format") == SUBMISSIONS_FORMAT
            and isinstance(items, list)
        )
        or not items
    ):
        raise DataError(
            f"{what} is not a submissions request (format {SUBMISSIONS_FORMAT!r} with a "
            "non-empty list of submissions)"
        )
    out = []
    for item in items:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("submission_id"), str)
            and isinstance(item.get("ciphertexts"), list)
            and isinstance(item.get("token", ""), str)
        ):
            raise DataError(f"{what}: a submission lacks its submission_id or ciphertexts")
        try:
            ciphertexts = tuple(
                b64decode_exact(c, CIPHERTEXT_LENGTH, "ciphertext") for c in item["ciphertexts"]
            )
        except ValueError as exc:
            raise DataError(f"{what}: {exc}") from None
        out.append(
            Submission(
                submission_id=item["submission_id"],
                ciphertexts=ciphertexts,
                messages=np.empty(0, dtype=np.int64),
                token=item.get("token"),
            )
        )
    return out


def tls_verification(
    ca_file: str | os.PathLike[str] | None, name: str = "ca_file"
) -> ssl.SSLContext | bool:
    """What httpx checks a server's certificate with: ``ca_file``'s CAs, or its default (True).

    Args:
        ca_file: A PEM file of CA certificates, or None.
        name: How an error names it (``--ca-file`` on the command line).

    Raises:
        InvalidParameterError: If ``ca_file`` cannot be read as PEM certificates.
    """
    if ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=os.fspath(ca_file))
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InvalidParameterError(
            f"{name} {os.fspath(ca_file)!r}: cannot read CA certificates from it ({reason})"
        ) from None


def fetch_task(
    source: str,
    *,
    expected_digest: str | None = None,
    timeout: float = 10.0,
    ca_file: str | os.PathLike[str] | None = None,
) -> Task:
    """Load a task document from a file or an ``http(s)://`` URL.

    Args:
        source: A path, or the URL of ``GET /v1/tasks/{task_id}`` on the shuffler.
        expected_digest: If given, the task's :meth:`Task.digest` must equal it.
        timeout: Seconds to wait for a URL.
        ca_file: PEM file of the CA certificates an ``https://`` URL's certificate
            must chain to (default: httpx's bundle).

    Raises:
        TaskError: If the document is invalid or its digest differs.
        ShufflerUnavailableError: If the URL cannot be fetched.
        InvalidParameterError: If ``ca_file`` cannot be read.
    """
    if source.startswith(("http://", "https://")):
        verify = tls_verification(ca_file)
        try:
            response = httpx.get(source, timeout=timeout, verify=verify)
            response.raise_for_status()
            task = Task.from_dict(response.json())
        except (httpx.HTTPError, ValueError) as exc:
            if isinstance(exc, TaskError):
                raise
            raise ShufflerUnavailableError(f"cannot fetch the task from {source}: {exc}") from None
    else:
        task = load_task(Path(source))
    if expected_digest is not None and task.digest() != expected_digest.lower():
        raise TaskError(f"task digest {task.digest()} differs from the expected {expected_digest}")
    return task


class Client:
    """Submits users' values for one task to a shuffler.

    Args:
        task: The task document, or the path of its JSON file (read with
            :func:`~shuffledp.service.task.load_task`; a file shipped with the
            client pins the analyzer's key).
        shuffler_url: The shuffler's base URL (``http://host:port``).
        token: The client token when the task admits one submission per client.
        seed: Randomness of the randomizer (default: OS entropy). A seed is for
            tests only: it makes the messages predictable.
        timeout: Seconds per HTTP request.
        retry_seconds: Give up retrying after this long (:class:`ShufflerUnavailableError`).
        http: An ``httpx.Client`` to use (default: one owned by this object).
        max_request_bytes: Largest body :meth:`requests` groups submissions into
            (default the shuffler's default ``--max-body-bytes``).
        ca_file: PEM file of the CA certificates an ``https://`` shuffler's
            certificate must chain to (default: httpx's bundle); not with ``http``.

    Raises:
        FileNotFoundError: If ``task`` is a path that does not exist.
        TaskError: If ``task`` is a path to an invalid task document.
        InvalidParameterError: If ``task`` is neither a task nor a path, ``ca_file``
            cannot be read, or both ``ca_file`` and ``http`` are given.
        DataError: If the task admits one submission per client and no token is given.
    """

    def __init__(
        self,
        task: Task | str | os.PathLike[str],
        shuffler_url: str,
        *,
        token: str | None = None,
        seed: SeedLike = None,
        timeout: float = 30.0,
        retry_seconds: float = 60.0,
        http: httpx.Client | None = None,
        max_request_bytes: int = DEFAULT_MAX_BODY_BYTES,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        if ca_file is not None and http is not None:
            raise InvalidParameterError(
                "give ca_file or http, not both (http's own verify setting applies)"
            )
        if isinstance(task, str | os.PathLike):
            task = load_task(Path(task))
        elif not isinstance(task, Task):
            raise InvalidParameterError(
                f"task must be a Task or the path of a task file, got {type(task).__name__}"
            )
        if task.one_submission_per_client and token is None:
            raise DataError("this task admits one submission per client: a client token is needed")
        self.task = task
        self.url = f"{shuffler_url.rstrip('/')}/v1/tasks/{task.task_id}/submissions"
        self.token = token
        self.retry_seconds = retry_seconds
        self.max_request_bytes = check_int(max_request_bytes, "max_request_bytes", minimum=1)
        self._rng = make_rng(seed)
        self._randomizer = build_randomizer(task)
        self._sealer = MessageSealer(
            public_key_from_b64(task.public_key), task.task_id, task.message_domain_size
        )
        self._own_http = http is None
        if http is None:
            http = httpx.Client(timeout=timeout, verify=tls_verification(ca_file))
        self._http = http

    def close(self) -> None:
        """Release the HTTP connections."""
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prepare(self, value: str, *, token: str | None = None) -> Submission:
        """Randomize and seal one user's value (a domain label); nothing is sent.

        Raises:
            DataError: If the value is not in the domain, or (with probability
                below 1e-30) the randomizer drew more messages than the task's
                ``max_messages_per_submission``: such a user does not submit (a
                dropout, whose probability does not depend on its value).
        """
        index = self.task.index_of(value)
        batch = self._randomizer.randomize(np.array([index], dtype=np.int64), self._rng)
        return self._seal(batch.payload, self.token if token is None else token)

    def prepare_many(
        self, values: Sequence[str], *, tokens: Sequence[str] | None = None
    ) -> list[Submission]:
        """Randomize and seal many users' values, each as its own user; nothing is sent.

        One vectorized call of the randomizer for all of them (the same law per
        user as :meth:`prepare`), then the messages are split by user.
        """
        if tokens is not None and len(tokens) != len(values):
            raise DataError("give one token per value")
        if not values:
            return []
        indices = np.array([self.task.index_of(v) for v in values], dtype=np.int64)
        batch = self._randomizer.randomize(indices, self._rng)
        order = np.argsort(batch.sender, kind="stable")
        ends = np.cumsum(np.bincount(batch.sender, minlength=len(values)))
        per_user = np.split(batch.payload[order], ends[:-1])
        return [
            self._seal(messages, self.token if tokens is None else tokens[i])
            for i, messages in enumerate(per_user)
        ]

    def _seal(self, payload: NDArray[np.int64], token: str | None) -> Submission:
        messages = np.sort(payload)  # the order of a user's messages says nothing
        if messages.shape[0] > self.task.max_messages_per_submission:
            raise DataError(
                f"the randomizer drew {messages.shape[0]} messages, above the task's bound "
                f"{self.task.max_messages_per_submission}; not submitting"
            )
        return Submission(
            submission_id=new_id(),
            ciphertexts=tuple(self._sealer.seal_all(messages.tolist())),
            messages=messages,
            token=token,
        )

    def submit(self, value: str) -> Submission:
        """Randomize, seal and post one user's value; return once the shuffler has it durably.

        Raises:
            SubmissionRejectedError: On a final refusal.
            ShufflerUnavailableError: If the retries ran out.
        """
        submission = self.prepare(value)
        self.post([submission])
        return submission

    def submit_many(
        self,
        values: Sequence[str],
        *,
        per_request: int = 100,
        tokens: Sequence[str] | None = None,
    ) -> list[Submission]:
        """Submit many users' values, ``per_request`` submissions per HTTP request.

        For load tests and simulations (one process standing in for many
        devices); each value is still randomized as its own user
        (:meth:`prepare_many`).

        Raises:
            SubmissionRejectedError: On a final refusal (earlier requests stay stored).
            ShufflerUnavailableError: If the retries ran out.
        """
        prepared = self.prepare_many(values, tokens=tokens)
        for request in self.requests(prepared, per_request):
            self.post(request)
        return prepared

    def requests(
        self, submissions: Sequence[Submission], per_request: int
    ) -> list[list[Submission]]:
        """Group submissions, in order, into requests the shuffler takes.

        Each holds at most ``per_request`` submissions and a body of at most
        ``max_request_bytes`` (the shuffler's default limit: a correlated
        user's noise shares can be thousands of messages), but for a single
        submission larger than that alone (the shuffler's limit admits one
        submission at the task's cap).
        """
        per_request = check_int(per_request, "per_request", minimum=1)
        envelope = len(_request_body([]))  # with k items: envelope + Σ(item + 2) − 2 bytes
        groups: list[list[Submission]] = []
        size = 0
        for submission in submissions:
            item = len(json.dumps(submission.to_json())) + 2  # with its ", " separator
            group = groups[-1] if groups else None
            if (
                group is None
                or len(group) >= per_request
                or envelope + size + item - 2 > self.max_request_bytes
            ):
                groups.append([submission])
                size = item
            else:
                group.append(submission)
                size += item
        return groups

    def post(self, submissions: Sequence[Submission]) -> dict[str, Any]:
        """Post prepared submissions in one request, retrying transient failures.

        Raises:
            SubmissionRejectedError: On a final refusal.
            ShufflerUnavailableError: If the retries ran out.
        """
        body = _request_body(submissions)
        headers = {"Content-Type": "application/json"}
        deadline = time.monotonic() + self.retry_seconds
        attempt = 0
        while True:
            retry_after = 0.0
            try:
                response = self._http.post(self.url, content=body, headers=headers)
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    answer: dict[str, Any] = response.json()
                    return answer
                if response.status_code != 429 and response.status_code < 500:
                    try:
                        info = response.json()
                        reason, message = str(info.get("reason")), str(info.get("error"))
                    except ValueError:
                        reason, message = "unknown", response.text[:200]
                    raise SubmissionRejectedError(response.status_code, reason, message)
                problem = f"HTTP {response.status_code}"
                retry_after = retry_after_seconds(response.headers.get("retry-after"))
            attempt += 1
            pause = min(5.0, 0.05 * 2**attempt) * (0.5 + random.random() / 2)
            pause = max(pause, retry_after)
            if time.monotonic() + pause > deadline:
                raise ShufflerUnavailableError(
                    f"shuffler at {self.url} unavailable after {attempt} attempts ({problem})"
                )
            time.sleep(pause)
