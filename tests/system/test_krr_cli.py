"""k-RR on the command line and the experiment end to end."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.experiments import ExperimentConfig, run_krr_vs_gaussian


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(1)
    vals = rng.choice(list("ABCDE"), size=4000, p=[0.4, 0.3, 0.15, 0.1, 0.05])
    path = tmp_path / "d.csv"
    path.write_text("v\n" + "\n".join(vals) + "\n")
    return path


def test_run_krr_json(csv_file, tmp_path, capsys):
    plot = tmp_path / "p.png"
    code, out, err = _run(
        [
            "run",
            "krr",
            "--input",
            str(csv_file),
            "--column",
            "v",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--seed",
            "2",
            "--plot",
            str(plot),
            "--domain",
            "A,B,C,D,E",
        ],
        capsys,
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["protocol"] == "krr" and result["n"] == 4000
    assert result["privacy"]["delta"] <= 1e-6 and result["privacy"]["local_epsilon"] > 1
    assert result["privacy"]["method"] == "krr-blanket"
    assert len(result["estimate"]["stderr"]) == 5
    assert result["parameters"]["estimator"] == "inversion"
    assert plot.stat().st_size > 1000
    for estimator in ("raw", "clip", "simplex"):
        code, out, _ = _run(
            [
                "run",
                "krr",
                "--input",
                str(csv_file),
                "--column",
                "v",
                "--epsilon",
                "1",
                "--delta",
                "1e-6",
                "--estimator",
                estimator,
                "--epsilon0",
                "2",
                "--domain",
                "A,B,C,D,E",
            ],
            capsys,
        )
        assert code == 0
        est = json.loads(out)["estimate"]
        assert est["stderr"] is None and est["estimator"] == estimator


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--epsilon", "0"], "--epsilon must be"),
        (["--delta", "2"], "--delta must be"),
        (["--epsilon0", "-1"], "--epsilon0 must be"),
        (["--epsilon0", "9"], "above the target"),
        (["--estimator", "mean"], "invalid choice"),
        (["--column", "w"], "column 'w' is not in"),
        (["--domain", "A,B"], "is not in the domain"),
    ],
)
def test_run_krr_bad_input(csv_file, tmp_path, capsys, extra, fragment):
    out_file = tmp_path / "never.json"
    argv = [
        "run",
        "krr",
        "--input",
        str(csv_file),
        "--column",
        "v",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--output",
        str(out_file),
        "--domain",
        "A,B,C,D,E",
        *extra,
    ]
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert fragment in err and not out_file.exists()


def test_account_krr(capsys):
    code, out, _ = _run(
        [
            "account",
            "krr",
            "--n",
            "10000",
            "--domain-size",
            "10",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    result = json.loads(out)
    assert result["exact"]["delta"] <= 1e-6
    assert result["exact"]["epsilon0"] > result["paper_setting"]["epsilon0"]
    assert result["exact"]["stderr"] < result["paper_setting"]["stderr"]
    code, out, _ = _run(
        [
            "account",
            "krr",
            "--n",
            "10000",
            "--domain-size",
            "10",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
        ],
        capsys,
    )
    assert "exact calibration" in out


def test_experiment_end_to_end_small(tmp_path):
    config = ExperimentConfig(
        ks=(5,), ns=(300,), epsilons=(1.0, 4.0), repetitions=3, x0s=(1,), seed=5
    )
    result = run_krr_vs_gaussian(config, tmp_path)
    with (tmp_path / "krr_vs_gaussian.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["mechanism"] for r in rows} == {"gaussian", "laplace", "shuffle", "shuffle+INV"}
    assert {r["delta_source"] for r in rows} == {"paper", "exact"}
    assert {r["metric"] for r in rows} == {"tv", "individual"}
    # At epsilon = epsilon0 both deltas vanish and no Gaussian is calibrated.
    at_eps0 = [r for r in rows if float(r["epsilon"]) == 4.0 and r["mechanism"] == "gaussian"]
    assert all(float(r["delta"]) == 0.0 and r["value"] == "nan" for r in at_eps0)
    below = [r for r in rows if float(r["epsilon"]) == 1.0 and r["delta_source"] == "exact"]
    assert all(float(r["delta"]) > 0 for r in below)
    for name in ("community", "sweep", "individual"):
        assert (tmp_path / f"krr_vs_gaussian_{name}.png").stat().st_size > 1000
    assert result["summary"]


def test_experiment_cli_quick(tmp_path, capsys):
    code, out, err = _run(
        [
            "experiment",
            "krr-vs-gaussian",
            "--quick",
            "--output-dir",
            str(tmp_path),
            "--repetitions",
            "2",
        ],
        capsys,
    )
    assert code == 0, err
    assert "exact" in out and "paper" in out
    assert (tmp_path / "krr_vs_gaussian.csv").exists()


def test_experiment_rejects_epsilon_above_epsilon0(tmp_path):
    with pytest.raises(ValueError, match="at most epsilon0"):
        run_krr_vs_gaussian(ExperimentConfig(ks=(5,), ns=(100,), epsilons=(5.0,)), tmp_path)
