"""``experiment near-central``: the rows, the verdicts, the files and the summary's schema."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import figure_checks
from shuffledp.experiments.near_central import (
    PROTOCOLS,
    NearCentralConfig,
    NearCentralRow,
    measure,
    run_near_central,
    verdicts,
    zipf_histogram,
)
from shuffledp.schemas import validate


def test_zipf_histogram_adds_up_and_falls():
    h = zipf_histogram(10_001, 100)
    assert h.sum() == 10_001 and len(h) == 100
    assert np.all(np.diff(h) <= 0)


@pytest.mark.parametrize(
    "name", ["central_laplace", "central_discrete_laplace", "central_analytic_gaussian"]
)
def test_central_rows_measure_their_analytic_std(name):
    row = measure(
        name,
        zipf_histogram(5000, 100),
        epsilon=1.0,
        delta=1e-6,
        repetitions=40,
        path="count",
        seed=np.random.SeedSequence(3),
    )
    # 4000 draws of each noise: the RMS is within a few standard errors of the std.
    assert abs(row.per_bin_std - row.analytic_std) <= 4.0 * row.per_bin_std_se
    assert row.message_path_seconds is None and row.path == "central"


def test_small_grid_writes_rows_verdicts_and_valid_files(tmp_path: Path):
    config = replace(
        NearCentralConfig.quick(seed=5),
        sizes=(3000,),
        epsilons=(1.0,),
        sweep_n=3000,
        message_path_up_to=3000,
        repetitions=3,
        count_repetitions=3,
    )
    result = run_near_central(config, tmp_path)
    rows = result["rows"]
    assert {r.protocol for r in rows} == set(PROTOCOLS)
    by = {r.protocol: r for r in rows}
    assert by["augmented"].messages_per_user == 1.0
    assert by["correlated"].ratio_to_central_dlap <= 1.10
    assert by["correlated"].certified_delta <= 1e-6
    assert by["flip"].ratio_to_central_dlap > 2.0
    assert math.isclose(by["central_discrete_laplace"].ratio_to_central_dlap, 1.0)
    summary = json.loads((tmp_path / "near_central_summary.json").read_text())
    validate(summary)
    claims = {v["claim"]: v["verdict"] for v in summary["verdicts"]}
    # No n = 1e6 row in this grid: those targets are untested, never "reached".
    assert all(v == "untested" for c, v in claims.items() if "1,000,000" in c)
    names = {p.name for p in result["files"]}
    assert {"near_central.csv", "near_central_by_n.png", "near_central_messages.png"} <= names
    for path in result["files"]:
        if path.suffix == ".png":
            assert figure_checks.checked(path), path.name  # drawn and readable (conftest)


def test_verdict_without_evidence_is_untested():
    config = NearCentralConfig.quick()
    assert all(v["verdict"] == "untested" for v in verdicts([], config))


def _row(protocol: str, analytic: float, measured: float, se: float) -> NearCentralRow:
    dlap = 2.799177768214361  # DLap(1/2)'s std
    return NearCentralRow(
        protocol, 100_000, 1.0, measured, se, analytic, analytic / dlap, measured / dlap,
        1.0, 9.9e-7, 1.0, 0.1, "message", 20,
    )  # fmt: skip


@pytest.mark.parametrize("protocol", ["flip", "correlated", "augmented"])
def test_verdict_misses_when_the_run_contradicts_the_analytic_std(protocol):
    analytic = {"flip": 6.56, "correlated": 3.079, "augmented": 2.799}[protocol]
    claim = {"flip": "flip and krr", "correlated": "correlated: per-bin", "augmented": "augmented"}
    config = NearCentralConfig()

    def verdict(measured: float) -> str:
        found = verdicts([_row(protocol, analytic, measured, 0.05)], config)
        return next(v["verdict"] for v in found if v["claim"].startswith(claim[protocol]))

    assert verdict(analytic + 3.9 * 0.05) == "reached"
    assert verdict(analytic + 4.1 * 0.05) == "missed"
    assert verdict(analytic - 4.1 * 0.05) == "missed"


def test_bad_option_is_one_line_and_exit_2(tmp_path: Path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "shuffledp",
            "experiment",
            "near-central",
            "--repetitions",
            "1",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--repetitions" in done.stderr
    assert not (tmp_path / "out").exists()


def test_printed_certified_delta_is_rounded_up(monkeypatch, tmp_path: Path, capsys):
    import shuffledp.experiments.near_central as near_central
    from shuffledp.cli import main

    row = replace(_row("augmented", 2.799, 2.799, 0.05), certified_delta=9.127282041333474e-07)

    def fake_run(config, out_dir, *, plots):
        return {"rows": [replace(row, epsilon=config.epsilon)], "verdicts": [], "files": []}

    monkeypatch.setattr(near_central, "run_near_central", fake_run)
    assert main(["experiment", "near-central", "--no-plots", "--output-dir", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("augmented"))
    assert line.split()[-1] == "9.128e-07"  # not 9.127e-07, below the certified value
