"""``run`` calibrates through the protocol's spec: what a spec cannot hold is refused.

A correlated spec's ``min_honest`` is at least 2 (a task's ``min_batch_users``;
its schema says so), and ``run correlated`` now calibrates through
``CorrelatedSpec.calibrated``: a ``--min-honest`` (or an input) that leaves one
user whose noise shares the guarantee counts on is refused with one line
naming the flag, before the calibration and without writing the release.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shuffledp.cli import main

DOMAIN = "Lyon,Nice,Paris,Rome"
REST = "the correlated spec needs at least 2 users whose noise shares the guarantee counts on"


def _users(directory: Path, n: int) -> Path:
    cities = DOMAIN.split(",")
    path = directory / "users.csv"
    path.write_text("city\n" + "".join(f"{cities[i % 4]}\n" for i in range(n)))
    return path


def _run(
    capsys: pytest.CaptureFixture[str], users: Path, output: Path, *extra: str
) -> tuple[int, str, str]:
    argv = ["run", "correlated", "--input", str(users), "--column", "city", "--domain", DOMAIN,
            "--epsilon", "1", "--delta", "1e-6", "--seed", "1", "--quiet", "--output",
            str(output), *extra]  # fmt: skip
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("n", "extra", "said"),
    [
        (200, ["--min-honest", "1"], "--min-honest 1 is 1 user of n=200"),
        (200, ["--min-honest", "0.001"], "--min-honest 0.001 is 1 user of n=200"),
        (1, [], "--min-honest (default: all n users) is 1 user of n=1"),
    ],
)
def test_one_honest_user_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int, extra: list[str], said: str
) -> None:
    output = tmp_path / "never.json"
    code, out, err = _run(capsys, _users(tmp_path, n), output, *extra)
    assert (code, out) == (2, "") and not output.exists()
    assert err == f"shuffledp: error: {said}; {REST}\n"


def test_two_honest_users_are_enough_and_the_release_states_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "release.json"
    code, _, err = _run(capsys, _users(tmp_path, 200), output, "--min-honest", "2")
    assert code == 0, err
    release = json.loads(output.read_text())
    assert release["parameters"]["min_honest"] == 2 and release["n"] == 200
