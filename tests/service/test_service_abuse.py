"""The services under abuse, over real sockets: huge and slow requests, disconnects, odd input.

The slower and larger cases (64 MiB and more, 2,000 slow connections, 1 GiB
bodies) are in ``benchmarks/service_abuse.py``; these are the fast ones, with
small limits passed on the command line where the defaults would make a test
wait.
"""

from __future__ import annotations

import os
import resource
import socket
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from _deploy import wait_until

from shuffledp.cli import main
from shuffledp.service._http import DISCARD_SECONDS
from shuffledp.service.analyzer import batch_body_bytes, default_max_batch_users
from shuffledp.service.shuffler import BATCH_FORMAT, SUBMISSIONS_FORMAT
from shuffledp.service.task import new_id
from shuffledp.service.tokens import issue_token
from shuffledp.service.wire import MessageSealer, b64encode, public_key_from_b64

pytestmark = pytest.mark.slow

_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _health_seconds(url: str) -> float:
    started = time.perf_counter()
    assert httpx.get(f"{url}/v1/health", timeout=5).status_code == 200
    return time.perf_counter() - started


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:80]
    return int(answer[9:12])


def _read_answer(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """What the server sent until it closed the connection (or the time ran out)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def _stream(port: int, head: bytes, total: int, piece: bytes) -> tuple[bytes, int]:
    """Send ``head`` then up to ``total`` bytes of ``piece`` until the server answers or closes.

    Returns the answer and the bytes sent after ``head`` (as far as the kernel took them).
    """
    sock = socket.create_connection(("127.0.0.1", port))
    answer: list[bytes] = []
    reader = threading.Thread(target=lambda: answer.append(_read_answer(sock, 30)))
    reader.start()
    sent = 0
    try:
        sock.sendall(head)
        while sent < total and reader.is_alive():
            sock.sendall(piece)
            sent += len(piece)
    except OSError:  # the server closed the connection: expected
        pass
    reader.join(timeout=30)
    sock.close()
    return answer[0], sent


def _raise_file_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def test_oversized_headers_get_431_at_once(deploy):
    dep = deploy("krr", min_batch_users=100)
    for service in (dep.shuffler, dep.analyzer):
        assert service.process is not None
        pid = service.process.pid
        # A header just under the limit is served; one over it is refused.
        fits = httpx.get(f"{service.url}/v1/health", headers={"x-pad": "a" * 60_000}, timeout=5)
        assert fits.status_code == 200
        cpu_before = _cpu_seconds(pid)
        started = time.perf_counter()
        head = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: "
        answer, sent = _stream(service.port, head, 64 << 20, b"a" * 65536)
        assert _status(answer) == 431 and b'"headers_too_large"' in answer
        assert time.perf_counter() - started < 5.0
        assert sent < 32 << 20  # the server closed long before the 64 MiB were sent
        assert _cpu_seconds(pid) - cpu_before < 0.5
        assert _health_seconds(service.url) < 1.0
        # The request line counts too.
        answer, _ = _stream(service.port, b"GET /" + b"a" * 70_000, 0, b"")
        assert _status(answer) == 431
    shuffler = dep.shuffler_metrics()
    assert shuffler["connections"]["headers_too_large"] == 2
    assert shuffler["submissions_stored"] == 0 and shuffler["rejected"] == {}
    assert dep.analyzer_metrics()["connections"]["headers_too_large"] == 2


def test_slow_connections_do_not_stop_a_health_check_or_a_submission(deploy):
    slow = 600
    _raise_file_limit(slow + 256)
    dep = deploy(
        "krr",
        min_batch_users=100,
        shuffler_args=["--header-timeout", "2", "--max-connections", "200"],
    )
    head = f"POST /v1/tasks/{dep.task.task_id}/submissions HTTP/1.1\r\nHost: x\r\n".encode()
    opened = time.monotonic()
    socks = []
    for _ in range(slow):  # slowloris: each sends part of a request, then a byte now and then
        sock = socket.create_connection(("127.0.0.1", dep.shuffler.port))
        sock.sendall(head)
        socks.append(sock)
    try:
        for sock in socks[-50:]:
            sock.sendall(b"X")
        assert _health_seconds(dep.shuffler.url) < 1.0
        item = dep.client(seed=1).prepare("red").to_json()
        response = httpx.post(
            dep.submissions_url,
            json={"format": SUBMISSIONS_FORMAT, "submissions": [item]},
            timeout=5,
        )
        assert response.status_code == 200
        # A connection that keeps trickling bytes gets no more time than a silent one.
        trickler = socks[-1]
        closed_after = None
        while closed_after is None and time.monotonic() - opened < 10:
            try:
                trickler.sendall(b"-")
            except OSError:
                closed_after = time.monotonic() - opened
            time.sleep(0.2)
        assert closed_after is not None and closed_after < 4.0
        # Every slow connection was closed by the server: evicted (above the cap) or timed out.
        answers = [_read_answer(sock, 5) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    timed_out = [a for a in answers if a]
    assert all(_status(a) == 408 and b'"header_timeout"' in a for a in timed_out)
    stats = dep.shuffler_metrics()["connections"]
    assert stats["evicted"] >= slow - 200
    assert stats["header_timeouts"] == len(timed_out) >= 100
    assert stats["evicted"] + stats["header_timeouts"] >= slow
    assert dep.shuffler_metrics()["submissions_stored"] == 1


def test_a_body_that_stops_gets_408_and_a_client_that_leaves_is_counted_not_logged(deploy):
    dep = deploy("krr", min_batch_users=100, shuffler_args=["--body-timeout", "1"])
    head = (
        f"POST /v1/tasks/{dep.task.task_id}/submissions HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
    ).encode()
    log_before = dep.shuffler.log_path.read_bytes()
    for _ in range(5):  # gone mid-body
        with socket.create_connection(("127.0.0.1", dep.shuffler.port)) as sock:
            sock.sendall(head + b'{"format": ')
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", dep.shuffler.port)) as sock:  # stops sending
        sock.sendall(head + b'{"format": ')
        answer = _read_answer(sock, 10)
    assert _status(answer) == 408 and b'"body_timeout"' in answer
    assert 0.9 < time.monotonic() - started < 3.0
    wait_until(
        lambda: dep.shuffler_metrics()["rejected"].get("client_disconnected") == 6,
        10,
        "six disconnects counted",
    )
    metrics = dep.shuffler_metrics()
    assert metrics["connections"]["body_timeouts"] == 1
    assert metrics["submissions_stored"] == 0
    assert dep.shuffler.log_path.read_bytes() == log_before  # not one line
    assert _health_seconds(dep.shuffler.url) < 1.0


def test_a_token_with_non_ascii_characters_gets_403(deploy):
    dep = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    token = issue_token(dep.token_key, dep.task.task_id)
    item = dep.client(token=token).prepare("red").to_json()
    for bad in (
        token[:-1] + "é",  # the right length, a non-ASCII character in the MAC
        token[:5] + "٣" + token[6:],  # an Arabic-Indic digit in the client id
        "é" * len(token),
        token.upper(),
    ):
        assert len(bad) == len(token)
        response = httpx.post(
            dep.submissions_url,
            json={"format": SUBMISSIONS_FORMAT, "submissions": [{**item, "token": bad}]},
            timeout=10,
        )
        assert response.status_code == 403 and response.json()["reason"] == "invalid_token"
    metrics = dep.shuffler_metrics()
    assert metrics["rejected"] == {"invalid_token": 4} and metrics["submissions_stored"] == 0


def test_batches_stating_impossible_user_counts_get_422(deploy, tmp_path, capsys):
    # FLIP: a user may send no message, so n_messages alone does not bound n_users.
    dep = deploy("flip", min_batch_users=100)
    task = dep.task
    most = default_max_batch_users(task)
    assert most == 100 - 1 + 1000
    sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, 5)
    rng = np.random.default_rng(3)

    def batch(n_users: int) -> dict:
        payload = b"".join(sealer.seal(int(i)) for i in rng.integers(0, 5, size=150))
        return {
            "format": BATCH_FORMAT,
            "task_id": task.task_id,
            "batch_id": new_id(),
            "n_users": n_users,
            "n_messages": 150,
            "payload": b64encode(payload),
        }

    for n_users in (10**30, 2**62, 2**62, most + 1):
        response = dep.post_batch(batch(n_users))
        assert response.status_code == 422, response.text
        assert response.json()["reason"] == "batch_too_large"
        assert str(most) in response.json()["error"]
    assert dep.post_batch(batch(most)).status_code == 200
    assert dep.post_batch(batch(100)).status_code == 200
    dep.wait_aggregated(most + 100)
    assert dep.estimate().status_code == 200
    metrics = dep.analyzer_metrics()
    assert metrics["rejected"] == {"batch_too_large": 4}
    assert metrics["users_aggregated"] == most + 100 and metrics["batches_stored"] == 2
    code = main(
        ["analyzer", "publish", "--task", str(dep.workdir / "task.json"),
         "--store", f"sqlite:///{dep.analyzer_db}", "--quiet"]
    )  # fmt: skip
    assert code == 0 and capsys.readouterr().out


def test_the_analyzer_refuses_a_large_body_without_buffering_it(deploy):
    dep = deploy("krr", min_batch_users=100)
    assert dep.analyzer.process is not None
    pid = dep.analyzer.process.pid
    limit = batch_body_bytes(dep.task, default_max_batch_users(dep.task))
    assert limit < 1 << 20  # 1099 users' one ciphertext each, in base64, and the JSON around it
    head = (
        f"POST /v1/batches HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {dep.forward_token}\r\n"
        "Content-Type: application/json\r\n"
    ).encode()
    # On Content-Length: refused before any byte of the body.
    answer, sent = _stream(dep.analyzer.port, head + b"Content-Length: 1073741824\r\n\r\n", 0, b"")
    assert _status(answer) == 413
    # Chunked, without end: refused once the limit is passed, without holding the
    # body; the rest is read and dropped for DISCARD_SECONDS, then the connection closes.
    peak_before = _peak_rss_mib(pid)
    chunk = b"a" * (1 << 20)
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    started = time.perf_counter()
    answer, sent = _stream(
        dep.analyzer.port, head + b"Transfer-Encoding: chunked\r\n\r\n", 1 << 40, framed
    )
    assert _status(answer) == 413 and b'"body_too_large"' in answer
    assert time.perf_counter() - started < DISCARD_SECONDS + 5.0
    assert sent > limit
    assert _peak_rss_mib(pid) - peak_before < 32
    assert dep.analyzer_metrics()["rejected"] == {"body_too_large": 2}
    assert dep.analyzer_metrics()["batches_stored"] == 0
    assert _health_seconds(dep.analyzer.url) < 1.0


def test_pipelined_and_keep_alive_requests_get_their_own_header_deadline(deploy):
    dep = deploy("krr", min_batch_users=100, shuffler_args=["--header-timeout", "1"])
    get = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", dep.shuffler.port)) as sock:
        # Two whole requests and the start of a third, in one write.
        sock.sendall(get + get + b"GET /v1/health HTTP/1.1\r\nHo")
        started = time.monotonic()
        answer = b""
        sock.settimeout(5)
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        waited = time.monotonic() - started
    assert answer.count(b"HTTP/1.1 200 OK") == 2
    assert answer.count(b"HTTP/1.1 408 Request Timeout") == 1 and b'"header_timeout"' in answer
    assert 0.9 < waited < 2.5
    # A keep-alive connection that sends a request slowly, a byte at a time, is cut off too.
    with socket.create_connection(("127.0.0.1", dep.shuffler.port)) as sock:
        sock.sendall(get)
        assert _status(_read_answer_head(sock)) == 200
        started = time.monotonic()
        try:
            for byte in get * 10:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)
        except OSError:
            pass
        assert time.monotonic() - started < 2.5
    assert dep.shuffler_metrics()["connections"]["header_timeouts"] == 2


def _read_answer_head(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    return data
