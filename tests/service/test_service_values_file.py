"""``client submit --values-file``: many users from one process, against real services on loopback.

Every line is its own user (own randomness, own submission id, own token when
the task needs one), ``--per-request`` of them per HTTP request; stdout gets
one receipt a line, stderr one summary line. Bad input stops before anything
is sent, in one line naming the flag.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _deploy import DOMAIN, stored_counts, stored_payloads

from shuffledp.cli import main
from shuffledp.schemas import schema_id, validate
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.tokens import issue_tokens
from shuffledp.service.wire import CIPHERTEXT_LENGTH, MessageOpener

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("shuffledp"))


def _values_file(path: Path, values: list[str]) -> Path:
    path.write_text("".join(f"{v}\n" for v in values), encoding="utf-8")
    return path


def _submit(dep, *extra: str) -> subprocess.CompletedProcess[str]:
    """``shuffledp client submit`` as its own process, against the deployment's shuffler."""
    return subprocess.run(
        [EXE, "client", "submit", "--task", str(dep.workdir / "task.json"),
         "--shuffler", dep.shuffler.url, *extra],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _receipts(out: str, task_id: str) -> list[dict]:
    receipts = [json.loads(line) for line in out.splitlines()]
    for receipt in receipts:
        validate(receipt)
        assert receipt["schema"] == schema_id("submission") and receipt["task_id"] == task_id
    assert len({r["submission_id"] for r in receipts}) == len(receipts)
    return receipts


def test_every_line_is_its_own_user_with_its_own_randomness(deploy, tmp_path):
    dep = deploy("krr", min_batch_users=100)
    # Every user holds the same value: shared randomness would send one report 150 times.
    values = _values_file(tmp_path / "values.txt", ["red"] * 150)
    done = _submit(dep, "--values-file", str(values), "--per-request", "40")
    assert done.returncode == 0, done.stderr
    receipts = _receipts(done.stdout, dep.task.task_id)
    assert len(receipts) == 150 and all(r["messages"] == 1 for r in receipts)
    summary = done.stderr.strip().splitlines()
    assert len(summary) == 1, done.stderr
    assert summary[0].startswith("shuffledp client submit: 150 submissions (150 encrypted")
    assert "in 4 requests of at most 40" in summary[0]

    metrics = dep.shuffler_metrics()
    assert metrics["submissions_accepted"] == 150 and metrics["requests_accepted"] == 4
    dep.wait_aggregated(120)  # 3 requests reach 100 waiting: one batch of 120 users
    opener = MessageOpener(dep.key, dep.task.task_id, dep.task.message_domain_size)
    reports = [
        opener.open(payload[i : i + CIPHERTEXT_LENGTH])
        for payload in stored_payloads(dep)
        for i in range(0, len(payload), CIPHERTEXT_LENGTH)
    ]
    assert len(reports) == 120 == stored_counts(dep).sum()
    counts = np.bincount(reports, minlength=len(DOMAIN))
    # k-RR keeps 'red' with probability p < 1: independent users report other values too.
    assert 0 < counts[0] < 120 and counts[1:].sum() > 0

    # '-' reads the values from stdin.
    piped = subprocess.run(
        [EXE, "client", "submit", "--task", str(dep.workdir / "task.json"),
         "--shuffler", dep.shuffler.url, "--values-file", "-"],
        input="green\nblue\r\ncyan\n", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert len(_receipts(piped.stdout, dep.task.task_id)) == 3
    assert dep.shuffler_metrics()["submissions_accepted"] == 153


def test_tokens_file_one_token_per_line_and_a_second_run_is_refused(deploy, tmp_path):
    dep = deploy("flip", min_batch_users=100, one_submission_per_client=True)
    values = _values_file(tmp_path / "values.txt", [DOMAIN[i % 5] for i in range(100)])
    tokens = tmp_path / "tokens.txt"
    done = subprocess.run(
        [EXE, "task", "tokens", "--task", str(dep.workdir / "task.json"),
         "--key-file", str(dep.workdir / "token.key"), "--count", "100", "--out", str(tokens)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = _submit(dep, "--values-file", str(values), "--tokens-file", str(tokens))
    assert done.returncode == 0, done.stderr
    receipts = _receipts(done.stdout, dep.task.task_id)
    assert len(receipts) == 100
    # FLIP's users send a random number of messages: not one law for the whole file.
    assert len({r["messages"] for r in receipts}) > 1
    assert "in 1 request of at most 100" in done.stderr
    dep.wait_aggregated(100)
    assert stored_counts(dep).sum() == sum(r["messages"] for r in receipts)

    again = _submit(dep, "--values-file", str(values), "--tokens-file", str(tokens))
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.count("\n") == 1 and "Traceback" not in again.stderr
    assert "client_already_submitted" in again.stderr and "nothing was stored" in again.stderr
    assert dep.shuffler_metrics()["submissions_accepted"] == 100


def test_a_refused_request_says_which_lines_were_stored(deploy, tmp_path):
    dep = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    tokens = issue_tokens(dep.token_key, dep.task.task_id, 100)
    # Token 50 (line 50, in the second request of 40) was used by its client already.
    with dep.client(token=tokens[49]) as client:
        client.submit("blue")
    write_secret_file(tmp_path / "tokens.txt", "\n".join(tokens) + "\n")
    values = _values_file(tmp_path / "values.txt", [DOMAIN[i % 5] for i in range(100)])
    done = _submit(
        dep, "--values-file", str(values), "--tokens-file", str(tmp_path / "tokens.txt"),
        "--per-request", "40",
    )  # fmt: skip
    assert done.returncode == 2
    assert len(_receipts(done.stdout, dep.task.task_id)) == 40
    (line,) = done.stderr.splitlines()
    assert "client_already_submitted" in line
    stored = "lines 1-40 of 100 were stored (their receipts are on stdout), lines 41-100 were not"
    assert stored in line
    assert dep.shuffler_metrics()["submissions_accepted"] == 1 + 40


def _bad(argv: list[str], capsys, fragment: str) -> None:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    (line,) = err.splitlines()
    assert fragment in line and "Traceback" not in err, line


def test_bad_input_is_one_line_naming_the_flag_and_sends_nothing(deploy, tmp_path, capsys):
    plain = deploy("krr", min_batch_users=100)
    keyed = deploy("krr", min_batch_users=100, one_submission_per_client=True)
    values = _values_file(tmp_path / "values.txt", ["red", "green", "mauve", "blue"])
    good = _values_file(tmp_path / "good.txt", ["red", "green", "blue"])
    empty = _values_file(tmp_path / "empty.txt", [])
    tokens = tmp_path / "tokens.txt"
    write_secret_file(tokens, "\n".join(issue_tokens(keyed.token_key, keyed.task.task_id, 2)))

    def base(dep) -> list[str]:
        return ["client", "submit", "--task", str(dep.workdir / "task.json"),
                "--shuffler", dep.shuffler.url]  # fmt: skip

    _bad([*base(plain), "--values-file", str(values)], capsys,
         "--values-file: line 3: 'mauve' is not in the task's domain")  # fmt: skip
    _bad([*base(plain), "--values-file", str(empty)], capsys, "holds no values")
    _bad([*base(plain), "--values-file", str(tmp_path / "absent.txt")], capsys, "--values-file")
    _bad([*base(plain), "--values-file", str(good), "--per-request", "0"], capsys,
         "--per-request must be an integer >= 1, got 0")  # fmt: skip
    _bad([*base(plain), "--value", "red", "--per-request", "5"], capsys,
         "--per-request goes with --values-file")  # fmt: skip
    _bad([*base(plain), "--values-file", str(good), "--token", "x"], capsys,
         "--token is one client's token")  # fmt: skip
    _bad([*base(plain), "--values-file", str(good), "--tokens-file", str(tokens)], capsys,
         "--tokens-file: task")  # fmt: skip
    _bad([*base(keyed), "--values-file", str(good)], capsys,
         "--tokens-file is needed")  # fmt: skip
    _bad([*base(keyed), "--values-file", str(good), "--tokens-file", str(tokens)], capsys,
         "--tokens-file holds 2 tokens for 3 values")  # fmt: skip
    _bad(["client", "submit", "--task", "t.json", "--shuffler", "http://x"], capsys,
         "one of the arguments --value --values-file --resend is required")  # fmt: skip
    for dep in (plain, keyed):
        assert dep.shuffler_metrics().get("requests_accepted", 0) == 0


def test_requests_stay_within_the_shuffler_s_default_body_limit(deploy, tmp_path):
    """Correlated users at d = 100, min_batch_users 100 send ~610 messages each (~45 KiB).

    100 of them (the default --per-request) make a body of about 4.4 MiB, past the
    shuffler's default 4 MiB: the client sends fewer per request instead of a 413.
    """
    domain = [f"v{i}" for i in range(100)]
    dep = deploy("correlated", min_batch_users=100, domain=domain)
    values = _values_file(tmp_path / "values.txt", [domain[i % 100] for i in range(200)])
    done = _submit(dep, "--values-file", str(values))
    assert done.returncode == 0, done.stderr
    receipts = _receipts(done.stdout, dep.task.task_id)
    assert len(receipts) == 200
    metrics = dep.shuffler_metrics()
    assert metrics["submissions_accepted"] == 200 and not metrics.get("rejected")
    requests = metrics["requests_accepted"]
    # Every ciphertext takes at least 74 bytes of a body (72 base64 characters, 2 quotes);
    # the 200 users' ~122,000 messages (standard deviation ~2,200) need 3 bodies of 4 MiB.
    messages = sum(r["messages"] for r in receipts)
    assert requests >= max(3, -(-messages * 74 // (4 * 1024 * 1024)))
    assert f"in {requests} requests of at most 100" in done.stderr
