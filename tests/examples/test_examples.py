"""Every script in examples/ runs, at small sizes with a fixed seed, and does what it says.

Each example runs as a user would run it (``python examples/NAME.py``, in a
fresh process, from a temporary working directory) and the test checks what it
printed and wrote: the certified guarantee, estimates within their error bars,
the ordering of bounds the accounting guide states. Two more tests keep the
directory, the tests and the site in step: every example has a test here and a
page under docs/examples that includes its source.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

#: The small sizes each example runs with here (every run also gets --output-dir).
SMALL: dict[str, list[str]] = {
    "histogram_from_csv": ["--users", "3000", "--seed", "3"],
    "compare_bounds": ["--n", "1000,10000", "--epsilon0", "2", "--k", "10"],
    "calibrate_flip_vs_krr": ["--n", "5000", "--domain-size", "20", "--runs", "4", "--seed", "3"],
    "segmented_sets": ["--users", "1500", "--blanket", "0.5", "--seed", "3"],
    "per_user_movielens": ["--seed", "3"],
    "local_deployment": ["--users", "200", "--seed", "3"],
    "compose_releases": ["--users", "5000", "--seed", "3"],
}


def run_example(name: str, tmp_path: Path, *extra: str) -> tuple[str, Path]:
    """Run ``examples/NAME.py`` with its small sizes; return its stdout and output directory."""
    out = tmp_path / "out"
    command = [sys.executable, str(EXAMPLES / f"{name}.py"), *SMALL[name], *extra]
    proc = subprocess.run(
        [*command, "--output-dir", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg"},
        check=False,
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout, out


def read_json(path: Path) -> Any:
    assert path.is_file() and path.stat().st_size > 0, path
    return json.loads(path.read_text())


def assert_certified(privacy: dict[str, Any], epsilon: float, delta: float) -> None:
    assert privacy["bound"] == "upper"
    assert privacy["epsilon"] == pytest.approx(epsilon)
    assert 0 < privacy["delta"] <= delta
    assert privacy["lower_bound_delta"] is None or privacy["lower_bound_delta"] <= privacy["delta"]


# -- one test per example ---------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["flip", "krr"])
def test_histogram_from_csv(tmp_path: Path, protocol: str) -> None:
    stdout, out = run_example("histogram_from_csv", tmp_path, "--protocol", protocol)
    result = read_json(out / "result.json")
    method = {"flip": "flip-exact", "krr": "krr-blanket"}[protocol]
    assert result["protocol"] == protocol and result["privacy"]["method"] == method
    assert_certified(result["privacy"], 1.0, 1e-6)
    assert f"certified (1, {result['privacy']['delta']:.3g})-DP by {method}" in stdout
    # The truth: each user's first row of the sample file the script wrote.
    first: dict[str, str] = {}
    with (out / "visits.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            first.setdefault(row["user_id"], row["city"])
    assert result["n"] == len(first) == 3000
    true = np.array([list(first.values()).count(city) for city in result["domain"]])
    counts = np.array(result["estimate"]["counts"])
    stderr = np.array(result["estimate"]["stderr"])
    assert np.all(np.abs(counts - true) <= 5 * stderr)


def test_compare_bounds(tmp_path: Path) -> None:
    stdout, out = run_example("compare_bounds", tmp_path)
    png = out / "epsilon_vs_n.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    rows = read_json(out / "bounds.json")
    eps = {(r["n"], r["method"]): r["epsilon"] for r in rows}
    certified = {(r["n"], r["method"]) for r in rows if r["certified"]}
    for n in (1000, 10_000):
        assert {(n, "krr-blanket"), (n, "vr2024"), (n, "fmt2021-numeric")} <= certified
        # The ordering docs/accounting.md states: exact certificate below the generic bounds,
        # and above the lower bound a dataset attains.
        assert eps[n, "krr-two-count"] <= eps[n, "krr-blanket"] < eps[n, "vr2024"]
        assert eps[n, "vr2024"] <= eps[n, "fmt2021-numeric"] < 2.0
    assert eps[10_000, "krr-blanket"] < eps[1000, "krr-blanket"]
    assert re.search(r"^\s+10000\s+0\.15\d+\s+0\.11\d+\s+0\.07\d+", stdout, re.MULTILINE)


def test_calibrate_flip_vs_krr(tmp_path: Path) -> None:
    stdout, out = run_example("calibrate_flip_vs_krr", tmp_path)
    summary = read_json(out / "comparison.json")
    flip, krr = summary["flip"], summary["krr"]
    for entry in (flip, krr):
        cal = entry["calibration"]
        assert cal["method"] == "exact" and cal["delta"] <= cal["target_delta"] == 1e-6
        # Four runs: the measured l-inf error is near the prediction.
        assert 0.5 * cal["linf_error"] < entry["measured_linf_error"] < 2.0 * cal["linf_error"]
    assert 0 < flip["calibration"]["q"] < 0.5 and krr["calibration"]["epsilon0"] > 1.0
    # At d = 20 FLIP's standard error is below k-RR's (docs/protocols/flip.md, krr.md).
    assert flip["calibration"]["stderr"] < krr["calibration"]["stderr"]
    assert "k-RR's measured ℓ∞ error is" in stdout


@pytest.mark.slow
def test_segmented_sets(tmp_path: Path) -> None:
    stdout, out = run_example("segmented_sets", tmp_path)
    result = read_json(out / "segmented.json")
    assert result["blanket_rate"] == 0.5
    assert [p["epsilon"] for p in result["privacy"]] == [0.5, 1.0, 2.0]
    for privacy in result["privacy"]:
        assert privacy["method"] == "segmented-poisson-exact"
        assert privacy["bound"] == "upper" and 0 <= privacy["delta"] <= 1e-6
        assert 0 < privacy["parameters"]["lambda"] <= 1
    freq = np.array(result["estimate"]["frequencies"])
    se = np.array(result["estimate"]["frequency_stderr"])
    assert np.all(np.abs(freq - np.array(result["true_frequencies"])) <= 5 * se)
    assert "blanket rate m = 0.5" in stdout


def test_per_user_movielens(tmp_path: Path) -> None:
    stdout, out = run_example("per_user_movielens", tmp_path)
    summary = read_json(out / "per_user.json")
    privacy = summary["privacy"]
    assert privacy["method"] == "per-user-laplace-local" and privacy["epsilon"] == 4.0
    assert privacy["delta"] == 0.0
    # The page's finding: one local Laplace copy beats cluster-then-shuffle on MovieLens.
    errors = summary["mean_l1_error"]
    assert 0 < errors["laplace-full"] < errors["t"] < 2.0
    assert summary["users_with_epsilon_prime_below_epsilon"] == 0
    with (out / "estimates.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert len(rows) == 672 and rows[0][1:3] == ["Action", "Adventure"]
    assert all(len(row) == 21 for row in rows)
    assert "MovieLens: 671 users, 20 genres" in stdout


@pytest.mark.slow
def test_local_deployment(tmp_path: Path) -> None:
    stdout, out = run_example("local_deployment", tmp_path)
    release = read_json(out / "release.json")
    assert release["protocol"] == "flip" and release["n"] == 200
    assert release["service"]["smallest_batch_users"] == 200
    assert release["service"]["batches"] == 1
    assert_certified(release["privacy"], 1.0, 1e-6)
    counts = np.array(release["estimate"]["counts"])
    stderr = np.array(release["estimate"]["stderr"])
    assert abs(counts.sum() - 200) <= 5 * np.sqrt(np.sum(stderr**2))
    assert "services stopped" in stdout
    assert re.search(r"200 clients submitted \d+ sealed messages", stdout)


def test_compose_releases(tmp_path: Path) -> None:
    stdout, out = run_example("compose_releases", tmp_path)
    for name in ("cities", "ages"):
        assert_certified(read_json(out / f"{name}.json")["privacy"], 1.0, 1e-6)
    composed = read_json(out / "composed.json")
    two, ten = composed["two"], composed["ten"]
    assert two["method"] == "pld-composition" and two["bound"] == "upper"
    # Tighter than basic composition (2, 2e-6) at the same total delta, and above one release.
    assert 1.0 < two["epsilon"] < 2.0 and two["delta"] <= 2e-6 * (1 + 1e-9)
    assert two["parameters"]["basic"]["epsilon"] == pytest.approx(2.0)
    assert 2.0 < ten["epsilon"] < 10.0
    assert "together: (1.3" in stdout


# -- the directory, the tests and the site stay in step ----------------------------------------


def test_every_example_has_a_test() -> None:
    scripts = {path.stem for path in EXAMPLES.glob("*.py")}
    assert scripts == set(SMALL)
    source = Path(__file__).read_text()
    for name in scripts:
        assert f'run_example("{name}"' in source, f"no test runs examples/{name}.py"


def test_every_example_is_in_the_site() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    for path in sorted(EXAMPLES.glob("*.py")):
        page = ROOT / "docs" / "examples" / f"{path.stem}.md"
        assert page.is_file(), f"no page for {path.name}"
        assert f'--8<-- "examples/{path.name}"' in page.read_text(), f"{page} does not include it"
        assert f"examples/{path.stem}.md" in config, f"{page.name} is not in the nav"
        assert f"]({path.stem}.md)" in (ROOT / "docs" / "examples" / "index.md").read_text()


def test_examples_have_a_docstring_and_main() -> None:
    for path in EXAMPLES.glob("*.py"):
        text = path.read_text()
        assert text.startswith('"""'), f"{path.name} has no module docstring"
        assert "def main() -> None:" in text and "--output-dir" in text, path.name
        assert 30 <= len(text.splitlines()) <= 130, f"{path.name} is not short"
