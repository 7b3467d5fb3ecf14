"""The service commands: task create/tokens, client submit, serve errors, publish, demo --deploy."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
from _deploy import DOMAIN, stored_counts

from shuffledp.cli import main
from shuffledp.schemas import schema_id, validate
from shuffledp.service.task import load_private_key, load_task
from shuffledp.service.tokens import load_token_key, verify_token


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_bad(argv, capsys, fragment):
    code, out, err = _run(argv, capsys)
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]


def test_task_create_and_tokens(tmp_path, capsys):
    argv = [
        "task", "create", "--protocol", "krr", "--domain", "a, b ,c", "--epsilon", "1",
        "--delta", "1e-6", "--min-batch-users", "1000", "--one-submission-per-client",
        "--out", str(tmp_path / "task.json"), "--key-out", str(tmp_path / "analyzer.key"),
        "--forward-token-out", str(tmp_path / "fwd.token"),
        "--token-key-out", str(tmp_path / "token.key"),
    ]  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    assert "digest" in err
    task = load_task(tmp_path / "task.json")
    assert task.domain == ("a", "b", "c") and task.min_batch_users == 1000
    validate(json.loads((tmp_path / "task.json").read_text()), "task")
    assert task.one_submission_per_client and task.protocol == "krr"
    load_private_key(tmp_path / "analyzer.key", task)
    for name in ("analyzer.key", "fwd.token", "token.key"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600
    key_text = (tmp_path / "analyzer.key").read_text().strip()
    assert key_text not in (tmp_path / "task.json").read_text()

    # Running it again never overwrites a secret.
    _assert_bad(argv, capsys, "already exists")
    assert (tmp_path / "analyzer.key").read_text().strip() == key_text

    code, out, err = _run(
        ["task", "tokens", "--task", str(tmp_path / "task.json"),
         "--key-file", str(tmp_path / "token.key"), "--count", "5"],
        capsys,
    )  # fmt: skip
    assert code == 0
    tokens = out.split()
    key = load_token_key(tmp_path / "token.key")
    assert len({verify_token(key, task.task_id, t) for t in tokens}) == 5
    code, _, _ = _run(
        ["task", "tokens", "--task", str(tmp_path / "task.json"),
         "--key-file", str(tmp_path / "token.key"), "--count", "3",
         "--out", str(tmp_path / "tokens.txt")],
        capsys,
    )  # fmt: skip
    assert code == 0 and len((tmp_path / "tokens.txt").read_text().split()) == 3
    assert stat.S_IMODE(os.stat(tmp_path / "tokens.txt").st_mode) == 0o600


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--epsilon", "0"], "--epsilon"),
        (["--min-batch-users", "1"], "--min-batch-users"),
        (["--one-submission-per-client"], "--token-key-out"),
        (["--domain", "a,a"], "repeats"),
    ],
)
def test_task_create_bad_input(tmp_path, capsys, extra, fragment):
    base = {
        "--protocol": "flip", "--domain": "a,b", "--epsilon": "1", "--delta": "1e-6",
        "--min-batch-users": "100", "--out": str(tmp_path / "t.json"),
        "--key-out": str(tmp_path / "k"),
    }  # fmt: skip
    for flag, value in zip(extra[::2], extra[1::2], strict=False):
        base[flag] = value
    argv = ["task", "create", *[x for kv in base.items() for x in kv]]
    if extra == ["--one-submission-per-client"]:
        argv.append("--one-submission-per-client")
    _assert_bad(argv, capsys, fragment)
    assert not (tmp_path / "k").exists() and not (tmp_path / "t.json").exists()


def test_tokens_for_a_task_without_them(tmp_path, capsys):
    assert _run(
        ["task", "create", "--protocol", "flip", "--domain-name", "weekdays", "--epsilon", "1",
         "--delta", "1e-6", "--min-batch-users", "100", "--out", str(tmp_path / "t.json"),
         "--key-out", str(tmp_path / "k"), "--token-key-out", str(tmp_path / "tk")],
        capsys,
    )[0] == 0  # fmt: skip
    _assert_bad(
        ["task", "tokens", "--task", str(tmp_path / "t.json"), "--key-file", str(tmp_path / "tk"),
         "--count", "2"],
        capsys,
        "does not admit one submission per client",
    )  # fmt: skip


@pytest.mark.slow
def test_client_submit_serve_errors_and_publish(deploy, tmp_path, capsys):
    dep = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    task_file = str(dep.workdir / "task.json")
    from shuffledp.service.tokens import issue_tokens

    tokens = issue_tokens(dep.token_key, dep.task.task_id, 2)
    url_task = f"{dep.shuffler.url}/v1/tasks/{dep.task.task_id}"
    code, out, err = _run(
        ["client", "submit", "--task", url_task, "--task-digest", dep.task.digest(),
         "--shuffler", dep.shuffler.url, "--value", "red", "--token", tokens[0]],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    answer = json.loads(out)
    assert answer["task_id"] == dep.task.task_id and answer["messages"] == 1
    assert out.count("\n") == 1 and answer["schema"] == schema_id("submission")
    validate(answer)
    base = ["client", "submit", "--task", task_file, "--shuffler", dep.shuffler.url]
    _assert_bad([*base, "--value", "red", "--token", tokens[0]], capsys, "client_already_submitted")
    _assert_bad(
        [*base, "--value", "mauve", "--token", tokens[1]], capsys, "not in the task's domain"
    )
    _assert_bad([*base, "--value", "red"], capsys, "client token is needed")
    _assert_bad(
        ["client", "submit", "--task", url_task, "--task-digest", "0" * 64,
         "--shuffler", dep.shuffler.url, "--value", "red", "--token", tokens[1]],
        capsys,
        "digest",
    )  # fmt: skip

    serve = ["serve", "shuffler", "--task", task_file, "--forward", dep.analyzer.url,
             "--forward-token-file", str(dep.workdir / "forward.token"),
             "--listen", "127.0.0.1:0"]  # fmt: skip
    _assert_bad([*serve, "--store", f"sqlite:///{tmp_path / 's.db'}"], capsys, "--token-key-file")
    _assert_bad(
        [*serve, "--store", f"sqlite:///{dep.analyzer_db}", "--token-key-file",
         str(dep.workdir / "token.key")],
        capsys,
        "belongs to the analyzer",
    )  # fmt: skip
    _assert_bad([*serve, "--store", "postgresql://db"], capsys, "must name its database")
    keyed = [*serve, "--store", f"sqlite:///{tmp_path / 's.db'}", "--token-key-file",
             str(dep.workdir / "token.key")]  # fmt: skip
    for flag, value, fragment in (
        ("--header-timeout", "0", "--header-timeout must be a positive number of seconds, got 0"),
        ("--body-timeout", "inf", "--body-timeout must be a positive number of seconds, got inf"),
        ("--max-connections", "0", "--max-connections must be an integer >= 1, got 0"),
    ):
        _assert_bad([*keyed, flag, value], capsys, fragment)
    _assert_bad(
        ["serve", "analyzer", "--task", task_file, "--key", str(dep.workdir / "analyzer.key"),
         "--store", f"sqlite:///{tmp_path / 'a.db'}", "--listen", "127.0.0.1:0",
         "--forward-token-file", str(dep.workdir / "forward.token"), "--max-batch-users", "99"],
        capsys,
        "--max-batch-users must be an integer >= 100, got 99",
    )  # fmt: skip
    _assert_bad(
        ["serve", "analyzer", "--task", task_file, "--key", str(dep.workdir / "forward.token"),
         "--store", f"sqlite:///{tmp_path / 'a.db'}",
         "--forward-token-file", str(dep.workdir / "forward.token")],
        capsys,
        "private key",
    )  # fmt: skip

    from shuffledp.service.client import Client

    rest = issue_tokens(dep.token_key, dep.task.task_id, 99)
    with Client(dep.task, dep.shuffler.url, token=rest[0]) as client:
        client.submit_many([DOMAIN[i % 5] for i in range(99)], tokens=rest)
    dep.wait_aggregated(100)
    out_file = tmp_path / "release.json"
    code, out, err = _run(
        ["analyzer", "publish", "--task", task_file, "--store", f"sqlite:///{dep.analyzer_db}",
         "--output", str(out_file)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    release = json.loads(out_file.read_text())
    assert release["n"] == 100 and sum(release["estimate"]["counts"]) == pytest.approx(100)
    assert release["schema"] == schema_id("release")
    validate(release)
    assert stored_counts(dep).sum() == 100


@pytest.mark.slow
def test_demo_deploy(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "shuffledp", "demo", "--deploy", "--n", "2000", "--seed", "1",
         "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=180,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "published" in result.stdout and "services stopped" in result.stdout
    release = json.loads((tmp_path / "out" / "flip_deploy.json").read_text())
    assert release["n"] == 2000 and release["protocol"] == "flip"
    assert release["schema"] == schema_id("demo")
    validate(release)
    assert release["linf_error"] < 60
    assert not list(tmp_path.glob("**/*.db"))  # the stores were temporary
    # Seeded clients (a child stream of --seed, independent of the data's): the release
    # says so, and the estimate is unbiased. FLIP's debiased count of bin j has variance
    # n(1 + k)·q(1 − q)/(1 − 2q)² (every bit of the n(1 + k) vectors flipped w.p. q); 4.5
    # standard errors over the 100 bins fail by chance with probability about 7e-4.
    assert release["parameters"]["seed"] == 1
    assert any("seeded" in item for item in release["privacy"]["not_covered"])
    assert release["privacy"]["covers_release"] is False
    q, k = release["parameters"]["q"], release["parameters"]["fake_users"]
    truth = np.asarray(release["true_counts"], dtype=float)
    se = math.sqrt(2000 * (1 + k) * q * (1 - q)) / (1 - 2 * q)
    z = (np.asarray(release["estimate"]["counts"]) - truth) / se
    assert np.all(np.abs(z) < 4.5), z
