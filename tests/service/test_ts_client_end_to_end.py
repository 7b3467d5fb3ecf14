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
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _deploy import DOMAIN
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
