"""The TypeScript client in Node (its CLI) against the real shuffler and analyzer.

300 users' values go through ``node clients/ts/build/src/cli.js submit --values-file``
(the task pinned by its digest) to a real deployment (tests/service/_deploy.py) of a
correlated and a k-RR task at min_batch_users = 100; the analyzer must count every
message the receipts report, open every one, and publish an estimate within the error its
release states (thresholds in _ts_client.check_end_to_end: the correlated error's exact law,
Bernstein's inequality from k-RR's stated stderr, at 1e-6 split over the bins).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _deploy import DOMAIN, stored_counts, wait_until
from _ts_client import CLI, check_end_to_end, node, read_receipts, run_node

pytestmark = pytest.mark.slow

USERS = 300


def _values(seed: int) -> list[str]:
    """The users' values (test input; the clients' randomness is the OS CSPRNG)."""
    rng = np.random.default_rng(seed)
    return [DOMAIN[i] for i in rng.choice(len(DOMAIN), size=USERS, p=[0.4, 0.3, 0.15, 0.1, 0.05])]


@pytest.mark.parametrize("protocol", ["correlated", "krr"])
def test_ts_cli_submits_to_the_real_services(deploy, tmp_path: Path, protocol: str):
    dep = deploy(protocol, min_batch_users=100)
    values = _values(11)
    values_file = tmp_path / "values.txt"
    values_file.write_text("\n".join(values) + "\n", encoding="utf-8")
    result = run_node(
        CLI, "submit",
        "--task", dep.workdir / "task.json",
        "--task-digest", dep.task.digest(),
        "--shuffler", dep.shuffler.url,
        "--values-file", values_file,
        "--per-request", "20",
        timeout=180,
    )  # fmt: skip
    receipts = read_receipts(result.stdout, dep.task.task_id, USERS)
    assert f"{USERS} submissions" in result.stderr
    counts = [r["messages"] for r in receipts]
    if protocol == "krr":
        assert counts == [1] * USERS
    else:
        assert min(counts) >= 1 and max(counts) <= dep.task.max_messages_per_submission
    release = check_end_to_end(dep, values, receipts)
    assert release["service"]["batches"] == 3


def test_ts_cli_value_and_refusals(deploy, tmp_path: Path):
    dep = deploy("krr", min_batch_users=100)
    task_file = dep.workdir / "task.json"
    one = run_node(CLI, "submit", "--task", task_file, "--shuffler", dep.shuffler.url,
                   "--value", DOMAIN[2])  # fmt: skip
    [receipt] = read_receipts(one.stdout, dep.task.task_id, 1)
    assert receipt["messages"] == 1
    assert dep.shuffler_metrics()["users_waiting"] == 1

    def refused(*args: str | Path) -> str:
        command = [node(), str(CLI), "submit", *map(str, args)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        return result.stderr

    base = ["--task", task_file, "--shuffler", dep.shuffler.url]
    assert "differs from the expected" in refused(
        *base, "--task-digest", "0" * 64, "--value", "red"
    )
    assert "not in the task's domain" in refused(*base, "--value", "purple")
    bad = tmp_path / "bad.txt"
    bad.write_text("red\npurple\n", encoding="utf-8")
    assert 'line 2: "purple" is not in the task\'s domain' in refused(*base, "--values-file", bad)
    good = tmp_path / "good.txt"
    good.write_text("red\nblue\n", encoding="utf-8")
    assert "does not admit one submission per client" in refused(
        *base, "--values-file", good, "--tokens-file", good
    )
    assert "http(s)://" in refused("--task", task_file, "--shuffler", "ftp://x", "--value", "red")
    other = json.loads(task_file.read_text())
    other["protocol"] = "segmented"
    strange = tmp_path / "strange.json"
    strange.write_text(json.dumps(other))
    refusal = refused("--task", strange, "--shuffler", dep.shuffler.url, "--value", "red")
    assert 'unsupported protocol "segmented"' in refusal
    # Nothing refused reached the shuffler.
    assert dep.shuffler_metrics()["users_waiting"] == 1


def test_ts_cli_tokens_one_submission_per_client(deploy, tmp_path: Path):
    from shuffledp.service.tokens import issue_tokens

    dep = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    values = _values(5)[:100]
    values_file = tmp_path / "values.txt"
    values_file.write_text("\n".join(values) + "\n", encoding="utf-8")
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text("\n".join(issue_tokens(dep.token_key, dep.task.task_id, 100)) + "\n")
    tokens_file.chmod(0o600)
    base = ["--task", dep.workdir / "task.json", "--shuffler", dep.shuffler.url]
    result = run_node(CLI, "submit", *base, "--values-file", values_file,
                      "--tokens-file", tokens_file, "--quiet")  # fmt: skip
    assert result.stderr == ""
    read_receipts(result.stdout, dep.task.task_id, 100)
    dep.wait_aggregated(100)
    # The same clients again, with fresh submissions: the shuffler refuses the first (409).
    again = subprocess.run(
        [node(), str(CLI), "submit", *map(str, base), "--values-file", str(values_file),
         "--tokens-file", str(tokens_file)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert again.returncode == 2 and again.stdout == ""
    assert "HTTP 409, client_already_submitted" in again.stderr
    assert "nothing was stored" in again.stderr
    assert dep.analyzer_metrics()["users_aggregated"] == 100


# -- Ctrl-C while a request is in flight, --resend ---------------------------------------


def _queued_bytes(port: int) -> int:
    """Bytes waiting in the receive queues of the TCP connections to 127.0.0.1:``port``.

    A stopped server's kernel still accepts connections and queues what they send: this
    tells when a client's request has reached it.
    """
    total = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if int(local.split(":")[1], 16) == port and state == "01":  # ESTABLISHED
            total += int(queues.split(":")[1], 16)
    return total


def test_ts_cli_ctrl_c_in_flight_then_resend_counts_everyone_once(deploy, tmp_path: Path):
    """Ctrl-C while the (SIGSTOPped) real shuffler holds a request: the request is saved,
    resent by the TS command and again by Python's; a file Python's client wrote is resent
    by the TS command; every user is counted exactly once."""
    from shuffledp.service.client import request_body_text
    from shuffledp.service.secretfile import write_secret_file

    dep = deploy("krr", min_batch_users=100)
    values = _values(7)[:100]
    values_file = tmp_path / "values.txt"
    values_file.write_text("\n".join(values) + "\n", encoding="utf-8")
    task_file = dep.workdir / "task.json"
    base = [CLI, "submit", "--task", task_file, "--shuffler", dep.shuffler.url]
    shuffler = dep.shuffler.pid
    assert shuffler is not None
    os.kill(shuffler, signal.SIGSTOP)
    try:
        child = subprocess.Popen(
            [node(), *map(str, base), "--values-file", str(values_file), "--per-request", "40"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            # 40 submissions of one 72-character ciphertext each: the request has arrived.
            wait_until(lambda: _queued_bytes(dep.shuffler.port) >= 40 * 72, 60, "a request")
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
    finally:
        os.kill(shuffler, signal.SIGCONT)
    assert child.returncode == 130, err
    assert out == ""
    [saved] = tmp_path.glob("shuffledp-in-flight-lines-1-40-*.json")
    assert err == (
        "shuffledp-client: interrupted: nothing was stored; lines 1-40 in flight, maybe stored: "
        f"saved as sent in {saved} (resend them with --resend {saved}: the same submission ids, "
        "which the shuffler stores once); lines 41-100 not sent (resume with --first-line 41)\n"
    )
    assert saved.stat().st_mode & 0o777 == 0o600
    sent = json.loads(saved.read_text())["submissions"]
    assert len(sent) == 40

    resent = run_node(*base, "--resend", saved, "--quiet")
    receipts = read_receipts(resent.stdout, dep.task.task_id, 40)
    assert [r["submission_id"] for r in receipts] == [s["submission_id"] for s in sent]
    # Lines 41-60 from a file Python's client wrote (what `shuffledp client submit` saves).
    python_file = tmp_path / "python-in-flight.json"
    prepared = dep.client().prepare_many(values[40:60])
    write_secret_file(python_file, request_body_text(prepared))
    from_python = run_node(*base, "--resend", python_file, "--quiet")
    receipts += read_receipts(from_python.stdout, dep.task.task_id, 20)
    assert [r["submission_id"] for r in receipts[40:]] == [s.submission_id for s in prepared]
    rest = run_node(*base, "--values-file", values_file, "--first-line", "61", "--quiet")
    receipts += read_receipts(rest.stdout, dep.task.task_id, 40)
    # Python's command resends the TS file once more: answered as stored, not stored twice.
    again = subprocess.run(
        [sys.executable, "-m", "shuffledp", "client", "submit", "--task", str(task_file),
         "--shuffler", dep.shuffler.url, "--resend", str(saved), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert len(again.stdout.splitlines()) == 40
    check_end_to_end(dep, values, receipts)
    assert dep.shuffler_metrics()["users_waiting"] == 0


# -- HTTPS with --ca-file -----------------------------------------------------------------


def test_ts_cli_over_https_with_a_private_ca(deploy, tmp_path: Path):
    """Both services on HTTPS with a self-signed certificate: refused without --ca-file, the
    task fetched and 100 users submitted with it; the analyzer counts every message."""
    from _browsers import self_signed_certificate, serve_over_tls

    cert, key = self_signed_certificate(tmp_path)
    dep = deploy("krr", min_batch_users=100, start=False)
    serve_over_tls(dep, cert, key)
    assert dep.shuffler.url.startswith("https://")
    task_url = f"{dep.shuffler.url}/v1/tasks/{dep.task.task_id}"
    base = [str(CLI), "submit", "--task", task_url, "--shuffler", dep.shuffler.url]

    def refused(*args: str) -> str:
        result = subprocess.run([node(), *base, *args], capture_output=True, text=True,
                                timeout=60, check=False)  # fmt: skip
        assert result.returncode == 2 and result.stdout == "", result.stderr
        return result.stderr

    without = refused("--value", "red")
    assert len(without.strip().splitlines()) == 1, without
    assert "self-signed certificate" in without and "DEPTH_ZERO_SELF_SIGNED_CERT" in without
    assert "cannot read CA certificates" in refused("--value", "red", "--ca-file", "/dev/null")
    values = _values(3)[:100]
    values_file = tmp_path / "values.txt"
    values_file.write_text("\n".join(values) + "\n", encoding="utf-8")
    result = run_node(*base, "--ca-file", cert, "--task-digest", dep.task.digest(),
                      "--values-file", values_file, "--per-request", "25", timeout=180)  # fmt: skip
    receipts = read_receipts(result.stdout, dep.task.task_id, 100)
    assert "100 submissions (100 encrypted messages) in 4 requests" in result.stderr
    with dep.analyzer.http() as analyzer, dep.shuffler.http() as shuffler:

        def aggregated() -> bool:
            metrics = analyzer.get(f"{dep.analyzer.url}/v1/metrics").json()
            return bool(metrics.get("users_aggregated") == 100)

        wait_until(aggregated, 60, "100 users aggregated over HTTPS")
        metrics = analyzer.get(f"{dep.analyzer.url}/v1/metrics").json()
        assert metrics.get("messages_undecryptable", 0) == 0
        release = analyzer.get(f"{dep.analyzer.url}/v1/estimate", timeout=60).json()
        assert release["n"] == 100
        assert shuffler.get(f"{dep.shuffler.url}/v1/metrics").json()["users_waiting"] == 0
    assert int(stored_counts(dep).sum()) == sum(r["messages"] for r in receipts) == 100
