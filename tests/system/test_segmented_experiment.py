"""``shuffledp experiment segmented`` end to end (a reduced --quick run) and its bad input."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

import figure_checks
from shuffledp.accounting.certificates.segmented import level_lower_bound
from shuffledp.cli import main
from shuffledp.experiments.segmented import FIELDS, whole_set_lower_delta
from shuffledp.schemas import schema_id, validate

pytest.importorskip("matplotlib")

VERDICTS = {
    "error_reduction_50",
    "error_reduction_70",
    "best_m",
    "best_m_decreases_with_n",
    "n_scaling",
    "messages_per_user",
    "best_m_below_4",
}
OUTCOMES = {"reproduced", "contradicted", "mixed", "inconclusive", "untested"}


def test_quick_run_writes_csv_json_and_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "seg"
    code = main(
        [
            "experiment",
            "segmented",
            "--quick",
            "--repetitions",
            "2",
            "--blanket-grid",
            "0.5,2.01,4",
            "--seed",
            "7",
            "--output-dir",
            str(out),
        ]
    )
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert "verdicts" in stdout and "wrote" in stdout
    # --quick says which verdicts it cannot test, and why.
    cannot = next(line for line in stdout.splitlines() if line.startswith("--quick cannot test"))
    for key in ("best_m ", "best_m_decreases_with_n", "n_scaling", "best_m_below_4"):
        assert key in cannot
    csv_path = out / "segmented_synthetic.csv"
    json_path = out / "segmented_synthetic_summary.json"
    for path in (
        csv_path,
        json_path,
        out / "segmented_synthetic_n5000_s4.png",
        out / "segmented_synthetic_lambda.png",
    ):
        assert path.is_file() and path.stat().st_size > 0, path
    for name in ("segmented_synthetic_n5000_s4.png", "segmented_synthetic_lambda.png"):
        assert figure_checks.checked(out / name), name  # drawn and readable (conftest)
    with csv_path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == FIELDS
    ours = [r for r in rows if r["mechanism"] == "segmented"]
    # 3 blanket rates × (exact, paper) for the paper variant, plus the dummy variant (exact).
    assert len(ours) == 3 * 2 + 3
    assert {r["accounting"] for r in ours} == {"exact", "paper"}
    assert {r["mechanism"] for r in rows} - {"segmented"} == {
        "subexp-local",
        "subexp-shuffle",
        "mm-shuffle",
        "sepmm",
        "weighted-sepmm",
    }
    assert all(r["repetitions"] == "2" for r in rows)
    exact = [r for r in ours if r["accounting"] == "exact"]
    assert all(r["certified"] == "True" for r in exact)
    # At m = 4 (γ = 1) the exact accountant shrinks λ for the strict level; Eq. 7 does not.
    at4 = {
        r["accounting"]: r for r in ours if r["variant"] == "paper" and r["blanket_rate"] == "4.0"
    }
    assert float(at4["exact"]["lambdas"].split(";")[0]) < 0.01
    assert float(at4["paper"]["lambdas"].split(";")[0]) > 0.1
    assert at4["paper"]["certified"] == "False"
    summary = json.loads(json_path.read_text(encoding="utf-8"))
    assert summary["schema"] == schema_id("experiment-segmented-summary")
    validate(summary)
    assert set(summary["verdicts"]) == VERDICTS
    for verdict in summary["verdicts"].values():
        assert verdict["verdict"] in OUTCOMES
        assert "claim" in verdict and "evidence" in verdict
    # One n, and a grid that stops at 4: these claims cannot be tested (never "reproduced").
    for key in ("n_scaling", "best_m_decreases_with_n", "best_m", "best_m_below_4"):
        verdict = summary["verdicts"][key]
        assert verdict["verdict"] == "untested" and verdict["note"], key
        assert set(verdict["verdict_by_accounting"].values()) == {"untested"}
    assert "4.01" in summary["verdicts"]["best_m_below_4"]["note"]
    entry = summary["settings"][0]
    assert entry["n"] == 5000 and entry["items_per_user"] == 4 and entry["shares"] == "S1"
    assert entry["best_baseline"] in entry["baselines"]
    assert math.isfinite(entry["ours"]["exact"]["mse"])
    eq7 = summary["eq7"]
    assert eq7["uncertified_at_integer_m"] >= 1
    # Not certified is not "not private": each such point carries a concrete pair's delta.
    assert eq7["uncertified"] and all(
        u["lower_bound_delta"] is not None and u["lower_bound_delta"] >= 0
        for u in eq7["uncertified"]
    )
    assert eq7["shown_not_private_count"] == sum(
        1 for u in eq7["uncertified"] if u["lower_bound_delta_over_target"] > 1
    )
    # The lambda figure's integer m: 1, 2 and 3 are computed beside the grid (0.5, 2.01, 4).
    off_grid = sorted(p["blanket_rate"] for p in eq7["points"] if not p["on_grid"])
    assert off_grid == [1.0, 2.0, 3.0]
    assert eq7["operating_points"] == 3 * 3
    assert summary["dummy_vs_paper"]["best"]["mse_ratio_dummy_over_paper"] > 0


def test_bad_repetitions_is_one_line_and_exit_2(tmp_path: Path, capsys):
    code = main(
        [
            "experiment",
            "segmented",
            "--quick",
            "--repetitions",
            "0",
            "--output-dir",
            str(tmp_path / "x"),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and "--repetitions" in err
    assert not (tmp_path / "x").exists()


def test_bad_blanket_grid_is_one_line_and_exit_2(tmp_path: Path, capsys):
    code = main(
        [
            "experiment",
            "segmented",
            "--quick",
            "--blanket-grid",
            "0.5,-1",
            "--output-dir",
            str(tmp_path / "x"),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert err.count("\n") == 1 and "--blanket-grid" in err


@pytest.mark.parametrize(
    ("eps", "n", "m", "d", "s"),
    [(0.5, 200, 2.5, 16, 2), (1.0, 500, 1.5, 32, 3), (2.0, 1000, 0.7, 8, 2)],
)
def test_whole_set_lower_bound_matches_the_grid(eps, n, m, d, s):
    fast = whole_set_lower_delta(eps, n=n, blanket_rate=m, message_domain=d, items=s)
    grid = level_lower_bound(eps, 1.0, message_domain=d, items=s, n=n, blanket_rate=m)
    assert fast <= grid * (1 + 1e-7)
    assert fast == pytest.approx(grid, rel=1e-5)
