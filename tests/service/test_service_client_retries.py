"""The Python client's retries against a stand-in shuffler on a real loopback socket.

The stand-in answers what a test scripts (503 with ``Retry-After``, 429, 409) and records
every request with the time it arrived; the real shuffler's answers are exercised end to
end elsewhere (tests/service/test_service_crashes.py keeps services down while clients
retry). What is checked here is the client's side of the contract: the same body resent,
``Retry-After`` honoured (up to a cap), 4xx other than 429 final, and a deadline.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shuffledp.service.client import (
    MAX_RETRY_AFTER_SECONDS,
    Client,
    ShufflerUnavailableError,
    SubmissionRejectedError,
    retry_after_seconds,
)
from shuffledp.service.task import create_task


@dataclass
class StandIn:
    """A scripted HTTP server: answers ``script`` in order, then 200 ``accepted``."""

    url: str
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    seen: list[tuple[float, bytes]] = field(default_factory=list)


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    state = StandIn(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.seen.append((time.monotonic(), body))
            status, headers = state.script.pop(0) if state.script else (200, {})
            answer: dict[str, Any] = (
                {"status": "accepted", "accepted": 1, "duplicates": 0}
                if status == 200
                else {"error": f"scripted {status}", "reason": "scripted"}
            )
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def task():
    return create_task("krr", ["a", "b", "c"], 1.0, 1e-6, 1000)[0]


def test_retry_after_is_honoured_and_the_same_body_resent(stand_in, task):
    stand_in.script = [(503, {"Retry-After": "1"})]
    client = Client(task, stand_in.url, seed=1, retry_seconds=30)
    client.submit("a")
    assert len(stand_in.seen) == 2
    (first, body), (second, again) = stand_in.seen
    assert body == again
    # Without the header the first pause is at most 0.1 s (0.05 * 2, jitter below 1).
    assert 1.0 <= second - first < 5.0


def test_without_retry_after_the_backoff_is_short(stand_in, task):
    stand_in.script = [(503, {}), (429, {})]
    client = Client(task, stand_in.url, seed=2, retry_seconds=30)
    client.submit("b")
    times = [t for t, _ in stand_in.seen]
    assert len(times) == 3 and len({b for _, b in stand_in.seen}) == 1
    # pauses of at most 0.1 s and 0.2 s (plus the round trips)
    assert times[2] - times[0] < 1.0


def test_a_4xx_other_than_429_is_final(stand_in, task):
    stand_in.script = [(409, {"Retry-After": "1"})]
    client = Client(task, stand_in.url, seed=3, retry_seconds=30)
    with pytest.raises(SubmissionRejectedError) as caught:
        client.submit("c")
    assert caught.value.status == 409 and len(stand_in.seen) == 1


def test_a_retry_after_beyond_the_deadline_gives_up_at_once(stand_in, task):
    """A pause that would end after ``retry_seconds`` is not taken: the client says so."""
    stand_in.script = [(503, {"Retry-After": "20"})]
    client = Client(task, stand_in.url, seed=4, retry_seconds=2)
    started = time.monotonic()
    with pytest.raises(ShufflerUnavailableError, match=r"after 1 attempts \(HTTP 503\)"):
        client.submit("a")
    assert time.monotonic() - started < 1.5 and len(stand_in.seen) == 1


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1", 1.0),
        ("0", 0.0),
        ("86400", MAX_RETRY_AFTER_SECONDS),
        (None, 0.0),
        ("", 0.0),
        ("-1", 0.0),
        ("1.5", 0.0),
        (" 1", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("\u0661", 0.0),  # an Arabic-Indic one: a digit to str.isdigit, not to HTTP
    ],
)
def test_retry_after_reads_delay_seconds_only(value, seconds):
    assert retry_after_seconds(value) == seconds
