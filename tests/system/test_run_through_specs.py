"""``run correlated`` calibrates through its spec, which holds what a run may count on.

A correlated run may count on one user's noise shares (an input of one user, or
``--min-honest 1``): the spec holds ``min_honest = 1`` (a task holds at least 2,
its ``min_batch_users``), and the release states the m its certificate counts on,
with a δ within the target. Two honest users are stated as two.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shuffledp.cli import main

DOMAIN = "Lyon,Nice,Paris,Rome"


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
    ("n", "extra"), [(200, ["--min-honest", "1"]), (200, ["--min-honest", "0.001"]), (1, [])]
)
def test_one_honest_user_is_run_and_stated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], n: int, extra: list[str]
) -> None:
    output = tmp_path / "release.json"
    code, _, err = _run(capsys, _users(tmp_path, n), output, *extra)
    assert code == 0, err
    release = json.loads(output.read_text())
    assert release["parameters"]["min_honest"] == 1 and release["n"] == n
    assert release["privacy"]["delta"] <= 1e-6


def test_two_honest_users_are_enough_and_the_release_states_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "release.json"
    code, _, err = _run(capsys, _users(tmp_path, 200), output, "--min-honest", "2")
    assert code == 0, err
    release = json.loads(output.read_text())
    assert release["parameters"]["min_honest"] == 2 and release["n"] == 200
