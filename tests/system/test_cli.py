"""The command line: success paths, JSON schema and every bad-input case."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shuffledp.cli import main


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    cities = np.array(["Lyon", "Paris", "Nice", "Rome"])[
        rng.choice(4, size=3000, p=[0.1, 0.5, 0.3, 0.1])
    ]
    path = tmp_path / "users.csv"
    path.write_text("user,city\n" + "".join(f"{i},{c}\n" for i, c in enumerate(cities)))
    return path


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_bad(argv, capsys, fragment, output=None):
    code, out, err = _run(argv, capsys)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]
    if output is not None:
        assert not Path(output).exists()


DOMAIN = "Lyon,Nice,Paris,Rome"
BASE = ["run", "flip", "--column", "city", "--epsilon", "1", "--delta", "1e-6", "--domain", DOMAIN]


def test_run_flip_json_schema(csv_file, tmp_path, capsys):
    out_path = tmp_path / "out.json"
    plot_path = tmp_path / "out.png"
    code, out, err = _run(
        [
            *BASE,
            "--input",
            str(csv_file),
            "--seed",
            "3",
            "--output",
            str(out_path),
            "--plot",
            str(plot_path),
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out_path.read_text())
    assert result["protocol"] == "flip"
    assert result["n"] == 3000
    assert result["domain"] == ["Lyon", "Nice", "Paris", "Rome"]
    est = result["estimate"]
    assert len(est["counts"]) == len(est["frequencies"]) == len(est["stderr"]) == 4
    assert sum(est["counts"]) == pytest.approx(3000, abs=6 * 2 * est["stderr"][0])
    privacy = result["privacy"]
    assert privacy["epsilon"] == 1.0
    assert 0 < privacy["delta"] <= 1e-6
    assert privacy["method"] == "flip-exact"
    assert privacy["bound"] == "upper"
    assert set(result["parameters"]) >= {"q", "fake_users"}
    assert result["parameters"]["fake_users"] == 100
    assert result["messages_per_user"] >= 0.9
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The same seed reproduces the run.
    code, out, _ = _run([*BASE, "--input", str(csv_file), "--seed", "3"], capsys)
    assert json.loads(out)["estimate"] == result["estimate"]


def test_run_flip_paper_calibration_and_domain(csv_file, capsys):
    code, out, err = _run(
        [
            *BASE[:-2],
            "--input",
            str(csv_file),
            "--calibration",
            "paper",
            "--domain",
            "Rome,Paris,Nice,Lyon,Oslo",
            "--fake-users",
            "20",
            "--path",
            "count",
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["domain"] == ["Rome", "Paris", "Nice", "Lyon", "Oslo"]
    assert result["parameters"]["calibration"] == "paper"
    assert result["parameters"]["fake_users"] == 20
    assert result["path"] == "count"
    assert result["privacy"]["delta"] <= 1e-6


def test_run_flip_parquet(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"city": ["a", "b", "c"] * 100}), path)
    code, out, err = _run([*BASE[:-2], "--domain", "a,b,c", "--input", str(path)], capsys)
    assert code == 0, err
    assert json.loads(out)["n"] == 300


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--epsilon", "0"], "--epsilon must be a finite number > 0"),
        (["--epsilon", "-1"], "--epsilon must be a finite number > 0"),
        (["--epsilon", "abc"], "expected a number"),
        (["--delta", "0"], "--delta must be in the open interval (0, 1)"),
        (["--delta", "1"], "--delta must be in the open interval (0, 1)"),
        (["--delta", "1.5"], "--delta must be in the open interval (0, 1)"),
        (["--fake-users", "-1"], "--fake-users must be an integer >= 0"),
        (["--domain", "Lyon,Paris"], "is not in the domain"),
        (["--domain", "Lyon,,Paris"], "empty label"),
        (["--column", "town"], "column 'town' is not in"),
        (["--calibration", "magic"], "invalid choice"),
    ],
)
def test_run_flip_bad_input(csv_file, tmp_path, capsys, extra, fragment):
    output = tmp_path / "never.json"
    _assert_bad(
        [*BASE, "--input", str(csv_file), "--output", str(output), *extra], capsys, fragment, output
    )


def test_run_flip_missing_and_empty_files(tmp_path, capsys):
    output = tmp_path / "never.json"
    _assert_bad(
        [*BASE, "--input", str(tmp_path / "nope.csv"), "--output", str(output)],
        capsys,
        "does not exist",
        output,
    )
    folder = tmp_path / "a-folder"
    folder.mkdir()
    _assert_bad(
        [*BASE, "--input", str(folder), "--output", str(output)],
        capsys,
        "is not a regular file",
        output,
    )
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _assert_bad([*BASE, "--input", str(empty), "--output", str(output)], capsys, "is empty", output)
    header_only = tmp_path / "header.csv"
    header_only.write_text("user,city\n")
    _assert_bad(
        [*BASE, "--input", str(header_only), "--output", str(output)],
        capsys,
        "no data rows",
        output,
    )
    _assert_bad(
        [*BASE, "--input", str(header_only), "--output", str(tmp_path / "no-dir" / "x.json")],
        capsys,
        "does not exist",
    )


def test_paper_calibration_too_few_fake_users(csv_file, capsys):
    _assert_bad(
        [*BASE, "--input", str(csv_file), "--calibration", "paper", "--fake-users", "0"],
        capsys,
        "fake_users must be an integer >= 1",
    )


def test_account_flip_json(capsys):
    code, out, err = _run(
        [
            "account",
            "flip",
            "--n",
            "100000",
            "--domain-size",
            "100",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out)
    for key in ("paper", "exact"):
        assert set(result[key]) >= {"q", "fake_users", "delta", "linf_error", "stderr"}
        assert result[key]["delta"] <= 1e-6
    assert result["exact"]["q"] < result["paper"]["q"]
    assert result["exact"]["linf_error"] < result["paper"]["linf_error"]


def test_account_flip_table_and_unavailable_paper(capsys):
    code, out, _ = _run(
        [
            "account",
            "flip",
            "--n",
            "1000",
            "--domain-size",
            "10",
            "--epsilon",
            "1",
            "--delta",
            "0.1",
        ],
        capsys,
    )
    assert code == 0
    assert "paper calibration unavailable" in out and "< 1/32" in out
    code, out, _ = _run(
        [
            "account",
            "flip",
            "--n",
            "1000",
            "--domain-size",
            "10",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
        ],
        capsys,
    )
    assert code == 0
    assert "flip probability q" in out and "x smaller" in out


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--n", "0"], "--n must be an integer >= 1"),
        (["--domain-size", "1"], "--domain-size must be an integer >= 2"),
        (["--epsilon", "0"], "--epsilon must be"),
        (["--delta", "2"], "--delta must be"),
        (["--fake-users", "-3"], "--fake-users must be"),
    ],
)
def test_account_flip_bad_input(capsys, extra, fragment):
    argv = [
        "account",
        "flip",
        "--n",
        "100",
        "--domain-size",
        "5",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        *extra,
    ]
    _assert_bad(argv, capsys, fragment)


def test_missing_arguments_one_line(capsys):
    _assert_bad(["run", "flip"], capsys, "required")
    _assert_bad([], capsys, "required")


def test_demo_small(tmp_path, capsys):
    code, out, err = _run(
        [
            "demo",
            "--n",
            "5000",
            "--domain-size",
            "20",
            "--seed",
            "1",
            "--output-dir",
            str(tmp_path / "demo"),
        ],
        capsys,
    )
    assert code == 0, err
    assert "l-inf error" in out and "top-10" in out
    result = json.loads((tmp_path / "demo" / "flip_demo.json").read_text())
    assert result["n"] == 5000 and len(result["true_counts"]) == 20
    assert (tmp_path / "demo" / "flip_demo.png").stat().st_size > 1000


def test_console_script_process(tmp_path):
    exe = Path(sys.executable).with_name("shuffledp")
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("shuffledp ")
    proc = subprocess.run(
        [
            str(exe),
            "run",
            "flip",
            "--input",
            str(tmp_path / "x.csv"),
            "--column",
            "c",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--domain",
            "a,b",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr


def test_account_amplify_json_rows(capsys):
    code, out, err = _run(
        [
            "account",
            "amplify",
            "--epsilon0",
            "2",
            "--n",
            "2000",
            "--delta",
            "1e-6",
            "--mechanism",
            "krr",
            "--k",
            "10",
            "--n-x0",
            "1500",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert {r["method"] for r in rows} >= {"erlingsson2019", "vr2024", "krr-blanket", "biswas2023"}
    for r in rows:
        assert set(r) >= {"method", "epsilon", "delta", "bound"}
        assert r["bound"] in {"upper", "exact", "lower", "reproduction"}


def test_account_delta_table_and_single_method(capsys):
    code, out, _ = _run(
        ["account", "delta", "--epsilon", "0.3", "--epsilon0", "1", "--n", "5000"], capsys
    )
    assert code == 0
    assert "fmt2021-numeric" in out and "vr2024" in out
    code, out, _ = _run(
        [
            "account",
            "delta",
            "--epsilon",
            "0.3",
            "--epsilon0",
            "1",
            "--n",
            "5000",
            "--method",
            "vr2024",
            "--json",
        ],
        capsys,
    )
    rows = json.loads(out)["rows"]
    assert len(rows) == 1 and rows[0]["method"] == "vr2024" and rows[0]["bound"] == "upper"


def test_account_calibrate(capsys):
    code, out, _ = _run(
        [
            "account",
            "calibrate",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--n",
            "5000",
            "--mechanism",
            "krr",
            "--k",
            "10",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    result = json.loads(out)
    assert result["parameter"] == "epsilon0" and result["delta"] <= 1e-6


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["account", "amplify", "--n", "100", "--delta", "1e-6"], "--epsilon0 is required"),
        (
            ["account", "amplify", "--epsilon0", "1", "--n", "100", "--delta", "0"],
            "--delta must be",
        ),
        (
            ["account", "delta", "--epsilon", "-1", "--epsilon0", "1", "--n", "100"],
            "--epsilon must be",
        ),
        (["account", "delta", "--epsilon", "1", "--epsilon0", "1", "--n", "0"], "--n must be"),
        (
            [
                "account",
                "delta",
                "--epsilon",
                "1",
                "--epsilon0",
                "1",
                "--n",
                "10",
                "--mechanism",
                "krr",
            ],
            "--k",
        ),
        (
            [
                "account",
                "delta",
                "--epsilon",
                "1",
                "--epsilon0",
                "1",
                "--n",
                "10",
                "--method",
                "nope",
            ],
            "unknown method",
        ),
        (
            ["account", "delta", "--epsilon", "1", "--epsilon0", "-2", "--n", "10"],
            "epsilon0 must be",
        ),
    ],
)
def test_account_bad_input(capsys, argv, fragment):
    _assert_bad(argv, capsys, fragment)
