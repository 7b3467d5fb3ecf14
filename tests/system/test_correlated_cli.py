"""``shuffledp run correlated`` and ``shuffledp account correlated`` end to end.

Every document is validated against its packaged schema, and every δ it
reports is recomputed here from the parameters it states with the public
certificate ``correlated_delta``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from shuffledp._rng import SEEDED_NOT_COVERED
from shuffledp.accounting.certificates.correlated import CorrelatedNoise, correlated_delta
from shuffledp.cli import main
from shuffledp.schemas import schema_id, validate

DOMAIN = "Lyon,Nice,Paris,Rome"
TRUTH = {"Lyon": 200, "Nice": 600, "Paris": 1000, "Rome": 200}


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def users(tmp_path_factory) -> Path:
    values = [city for city, count in TRUTH.items() for _ in range(count)]
    order = np.random.default_rng(0).permutation(len(values))
    path = tmp_path_factory.mktemp("correlated") / "users.csv"
    path.write_text("user,city\n" + "".join(f"{i},{values[j]}\n" for i, j in enumerate(order)))
    return path


def _base(users: Path) -> list[str]:
    return ["run", "correlated", "--input", str(users), "--column", "city", "--domain", DOMAIN,
            "--epsilon", "1", "--delta", "1e-6"]  # fmt: skip


def _recomputed_delta(parameters: dict, epsilon: float) -> float:
    noise = CorrelatedNoise(
        math.exp(-parameters["a"]), parameters["flood_r"], parameters["flood_q"]
    )
    return correlated_delta(
        epsilon,
        noise,
        neighbours=parameters["neighbours"],
        domain_size=len(DOMAIN.split(",")),
        min_honest=parameters["min_honest"],
    )


@pytest.mark.parametrize("path", ["message", "count"])
def test_run_writes_a_certified_release(users, tmp_path, capsys, path):
    output = tmp_path / "release.json"
    code, out, err = _run([*_base(users), "--path", path, "--seed", "3", "--output", output],
                          capsys)  # fmt: skip
    assert code == 0, err
    assert out == "" and "correlated-exact" in err
    release = json.loads(output.read_text())
    validate(release)
    assert release["schema"] == schema_id("correlated-release")
    assert release["protocol"] == "correlated" and release["path"] == path
    privacy = release["privacy"]
    assert privacy["method"] == "correlated-exact" and privacy["bound"] == "upper"
    assert privacy["delta"] == _recomputed_delta(release["parameters"], 1.0) <= 1e-6
    assert privacy["target_delta"] == 1e-6 and privacy["calibration"] == "exact"
    assert any("at least 2000 of the 2000 users" in a for a in privacy["assumptions"])
    assert SEEDED_NOT_COVERED in privacy["not_covered"] and release["parameters"]["seed"] == 3
    # Estimates within 5 exact standard errors of the truth, errors unbiased by design.
    stderr = release["accuracy"]["per_bin_std"]
    assert release["estimate"]["stderr"] == [stderr] * 4
    counts = dict(zip(release["domain"], release["estimate"]["counts"], strict=True))
    assert all(abs(counts[c] - TRUTH[c]) < 5 * stderr for c in TRUTH)
    assert release["accuracy"]["std_ratio"] <= 1.1
    assert release["messages"] >= 2000 and release["expected_messages_per_user"] > 1
    assert any("min_honest not given" in note for note in release["notes"])


def test_run_with_fewer_honest_users_and_add_remove(users, capsys):
    argv = [*_base(users), "--min-honest", "0.5", "--neighbours", "add-remove", "--quiet"]
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    assert err == ""  # --quiet
    release = json.loads(out)
    validate(release)
    parameters = release["parameters"]
    assert parameters["min_honest"] == 1000 and parameters["neighbours"] == "add-remove"
    # The usual relation: the absent user sends nothing, noise shares included.
    assert release["privacy"]["neighbouring"].startswith("add-remove: one user present or absent")
    assert "sends nothing" in release["privacy"]["neighbouring"]
    assert release["privacy"]["not_covered"] == []
    assert release["privacy"]["delta"] == _recomputed_delta(parameters, 1.0) <= 1e-6
    accuracy = release["accuracy"]
    assert accuracy["per_bin_std"] == pytest.approx(
        math.sqrt(2) * accuracy["per_bin_std_min_honest"]
    )
    _, out, _ = _run([*_base(users), "--min-honest", "1500", "--quiet"], capsys)
    assert json.loads(out)["parameters"]["min_honest"] == 1500


def _account(capsys, *extra):
    argv = ["account", "correlated", "--n", "100000", "--domain-size", "100", "--epsilon", "1",
            "--delta", "1e-6", *extra]  # fmt: skip
    return _run(argv, capsys)


def test_account_json_reports_the_certificate_and_the_papers_rule(capsys):
    code, out, err = _account(capsys, "--json")
    assert code == 0, err
    document = json.loads(out)
    validate(document)
    assert document["schema"] == schema_id("account-correlated")
    noise = CorrelatedNoise(
        math.exp(-document["a"]), document["flooding"]["r"], document["flooding"]["q"]
    )
    assert document["delta"] == correlated_delta(1.0, noise) <= document["target_delta"] == 1e-6
    assert document["per_bin_std"] == pytest.approx(noise.per_bin_std)
    assert document["std_ratio"] <= 1.1
    assert document["messages_per_user"] == pytest.approx(1 + 100 * noise.messages_per_bin / 1e5)
    assert document["messages_per_user"] <= 2.0
    paper = document["paper"]
    assert paper["method"] == "paper" and paper["a"] == pytest.approx(0.45)
    paper_noise = CorrelatedNoise(
        math.exp(-paper["a"]), paper["flooding"]["r"], paper["flooding"]["q"]
    )
    assert paper["delta"] == correlated_delta(1.0, paper_noise) <= 1e-6
    assert correlated_delta(paper["exact_epsilon"], paper_noise) <= 1e-6
    assert paper["messages_per_user"] > document["messages_per_user"]


def test_account_table(capsys):
    code, out, err = _account(capsys, "--min-honest", "90000")
    assert code == 0, err
    assert "min_honest=90000" in out and "expected messages per user" in out
    assert "papers (gamma=0.1)" in out and "certified delta at epsilon" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--min-honest", "0"], "--min-honest must be a count of users"),
        (["--min-honest", "200000"], "--min-honest must be a count of users"),
        (["--min-honest", "many"], "argument --min-honest: expected a count of users"),
        (["--slack", "0"], "--slack must be a finite number > 0, got 0.0"),
        (["--slack", "-1"], "--slack must be a finite number > 0, got -1.0"),
        (["--neighbours", "swap"], "argument --neighbours: invalid choice: 'swap'"),
        (["--gamma", "1.5"], "--gamma must be in the open interval (0, 1), got 1.5"),
    ],
)
def test_account_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    code, out, err = _account(capsys, *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--min-honest", "2001"], "--min-honest must be a count of users (an integer from 1 to "
                                   "n=2000)"),
        (["--min-honest", "1.5"], "--min-honest must be a count of users"),
        (["--slack", "0"], "--slack must be a finite number > 0"),
        (["--epsilon", "0"], "--epsilon must be a finite number > 0"),
    ],
)  # fmt: skip
def test_run_bad_input_is_one_line_and_exit_2(users, tmp_path, capsys, extra, message):
    output = tmp_path / "never.json"
    code, out, err = _run([*_base(users), "--output", output, *extra], capsys)
    assert code == 2 and out == "" and not output.exists()
    assert len(err.strip().splitlines()) == 1 and message in err
