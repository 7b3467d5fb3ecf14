"""``shuffledp run per-user`` end to end: outputs, report schema and every bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp._rng import SEEDED_NOT_COVERED
from shuffledp.cli import build_parser, main
from shuffledp.data.synthetic_users import clustered_users

pytest.importorskip("sklearn")

CLASSES = "A,B,C,D,E"


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def users():
    return clustered_users(400, 5, 3, separation=1.0, radius=0.15, total=60, seed=5)


@pytest.fixture
def long_file(tmp_path: Path, users) -> Path:
    lines = ["user,cls,n"]
    for i in range(users.n):
        for j in range(users.d):
            if users.counts[i, j]:
                lines.append(f"u{i},{'ABCDE'[j]},{users.counts[i, j]}")
    path = tmp_path / "long.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _base(path: Path, out: Path) -> list[str]:
    return [
        "run",
        "per-user",
        "--input",
        str(path),
        "--user-column",
        "user",
        "--class-column",
        "cls",
        "--count-column",
        "n",
        "--domain",
        CLASSES,
        "--epsilon",
        "4",
        "--epsilon1",
        "1",
        "--c",
        "0.1",
        "--clusters",
        "3",
        "--seed",
        "1",
        "--output",
        str(out),
    ]


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def test_long_input_writes_table_and_report(long_file, tmp_path, capsys, users):
    out, report = tmp_path / "est.csv", tmp_path / "rep.json"
    code, stdout, err = _run([*_base(long_file, out), "--report", str(report)], capsys)
    assert code == 0, err
    assert stdout == ""
    header, rows = _read_csv(out)
    assert header == ["user", *CLASSES.split(",")]
    assert [r[0] for r in rows] == [f"u{i}" for i in range(users.n)]  # input order
    values = np.array([[float(x) for x in r[1:]] for r in rows])
    assert values.shape == (users.n, 5)
    # Well-separated clusters: the released rows stay closer to each user's histogram than a
    # random other user's true histogram is (what a uniform shuffle would give, before noise).
    others = users.normalized[np.random.default_rng(0).permutation(users.n)]
    baseline = np.abs(others - users.normalized).sum(axis=1).mean()
    assert np.abs(values - users.normalized).sum(axis=1).mean() < 0.75 * baseline
    result = json.loads(report.read_text())
    assert result["protocol"] == "per-user" and result["n"] == users.n
    assert result["classes"] == CLASSES.split(",")
    privacy = result["privacy"]
    assert privacy["epsilon"] == 4.0 and privacy["delta"] == 0.0
    assert privacy["method"] == "per-user-laplace-local" and privacy["bound"] == "upper"
    # A seeded run (--seed in _base) says so: its shuffle is not cryptographic.
    assert not privacy["covers_release"] and privacy["not_covered"] == [SEEDED_NOT_COVERED]
    assert result["parameters"]["seed"] == privacy["parameters"]["seed"] == 1
    # The default relation, in words: up to floor(c s) items moved, which covers the L1 reading.
    assert "moving at most floor(0.1*s) of its items" in privacy["neighbouring"]
    assert "this includes every H' with ||H - H'||_1 <= floor(0.1*s)" in privacy["neighbouring"]
    params = result["parameters"]
    assert params["neighbouring"] == "moved-items" and params["l1_sensitivity"] == 0.2
    assert params["laplace_scale_t"] == pytest.approx(2 * 0.1 / 3.0)  # Alg. 1's 2c/epsilon2
    assert params["release"] == "t" and params["epsilon2"] == 3.0 and params["clusters"] == 3
    text = report.read_text()
    for word in ("n_groups", "group_size", '"permutation"', "true_labels", '"labels"'):
        assert word not in text
    assert "groups by size" in err and "operator only" in err


def test_reproducible_with_seed(long_file, tmp_path, capsys):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert _run([*_base(long_file, a), "--quiet"], capsys)[0] == 0
    code, stdout, err = _run([*_base(long_file, b), "--quiet"], capsys)
    assert code == 0 and err == ""
    assert a.read_text() == b.read_text()
    assert json.loads(stdout)["protocol"] == "per-user"  # report on stdout without --report


def test_wide_parquet_round_trip_and_release_r(tmp_path, capsys, users):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    source = tmp_path / "wide.parquet"
    columns = {"id": [f"p{i}" for i in range(users.n)]}
    for j, label in enumerate(CLASSES.split(",")):
        columns[label] = users.counts[:, j]
    pq.write_table(pa.table(columns), source)
    out = tmp_path / "est.parquet"
    argv = [
        "run",
        "per-user",
        "--input",
        str(source),
        "--wide",
        "--user-column",
        "id",
        "--domain",
        CLASSES,
        "--epsilon",
        "3",
        "--epsilon1",
        "1",
        "--c",
        "0.2",
        "--clustering",
        "dbscan",
        "--eps-radius",
        "0.2",
        "--max-diameter",
        "0.4",
        "--release",
        "r",
        "--neighbouring",
        "l1-distance",
        "--seed",
        "2",
        "--output",
        str(out),
        "--report",
        str(tmp_path / "r.json"),
    ]
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    table = pq.read_table(out)
    assert table.column_names == ["id", *CLASSES.split(",")]
    assert table.column("id").to_pylist() == columns["id"]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["parameters"]["release"] == "r"
    assert report["parameters"]["neighbouring"] == "l1-distance"
    assert report["parameters"]["laplace_scale_t"] == pytest.approx(0.2 / 2)  # c / epsilon2
    assert report["parameters"]["max_diameter"] == 0.4
    assert "||H - H'||_1 <= floor(0.2*s)" in report["privacy"]["neighbouring"]
    assert "only (6, 0, c)-hDP" in report["privacy"]["notes"]


def test_wide_without_domain_flags_the_header(tmp_path, capsys):
    source = tmp_path / "w.csv"
    source.write_text("A,B,C\n1,2,0\n0,1,1\n3,0,0\n")
    out = tmp_path / "o.csv"
    argv = [
        "run",
        "per-user",
        "--input",
        str(source),
        "--wide",
        "--epsilon",
        "2",
        "--epsilon1",
        "0.5",
        "--c",
        "0.5",
        "--clusters",
        "1",
        "--output",
        str(out),
    ]
    code, stdout, err = _run(argv, capsys)
    assert code == 0, err
    header, rows = _read_csv(out)
    assert header == ["user", "A", "B", "C"] and [r[0] for r in rows] == ["1", "2", "3"]
    result = json.loads(stdout)
    assert result["domain_source"] == "header" and not result["privacy"]["covers_release"]
    assert "warning: not covered" in err


def _bad_cases(long_file: Path, tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    zero = tmp_path / "zero.csv"
    zero.write_text("user,cls,n\nu1,A,1\nu2,B,0\n")
    negative = tmp_path / "neg.csv"
    negative.write_text("user,cls,n\nu1,A,1\nu2,B,-3\n")
    out = tmp_path / "out.csv"

    def with_(path: Path, *extra: str, output: Path = out) -> list[str]:
        argv = _base(path, output)
        for flag, value in zip(extra[::2], extra[1::2], strict=True):
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        return argv

    return {
        "zero total": (with_(zero, "--clusters", "1"), "user 'u2' has total count 0"),
        "negative": (with_(negative, "--clusters", "1"), "user 'u2' has count '-3'"),
        "eps1 = eps": (with_(long_file, "--epsilon1", "4"), "--epsilon1 must be < --epsilon"),
        "eps1 > eps": (with_(long_file, "--epsilon1", "5"), "--epsilon1 must be < --epsilon"),
        "c = 0": (with_(long_file, "--c", "0"), r"--c must be a number in (0, 1]"),
        "c > 1": (with_(long_file, "--c", "1.5"), r"--c must be a number in (0, 1]"),
        "unknown column": (with_(long_file, "--class-column", "genre"), "column 'genre' is not"),
        "output is input": (with_(long_file, output=long_file), "is the input file"),
        "suffix": (with_(long_file, output=tmp_path / "o.txt"), "unsupported table format"),
        "outside domain": (with_(long_file, "--domain", "A,B,C,D"), "class 'E'"),
        "no clusters": (
            [a for a in with_(long_file) if a not in ("--clusters", "3")],
            "--clustering kmeans needs --clusters",
        ),
        "dbscan without radius": (
            with_(long_file, "--clustering", "dbscan", "--clusters", "3"),
            "--clusters is for --clustering kmeans",
        ),
        "old calibration flag": (
            with_(long_file, "--calibration", "proven"),
            "--calibration was replaced by --neighbouring (got --calibration proven)",
        ),
        "unknown neighbouring": (
            with_(long_file, "--neighbouring", "l1"),
            "argument --neighbouring: invalid choice: 'l1'",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "zero total",
        "negative",
        "eps1 = eps",
        "eps1 > eps",
        "c = 0",
        "c > 1",
        "unknown column",
        "output is input",
        "suffix",
        "outside domain",
        "no clusters",
        "dbscan without radius",
        "old calibration flag",
        "unknown neighbouring",
    ],
)
def test_bad_input_one_line_exit_2_no_output(case, long_file, tmp_path, capsys):
    argv, message = _bad_cases(long_file, tmp_path)[case]
    before = long_file.read_text()
    code, stdout, err = _run(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert stdout == ""
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "o.txt").exists()
    assert long_file.read_text() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_more_clusters_than_users(tmp_path, capsys):
    path = tmp_path / "small.csv"
    path.write_text("user,cls\na,A\nb,B\n")
    argv = _base(path, tmp_path / "o.csv")
    argv.remove("--count-column")
    argv.remove("n")
    code, _, err = _run(argv, capsys)
    assert code == 2 and "--clusters must be at most the number of users, 2" in err
    assert not (tmp_path / "o.csv").exists()


def test_wide_rejects_long_layout_options(long_file, tmp_path, capsys):
    argv = [*_base(long_file, tmp_path / "o.csv"), "--wide"]
    code, _, err = _run(argv, capsys)
    assert code == 2 and "--class-column is for the long layout" in err


def test_long_layout_needs_a_domain(long_file, tmp_path, capsys):
    argv = _base(long_file, tmp_path / "o.csv")
    i = argv.index("--domain")
    del argv[i : i + 2]
    code, _, err = _run(argv, capsys)
    assert code == 2 and "needs the public classes" in err


def test_every_option_has_help():
    parser = build_parser()
    run = next(a for a in parser._actions if getattr(a, "choices", None) and "run" in a.choices)
    sub = run.choices["run"]
    per_user = next(a for a in sub._actions if getattr(a, "choices", None)).choices["per-user"]
    for action in per_user._actions:
        assert action.help, action.option_strings
