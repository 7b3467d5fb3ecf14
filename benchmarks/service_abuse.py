"""Abuse cases against the shuffler and the analyzer on loopback; prints one JSON object.

Both services run as real processes (``python -m shuffledp serve …`` through
:class:`shuffledp.service.processes.ServiceProcess`, SQLite stores in a
temporary directory, default options), started with the soft limit on open
files at ``--service-nofile`` (1024 by default, the usual default on Linux; a
service may raise its own soft limit up to the hard one). Each case reports

* ``status_codes``: the HTTP status of every answer the attack got (``closed``:
  the connection was closed without an answer);
* ``service_cpu_s``: CPU seconds the attacked service used during the case
  (``/proc/PID/stat``, all its threads);
* ``health``: a health check (``GET /v1/health``, a new connection each time,
  10 s timeout) every 0.25 s during the case: checks, failures, longest delay;
* ``stored``: whether the attacked service stored anything (rows of the
  shuffler's ``submissions`` or the analyzer's ``batches``, read from its file);

and what else the case measures. Cases:

* ``huge_header_MiB_<N>``: a request whose one header is N MiB, sent as fast as
  loopback takes it (shuffler, then the analyzer for the first size);
* ``slowloris_<N>``: N connections (``--slow-connections``; asyncio, in a process of
  their own) each send a partial request, then one header line every
  ``--slow-interval`` seconds, for ``--slow-seconds``; closed ones reconnect
  after ``--slow-interval``. A valid submission is posted every second meanwhile;
* ``disconnect_mid_body``: 20 requests that send half their declared body and
  close: log bytes and lines the service wrote;
* ``non_ascii_token``: a token of the right length with a non-ASCII character;
* ``n_users``: batches stating 10**30 and (twice) 2**62 users with the forward
  token (FLIP: users may send no message), then ``/v1/estimate``,
  ``/v1/metrics`` and ``analyzer publish``;
* ``analyzer_body_1GiB``: 1 GiB bodies with the forward token, with
  Content-Length and chunked: MiB sent before the answer, the analyzer's peak
  RSS growth;
* ``body_limits``: computed, no service runs: the default body limits of both
  services for the tasks of :data:`BODY_LIMIT_TASKS` (the figures
  docs/deployment.md quotes), and for correlated tasks an honest user's mean
  message count and the mean bodies it makes (:func:`body_limits`);
* ``file_modes``: the modes of the stores' files and of a published release
  under umask 022 and 077;
* ``disk_order``: 150 token-holding clients submit one request each; the
  shuffler's files are read as an attacker would
  (:mod:`shuffledp.service.disk_audit`) before the batch is cut (149 waiting)
  and after it is cut, sent and the WAL truncated.

Usage: python benchmarks/service_abuse.py [--header-mib 64,256]
    [--slow-connections 2000,500] [--slow-seconds 20] [--slow-interval 1]
    [--service-nofile 1024] [--skip CASE,…]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import resource
import secrets
import socket
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import shuffledp
from shuffledp.service.client import Client
from shuffledp.service.disk_audit import linked_pairs, order_leak, read_files
from shuffledp.service.processes import ServiceProcess
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.shuffler import BATCH_FORMAT, SUBMISSIONS_FORMAT
from shuffledp.service.task import Task, create_task, new_id, save_private_key, save_task
from shuffledp.service.tokens import issue_token, issue_tokens, new_token_key, save_token_key
from shuffledp.service.wire import (
    CIPHERTEXT_LENGTH,
    MessageSealer,
    b64encode,
    public_key_from_b64,
)

_TICK = os.sysconf("SC_CLK_TCK")
DOMAIN = ["red", "green", "blue", "cyan", "pink"]


def _log(message: str) -> None:
    print(f"[service_abuse] {message}", file=sys.stderr, flush=True)


# --- the services ---------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextmanager
def _nofile(soft: int) -> Iterator[None]:
    """Run the block with the soft open-file limit at ``soft`` (children inherit it)."""
    old_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (old_soft, hard))


class Services:
    """A task's files in ``workdir`` and both services, started with ``nofile`` open files."""

    def __init__(self, workdir: Path, task: Task, key: Any, nofile: int, *, tokens: bool) -> None:
        self.workdir, self.task = workdir, task
        workdir.mkdir(parents=True)
        save_task(task, workdir / "task.json")
        save_private_key(key, workdir / "analyzer.key")
        self.forward_token = secrets.token_urlsafe(32)
        write_secret_file(workdir / "forward.token", self.forward_token)
        self.token_key: bytes | None = None
        extra: list[str] = []
        if tokens:
            self.token_key = new_token_key()
            save_token_key(self.token_key, workdir / "token.key")
            extra = ["--token-key-file", str(workdir / "token.key")]
        self.analyzer = ServiceProcess(
            "analyzer",
            ["--task", str(workdir / "task.json"), "--key", str(workdir / "analyzer.key"),
             "--store", f"sqlite:///{workdir / 'analyzer.db'}",
             "--forward-token-file", str(workdir / "forward.token")],
            workdir,
        )  # fmt: skip
        with _nofile(nofile):
            self.analyzer.start()
            self.shuffler = ServiceProcess(
                "shuffler",
                ["--task", str(workdir / "task.json"),
                 "--store", f"sqlite:///{workdir / 'shuffler.db'}",
                 "--forward-token-file", str(workdir / "forward.token"),
                 "--forward", self.analyzer.url, *extra],
                workdir,
            )  # fmt: skip
            self.shuffler.start()

    @property
    def submissions_url(self) -> str:
        """The shuffler's submissions endpoint."""
        return f"{self.shuffler.url}/v1/tasks/{self.task.task_id}/submissions"

    def pid(self, role: str) -> int:
        """The process id of ``role``."""
        process = (self.shuffler if role == "shuffler" else self.analyzer).process
        assert process is not None
        return process.pid

    def metrics(self, role: str, timeout: float = 120.0) -> dict[str, Any]:
        """``GET /v1/metrics`` of ``role`` (``{"status": CODE}`` if it is not a 200)."""
        service = self.shuffler if role == "shuffler" else self.analyzer
        response = httpx.get(f"{service.url}/v1/metrics", timeout=timeout)
        if response.status_code != 200:
            return {"status": response.status_code}
        answer: dict[str, Any] = response.json()
        return answer

    def stored(self, role: str) -> int | None:
        """What ``role`` has stored (submissions or batches), read from its files.

        From the SQLite file rather than ``/v1/metrics``, which an attack may break.
        """
        table = "submissions" if role == "shuffler" else "batches"
        conn = sqlite3.connect(f"file:{self.workdir / role}.db?mode=ro", uri=True, timeout=30)
        try:
            (count,) = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
            return int(count)
        except sqlite3.Error:
            return None
        finally:
            conn.close()

    def stop(self) -> None:
        """Stop both services."""
        for service in (self.shuffler, self.analyzer):
            service.stop(timeout=30)


class HealthProbe:
    """``GET /v1/health`` on a new connection every ``interval`` s, in a thread."""

    def __init__(self, url: str, interval: float = 0.25, timeout: float = 10.0) -> None:
        self.url, self.interval, self.timeout = url, interval, timeout
        self.delays: list[float] = []
        self.failures: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                ok = httpx.get(f"{self.url}/v1/health", timeout=self.timeout).status_code == 200
                if not ok:
                    self.failures["status"] += 1
            except httpx.HTTPError as exc:
                self.failures[type(exc).__name__] += 1
            self.delays.append(time.perf_counter() - started)
            self._stop.wait(self.interval)

    def stop(self) -> dict[str, Any]:
        """Stop probing; return checks, failures and the longest delay."""
        self._stop.set()
        self._thread.join(timeout=self.timeout + 5)
        return {
            "checks": len(self.delays),
            "failures": sum(self.failures.values()),
            "failure_kinds": dict(self.failures),
            "median_delay_s": round(float(np.median(self.delays)), 3) if self.delays else None,
            "max_delay_s": round(max(self.delays), 3) if self.delays else None,
            "delays_over_1s": sum(d > 1.0 for d in self.delays),
        }


def run_case(services: Services, role: str, attack: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``attack`` against ``role`` with a health probe; add CPU, health and storage."""
    service = services.shuffler if role == "shuffler" else services.analyzer
    stored_before = services.stored(role)
    pid = services.pid(role)
    cpu_before = _cpu_seconds(pid)
    probe = HealthProbe(service.url)
    try:
        out = attack()
    finally:
        health = probe.stop()
    cpu = _cpu_seconds(pid) - cpu_before
    stored_after = services.stored(role)
    stored = None if None in (stored_before, stored_after) else stored_after != stored_before
    return {
        "service": role,
        **out,
        "service_cpu_s": round(cpu, 2),
        "health": health,
        "stored": stored,
        "connections": services.metrics(role).get("connections"),
    }


# --- raw HTTP -------------------------------------------------------------------------------


def _answer_status(answer: bytes) -> str:
    return answer[9:12].decode("ascii") if answer.startswith(b"HTTP/1.1 ") else "closed"


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data:
                break
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def stream(
    port: int, head: bytes, total: int, piece: bytes, tail: bytes = b"", timeout: float = 300.0
) -> dict[str, Any]:
    """Send ``head``, ``piece`` until ``total`` bytes, then ``tail``; stop at an answer or close."""
    sock = socket.create_connection(("127.0.0.1", port))
    answer: dict[str, Any] = {}
    sent = [0]
    started = time.perf_counter()

    def read() -> None:
        answer["bytes"] = _read_all(sock, timeout)
        answer["after_s"] = time.perf_counter() - started
        answer["sent_before"] = sent[0]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        sock.sendall(head)
        while sent[0] < total and reader.is_alive():
            sock.sendall(piece)
            sent[0] += len(piece)
        if reader.is_alive():
            sock.sendall(tail)
    except OSError:
        pass
    reader.join(timeout=timeout)
    sock.close()
    return {
        "status": _answer_status(answer.get("bytes", b"")),
        "answer_after_s": round(answer.get("after_s", float("nan")), 3),
        "mib_sent_before_answer": round(answer.get("sent_before", sent[0]) / 2**20, 1),
        "mib_sent": round(sent[0] / 2**20, 1),
    }


# --- the cases ------------------------------------------------------------------------------


def huge_header(services: Services, role: str, mib: int) -> dict[str, Any]:
    service = services.shuffler if role == "shuffler" else services.analyzer
    head = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: "
    result = stream(service.port, head, mib << 20, b"a" * 65536, tail=b"\r\n\r\n")
    return {"status_codes": {result.pop("status"): 1}, "header_mib": mib, **result}


async def _slow_connection(
    port: int, head: bytes, interval: float, stop_at: float, stats: Counter[str], lives: list[float]
) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < stop_at:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            stats["connect_errors"] += 1
            await asyncio.sleep(interval)
            continue
        stats["opened"] += 1
        opened = loop.time()
        closed_by_server = False
        answer = b""
        read = asyncio.ensure_future(reader.read(4096))
        try:
            writer.write(head)
            while loop.time() < stop_at:
                done, _ = await asyncio.wait({read}, timeout=interval)
                if done:
                    answer = read.result() if not read.exception() else b""
                    closed_by_server = True
                    break
                writer.write(b"X-Slow: 1\r\n")  # one more header line, never the end
                await writer.drain()
        except OSError:
            closed_by_server = True
        if closed_by_server:
            stats[_answer_status(answer)] += 1
            lives.append(loop.time() - opened)
        read.cancel()
        writer.close()
        if closed_by_server:
            await asyncio.sleep(interval)


async def _slowloris(
    port: int, head: bytes, count: int, interval: float, seconds: float
) -> tuple[Counter[str], list[float]]:
    stats: Counter[str] = Counter()
    lives: list[float] = []
    stop_at = asyncio.get_running_loop().time() + seconds
    await asyncio.gather(
        *(_slow_connection(port, head, interval, stop_at, stats, lives) for _ in range(count))
    )
    return stats, lives


def _slowloris_process(
    port: int, head: bytes, count: int, interval: float, seconds: float
) -> tuple[dict[str, int], list[float]]:
    """:func:`_slowloris` in a process of its own (so the health probe does not share its GIL)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    stats, lives = asyncio.run(_slowloris(port, head, count, interval, seconds))
    return dict(stats), lives


def slowloris(services: Services, args: argparse.Namespace, count: int) -> dict[str, Any]:
    head = (f"POST /v1/tasks/{services.task.task_id}/submissions HTTP/1.1\r\nHost: x\r\n").encode()
    submitted: Counter[str] = Counter()
    stop = threading.Event()

    def submit() -> None:
        client = Client(services.task, services.shuffler.url, seed=1, retry_seconds=0.0)
        while not stop.wait(1.0):
            item = client.prepare("red").to_json()
            try:
                response = httpx.post(
                    services.submissions_url,
                    json={"format": SUBMISSIONS_FORMAT, "submissions": [item]},
                    timeout=10,
                )
                submitted[str(response.status_code)] += 1
            except httpx.HTTPError as exc:
                submitted[type(exc).__name__] += 1
        client.close()

    submitter = threading.Thread(target=submit, daemon=True)
    submitter.start()
    try:
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            counts, lives = pool.submit(
                _slowloris_process,
                services.shuffler.port,
                head,
                count,
                args.slow_interval,
                args.slow_seconds,
            ).result()
        stats = Counter(counts)
    finally:
        stop.set()
        submitter.join(timeout=15)
    closed = {k: v for k, v in stats.items() if k not in ("opened", "connect_errors")}
    return {
        "status_codes": closed,
        "slow_connections": count,
        "seconds": args.slow_seconds,
        "connections_opened": stats["opened"],
        "connect_errors": stats["connect_errors"],
        "closed_by_server": sum(closed.values()),
        "seconds_until_closed": (
            {
                "min": round(min(lives), 2),
                "median": round(float(np.median(lives)), 2),
                "max": round(max(lives), 2),
            }
            if lives
            else None
        ),
        "submissions_during_attack": dict(submitted),
    }


def disconnect_mid_body(services: Services) -> dict[str, Any]:
    log = services.shuffler.log_path
    before = log.read_bytes()
    head = (
        f"POST /v1/tasks/{services.task.task_id}/submissions HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/json\r\nContent-Length: 20000\r\n\r\n"
    ).encode()
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", services.shuffler.port)) as sock:
            sock.sendall(head + b" " * 10_000)
    time.sleep(1.0)
    added = log.read_bytes()[len(before) :]
    return {
        "status_codes": {"closed": 20},
        "disconnects": 20,
        "log_bytes_added": len(added),
        "log_lines_added": added.count(b"\n"),
        "counted_client_disconnected": services.metrics("shuffler")["rejected"].get(
            "client_disconnected", 0
        ),
    }


def non_ascii_token(services: Services) -> dict[str, Any]:
    assert services.token_key is not None
    token = issue_token(services.token_key, services.task.task_id)
    with Client(services.task, services.shuffler.url, token=token) as client:
        item = client.prepare("red").to_json()
    codes: Counter[str] = Counter()
    for bad in (token[:-1] + "é", "é" * len(token), token[:5] + "٣" + token[6:]):
        response = httpx.post(
            services.submissions_url,
            json={"format": SUBMISSIONS_FORMAT, "submissions": [{**item, "token": bad}]},
            timeout=10,
        )
        codes[str(response.status_code)] += 1
    return {"status_codes": dict(codes)}


def n_users(services: Services) -> dict[str, Any]:
    task = services.task
    sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, len(DOMAIN))
    rng = np.random.default_rng(5)
    codes: dict[str, int] = {}
    for label, count in (("10**30", 10**30), ("2**62 first", 2**62), ("2**62 second", 2**62)):
        payload = b"".join(sealer.seal(int(i)) for i in rng.integers(0, len(DOMAIN), size=150))
        body = {
            "format": BATCH_FORMAT,
            "task_id": task.task_id,
            "batch_id": new_id(),
            "n_users": count,
            "n_messages": 150,
            "payload": b64encode(payload),
        }
        response = httpx.post(
            f"{services.analyzer.url}/v1/batches",
            json=body,
            headers={"Authorization": f"Bearer {services.forward_token}"},
            timeout=30,
        )
        codes[f"batch n_users {label}"] = response.status_code
    time.sleep(1.0)  # let the aggregator count what was stored
    codes["GET /v1/estimate"] = httpx.get(
        f"{services.analyzer.url}/v1/estimate", timeout=30
    ).status_code
    codes["GET /v1/metrics"] = httpx.get(
        f"{services.analyzer.url}/v1/metrics", timeout=30
    ).status_code
    publish = subprocess.run(
        [sys.executable, "-m", "shuffledp", "analyzer", "publish",
         "--task", str(services.workdir / "task.json"),
         "--store", f"sqlite:///{services.workdir / 'analyzer.db'}", "--quiet"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    err = publish.stderr.strip().splitlines()
    return {
        "status_codes": codes,
        "publish_exit_code": publish.returncode,
        "publish_stderr_last_line": err[-1][:200] if err else "",
        "note": "/v1/estimate answers 409 while no batch is stored (nothing to publish)",
    }


def analyzer_body(services: Services) -> dict[str, Any]:
    pid = services.pid("analyzer")
    head = (
        "POST /v1/batches HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {services.forward_token}\r\nContent-Type: application/json\r\n"
    ).encode()
    out: dict[str, Any] = {"peak_rss_mib_before": round(_peak_rss_mib(pid), 1)}
    chunk = b"a" * (1 << 20)
    with_length = stream(
        services.analyzer.port, head + b"Content-Length: 1073741824\r\n\r\n", 1 << 30, chunk
    )
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    chunked = stream(
        services.analyzer.port,
        head + b"Transfer-Encoding: chunked\r\n\r\n",
        1 << 30,
        framed,
        tail=b"0\r\n\r\n",
    )
    out["peak_rss_mib_after"] = round(_peak_rss_mib(pid), 1)
    out["peak_rss_growth_mib"] = round(out["peak_rss_mib_after"] - out["peak_rss_mib_before"], 1)
    codes: Counter[str] = Counter([with_length.pop("status"), chunked.pop("status")])
    return {"status_codes": dict(codes), "content_length": with_length, "chunked": chunked, **out}


#: (protocol, d, min_batch_users) of the default body limits docs/deployment.md quotes.
BODY_LIMIT_TASKS = (
    ("krr", 5, 1000),
    ("flip", 5, 1000),
    ("augmented", 100, 1000),
    ("correlated", 5, 100),
    ("correlated", 100, 100),
    ("correlated", 100, 1000),
    ("correlated", 10_000, 100),
)


def body_limits() -> dict[str, Any]:
    """The services' default body limits per task (computed, no service runs).

    The shuffler's: 4 MiB or one submission at the cap; the analyzer's: a batch
    of ``max_batch_users`` users each at the cap (plus the dummy bound). For the
    correlated protocol also an honest user's mean message count,
    1 + 2(d/m)·α/(1 − α) + 2(d/m)·r·q/(1 − q), and the mean body of an honest
    batch of ``max_batch_users`` users (one base64 payload) and of a client
    request of 100 users (a JSON list of base64 ciphertexts).
    """
    from shuffledp.service.analyzer import batch_body_bytes, default_max_batch_users
    from shuffledp.service.shuffler import default_max_body_bytes, submission_body_bytes

    mib = 1 << 20
    rows = []
    for protocol, d, m in BODY_LIMIT_TASKS:
        task, _ = create_task(protocol, [f"v{i}" for i in range(d)], 1.0, 1e-6, m)
        users = default_max_batch_users(task)
        row: dict[str, Any] = {
            "protocol": protocol,
            "domain_size": d,
            "min_batch_users": m,
            "max_messages_per_submission": task.max_messages_per_submission,
            "shuffler_max_body_mib": round(default_max_body_bytes(task) / mib, 2),
            "analyzer_max_batch_users": users,
            "analyzer_max_body_mib": round(batch_body_bytes(task, users) / mib, 2),
        }
        if protocol == "correlated":
            noise = task.correlated_noise()
            mean = (
                1
                + 2 * d / m * noise.alpha / (1 - noise.alpha)
                + 2 * d / m * noise.flood_r * noise.flood_q / (1 - noise.flood_q)
            )
            per_message = submission_body_bytes(2) - submission_body_bytes(1)
            row["honest_mean_messages"] = round(mean, 1)
            batch = 4 * users * mean * CIPHERTEXT_LENGTH / 3  # one base64 payload
            row["honest_batch_body_mib"] = round(batch / mib, 2)
            row["honest_request_of_100_mib"] = round(100 * mean * per_message / mib, 2)
        rows.append(row)
    return {"tasks": rows, "epsilon": 1.0, "delta": 1e-6}


def _modes(paths: list[Path]) -> dict[str, str]:
    return {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in paths if p.exists()}


def file_modes(root: Path, nofile: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for umask in (0o022, 0o077):
        previous = os.umask(umask)
        try:
            task, key = create_task("krr", DOMAIN, 1.0, 1e-6, 100)
            services = Services(root / f"umask{umask:03o}", task, key, nofile, tokens=False)
            try:
                with Client(task, services.shuffler.url, seed=3) as client:
                    client.submit_many([DOMAIN[i % 5] for i in range(100)], per_request=50)
                deadline = time.monotonic() + 60
                while services.metrics("analyzer").get("users_aggregated", 0) < 100:
                    if time.monotonic() > deadline:
                        raise RuntimeError("batch not aggregated in time")
                    time.sleep(0.1)
                release = services.workdir / "release.json"
                subprocess.run(
                    [sys.executable, "-m", "shuffledp", "analyzer", "publish",
                     "--task", str(services.workdir / "task.json"),
                     "--store", f"sqlite:///{services.workdir / 'analyzer.db'}",
                     "--output", str(release), "--quiet"],
                    check=True,
                )  # fmt: skip
                files = [*sorted(services.workdir.glob("*.db*")), release]
                out[f"umask_{umask:03o}"] = _modes(files)
            finally:
                services.stop()
        finally:
            os.umask(previous)
    return out


def disk_order(services: Services) -> dict[str, Any]:
    assert services.token_key is not None
    users = services.task.min_batch_users
    tokens = issue_tokens(services.token_key, services.task.task_id, users)
    files = [services.workdir / f"shuffler.db{s}" for s in ("", "-wal", "-shm")]
    sids: list[str] = []
    clients = [t.split(".")[0] for t in tokens]

    def look(ids_users: int) -> dict[str, Any]:
        data = read_files(files)
        return {
            "file_bytes": {p.name: p.stat().st_size for p in files if p.exists()},
            "submission_ids": order_leak(data, sids[:ids_users]).to_dict(),
            "client_ids": order_leak(data, clients[:ids_users]).to_dict(),
            "linked_pairs": linked_pairs(data, sids[:ids_users], clients[:ids_users]),
        }

    with Client(services.task, services.shuffler.url, token=tokens[0], seed=4) as client:
        for i in range(users - 1):
            sub = client.submit_many([DOMAIN[i % 5]], per_request=1, tokens=[tokens[i]])[0]
            sids.append(sub.submission_id)
        before = look(users - 1)
        sub = client.submit_many(["red"], per_request=1, tokens=[tokens[-1]])[0]
        sids.append(sub.submission_id)
    deadline = time.monotonic() + 60
    while services.metrics("shuffler")["batches_acknowledged"] < 1:
        if time.monotonic() > deadline:
            raise RuntimeError("batch not sent in time")
        time.sleep(0.1)
    time.sleep(1.0)  # the checkpoint that follows the acknowledgement, where there is one
    after = look(users)
    return {
        "status_codes": {"200": users},
        "users": users,
        "before_cut": before,
        "after_cut_and_sent": after,
        "null_law": "no leak: spearman ~ N(0, 1/(n-1)), within_page_z ~ N(0, 1), "
        "linked_pairs ~ fixed points of a random permutation (mean 1)",
    }


# --- main -----------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "shuffledp": shuffledp.__version__}
    for name in ("uvicorn", "starlette", "httptools", "uvloop", "h11"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["sqlite"] = sqlite3.sqlite_version
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--header-mib", default="64,256", help="header sizes (MiB), comma-separated"
    )
    parser.add_argument(
        "--slow-connections",
        default="2000,500",
        help="slow connections of each slowloris case, comma-separated",
    )
    parser.add_argument("--slow-seconds", type=float, default=20.0)
    parser.add_argument("--slow-interval", type=float, default=1.0)
    parser.add_argument(
        "--service-nofile",
        type=int,
        default=1024,
        help="soft open-file limit the services start with",
    )
    parser.add_argument("--skip", default="", help="cases to skip, comma-separated")
    parser.add_argument("--dir", default=None, help="where the temporary stores go")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    sizes = [int(x) for x in args.header_mib.split(",") if x]
    slow_counts = [int(x) for x in args.slow_connections.split(",") if x]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the attacker's own sockets

    started = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    root = Path(tempfile.mkdtemp(prefix="service_abuse_", dir=args.dir))
    cases: dict[str, Any] = {}
    flip_task, flip_key = create_task("flip", DOMAIN, 1.0, 1e-6, 100)
    main_services = Services(root / "flip", flip_task, flip_key, args.service_nofile, tokens=False)
    try:
        for i, mib in enumerate(sizes):
            for role in ("shuffler", "analyzer") if i == 0 else ("shuffler",):
                name = f"huge_header_MiB_{mib}" + ("" if role == "shuffler" else "_analyzer")
                if "huge_header" in skip:
                    continue
                _log(name)
                cases[name] = run_case(
                    main_services, role, partial(huge_header, main_services, role, mib)
                )
        for count in slow_counts:
            if "slowloris" in skip:
                break
            _log(f"slowloris_{count}")
            cases[f"slowloris_{count}"] = run_case(
                main_services, "shuffler", partial(slowloris, main_services, args, count)
            )
        if "disconnect_mid_body" not in skip:
            _log("disconnect_mid_body")
            cases["disconnect_mid_body"] = run_case(
                main_services, "shuffler", lambda: disconnect_mid_body(main_services)
            )
        if "n_users" not in skip:
            _log("n_users")
            cases["n_users"] = run_case(main_services, "analyzer", lambda: n_users(main_services))
        if "analyzer_body_1GiB" not in skip:
            _log("analyzer_body_1GiB")
            cases["analyzer_body_1GiB"] = run_case(
                main_services, "analyzer", lambda: analyzer_body(main_services)
            )
    finally:
        main_services.stop()
    krr_task, krr_key = create_task("krr", DOMAIN, 1.0, 1e-6, 150)
    krr_task_tokens = replace(krr_task, one_submission_per_client=True)
    token_services = Services(
        root / "tokens", krr_task_tokens, krr_key, args.service_nofile, tokens=True
    )
    try:
        if "non_ascii_token" not in skip:
            _log("non_ascii_token")
            cases["non_ascii_token"] = run_case(
                token_services, "shuffler", lambda: non_ascii_token(token_services)
            )
        if "disk_order" not in skip:
            _log("disk_order")
            cases["disk_order"] = run_case(
                token_services, "shuffler", lambda: disk_order(token_services)
            )
    finally:
        token_services.stop()
    if "body_limits" not in skip:
        _log("body_limits")
        cases["body_limits"] = body_limits()
    if "file_modes" not in skip:
        _log("file_modes")
        cases["file_modes"] = file_modes(root / "modes", args.service_nofile)

    result = {
        "cases": cases,
        "config": {
            "service_nofile": args.service_nofile,
            "attacker_nofile": hard,
            "header_mib": sizes,
            "slow_connections": slow_counts,
            "slow_seconds": args.slow_seconds,
            "slow_interval": args.slow_interval,
            "stores": "sqlite, temporary directory",
            "store_directory": str(root),
            "cpu_count": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "total_seconds": round(time.perf_counter() - started, 1),
            "machine": platform.machine(),
            **_versions(),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
