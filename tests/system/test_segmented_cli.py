"""``shuffledp run segmented`` and ``shuffledp account segmented`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.schemas import validate

ITEMS = "A,B,C,D,E,F"


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def sets_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    lines = ["user,item,level"]
    for u in range(1500):
        level = ("0.5", "1", "2")[u % 3]
        for item in rng.choice(list("ABCDEF"), size=rng.integers(1, 4), replace=False):
            lines.append(f"user{u},{item},{level}")
    path = tmp_path / "sets.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def base_args(path: Path, out: Path) -> list[str]:
    return [
        "run",
        "segmented",
        "--input",
        str(path),
        "--user-column",
        "user",
        "--item-column",
        "item",
        "--level-column",
        "level",
        "--levels",
        "0.5,1,2",
        "--delta",
        "1e-5",
        "--items-per-user",
        "2",
        "--domain",
        ITEMS,
        "--blanket",
        "1.5",
        "--padding",
        "--seed",
        "4",
        "--output",
        str(out),
    ]


def test_run_segmented_writes_the_release(sets_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    plot = tmp_path / "r.png"
    code, stdout, err = _run([*base_args(sets_file, out), "--plot", str(plot)], capsys)
    assert code == 0, err
    assert stdout == ""
    result = json.loads(out.read_text())
    assert result["protocol"] == "segmented" and result["n"] == 1500
    assert result["domain"] == ITEMS.split(",") and result["domain_source"] == "declared"
    est = result["estimate"]
    assert len(est["frequencies"]) == 6 and len(est["stderr"]) == 6
    np.testing.assert_allclose(est["counts"], 1500 * np.array(est["frequencies"]))
    privacy = result["privacy"]
    assert privacy["method"] == "segmented-poisson-exact"
    assert [level["epsilon"] for level in privacy["levels"]] == [0.5, 1.0, 2.0]
    for level in privacy["levels"]:
        assert level["delta"] <= 1e-5
        assert {"lambda", "lower_bound_delta", "users"} <= set(level)
    assert privacy["level_counts"]["mode"] == "exact"
    assert any("level histogram" in item for item in privacy["not_covered"])
    assert not privacy["covers_release"]
    assert any("shuffler is trusted" in item for item in privacy["assumptions"])
    params = result["parameters"]
    assert params["blanket_rate"] == 1.5 and params["variant"] == "paper"
    assert params["items_per_user"] == 2 and params["padding"] is True
    assert params["error_bound"] > 0 and result["messages_per_user"] > 1.5
    assert any("uniform random sample" in note for note in result["notes"])
    assert plot.stat().st_size > 1000
    assert "shuffledp run segmented: 1500 users" in err
    assert "had fewer than 2 items and were padded" in err  # counts on stderr only
    assert not any("were padded" in note and "user(s)" in note for note in result["notes"])


def test_run_segmented_dp_levels_dummy_count_path(sets_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = [
        *base_args(sets_file, out),
        "--level-counts",
        "dp",
        "--level-epsilon",
        "1",
        "--level-delta",
        "1e-6",
        "--variant",
        "dummy",
        "--path",
        "count",
        "--quiet",
    ]
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    assert err == ""
    result = json.loads(out.read_text())
    counts = result["privacy"]["level_counts"]
    assert counts["mode"] == "dp" and counts["covered"]
    assert counts["privacy"]["epsilon"] == 1.0 and counts["privacy"]["delta"] <= 1e-6
    assert result["privacy"]["method"] == "segmented-dummy-exact"
    assert all("level histogram" not in item for item in result["privacy"]["not_covered"])
    assert result["path"] == "count"


def test_account_segmented_json_and_table(capsys):
    argv = [
        "account",
        "segmented",
        "--n",
        "2000",
        "--domain-size",
        "16",
        "--levels",
        "0.5,1,2",
        "--shares",
        "0.25,0.5,0.25",
        "--items-per-user",
        "2",
        "--delta",
        "1e-6",
        "--blanket",
        "1",
    ]
    code, out, err = _run([*argv, "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["blanket_rate"] == 1.0 and result["messages_per_user"] > 1
    assert result["error_bound"] > 0 and len(result["levels"]) == 3
    assert [level["users"] for level in result["levels"]] == [500, 1000, 500]
    for level in result["levels"]:
        assert {"epsilon", "share", "lambda", "delta", "lower_bound_delta", "paper_lambda"} <= set(
            level
        )
        assert level["delta"] <= 1e-6
    code, out, err = _run([*argv, "--padding"], capsys)
    assert code == 0, err
    assert "message domain 17" in out and "paper lambda" in out


def test_account_segmented_shows_no_lower_bound_where_none_exists(capsys):
    # d = 3 < 3s without padding: no pair of datasets has room for the construction, and the
    # first level has no user. The table shows "-", the JSON null (and validates).
    argv = [
        "account",
        "segmented",
        "--n",
        "30",
        "--domain-size",
        "3",
        "--levels",
        "0.5,1",
        "--shares",
        "0,1",
        "--items-per-user",
        "2",
        "--delta",
        "0.1",
        "--blanket",
        "0.5",
    ]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["0.5"], ["1"])]
    assert len(rows) == 2 and all(row[4] == "-" for row in rows)
    code, out, err = _run([*argv, "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    validate(result)
    assert [level["lower_bound_delta"] for level in result["levels"]] == [None, None]
    # With padding (d' = 4) one slot fits: the populated level gets a number, the empty none.
    code, out, err = _run([*argv, "--padding", "--json"], capsys)
    assert code == 0, err
    levels = json.loads(out)["levels"]
    assert levels[0]["lower_bound_delta"] is None
    assert 0 <= levels[1]["lower_bound_delta"] <= levels[1]["delta"]


def _bad(argv, capsys, out: Path | None = None):
    code, stdout, err = _run(argv, capsys)
    assert code == 2, (stdout, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    if out is not None:
        assert not out.exists()
    return err


CSV_ERRORS = [
    ("user,item,level\nu1,A,0.5\nu2,B,0.7\n", "not one of the levels"),
    ("user,item,level\nu1,A,0.5\nu1,B,1\n", "different levels"),
    ("user,item,level\nu1,A,0.5\nu2,Z,1\n", "not in the domain"),
    ("user,item,level\nu1,A,0.5\nu2,,1\n", "missing"),
    ("user,item,level\nu1,A,\n", "no level"),
    ("user,item,level\n,A,1\n", "no user id"),
    ("user,item,level\n", "no data rows"),
    ("user,thing,level\nu1,A,1\n", "column 'item' is not in"),
]


@pytest.mark.parametrize(("text", "message"), CSV_ERRORS)
def test_run_segmented_bad_data(tmp_path, capsys, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    out = tmp_path / "r.json"
    err = _bad(base_args(path, out), capsys, out)
    assert message in err


def _replace(argv: list[str], flag: str, value: str | None) -> list[str]:
    argv = list(argv)
    at = argv.index(flag)
    if value is None:
        del argv[at : at + 2]
    else:
        argv[at + 1] = value
    return argv


BAD_OPTIONS = [
    ("--levels", "0.5,x", "--levels must be comma-separated numbers"),
    ("--levels", "1,0.5", "strictly increasing"),
    ("--levels", "0,1", "finite numbers > 0"),
    ("--delta", "0", "--delta must be in the open interval"),
    ("--delta", "2", "--delta must be in the open interval"),
    ("--items-per-user", "0", "--items-per-user must be an integer >= 1"),
    ("--items-per-user", "1.5", "expected an integer"),
    ("--blanket", "many", "--blanket must be 'auto' or a number"),
    ("--blanket", "-1", "--blanket must be 'auto' or a finite number > 0"),
    ("--domain", "A", "at least two labels"),
    ("--seed", "-3", "--seed must be an integer >= 0"),
]


@pytest.mark.parametrize(("flag", "value", "message"), BAD_OPTIONS)
def test_run_segmented_bad_options(sets_file, tmp_path, capsys, flag, value, message):
    out = tmp_path / "r.json"
    err = _bad(_replace(base_args(sets_file, out), flag, value), capsys, out)
    assert message in err


def test_run_segmented_more_bad_options(sets_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = base_args(sets_file, out)
    assert "--level-counts dp needs --level-epsilon" in _bad(
        [*argv, "--level-counts", "dp"], capsys, out
    )
    assert "need --level-counts dp" in _bad([*argv, "--level-epsilon", "1"], capsys, out)
    assert "--level-epsilon must be a finite number > 0" in _bad(
        [*argv, "--level-counts", "dp", "--level-epsilon", "0", "--level-delta", "1e-6"],
        capsys,
        out,
    )
    single = _replace(argv, "--levels", "1")
    assert "at least two levels" in _bad(
        [*single, "--level-counts", "dp", "--level-epsilon", "1", "--level-delta", "1e-6"],
        capsys,
        out,
    )
    assert "fewer than --items-per-user 2 items" in _bad(
        [*(a for a in argv if a != "--padding"), "--no-padding"],
        capsys,
        out,
    )
    assert "is the input file" in _bad(_replace(argv, "--output", str(sets_file)), capsys)
    assert "unsupported image format" in _bad([*argv, "--plot", str(tmp_path / "p.txt")], capsys)
    assert "does not exist" in _bad(_replace(argv, "--input", str(tmp_path / "no.csv")), capsys)
    assert "three different columns" in _bad(_replace(argv, "--item-column", "user"), capsys, out)
    assert "invalid choice" in _bad([*argv, "--variant", "fancy"], capsys, out)
    assert "unknown domain name" in _bad(
        [*_replace(argv, "--domain", None), "--domain-name", "nope"], capsys, out
    )
    # A required option missing is a usage error on one line.
    assert "--levels" in _bad(_replace(argv, "--levels", None), capsys, out)


ACCOUNT = [
    "account",
    "segmented",
    "--n",
    "1000",
    "--domain-size",
    "8",
    "--levels",
    "0.5,1,2",
    "--shares",
    "0.25,0.5,0.25",
    "--items-per-user",
    "2",
    "--delta",
    "1e-6",
    "--blanket",
    "1",
]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--shares", "0.5,0.5", "2 entries for 3 levels"),
        ("--shares", "0.5,0.5,0.5", "must sum to 1"),
        ("--shares", "0.5,-0.5,1", "finite numbers >= 0"),
        ("--shares", "a,b,c", "comma-separated numbers"),
        ("--levels", "2,1,0.5", "strictly increasing"),
        ("--n", "0", "--n must be an integer >= 1"),
        ("--domain-size", "1", "--domain-size must be an integer >= 2"),
        ("--delta", "1", "--delta must be in the open interval"),
        ("--blanket", "0", "--blanket must be 'auto' or a finite number > 0"),
        ("--items-per-user", "0", "--items-per-user must be an integer >= 1"),
    ],
)
def test_account_segmented_bad_options(capsys, flag, value, message):
    assert message in _bad(_replace(ACCOUNT, flag, value), capsys)


def test_every_option_has_help():
    from shuffledp.cli import build_parser

    parser = build_parser()
    for family in ("run", "account"):
        sub = next(a for a in parser._actions if a.dest == "command").choices[family]
        command = next(a for a in sub._actions if a.dest == "protocol").choices["segmented"]
        for action in command._actions:
            if action.dest != "help":
                assert action.help, (family, action.dest)


@pytest.mark.slow
def test_run_segmented_auto_blanket_is_stated(sets_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = _replace(base_args(sets_file, out), "--blanket", "auto")
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["parameters"]["blanket_choice"].startswith("auto")
    chosen = [note for note in result["notes"] if "chosen on your behalf" in note]
    assert len(chosen) == 1 and f"note: {chosen[0]}" in err
