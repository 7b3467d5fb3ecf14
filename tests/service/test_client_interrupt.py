"""Ctrl-C during ``client submit --values-file``: nothing stored is left without its receipt.

Issue 24: an interrupted run left 10 of 380 stored submissions without a receipt
and did not say which lines were stored. A TCP relay between the client and a
real shuffler holds back one request (the shuffler never sees it) or one
response (the shuffler stored the request, the client never hears so) while
the client is interrupted: every acknowledged request has its receipts, the
in-flight one is saved as sent, ``--resend`` posts it again without counting
anyone twice, and ``--first-line`` resumes with the lines not sent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from _deploy import DOMAIN

from shuffledp.schemas import schema_id, validate
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.tokens import issue_tokens

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

EXE = str(Path(sys.executable).with_name("shuffledp"))
LINES = 380
PER_REQUEST = 10
HELD = 20  # the 20th request (lines 191-200) or its answer is held back


class HoldingRelay:
    """Relays TCP connections to ``port``; holds back the ``HELD``-th request or response.

    ``hold="request"``: that request's bytes never reach the shuffler.
    ``hold="response"``: the shuffler gets the request and answers (it has stored
    the submissions), but the answer never reaches the client. ``held`` is set
    once something is held. Requests and responses are told apart by their
    first line (``POST `` and ``HTTP/1.1 ``), which no JSON body holds.
    """

    def __init__(self, port: int, hold: str) -> None:
        self._port = port
        self._marker = b"POST " if hold == "request" else b"HTTP/1.1 "
        self._from_client = hold == "request"
        self._seen = 0
        self.held = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._sockets.append(self._server)
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._start(self._accept)

    def _start(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._port))
            self._sockets += [client, upstream]
            self._start(self._pump, client, upstream, self._from_client)
            self._start(self._pump, upstream, client, not self._from_client)

    def _pump(self, source: socket.socket, target: socket.socket, counted: bool) -> None:
        """Copy ``source`` to ``target``; on the counted side, stop at the held message."""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            if not data:
                return
            if counted:
                if self.held.is_set():
                    continue  # the held message and all after it are dropped
                cut = self._cut(data)
                if cut is not None:
                    data = data[:cut]
                    self.held.set()
            try:
                target.sendall(data)
            except OSError:
                return

    def _cut(self, data: bytes) -> int | None:
        """Where the held message starts in ``data`` (``None``: not in this chunk)."""
        start = 0
        while (at := data.find(self._marker, start)) >= 0:
            self._seen += 1
            if self._seen == HELD:
                return at
            start = at + 1
        return None

    def close(self) -> None:
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(timeout=10)


def _receipt_ids(out: str, task_id: str) -> list[str]:
    ids = []
    for line in out.splitlines():
        receipt = json.loads(line)
        validate(receipt)
        assert receipt["schema"] == schema_id("submission") and receipt["task_id"] == task_id
        ids.append(receipt["submission_id"])
    return ids


def _submit(dep, cwd: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, "client", "submit", "--task", str(dep.workdir / "task.json"), "--shuffler", url,
         *extra],
        capture_output=True, text=True, timeout=300, check=False, cwd=cwd,
    )  # fmt: skip


@pytest.mark.parametrize("hold", ["response", "request"])
def test_an_interrupted_run_keeps_every_receipt_and_resumes_without_double_counting(
    deploy, tmp_path: Path, hold: str
) -> None:
    dep = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    values = tmp_path / "values.txt"
    values.write_text("".join(f"{DOMAIN[i % len(DOMAIN)]}\n" for i in range(LINES)))
    tokens = tmp_path / "tokens.txt"
    write_secret_file(tokens, "\n".join(issue_tokens(dep.token_key, dep.task.task_id, LINES)))
    files = ["--values-file", str(values), "--tokens-file", str(tokens)]
    relay = HoldingRelay(int(dep.shuffler.url.rsplit(":", 1)[1]), hold)
    client = subprocess.Popen(
        [EXE, "client", "submit", "--task", str(dep.workdir / "task.json"),
         "--shuffler", relay.url, *files, "--per-request", str(PER_REQUEST)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        assert relay.held.wait(120), "the client never reached the held request"
        time.sleep(0.2)  # the client is now waiting for the answer it will not get
        os.kill(client.pid, signal.SIGINT)
        out, err = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
            client.communicate()
        relay.close()

    assert client.returncode == 130, err
    stored_ids = _receipt_ids(out, dep.task.task_id)
    done = (HELD - 1) * PER_REQUEST
    assert len(stored_ids) == done
    (line,) = err.splitlines()
    saved = sorted(tmp_path.glob(f"shuffledp-in-flight-lines-{done + 1}-{done + 10}-*.json"))
    assert len(saved) == 1
    assert line == (
        f"shuffledp: interrupted: lines 1-{done} of {LINES} stored (receipts on stdout); "
        f"lines {done + 1}-{done + 10} in flight, maybe stored: saved as sent in {saved[0]} "
        f"(resend them with --resend {saved[0]}: the same submission ids, which the shuffler "
        f"stores once); lines {done + 11}-{LINES} not sent (resume with --first-line "
        f"{done + 11})"
    )
    assert stat.S_IMODE(saved[0].stat().st_mode) == 0o600
    in_flight = json.loads(saved[0].read_text())["submissions"]
    assert len(in_flight) == PER_REQUEST and all("token" in item for item in in_flight)
    in_flight_ids = [item["submission_id"] for item in in_flight]
    assert not set(in_flight_ids) & set(stored_ids)
    metrics = dep.shuffler_metrics()
    accepted = done + (PER_REQUEST if hold == "response" else 0)
    assert metrics["submissions_accepted"] == accepted

    # The same ids and ciphertexts again, straight to the shuffler: stored once in all.
    resent = _submit(dep, tmp_path, dep.shuffler.url, "--resend", str(saved[0]))
    assert resent.returncode == 0, resent.stderr
    assert _receipt_ids(resent.stdout, dep.task.task_id) == in_flight_ids
    metrics = dep.shuffler_metrics()
    assert metrics["submissions_accepted"] == done + PER_REQUEST
    assert metrics.get("submissions_duplicate", 0) == (PER_REQUEST if hold == "response" else 0)

    resumed = _submit(
        dep, tmp_path, dep.shuffler.url, *files, "--first-line", str(done + 11), "--quiet"
    )
    assert resumed.returncode == 0 and resumed.stderr == "", resumed.stderr
    resumed_ids = _receipt_ids(resumed.stdout, dep.task.task_id)
    assert len(resumed_ids) == LINES - done - PER_REQUEST
    everyone = stored_ids + in_flight_ids + resumed_ids
    assert len(set(everyone)) == LINES
    metrics = dep.shuffler_metrics()
    assert metrics["submissions_accepted"] == LINES
    assert not metrics.get("rejected"), metrics  # no token was refused as used twice


def test_posting_the_same_submissions_twice_stores_them_once(deploy) -> None:
    """What ``--resend`` relies on: a known submission id is answered as stored, not again."""
    dep = deploy("krr", min_batch_users=100)
    with dep.client() as client:
        prepared = client.prepare_many(["red", "green", "blue"])
    from shuffledp.service.client import request_body_text

    body = request_body_text(prepared)
    answers = [
        httpx.post(
            dep.submissions_url,
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
        for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    metrics = dep.shuffler_metrics()
    assert metrics["submissions_accepted"] == 3 and metrics["submissions_duplicate"] == 3


def test_first_line_and_resend_are_checked_before_anything_is_sent(
    deploy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shuffledp.cli import main

    dep = deploy("krr", min_batch_users=100)
    values = tmp_path / "values.txt"
    values.write_text("red\ngreen\n")
    not_a_body = tmp_path / "other.json"
    write_secret_file(not_a_body, json.dumps({"format": "something else"}))
    base = ["client", "submit", "--task", str(dep.workdir / "task.json"),
            "--shuffler", dep.shuffler.url]  # fmt: skip
    cases = {
        "--first-line 3 is past the last line (2) of --values-file": [
            "--values-file", str(values), "--first-line", "3"],
        "--first-line goes with --values-file, not --value": [
            "--value", "red", "--first-line", "2"],
        "--first-line must be an integer >= 1, got 0": [
            "--values-file", str(values), "--first-line", "0"],
        "is not a submissions request": ["--resend", str(not_a_body)],
    }  # fmt: skip
    for fragment, extra in cases.items():
        assert main([*base, *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and fragment in err, err
    assert dep.shuffler_metrics().get("requests_accepted", 0) == 0
