"""``run augmented`` and ``account augmented`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp.accounting.certificates.augmented import augmented_delta, sageo_law
from shuffledp.cli import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    values = rng.choice(list("ABCDE"), size=3000, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    path = tmp_path / "d.csv"
    path.write_text("v\n" + "\n".join(values) + "\n")
    return path


ACCOUNT = ["account", "augmented", "--n", "10000", "--domain-size", "100", "--epsilon", "1"]


def test_account_json_has_the_issue_keys_and_figures(capsys) -> None:
    code, out, err = _run([*ACCOUNT, "--delta", "1e-6", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    for key in ("beta", "nu", "q_left", "q_right", "delta", "per_bin_std"):
        assert key in doc
    assert doc["beta"] == 1.0 and doc["nu"] == 25 and doc["paper_nu"] == 27
    assert doc["delta"] == augmented_delta(1.0, sageo_law(1.0, 1.0, 25)) <= 1e-6
    assert doc["std_ratio"] <= 1.01 and doc["messages_per_user"] == 1
    assert [row["variant"] for row in doc["variants"]] == ["sageo", "s1geo", "sbin"]
    assert doc["variants"][2]["trials"] == 148 and doc["variants"][1]["delta"] == 0.0


def test_account_table(capsys) -> None:
    code, out, err = _run([*ACCOUNT, "--delta", "1e-6", "--beta", "0.9"], capsys)
    assert code == 0, err
    assert "certified delta" in out and "paper's closed-form nu" in out
    assert "s1geo" in out and "Bin(148,1/2)" in out


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--beta", "0.1"], "--beta must be in [1 - e^(-epsilon/2), 1] = [0.3934693403, 1]"),
        (["--beta", "1.5"], "--beta must be a number in (0, 1]"),
        (["--variant", "s1geo", "--beta", "0.5"], "--beta: variant s1geo fixes beta"),
        (["--variant", "sbin", "--nu", "3"], "--nu is sageo's shift"),
        (["--trials", "3"], "--trials is sbin's M"),
        (["--variant", "sbin", "--calibration", "paper"], "--calibration paper is sageo's"),
        (["--nu", "-1"], "--nu must be an integer >= 0"),
        (["--nu", "20"], "certified delta of"),
    ],
)
def test_bad_options_give_one_line_and_exit_2(extra, fragment, capsys) -> None:
    code, out, err = _run([*ACCOUNT, "--delta", "1e-6", *extra], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and fragment in err, err


def test_run_augmented_release(csv_file, capsys) -> None:
    argv = ["run", "augmented", "--input", str(csv_file), "--column", "v", "--epsilon", "1"]
    argv += ["--delta", "1e-6", "--domain", "A,B,C,D,E", "--seed", "3"]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["protocol"] == "augmented" and doc["n"] == 3000
    assert doc["schema"] == "urn:shuffledp:schema:augmented-release:1"
    privacy = doc["privacy"]
    assert privacy["method"] == "augmented-exact-pair" and privacy["delta"] <= 1e-6
    assert any("does not collude with the analyzer" in a for a in privacy["assumptions"])
    assert doc["parameters"]["nu"] == 25 and doc["parameters"]["seed"] == 3
    counts = np.array(doc["estimate"]["counts"])
    assert abs(counts.sum() - 3000) < 10 * 2.8 * np.sqrt(5)
    # Nothing data-dependent in the notes: the same text for other data.
    assert all(str(3000) not in note for note in doc["notes"])
    assert "augmented" in err and "certified" in err


def test_run_rejects_bad_beta_before_reading(tmp_path, capsys) -> None:
    argv = ["run", "augmented", "--input", str(tmp_path / "missing.csv"), "--column", "v"]
    argv += ["--epsilon", "1", "--delta", "1e-6", "--domain", "A,B", "--beta", "0.2"]
    code, _, err = _run(argv, capsys)
    assert code == 2 and "--beta must be in" in err and err.count("\n") == 1
