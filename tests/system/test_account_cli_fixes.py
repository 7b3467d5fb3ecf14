"""`shuffledp account`: rows for methods out of range, extreme parameters, one name for k."""

import json

import pytest

from shuffledp.cli import main


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _rows(argv, capsys):
    code, out, err = _run([*argv, "--json"], capsys)
    assert code == 0, err
    return {row["method"]: row for row in json.loads(out)["rows"]}


def test_poisson_method_out_of_range_is_a_row(capsys):
    rows = _rows(
        [
            "account",
            "delta",
            "--mechanism",
            "poisson",
            "--report-probability",
            "0.1",
            "--domain-size",
            "5",
            "--blanket-messages",
            "100",
            "--epsilon",
            "1",
            "--n",
            "100",
        ],
        capsys,
    )
    assert rows["poisson-exact"]["certified"] and 0 < rows["poisson-exact"]["delta"] < 1
    lemma3 = rows["poisson-lemma3"]
    assert lemma3["delta"] is None and not lemma3["certified"] and "lambda" in lemma3["note"]


def test_huge_epsilon0_gives_rows_not_a_traceback(capsys):
    rows = _rows(["account", "delta", "--epsilon0", "400", "--n", "100", "--epsilon", "1"], capsys)
    for row in rows.values():
        if row["certified"]:
            assert row["bound"] == "upper" and 0 <= row["delta"] <= 1
    code, _out, err = _run(
        ["account", "delta", "--epsilon0", "800", "--n", "100", "--epsilon", "1"], capsys
    )
    assert code == 0 and "Traceback" not in err


def test_epsilon_at_tiny_delta_never_exceeds_epsilon0(capsys):
    rows = _rows(
        ["account", "amplify", "--epsilon0", "0.1", "--n", "10", "--delta", "1e-300"], capsys
    )
    for row in rows.values():
        if row["bound"] == "upper" and row["certified"]:
            assert row["epsilon"] <= 0.1


def test_k2_lower_bound_exists_and_is_below_the_upper(capsys):
    rows = _rows(
        [
            "account",
            "delta",
            "--mechanism",
            "krr",
            "--k",
            "2",
            "--epsilon0",
            "2",
            "--n",
            "8",
            "--epsilon",
            "0.2",
        ],
        capsys,
    )
    assert rows["krr-two-count"]["delta"] is None
    assert rows["krr-splits"]["bound"] == "lower" and not rows["krr-splits"]["certified"]
    assert rows["krr-splits"]["delta"] == pytest.approx(0.331322, abs=1e-6)
    assert rows["krr-blanket"]["delta"] >= rows["krr-splits"]["delta"]


def test_domain_size_is_one_name_with_k_as_alias(capsys):
    argv = ["account", "calibrate", "--epsilon", "1", "--delta", "1e-6", "--n", "1e3"]
    argv += ["--mechanism", "krr"]
    code, out_k, err = _run([*argv, "--k", "4", "--json"], capsys)
    assert code == 0, err
    code, out_d, err = _run([*argv, "--domain-size", "4", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out_k) == json.loads(out_d)
    code, out, err = _run([*argv, "--k", "1"], capsys)
    assert code == 2 and "--domain-size must be an integer >= 2, got 1" in err
    code, out, err = _run(
        [
            "account",
            "krr",
            "--n",
            "1e4",
            "--k",
            "10",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["domain_size"] == 10


def test_calibrate_all_prints_every_upper_method(capsys):
    code, out, err = _run(
        [
            "account",
            "calibrate",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--n",
            "1000",
            "--mechanism",
            "krr",
            "--k",
            "4",
            "--method",
            "all",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    rows = json.loads(out)["rows"]
    methods = {row["method"] for row in rows}
    assert {"vr2024", "fmt2021-numeric", "krr-blanket"} <= methods
    values = {row["method"]: row["value"] for row in rows}
    # The mechanism-specific certificate allows the largest epsilon0.
    assert values["krr-blanket"] == max(v for v in values.values() if v is not None)


def test_integral_floats_are_integers(capsys):
    code, out, err = _run(
        [
            "account",
            "flip",
            "--n",
            "1e5",
            "--domain-size",
            "1e2",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["n"] == 100_000
    code, out, err = _run(
        [
            "account",
            "flip",
            "--n",
            "1.5e2",
            "--domain-size",
            "10",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
        ],
        capsys,
    )
    assert code == 0, err
    code, out, err = _run(
        [
            "account",
            "flip",
            "--n",
            "100.5",
            "--domain-size",
            "10",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
        ],
        capsys,
    )
    assert code == 2 and "expected an integer, got '100.5'" in err


def test_experiment_repetitions_zero_is_refused(tmp_path, capsys):
    code, _out, err = _run(
        [
            "experiment",
            "krr-vs-gaussian",
            "--quick",
            "--repetitions",
            "0",
            "--output-dir",
            str(tmp_path / "x"),
        ],
        capsys,
    )
    assert code == 2 and "--repetitions must be an integer >= 1, got 0" in err
    assert not (tmp_path / "x").exists()


def test_every_option_has_help():
    import argparse

    from shuffledp.cli import build_parser

    missing = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif not action.help and action.dest != "help":
                missing.append((" ".join(path), action.option_strings or action.dest))

    walk(build_parser(), ["shuffledp"])
    assert missing == []
