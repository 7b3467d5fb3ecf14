"""Privacy hygiene of `shuffledp run`: a public domain, one value per user, nothing silent."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shuffledp._rng import SEEDED_NOT_COVERED
from shuffledp.cli import main

RUN = ["--column", "city", "--epsilon", "1", "--delta", "0.05", "--path", "count", "--seed", "1"]


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _assert_bad(argv, capsys, fragment, *never_written):
    code, out, err = _run(argv, capsys)
    assert code == 2, err
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0], lines[0]
    for path in never_written:
        assert not Path(path).exists()


def _csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "".join(f"{r}\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def neighbours(tmp_path):
    """Two files that differ in the last user's value (B in one, C in the other)."""
    base = ["A", "A", "A", "B", "B", "B", "A"]
    return (
        _csv(tmp_path / "one.csv", "city", [*base, "B"]),
        _csv(tmp_path / "two.csv", "city", [*base, "C"]),
    )


@pytest.mark.parametrize("protocol", ["flip", "krr", "correlated"])
def test_domain_is_required_public_input(neighbours, capsys, protocol):
    one, _ = neighbours
    _assert_bad(["run", protocol, "--input", str(one), *RUN], capsys, "--domain")


@pytest.mark.parametrize("protocol", ["flip", "krr", "correlated"])
def test_declared_domain_does_not_depend_on_the_data(neighbours, capsys, protocol):
    results = []
    for path in neighbours:
        code, out, err = _run(
            ["run", protocol, "--input", str(path), *RUN, "--domain", "A,B,C"], capsys
        )
        assert code == 0, err
        results.append(json.loads(out))
    assert results[0]["domain"] == results[1]["domain"] == ["A", "B", "C"]
    for result in results:
        assert result["domain_source"] == "declared"
        assert result["privacy"]["domain_covered"] is True
        # The declared domain adds nothing; the only item is the seed's (RUN has --seed).
        assert result["privacy"]["not_covered"] == [SEEDED_NOT_COVERED]
        assert result["privacy"]["covers_release"] is False
        assert result["parameters"]["seed"] == 1
    # Without a seed (OS entropy, cryptographic shuffle) the release is fully covered.
    assert RUN[-2:] == ["--seed", "1"]
    unseeded = RUN[:-2]
    code, out, err = _run(
        ["run", protocol, "--input", str(neighbours[0]), *unseeded, "--domain", "A,B,C"], capsys
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["privacy"]["not_covered"] == [] and result["privacy"]["covers_release"] is True
    assert "seed" not in result["parameters"]


def test_domain_from_data_is_flagged_as_not_covered(neighbours, capsys):
    domains = []
    for path in neighbours:
        code, out, err = _run(
            ["run", "flip", "--input", str(path), *RUN, "--unsafe-domain-from-data"], capsys
        )
        assert code == 0, err
        result = json.loads(out)
        domains.append(result["domain"])
        assert result["domain_source"] == "inferred-from-data"
        privacy = result["privacy"]
        assert privacy["domain_covered"] is False and privacy["covers_release"] is False
        assert any("domain" in item for item in privacy["not_covered"])
        assert "not covered by the guarantee" in err
    # Exactly the leak the flag warns about: the released domain differs between neighbours.
    assert domains == [["A", "B"], ["A", "B", "C"]]


def test_domain_file_and_builtin_domain(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", "city", ['"Paris, France"', '"Lyon, France"'] * 20)
    domain_file = tmp_path / "domain.txt"
    domain_file.write_text("Paris, France\nLyon, France\nNice, France\n")
    code, out, err = _run(
        ["run", "krr", "--input", str(data), *RUN, "--domain-file", str(domain_file)], capsys
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["domain"] == ["Paris, France", "Lyon, France", "Nice, France"]
    assert result["domain_source"] == "file"
    days = _csv(tmp_path / "days.csv", "city", ["Monday", "Sunday"] * 10)
    code, out, err = _run(
        ["run", "flip", "--input", str(days), *RUN, "--domain-name", "weekdays"], capsys
    )
    assert code == 0, err
    result = json.loads(out)
    assert len(result["domain"]) == 7 and result["domain_source"] == "builtin:weekdays"


def test_values_outside_the_domain_error_or_other(neighbours, capsys):
    _, two = neighbours
    _assert_bad(["run", "flip", "--input", str(two), *RUN, "--domain", "A,B"], capsys, "'C'")
    code, out, err = _run(
        ["run", "flip", "--input", str(two), *RUN, "--domain", "A,B", "--other", "other"], capsys
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["domain"] == ["A", "B", "other"]
    assert any("--other" in note for note in result["notes"])
    # The operator sees the count on stderr; the release does not carry it.
    assert "1" in err and "other" in err
    assert not any(ch.isdigit() for note in result["notes"] for ch in note)


def test_one_row_per_user_is_stated_or_enforced(tmp_path, capsys):
    rows = [f"{u},{c}" for u, c in [(1, "A"), (2, "B"), (2, "B"), (3, "A"), (3, "C"), (4, "C")]]
    data = _csv(tmp_path / "u.csv", "user,city", rows)
    argv = ["run", "krr", "--input", str(data), *RUN, "--domain", "A,B,C"]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["n"] == 6
    assert any("different user" in a for a in result["privacy"]["assumptions"])
    assert "assumed one row per user" in err
    _assert_bad([*argv, "--user-column", "user"], capsys, "2 users in column 'user'")
    for rule in ("first", "sample"):
        code, out, err = _run([*argv, "--user-column", "user", "--per-user", rule], capsys)
        assert code == 0, err
        result = json.loads(out)
        assert result["n"] == 4
        assert result["input"]["user_column"] == "user"
        assert any("exactly one value" in a for a in result["privacy"]["assumptions"])
    _assert_bad([*argv, "--per-user", "first"], capsys, "--per-user first needs --user-column")


def test_output_and_plot_never_overwrite_the_input(neighbours, tmp_path, capsys):
    one, _ = neighbours
    before = one.read_bytes()
    argv = ["run", "flip", "--input", str(one), *RUN, "--domain", "A,B"]
    _assert_bad([*argv, "--output", str(one)], capsys, "is the input file")
    _assert_bad([*argv, "--plot", str(one)], capsys, "is the input file")
    same = tmp_path / "same.png"
    _assert_bad([*argv, "--output", str(same), "--plot", str(same)], capsys, "same file", same)
    assert one.read_bytes() == before


def test_plot_format_is_checked_before_any_work(neighbours, tmp_path, capsys):
    one, _ = neighbours
    argv = ["run", "flip", "--input", str(one), *RUN, "--domain", "A,B"]
    out = tmp_path / "out.json"
    _assert_bad(
        [*argv, "--plot", str(tmp_path / "x.txt"), "--output", str(out)],
        capsys,
        "unsupported image format '.txt'",
        out,
    )
    _assert_bad(
        [*argv, "--plot", str(tmp_path / "chart"), "--output", str(out)],
        capsys,
        "has no extension",
        out,
    )
    code, _, err = _run([*argv, "--plot", str(tmp_path / "chart.svg")], capsys)
    assert code == 0, err
    assert (tmp_path / "chart.svg").read_text().lstrip().startswith("<?xml")


def test_summary_on_stderr_unless_quiet(neighbours, tmp_path, capsys):
    one, _ = neighbours
    out = tmp_path / "r.json"
    argv = ["run", "flip", "--input", str(one), *RUN, "--domain", "A,B", "--output", str(out)]
    code, stdout, err = _run(argv, capsys)
    assert code == 0 and stdout == ""
    assert "8 users" in err and "2 bins" in err and str(out) in err and "-DP" in err
    code, stdout, err = _run([*argv, "--quiet"], capsys)
    assert code == 0 and stdout == "" and err == ""


def test_adjusted_parameters_are_stated(tmp_path, capsys):
    one = _csv(tmp_path / "one.csv", "city", ["A"])
    argv = ["run", "flip", "--input", str(one), "--column", "city", "--epsilon", "1"]
    argv += ["--delta", "1e-6", "--domain", "A,B", "--path", "count"]
    code, out, err = _run([*argv, "--calibration", "paper"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["parameters"]["fake_users"] > 100
    assert any("raised from the default 100" in note for note in result["notes"])
    assert "raised from the default 100" in err
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    assert json.loads(out)["parameters"]["fake_users"] == 100
    krr = ["run", "krr", *argv[2:]]
    code, out, err = _run(krr, capsys)
    assert code == 0, err
    assert any("no amplification" in note for note in json.loads(out)["notes"])
    assert "no amplification" in err


def test_real_file_options(tmp_path, capsys):
    path = tmp_path / "excel.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8-sig") as handle:
        handle.write("id;city\n1;Paris\n2;NA\n3;Lyon\n4;\n5;Paris\n")
    argv = ["run", "flip", "--input", str(path), *RUN, "--domain", "Paris,Lyon"]
    _assert_bad(argv, capsys, "missing")
    code, out, err = _run([*argv, "--drop-missing"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["n"] == 3
    assert any("missing" in item for item in result["privacy"]["not_covered"])
    assert "2" in err  # the operator is told how many rows were dropped
    latin = tmp_path / "latin.csv"
    latin.write_bytes("city\nZürich\nGenève\n".encode("latin-1"))
    argv = ["run", "krr", "--input", str(latin), *RUN, "--domain", "Zürich,Genève"]
    _assert_bad(argv, capsys, "--encoding")
    code, out, err = _run([*argv, "--encoding", "latin-1"], capsys)
    assert code == 0, err
    assert json.loads(out)["n"] == 2


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--domain-file", "/nonexistent/domain.txt"], "does not exist"),
        (["--domain-name", "planets"], "planets"),
        (["--domain", "A,B", "--domain-name", "weekdays"], "not allowed with"),
        (["--domain", "A,B", "--delimiter", ";;"], "delimiter"),
        (["--domain", "A,B", "--encoding", "klingon"], "klingon"),
        (["--domain", "A,B", "--user-column", "nobody"], "nobody"),
        (["--domain", "A,B", "--per-user", "oldest"], "invalid choice"),
        (["--domain", "A,B", "--per-user", "sample"], "needs --user-column"),
        (["--domain", "A,B", "--other", ""], "other"),
        (["--unsafe-domain-from-data", "--other", "Z"], "--other"),
        (["--domain", "A,B", "--seed", "x"], "expected an integer"),
    ],
)
def test_new_flags_bad_input(neighbours, tmp_path, capsys, extra, fragment):
    one, _ = neighbours
    out = tmp_path / "never.json"
    argv = ["run", "flip", "--input", str(one), *RUN[:-2], "--output", str(out), *extra]
    _assert_bad(argv, capsys, fragment, out)


def test_python_dash_m(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "shuffledp", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.startswith("shuffledp ")
    proc = subprocess.run(
        [sys.executable, "-m", "shuffledp", "run", "flip", "--input", "x.csv"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_large_domain_plot_is_legible(tmp_path, capsys):
    labels = [f"c{j}" for j in range(50_001)]
    domain_file = tmp_path / "cells.txt"
    domain_file.write_text("\n".join(labels) + "\n")
    data = _csv(tmp_path / "cells.csv", "city", [labels[j % 300] for j in range(20_000)])
    plot = tmp_path / "cells.png"
    argv = ["run", "flip", "--input", str(data), "--column", "city", "--epsilon", "1"]
    argv += ["--delta", "1e-6", "--domain-file", str(domain_file), "--plot", str(plot)]
    argv += ["--output", str(tmp_path / "cells.json"), "--quiet"]
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    assert plot.stat().st_size > 1000
    assert len(json.loads((tmp_path / "cells.json").read_text())["domain"]) == 50_001
