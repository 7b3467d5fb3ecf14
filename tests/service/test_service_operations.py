"""What an operator relies on, on real processes: readiness, Prometheus metrics, version, logs.

Also the configuration by environment variables (a PostgreSQL password kept
off the command line), JSON bodies that must be UTF-8, and the test
processes' own hygiene (a service ends with its parent; the session-end check
catches one that does not).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from _deploy import DOMAIN, SESSION_ENV, Deployment, make_deployment, wait_until
from prometheus_client.parser import text_string_to_metric_families

import shuffledp
from shuffledp.service.processes import ServiceProcess, ServiceStartError
from shuffledp.service.shuffler import BATCH_FORMAT, SUBMISSIONS_FORMAT
from shuffledp.service.task import TASK_FORMAT, new_id
from shuffledp.service.wire import SUITE_NAMES, WIRE_VERSION, b64encode

HERE = Path(__file__).parent
JSON = {"Content-Type": "application/json"}  # every POST body must say it is JSON (else 415)


def _families(text: str) -> dict[str, object]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def _value(text: str, name: str, **labels: str) -> float | None:
    for sample_name, sample_labels, value in _samples(text):
        if sample_name == name and sample_labels == labels:
            return value
    return None


def _dbname(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


# -- readiness, liveness, version ---------------------------------------------------------


def test_ready_health_and_version(shared_deploy):
    dep = shared_deploy("krr", min_batch_users=100)
    for service, role in ((dep.shuffler, "shuffler"), (dep.analyzer, "analyzer")):
        ready = httpx.get(f"{service.url}/v1/ready", timeout=10)
        assert ready.status_code == 200, ready.text
        assert ready.json() == {"status": "ready", "role": role, "task_id": dep.task.task_id}
        assert httpx.get(f"{service.url}/v1/health", timeout=10).status_code == 200
        version = httpx.get(f"{service.url}/v1/version", timeout=10).json()
        assert version["shuffledp_version"] == shuffledp.__version__
        assert version["role"] == role and version["task_id"] == dep.task.task_id
        assert version["task_shuffledp_version"] == dep.task.shuffledp_version
        formats = version["formats"]
        assert formats["task"] == TASK_FORMAT and formats["message"] == WIRE_VERSION
        assert formats["hpke"] == dict(SUITE_NAMES) and formats["batch"] == BATCH_FORMAT
        assert ("submissions" in formats) == (role == "shuffler")
    assert (
        httpx.get(f"{dep.shuffler.url}/v1/version", timeout=10).json()["formats"]["submissions"]
        == SUBMISSIONS_FORMAT
    )


# -- Prometheus ---------------------------------------------------------------------------


def test_prometheus_metrics_are_the_json_counters_plus_latency(deploy):
    dep = deploy("krr", min_batch_users=100)
    dep.client(seed=1).submit_many([DOMAIN[i % 5] for i in range(100)], per_request=25)
    dep.wait_aggregated(100)
    wait_until(lambda: dep.shuffler_metrics()["batches_unsent"] == 0, what="batch sent")
    # refusals a client can provoke, with paths and bodies of its choosing
    junk = f"zz{uuid.uuid4().hex}"
    malformed = httpx.post(dep.submissions_url, content=b"{", headers=JSON, timeout=10)
    assert malformed.status_code == 400
    other_task = f"{dep.shuffler.url}/v1/tasks/{junk}/submissions"
    assert httpx.post(other_task, json={}, timeout=10).status_code == 404
    assert httpx.get(f"{dep.shuffler.url}/{junk}", timeout=10).status_code == 404
    assert httpx.get(f"{dep.shuffler.url}/v1/health?{junk}=1", timeout=10).status_code == 200

    for service in (dep.shuffler, dep.analyzer):
        response = httpx.get(f"{service.url}/metrics", timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = response.text
        assert junk not in text  # nothing a client sent became a label or a name
        families = _families(text)
        assert families["shuffledp_http_request_duration_seconds"].type == "histogram"
        labels = {
            (sample_labels["route"], sample_labels["status_class"])
            for name, sample_labels, _ in _samples(text)
            if name.startswith("shuffledp_http_request_duration_seconds")
        }
        for route, status_class in labels:  # templates of the server's routes, or "unmatched"
            assert route == "unmatched" or (route.startswith("/v1/") and "{" not in route[:4])
            assert re.fullmatch("[1-5]xx", status_class), status_class
        assert _value(text, "shuffledp_store_up") == 1.0
        assert _value(text, "shuffledp_worker_alive") == 1.0
        assert _value(text, "process_cpu_seconds_total") is not None

    shuffler_text = httpx.get(f"{dep.shuffler.url}/metrics", timeout=10).text
    json_now = dep.shuffler_metrics()
    for name in ("submissions_accepted", "requests_accepted", "batches_cut", "batches_forwarded"):
        assert _value(shuffler_text, f"shuffledp_{name}_total") == json_now[name], name
    for reason, count in json_now["rejected"].items():
        assert _value(shuffler_text, "shuffledp_rejected_requests_total", reason=reason) == count
    for name in ("users_waiting", "submissions_stored", "batches_unsent"):
        assert _value(shuffler_text, f"shuffledp_store_{name}") == json_now[name], name
    submissions = "/v1/tasks/{task_id}/submissions"
    assert (
        _value(
            shuffler_text,
            "shuffledp_http_request_duration_seconds_count",
            route=submissions,
            status_class="2xx",
        )
        == json_now["requests_accepted"]
    )
    assert (
        _value(
            shuffler_text,
            "shuffledp_http_request_duration_seconds_count",
            route=submissions,
            status_class="4xx",
        )
        == 2  # the malformed body and the other task
    )
    assert _value(
        shuffler_text, "shuffledp_http_request_duration_seconds_count",
        route="unmatched", status_class="4xx",
    ) == 1  # fmt: skip
    analyzer_text = httpx.get(f"{dep.analyzer.url}/metrics", timeout=10).text
    analyzer_json = dep.analyzer_metrics()
    assert _value(analyzer_text, "shuffledp_batches_received_total") == 1
    assert _value(analyzer_text, "shuffledp_store_users_aggregated") == 100
    assert analyzer_json["users_aggregated"] == 100
    assert _value(
        analyzer_text, "shuffledp_http_request_duration_seconds_count",
        route="/v1/batches", status_class="2xx",
    ) == 1  # fmt: skip
    assert _value(analyzer_text, "shuffledp_connections_open") is not None


def test_metrics_token_guards_both_metrics_endpoints_and_only_them(deploy, tmp_path):
    from shuffledp.service.secretfile import write_secret_file

    token = f"metrics-{uuid.uuid4().hex}"
    write_secret_file(tmp_path / "metrics.token", token)
    env = {"SHUFFLEDP_METRICS_TOKEN_FILE": str(tmp_path / "metrics.token")}
    dep = deploy("krr", min_batch_users=100, shuffler_env=env, analyzer_args=[
        "--metrics-token-file", str(tmp_path / "metrics.token")
    ])  # fmt: skip
    for service in (dep.shuffler, dep.analyzer):
        for path in ("/metrics", "/v1/metrics"):
            url = f"{service.url}{path}"
            missing = httpx.get(url, timeout=10)
            assert missing.status_code == 401 and missing.json()["reason"] == "missing_bearer"
            wrong = httpx.get(url, headers={"Authorization": "Bearer nope"}, timeout=10)
            assert wrong.status_code == 403 and wrong.json()["reason"] == "wrong_bearer"
            right = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            assert right.status_code == 200, (path, right.text)
        for path in ("/v1/health", "/v1/ready", "/v1/version"):
            assert httpx.get(f"{service.url}{path}", timeout=10).status_code == 200
        assert token not in service.log_path.read_text()


# -- JSON must be UTF-8 -------------------------------------------------------------------


@pytest.mark.parametrize(
    "encoding",
    ["utf-16-le", "utf-16-be", "utf-16", "utf-32-le", "utf-32-be", "utf-32", "utf-8-sig"],
)
def test_json_bodies_other_than_utf8_are_refused(shared_deploy, encoding):
    dep = shared_deploy("krr", min_batch_users=100)  # one user waits per encoding: no batch
    waiting = dep.shuffler_metrics()["users_waiting"]
    sealed = dep.client(seed=2).prepare("red")  # a well-formed submission
    text = json.dumps({"format": SUBMISSIONS_FORMAT, "submissions": [sealed.to_json()]})
    refused = httpx.post(
        dep.submissions_url,
        content=text.encode(encoding),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["reason"] == "malformed_json"
    assert "UTF-8" in refused.json()["error"]
    batch = {
        "format": BATCH_FORMAT, "task_id": dep.task.task_id, "batch_id": new_id(),
        "n_users": 100, "n_messages": 0, "payload": b64encode(b""),
    }  # fmt: skip
    refused = dep.post_batch(None, content=json.dumps(batch).encode(encoding))
    assert refused.status_code == 400 and "UTF-8" in refused.json()["error"], refused.text
    assert dep.shuffler_metrics()["users_waiting"] == waiting
    # the same document in UTF-8 is accepted
    accepted = httpx.post(
        dep.submissions_url, content=text.encode("utf-8"), headers=JSON, timeout=10
    )
    assert accepted.status_code == 200, accepted.text
    assert dep.shuffler_metrics()["users_waiting"] == waiting + 1


# -- logs ---------------------------------------------------------------------------------

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z ")


def test_every_log_line_starts_with_a_utc_timestamp(deploy):
    before = dt.datetime.now(dt.timezone.utc)
    # A zone far from UTC: a local-time stamp would be 5 h 30 min off.
    env = {"TZ": "Asia/Kolkata"}
    dep = deploy("krr", min_batch_users=100, shuffler_env=env, analyzer_env=env)
    dep.client(seed=1).submit_many([DOMAIN[i % 5] for i in range(100)], per_request=50)
    dep.wait_aggregated(100)
    with socket.create_connection(("127.0.0.1", dep.shuffler.port), timeout=10) as sock:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")  # uvicorn logs a warning of its own
        sock.recv(1024)
    dep.stop()
    after = dt.datetime.now(dt.timezone.utc)
    for service in (dep.shuffler, dep.analyzer):
        lines = service.log_path.read_text().splitlines()
        assert any("listening on" in line for line in lines), lines
        assert any("batch" in line for line in lines), lines
        if service is dep.shuffler:
            assert any("uvicorn" in line for line in lines), lines
        for line in lines:
            match = _STAMP.match(line)
            assert match, line
            stamp = dt.datetime.fromisoformat(match.group(1)).replace(tzinfo=dt.timezone.utc)
            assert before - dt.timedelta(seconds=1) <= stamp <= after, line


# -- PostgreSQL: an outage, the password ---------------------------------------------------


@pytest.mark.slow
def test_a_store_outage_is_two_log_lines_and_readiness_follows_it(deploy, postgres_server):
    """Before: a traceback per failed background step (one a second during an outage)."""
    dep = deploy(
        "krr",
        min_batch_users=100,
        shuffler_store=postgres_server.create_database(),
        analyzer_store=postgres_server.create_database(),
    )
    services = {"shuffler": dep.shuffler, "analyzer": dep.analyzer}
    for service in services.values():
        assert httpx.get(f"{service.url}/v1/ready", timeout=10).status_code == 200
    blocked = [_dbname(dep.shuffler_store), _dbname(dep.analyzer_store)]
    for name in blocked:
        postgres_server.block(name)
    try:
        for service in services.values():
            # several failed steps in a row (the dispatcher retries after 0.2, 0.4, 0.8 s ...)
            wait_until(
                lambda s=service: (
                    (
                        _value(
                            httpx.get(f"{s.url}/metrics", timeout=10).text,
                            "shuffledp_worker_failures",
                        )
                        or 0
                    )
                    >= 4
                ),
                timeout=60,
                what=f"{service.role} failing",
            )
            text = httpx.get(f"{service.url}/metrics", timeout=10).text
            assert _value(text, "shuffledp_store_up") == 0.0
            for _ in range(3):
                ready = httpx.get(f"{service.url}/v1/ready", timeout=30)
                assert ready.status_code == 503
                assert ready.json()["reason"] == "store_unavailable"
                assert {p["reason"] for p in ready.json()["problems"]} == {
                    "store_unavailable",
                    "worker_failing",
                }
                assert httpx.get(f"{service.url}/v1/health", timeout=10).status_code == 200
    finally:
        for name in blocked:
            postgres_server.unblock(name)
    for service in services.values():
        wait_until(
            lambda s=service: httpx.get(f"{s.url}/v1/ready", timeout=30).status_code == 200,
            timeout=60,
            what=f"{service.role} ready again",
        )
    dep.client(seed=4).submit_many([DOMAIN[i % 5] for i in range(100)], per_request=50)
    dep.wait_aggregated(100)
    for role, service in services.items():
        log = service.log_path.read_text()
        step = "dispatcher step" if role == "shuffler" else "aggregation step"
        assert "Traceback" not in log, log
        assert log.count(f"{step} failed") == 1, log
        assert log.count(f"{step} succeeds again") == 1, log
        assert log.count("not ready:") == 1 and log.count("ready again") == 1, log


def _service(role: str, dep: Deployment, store: str | None, env: dict[str, str]) -> ServiceProcess:
    args = ["--task", str(dep.workdir / "task.json")]
    args += ["--forward-token-file", str(dep.workdir / "forward.token")]
    if store is not None:
        args += ["--store", store]
    if role == "analyzer":
        args += ["--key", str(dep.workdir / "analyzer.key")]
    else:
        args += ["--forward", "http://127.0.0.1:9"]
    return ServiceProcess(role, args, dep.workdir / role, env=env)


def _start_stop(service: ServiceProcess) -> str:
    """Start, check readiness, stop; return the log."""
    service.workdir.mkdir(parents=True, exist_ok=True)
    try:
        service.start()
        assert httpx.get(f"{service.url}/v1/ready", timeout=10).status_code == 200
        cmdline = Path(f"/proc/{service.pid}/cmdline").read_bytes()
    finally:
        service.stop()
    return cmdline.decode(errors="replace") + service.log_path.read_text()


@pytest.mark.slow
def test_a_postgres_password_stays_off_the_command_line(tmp_path, postgres_server):
    password = f"pw-{uuid.uuid4().hex}"
    user = postgres_server.create_password_user(password)
    dep = make_deployment(tmp_path / "dep", start=False)
    host = f"{postgres_server.host}:{postgres_server.port}"
    databases = [_dbname(postgres_server.create_database(owner=user)) for _ in range(4)]
    url = [f"postgresql://{user}@{host}/{name}" for name in databases]
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"{postgres_server.host}:{postgres_server.port}:*:{user}:{password}\n")
    passfile.chmod(0o600)

    seen = [
        # libpq's PGPASSWORD, the URL on the command line names no password
        _start_stop(_service("analyzer", dep, url[0], {"PGPASSWORD": password})),
        # libpq's PGPASSFILE
        _start_stop(_service("shuffler", dep, url[1], {"PGPASSFILE": str(passfile)})),
        # the whole URL, password included, in SHUFFLEDP_STORE
        _start_stop(
            _service(
                "analyzer",
                dep,
                None,
                {"SHUFFLEDP_STORE": f"postgresql://{user}:{password}@{host}/{databases[2]}"},
            )
        ),
    ]
    for text in seen:
        assert password not in text
    # A wrong password, or none: one line, exit 2, the password never shown.
    wrong = f"wrong-{uuid.uuid4().hex}"
    cases = [
        {"SHUFFLEDP_STORE": f"postgresql://{user}:{wrong}@{host}/{databases[3]}"},
        {"PGPASSWORD": wrong, "SHUFFLEDP_STORE": url[3]},
        {"SHUFFLEDP_STORE": url[3], "PGPASSFILE": str(tmp_path / "none")},
    ]
    for env in cases:
        done = subprocess.run(
            [sys.executable, "-m", "shuffledp", "serve", "analyzer",
             "--task", str(dep.workdir / "task.json"), "--key", str(dep.workdir / "analyzer.key"),
             "--forward-token-file", str(dep.workdir / "forward.token"),
             "--listen", "127.0.0.1:0"],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, **env},
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "password" in lines[0], done.stderr
        assert wrong not in done.stderr and password not in done.stderr
    # and the stores of the good starts hold the task's tables
    for name in databases[:3]:
        with postgres_server.connect(name) as conn:
            assert conn.execute("SELECT COUNT(*) FROM meta").fetchone()[0] > 0


# -- every option from the environment -----------------------------------------------------


@pytest.mark.parametrize("role", ["shuffler", "analyzer"])
def test_help_names_a_variable_for_every_option(role):
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "serve", role, "--help"],
        capture_output=True, text=True, timeout=60, check=True,
        env={**os.environ, "COLUMNS": "400"},
    )  # fmt: skip
    options = set(re.findall(r"^  (--[a-z-]+)", done.stdout, re.MULTILINE))
    assert {"--store", "--task", "--listen", "--metrics-token-file"} <= options
    for option in options - {"--help"}:
        variable = "SHUFFLEDP_" + option[2:].upper().replace("-", "_")
        assert f"[env {variable}]" in done.stdout, option


def test_a_service_configured_by_environment_variables_flags_winning(tmp_path):
    dep = make_deployment(tmp_path / "dep", start=False)
    env = {
        "SHUFFLEDP_TASK": str(dep.workdir / "task.json"),
        "SHUFFLEDP_KEY": str(dep.workdir / "analyzer.key"),
        "SHUFFLEDP_FORWARD_TOKEN_FILE": str(dep.workdir / "forward.token"),
        "SHUFFLEDP_STORE": f"sqlite:///{tmp_path / 'from-env.db'}",
        "SHUFFLEDP_MAX_BATCH_USERS": "150",
        "SHUFFLEDP_MAX_BODY_BYTES": "1x",  # not a number: the flag below wins
    }
    service = ServiceProcess(
        "analyzer",
        ["--store", f"sqlite:///{tmp_path / 'from-flag.db'}", "--max-body-bytes", "20000"],
        tmp_path,
        env=env,
    )
    try:
        service.start()
        assert httpx.get(f"{service.url}/v1/ready", timeout=10).status_code == 200
        # SHUFFLEDP_MAX_BATCH_USERS: a batch of 151 users is refused, 150 is not too large
        for users, reason in ((151, "batch_too_large"), (150, "implausible_batch")):
            answer = httpx.post(
                f"{service.url}/v1/batches",
                json={
                    "format": BATCH_FORMAT, "task_id": dep.task.task_id, "batch_id": new_id(),
                    "n_users": users, "n_messages": 0, "payload": "",
                },
                headers={"Authorization": f"Bearer {dep.forward_token}"},
                timeout=10,
            )  # fmt: skip
            assert answer.json()["reason"] == reason, answer.text
        # --max-body-bytes 20000 (the flag) and not the variable's value
        big = httpx.post(
            f"{service.url}/v1/batches",
            content=b"x" * 20_001,
            headers={"Authorization": f"Bearer {dep.forward_token}", **JSON},
            timeout=10,
        )
        assert big.status_code == 413 and "20000" in big.json()["error"]
    finally:
        service.stop()
    assert (tmp_path / "from-flag.db").exists() and not (tmp_path / "from-env.db").exists()


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("SHUFFLEDP_MAX_CONNECTIONS", "many", "expected an integer, got 'many'"),
        ("SHUFFLEDP_MAX_CONNECTIONS", "0", "--max-connections must be an integer >= 1, got 0"),
        ("SHUFFLEDP_HEADER_TIMEOUT", "soon", "expected a number, got 'soon'"),
        ("SHUFFLEDP_LISTEN", "nowhere", "--listen must be HOST:PORT, got 'nowhere'"),
    ],
)
def test_a_bad_variable_is_one_line_naming_it(tmp_path, variable, value, fragment):
    dep = make_deployment(tmp_path / "dep", start=False)
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "serve", "shuffler",
         "--task", str(dep.workdir / "task.json"), "--store", f"sqlite:///{tmp_path / 's.db'}",
         "--forward", "http://127.0.0.1:9",
         "--forward-token-file", str(dep.workdir / "forward.token")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, variable: value},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], done.stderr
    if variable != "SHUFFLEDP_LISTEN":  # checked by the service itself, under the flag's name
        assert f"(from {variable})" in lines[0]
    assert not (tmp_path / "s.db").exists()


# -- the test processes themselves ---------------------------------------------------------


def test_a_service_ends_when_its_parent_is_killed(tmp_path):
    dep = make_deployment(tmp_path / "dep", start=False)
    script = textwrap.dedent(
        f"""
        import sys, time
        from shuffledp.service.processes import ServiceProcess
        service = ServiceProcess("shuffler", {dep.shuffler.args!r}, {str(tmp_path)!r})
        service.start()
        print(service.pid, flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert Path(f"/proc/{pid}").exists()
        parent.send_signal(signal.SIGKILL)  # no cleanup code of the parent runs
        parent.wait()
        wait_until(lambda: _gone(pid), timeout=60, what=f"service {pid} to end")
    finally:
        parent.kill()
        parent.wait()
    assert "stdin closed" in (tmp_path / "shuffler.log").read_text()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # ended, not yet reaped by init


def test_a_failed_start_leaves_no_process(tmp_path):
    dep = make_deployment(tmp_path / "dep", start=False)
    service = ServiceProcess("analyzer", dep.analyzer.args, tmp_path)
    service.launch()
    pid = service.pid
    with pytest.raises(ServiceStartError):
        service.wait_started(timeout=0.01)  # too short for any start
    assert pid is not None and _gone(pid)


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "1"]], ids=["one", "xdist"])
def test_the_session_end_check_fails_a_run_that_leaves_a_service(tmp_path, workers):
    """Also through a pytest-xdist worker, whose own exit status the run would not show:
    the root conftest (copied as the tests' root) reports the worker's lines."""
    inner = tmp_path / "service"
    inner.mkdir()
    for name in ("conftest.py", "_deploy.py", "_postgres.py"):
        (inner / name).write_text((HERE / name).read_text())
    for name in ("conftest.py", "figure_checks.py"):
        (tmp_path / name).write_text((HERE.parent / name).read_text())
    (inner / "test_leak.py").write_text(
        textwrap.dedent(
            """
            from pathlib import Path

            from shuffledp.service.processes import ServiceProcess

            KEEP = []

            def test_leaks(deploy, tmp_path):
                dep = deploy("krr", min_batch_users=100, start=False)
                service = ServiceProcess("shuffler", dep.shuffler.args, tmp_path)
                service.start()
                KEEP.append(service)  # never stopped
                Path(LEAKED_FILE).write_text(str(service.pid))
            """
        ).replace("LEAKED_FILE", repr(str(tmp_path / "leaked.pid")))
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    leaked = int((tmp_path / "leaked.pid").read_text())
    assert f"pid {leaked}:" in done.stdout and "survived" in done.stdout, done.stdout
    assert _gone(leaked)
    assert os.environ[SESSION_ENV]  # ours, left alone by the inner run


# -- what a service imports before it listens ----------------------------------------------

#: Modules a service does not need to serve: the accountant's questions layer and every
#: certificate behind it, the protocol classes (the analyzer loads them lazily to publish),
#: the statistics, optimisation and signal parts of scipy, and pandas.
NOT_BEFORE_LISTENING = (
    "shuffledp.accounting.api",
    "shuffledp.protocols.base",
    "shuffledp.service.release",
    "scipy.stats",
    "scipy.optimize",
    "scipy.signal",
    "pandas",
)


def _imported(log: str) -> set[str]:
    names = set()
    for line in log.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


@pytest.mark.parametrize("protocol", ["krr", "flip", "correlated", "augmented"])
def test_a_service_listens_without_the_accountant(deploy, protocol):
    """Before: 0.9 to 1.05 CPU seconds of imports (scipy, the accountant, the protocols)
    before the port accepted (benchmarks/service_startup.py); see that script for figures."""
    env = {"PYTHONPROFILEIMPORTTIME": "1"}
    dep = deploy(protocol, min_batch_users=100, shuffler_env=env, analyzer_env=env)
    for service in (dep.shuffler, dep.analyzer):
        imported = _imported(service.log_path.read_text())  # up to its first health check
        assert "shuffledp.service.operations" in imported  # the log does record imports
        assert not imported & set(NOT_BEFORE_LISTENING), imported & set(NOT_BEFORE_LISTENING)
        if protocol != "krr":  # k-RR's task check computes ε₀'s probabilities (its certificate)
            assert "scipy" not in imported, service.role
    # what was left out is loaded when needed: the analyzer publishes
    dep.client(seed=1).submit_many([DOMAIN[i % 5] for i in range(100)], per_request=50)
    dep.wait_aggregated(100)
    release = dep.estimate()
    assert release.status_code == 200 and release.json()["n"] == 100
    assert "shuffledp.service.release" in _imported(dep.analyzer.log_path.read_text())
