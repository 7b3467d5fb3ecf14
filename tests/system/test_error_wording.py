"""Shared messages name Python parameters in Python and command-line flags on the command line.

Every message the loaders and protocols share with the CLI that tells the user
what to change is checked on both sides: the Python exception (or text) names
``per_user='first'``, ``other=LABEL``, ...; the command prints one line naming
``--per-user first``, ``--other LABEL``, ... and exits with 2.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp._wording import Parameter, Worded, command_line_document, plural
from shuffledp.cli import main
from shuffledp.data.domains import read_domain_file
from shuffledp.data.ingest import load_values
from shuffledp.data.sets import load_sets
from shuffledp.protocols.segmented import aggregate_levels, run_segmented

DOMAIN = "Paris,Rome,Lyon"


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, err = _cli(argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("shuffledp: error: "), err
    return err


def _run_krr(path: Path, *extra: str, quiet: bool = True) -> list[str]:
    return [
        "run",
        "krr",
        "--input",
        str(path),
        "--column",
        "city",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        *(["--quiet"] if quiet else []),
        *extra,
    ]


@pytest.fixture
def csv(tmp_path: Path):
    def write(text: str | bytes, name: str = "d.csv") -> Path:
        path = tmp_path / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path

    return write


def _load(path: Path, **kw):
    return load_values(path, "city", show_progress=False, **kw)


def _load_sets(path: Path, **kw):
    return load_sets(
        path,
        user_column="user",
        item_column="item",
        level_column="level",
        levels=(1.0,),
        domain=DOMAIN.split(","),
        show_progress=False,
        **kw,
    )


# --- per_user ---------------------------------------------------------------------------------


def test_several_rows_per_user(csv, capsys):
    path = csv("user,city\n1,Paris\n1,Rome\n2,Lyon\n")
    with pytest.raises(DataError) as info:
        _load(path, domain=DOMAIN.split(","), user_column="user")
    message = str(info.value)
    assert "choose per_user='first' or per_user='sample'" in message
    assert "1 user in" in message and "has more than one row (1 row beyond" in message
    assert "--" not in message
    err = _one_line_error(_run_krr(path, "--domain", DOMAIN, "--user-column", "user"), capsys)
    assert "choose --per-user first or --per-user sample to keep one row per user" in err
    assert "per_user=" not in err


def test_per_user_note(csv, capsys):
    path = csv("user,city\n1,Paris\n1,Rome\n2,Lyon\n")
    loaded = _load(path, domain=DOMAIN.split(","), user_column="user", per_user="first")
    assert any("(per_user='first')" in note for note in loaded.notes)
    out = str(path.with_suffix(".json"))
    argv = _run_krr(
        path,
        "--domain",
        DOMAIN,
        "--user-column",
        "user",
        "--per-user",
        "first",
        "--output",
        out,
        quiet=False,
    )
    code, err = _cli(argv, capsys)
    assert code == 0, err
    assert "each contributed the first row (--per-user first)" in err
    assert "per_user=" not in err


# --- drop_missing -----------------------------------------------------------------------------


def test_missing_values(csv, capsys):
    path = csv("city\nParis\n\nRome\n")
    with pytest.raises(DataError) as info:
        _load(path, domain=DOMAIN.split(","))
    assert "drop such rows with drop_missing=True, which reports" in str(info.value)
    assert "--" not in str(info.value)
    err = _one_line_error(_run_krr(path, "--domain", DOMAIN), capsys)
    assert "drop such rows with --drop-missing, which reports how many" in err
    assert "drop_missing" not in err


def test_missing_values_note(csv, capsys):
    path = csv("city\nParis\n\nRome\n")
    loaded = _load(path, domain=DOMAIN.split(","), drop_missing=True)
    assert any("were dropped (drop_missing=True)" in note for note in loaded.notes)
    out = path.with_suffix(".json")
    argv = _run_krr(path, "--domain", DOMAIN, "--drop-missing", "--output", str(out), quiet=False)
    code, err = _cli(argv, capsys)
    assert code == 0, err
    assert "were dropped (--drop-missing)" in err and "drop_missing" not in err


# --- other ------------------------------------------------------------------------------------


def test_value_outside_the_domain(csv, capsys):
    path = csv("city\nParis\nOslo\n")
    with pytest.raises(DataError) as info:
        _load(path, domain=DOMAIN.split(","))
    assert "count such values in one bin with other=LABEL" in str(info.value)
    assert "--" not in str(info.value)
    err = _one_line_error(_run_krr(path, "--domain", DOMAIN), capsys)
    assert "count such values in one bin with --other LABEL" in err and "other=" not in err


def test_item_outside_the_domain_in_segmented(csv, capsys):
    path = csv("user,item,level\nu1,Paris,1\nu2,Oslo,1\n")
    with pytest.raises(DataError) as info:
        _load_sets(path, items_per_user=1)
    assert "other=LABEL" in str(info.value)
    err = _one_line_error(_segmented(path, "--items-per-user", "1"), capsys)
    assert "--other LABEL" in err and "other=" not in err


# --- encoding and delimiter -------------------------------------------------------------------


def test_undecodable_input(csv, capsys):
    path = csv("city\nPar\xe9s\nRome\n".encode("latin-1"))
    with pytest.raises(DataError) as info:
        _load(path, domain=DOMAIN.split(","))
    assert "give the file's encoding with encoding=..., e.g. 'latin-1'" in str(info.value)
    assert "--" not in str(info.value)
    err = _one_line_error(_run_krr(path, "--domain", DOMAIN), capsys)
    assert "give the file's encoding with --encoding ..., e.g. 'latin-1'" in err
    assert "encoding=" not in err


def test_undecodable_domain_file(csv, tmp_path, capsys):
    domain = csv("Par\xe9s\nRome\n".encode("latin-1"), "domain.txt")
    with pytest.raises(DataError) as info:
        read_domain_file(domain)
    assert str(info.value).endswith("give its encoding, e.g. encoding='latin-1'")
    data = csv("city\nRome\n")
    err = _one_line_error(_run_krr(data, "--domain-file", str(domain)), capsys)
    assert err.rstrip().endswith("give its encoding, e.g. --encoding latin-1")
    err = _one_line_error(
        [
            "task",
            "create",
            "--protocol",
            "krr",
            "--domain-file",
            str(domain),
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--min-batch-users",
            "1000",
            "--out",
            str(tmp_path / "task.json"),
            "--key-out",
            str(tmp_path / "key"),
        ],
        capsys,
    )
    assert "--encoding latin-1" in err


def test_ambiguous_delimiter(csv, capsys):
    path = csv("a;b,city\n1;2,Paris\n")
    with pytest.raises(DataError) as info:
        _load(path, domain=DOMAIN.split(","))
    assert str(info.value).endswith("give the delimiter explicitly with delimiter=...")
    err = _one_line_error(_run_krr(path, "--domain", DOMAIN), capsys)
    assert err.rstrip().endswith("give the delimiter explicitly with --delimiter ...")


# --- segmented: items_per_user, padding, level_counts -----------------------------------------


def _segmented(path: Path, *extra: str) -> list[str]:
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
        "1",
        "--delta",
        "1e-5",
        "--domain",
        DOMAIN,
        "--blanket",
        "1",
        "--seed",
        "1",
        "--quiet",
        *extra,
    ]


def test_sets_smaller_than_s(csv, capsys):
    path = csv("user,item,level\nu1,Paris,1\nu1,Rome,1\nu2,Lyon,1\n")
    with pytest.raises(DataError) as info:
        _load_sets(path, items_per_user=2, padding=False)
    message = str(info.value)
    assert "fewer than items_per_user=2 items" in message
    assert "pad them with padding=True or lower items_per_user" in message
    err = _one_line_error(_segmented(path, "--items-per-user", "2"), capsys)
    assert "fewer than --items-per-user 2 items" in err
    assert "pad them with --padding or lower --items-per-user" in err
    assert "items_per_user" not in err and "padding=" not in err


def test_exact_level_counts_not_covered(tmp_path, capsys):
    rng = np.random.default_rng(0)
    items = rng.integers(0, 3, size=(300, 1))
    levels = np.arange(300) % 2
    _, run = run_segmented(
        items, levels, levels=(1.0, 2.0), delta=1e-5, domain=3, blanket_rate=1.0, seed=1
    )
    text = next(item for item in run.not_covered if "level histogram" in item)
    assert text.endswith("use level_counts='dp' to protect it")
    rows = ["user,item,level"] + [f"u{i},{'PRL'[items[i, 0]]},{levels[i] + 1}" for i in range(300)]
    path = tmp_path / "s.csv"
    path.write_text("\n".join(rows) + "\n")
    out = tmp_path / "r.json"
    argv = _segmented(path, "--items-per-user", "1", "--output", str(out))
    argv[argv.index("--levels") + 1] = "1,2"
    argv[argv.index("--domain") + 1] = "P,R,L"
    argv.remove("--quiet")
    code, err = _cli(argv, capsys)
    assert code == 0, err
    assert "use --level-counts dp to protect it" in err and "level_counts=" not in err
    assert "use --level-counts dp to protect it" in out.read_text()


def test_dp_level_counts_need_their_target():
    with pytest.raises(InvalidParameterError) as info:
        aggregate_levels(np.array([0, 1, 0]), 2, mode="dp")
    assert "(level_epsilon, level_delta)" in str(info.value)
    assert "--" not in str(info.value)


# --- same_users (composition) -----------------------------------------------------------------


def test_compose_releases_that_differ(csv, tmp_path, capsys):
    import json

    from shuffledp.accounting.composition.compose import (
        compose,
        populations_from_json,
        reports_from_json,
    )

    files = []
    for name, rows in (("a", 30), ("b", 40)):
        data = csv("city\n" + "Paris\nRome\n" * rows, f"{name}.csv")
        out = tmp_path / f"{name}.json"
        assert main(_run_krr(data, "--domain", DOMAIN, "--seed", "1", "--output", str(out))) == 0
        files.append(out)
    capsys.readouterr()
    objects = [json.loads(path.read_text()) for path in files]
    reports, populations = reports_from_json(objects), populations_from_json(objects)
    with pytest.raises(InvalidParameterError) as info:
        compose(*reports, populations=populations)
    assert "say so with same_users=True, and" in str(info.value)
    assert "--" not in str(info.value)
    err = _one_line_error(["account", "compose", *map(str, files)], capsys)
    assert "say so with --same-users, and" in err and "same_users" not in err
    assert "(files in the order given:" in err
    total = compose(*reports, populations=populations, same_users=True)
    assert any("as the caller asserted (same_users=True)" in a for a in total.assumptions)
    assert main(["account", "compose", "--same-users", "--json", *map(str, files)]) == 0
    document = json.loads(capsys.readouterr().out)
    assumptions = " ".join(document["assumptions"])
    assert "as the caller asserted (--same-users)" in assumptions
    assert "same_users=" not in assumptions
    assert "composition of 1 release;" in compose(reports[0]).notes


# --- the mechanism ----------------------------------------------------------------------------


def test_worded_spellings_survive_pickling_and_documents():
    text = Worded(
        "{n} in {path}: use {other} or {first}",
        n=plural(1, "value"),
        path="a {b}.csv",
        other=Parameter("other", placeholder="LABEL"),
        first=Parameter("per_user", "first"),
    )
    assert text == "1 value in a {b}.csv: use other=LABEL or per_user='first'"
    assert text.command_line == "1 value in a {b}.csv: use --other LABEL or --per-user first"
    back = pickle.loads(pickle.dumps(DataError(text)))
    assert back.args[0].command_line == text.command_line
    assert command_line_document({"notes": [text, "plain"], "n": 3}) == {
        "notes": [text.command_line, "plain"],
        "n": 3,
    }
    assert Parameter("label", "two words").command_line == "--label 'two words'"
    assert plural(2, "release") == "2 releases" and plural(1_000, "user") == "1,000 users"
