"""Helpers of the service tests: a deployment of both services and what to compare."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from shuffledp.service._testhooks import KILL_ENV
from shuffledp.service.client import Client, Submission
from shuffledp.service.processes import ServiceProcess, ServiceStartError
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.task import Task, create_task, save_private_key, save_task
from shuffledp.service.tokens import new_token_key, save_token_key

DOMAIN = ["red", "green", "blue", "cyan", "pink"]

#: Marks every process this pytest process starts (children and grandchildren inherit it):
#: what the session-end check of ``conftest.py`` looks for. A new value per process, so a
#: pytest run inside a test, or another person's run on the same machine, has its own.
SESSION_ENV = "SHUFFLEDP_TEST_SESSION"
os.environ[SESSION_ENV] = uuid.uuid4().hex

_TASKS: dict[tuple[Any, ...], tuple[Task, Any]] = {}


#: How a service says that its port is taken, and how often a deployment tries new ports.
PORT_TAKEN = "(Address already in use)"
PORT_ATTEMPTS = 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or predicate}")


@dataclass
class Deployment:
    """A task with its files and its two services."""

    task: Task
    key: Any
    workdir: Path
    analyzer: ServiceProcess
    shuffler: ServiceProcess
    forward_token: str
    token_key: bytes | None = None
    shuffler_store: str = ""
    analyzer_store: str = ""
    clients: list[Client] = field(default_factory=list)

    @property
    def shuffler_db(self) -> Path:
        return self.workdir / "shuffler.db"

    @property
    def analyzer_db(self) -> Path:
        return self.workdir / "analyzer.db"

    @property
    def submissions_url(self) -> str:
        return f"{self.shuffler.url}/v1/tasks/{self.task.task_id}/submissions"

    def client(self, **kwargs: Any) -> Client:
        kwargs.setdefault("retry_seconds", 60.0)
        client = Client(self.task, self.shuffler.url, **kwargs)
        self.clients.append(client)
        return client

    def shuffler_metrics(self) -> dict[str, Any]:
        return httpx.get(f"{self.shuffler.url}/v1/metrics", timeout=10).json()

    def analyzer_metrics(self) -> dict[str, Any]:
        return httpx.get(f"{self.analyzer.url}/v1/metrics", timeout=10).json()

    def wait_aggregated(self, users: int, timeout: float = 60.0) -> None:
        wait_until(
            lambda: self.analyzer_metrics().get("users_aggregated", 0) >= users,
            timeout,
            f"{users} users aggregated",
        )

    def estimate(self) -> httpx.Response:
        return httpx.get(f"{self.analyzer.url}/v1/estimate", timeout=60)

    def post_ciphertexts(self, ciphertexts: list[bytes]) -> httpx.Response:
        """Post one submission of raw ciphertexts (new id, no token), as a hostile client may."""
        from shuffledp.service.shuffler import SUBMISSIONS_FORMAT
        from shuffledp.service.task import new_id
        from shuffledp.service.wire import b64encode

        item = {"submission_id": new_id(), "ciphertexts": [b64encode(c) for c in ciphertexts]}
        return httpx.post(
            self.submissions_url,
            json={"format": SUBMISSIONS_FORMAT, "submissions": [item]},
            timeout=60,
        )

    def post_batch(self, body: Any, token: str | None = None, **kwargs: Any) -> httpx.Response:
        token = self.forward_token if token is None else token
        return httpx.post(
            f"{self.analyzer.url}/v1/batches",
            json=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            timeout=30,
            **kwargs,
        )

    def stop(self) -> None:
        """Stop both services (each even if closing a client or the other service fails).

        Both get SIGTERM first, so their graceful shutdowns (~0.2 s each) overlap;
        then each is waited for (and SIGKILLed if it does not end) as before.
        """
        try:
            for client in self.clients:
                client.close()
        finally:
            try:
                for service in (self.shuffler, self.analyzer):
                    if service.alive():
                        service._signal_group(signal.SIGTERM)
            finally:
                self._stop_each()

    def _stop_each(self) -> None:
        try:
            self.shuffler.stop()
        finally:
            self.analyzer.stop()


def stored_payloads(deployment: Deployment) -> list[bytes]:
    """Every batch's payload as the analyzer stored it (permuted ciphertexts)."""
    from shuffledp.service.store import open_analyzer_store

    store = open_analyzer_store(deployment.analyzer_store, deployment.task.task_id, read_only=True)
    try:
        return [store.load_batch(b).payload for b in store.batch_ids()]
    finally:
        store.close()


def expected_counts(submissions: list[Submission], d: int = len(DOMAIN)) -> np.ndarray:
    messages = [s.messages for s in submissions]
    joined = np.concatenate(messages) if messages else np.empty(0, dtype=np.int64)
    return np.bincount(joined, minlength=d)


def stored_counts(deployment: Deployment) -> np.ndarray:
    """The analyzer's aggregated counts per message index, read from its store."""
    from shuffledp.service.store import open_analyzer_store

    store = open_analyzer_store(deployment.analyzer_store, deployment.task.task_id, read_only=True)
    try:
        return store.totals(deployment.task.message_domain_size).counts
    finally:
        store.close()


def _task(
    protocol: str,
    min_batch_users: int,
    one_each: bool,
    domain: list[str] = DOMAIN,
    options: dict[str, Any] | None = None,
) -> tuple[Task, Any]:
    """A fresh task (new id and key) with the calibration of a cached one."""
    options = options or {}
    cache_key = (protocol, min_batch_users, tuple(domain), tuple(sorted(options.items())))
    if cache_key not in _TASKS:
        _TASKS[cache_key] = create_task(protocol, domain, 1.0, 1e-6, min_batch_users, **options)
    template, _ = _TASKS[cache_key]
    from dataclasses import replace

    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    from shuffledp.service.task import new_id
    from shuffledp.service.wire import public_key_to_b64

    key = X25519PrivateKey.generate()
    task = replace(
        template,
        task_id=new_id(),
        public_key=public_key_to_b64(key.public_key()),
        one_submission_per_client=one_each,
    )
    return task, key


def make_deployment(
    workdir: Path,
    protocol: str = "krr",
    min_batch_users: int = 100,
    *,
    one_submission_per_client: bool = False,
    shuffler_env: dict[str, str] | None = None,
    analyzer_env: dict[str, str] | None = None,
    shuffler_args: list[str] | None = None,
    analyzer_args: list[str] | None = None,
    start: bool = True,
    shuffler_store: str | None = None,
    analyzer_store: str | None = None,
    domain: list[str] = DOMAIN,
    task_options: dict[str, Any] | None = None,
    forward_url: str | None = None,
) -> Deployment:
    """Create a task's files in ``workdir`` and (by default) start both services.

    The stores are SQLite files in ``workdir`` unless ``shuffler_store`` /
    ``analyzer_store`` give other store URLs (``postgresql://…``);
    ``task_options`` go to :func:`create_task` (e.g. an augmented ``variant``);
    ``forward_url`` makes the shuffler forward somewhere else than the analyzer
    (a recording proxy in front of it).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    shuffler_store = shuffler_store or f"sqlite:///{workdir / 'shuffler.db'}"
    analyzer_store = analyzer_store or f"sqlite:///{workdir / 'analyzer.db'}"
    task, key = _task(protocol, min_batch_users, one_submission_per_client, domain, task_options)
    save_task(task, workdir / "task.json")
    save_private_key(key, workdir / "analyzer.key")
    forward_token = f"forward-secret-{task.task_id}"
    write_secret_file(workdir / "forward.token", forward_token)
    token_key = None
    base_args = [
        "--task", str(workdir / "task.json"),
        "--store", shuffler_store,
        "--forward-token-file", str(workdir / "forward.token"),
    ]  # fmt: skip
    if one_submission_per_client:
        token_key = new_token_key()
        save_token_key(token_key, workdir / "token.key")
        base_args += ["--token-key-file", str(workdir / "token.key")]
    for attempt in range(1, PORT_ATTEMPTS + 1):
        analyzer_port = free_port()
        analyzer = ServiceProcess(
            "analyzer",
            [
                "--task", str(workdir / "task.json"),
                "--key", str(workdir / "analyzer.key"),
                "--store", analyzer_store,
                "--forward-token-file", str(workdir / "forward.token"),
                *(analyzer_args or []),
            ],
            workdir,
            env=analyzer_env,
            port=analyzer_port,
        )  # fmt: skip
        shuffler = ServiceProcess(
            "shuffler",
            [
                *base_args,
                *(shuffler_args or []),
                "--forward",
                forward_url or f"http://127.0.0.1:{analyzer_port}",
            ],
            workdir,
            env=shuffler_env,
            port=free_port(),
        )
        deployment = Deployment(
            task, key, workdir, analyzer, shuffler, forward_token, token_key,
            shuffler_store=shuffler_store, analyzer_store=analyzer_store,
        )  # fmt: skip
        if not start:
            return deployment
        try:
            analyzer.launch()
            shuffler.launch()
            analyzer.wait_started()
            shuffler.wait_started()
        except ServiceStartError as exc:  # a service that did not come up: end both
            deployment.stop()
            if PORT_TAKEN not in str(exc) or attempt == PORT_ATTEMPTS:
                raise
            # Another process (another pytest-xdist worker, another run on this machine)
            # bound a port between free_port() and the service: new ports, same files.
            continue
        except BaseException:  # interrupted: end both, then report
            deployment.stop()
            raise
        return deployment
    raise AssertionError("unreachable")  # pragma: no cover


# -- kill -9 and restart (test_service_crashes, test_service_postgres_deploy) --------------

CRASH_USERS = 300
CRASH_VALUES = [DOMAIN[i] for i in np.random.default_rng(8).choice(5, size=CRASH_USERS)]


def submit_in_background(dep: Deployment, per_request: int = 10) -> tuple[threading.Thread, dict]:
    """Submit :data:`CRASH_VALUES` from a thread, retrying while a service is down."""
    result: dict = {}

    def run() -> None:
        try:
            result["subs"] = dep.client(seed=3, retry_seconds=120).submit_many(
                CRASH_VALUES, per_request=per_request
            )
        except Exception as exc:  # reported by the test
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def finish_after_crashes(dep: Deployment, thread: threading.Thread, result: dict) -> list:
    """Wait for the submitter; check every acknowledged submission is counted exactly once."""
    thread.join(timeout=180)
    assert not thread.is_alive() and "error" not in result, result.get("error")
    subs = result["subs"]
    assert len({s.submission_id for s in subs}) == CRASH_USERS
    dep.wait_aggregated(CRASH_USERS, timeout=90)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="all batches sent")
    assert stored_counts(dep).tolist() == expected_counts(subs).tolist()
    analyzer = dep.analyzer_metrics()
    assert analyzer["users_aggregated"] == CRASH_USERS == analyzer["users_stored"]
    assert analyzer["batches_pending"] == 0
    release = dep.estimate().json()
    assert release["n"] == CRASH_USERS
    return subs


def kill_at_crash_point_and_restart(
    deploy: Callable[..., Deployment], role: str, point: str, check: dict[str, dict[str, int]]
) -> None:
    """Let ``role`` SIGKILL itself at ``point``, restart it, finish; ``check`` its metrics."""
    env = {KILL_ENV: point}
    dep = deploy(
        "krr",
        min_batch_users=100,
        shuffler_env=env if role == "shuffler" else None,
        analyzer_env=env if role == "analyzer" else None,
    )
    victim = dep.shuffler if role == "shuffler" else dep.analyzer
    thread, result = submit_in_background(dep)
    assert victim.wait_exit(timeout=60) == -signal.SIGKILL
    victim.start(env={})  # same port, same store, no crash point
    finish_after_crashes(dep, thread, result)
    for service, expected in check.items():
        metrics = dep.shuffler_metrics() if service == "shuffler" else dep.analyzer_metrics()
        for name, value in expected.items():
            assert metrics.get(name, 0) == value, (name, metrics)


def kill_at_random_times(deploy: Callable[..., Deployment]) -> None:
    """SIGKILL from outside at random moments (fixed seed), both services, several times."""
    rng = np.random.default_rng(20240611)
    dep = deploy("flip", min_batch_users=100)
    # 5 per request: batches of exactly 100 users, so all 300 are forwarded.
    thread, result = submit_in_background(dep, per_request=5)
    for _ in range(4):
        time.sleep(float(rng.uniform(0.1, 0.8)))
        victim = dep.shuffler if rng.random() < 0.7 else dep.analyzer
        victim.kill()
        victim.start(env={})
    finish_after_crashes(dep, thread, result)
