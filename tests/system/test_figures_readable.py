"""Every figure the package draws is readable at its default size.

The figures are really drawn (Agg) and measured by ``tests/figure_checks.py``,
which ``tests/conftest.py`` installs for the whole session: every figure the
package writes in any test is checked (titles inside the figure, legends over
no data, tick labels apart, every bar named, no series under another) and a
problem fails the test that drew it. Here: the checker itself (and the old
run plot's failures it now sees: rotated labels on top of each other, 65 of
87 bars without a name), the ``run`` plots of every protocol with long titles
and the tallest bar at the right, ``run flip`` at 10, 87 and 336 long labels
(horizontal bars, the top 40 stated, the column's name on the axis), a
domain above ``MAX_BARS``, the demo's two panels (truth beside the estimate),
``experiment krr-vs-gaussian`` with one and two data sets, and the
docs/figures scripts that draw their own figures. The segmented, per-user and
near-central experiments' figures are checked in their own tests, which draw
them anyway (``figure_checks.checked`` there).
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import figure_checks
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.cli import main
from shuffledp.experiments import ExperimentConfig, run_krr_vs_gaussian
from shuffledp.plotting import (
    MAX_BARS,
    TOP_BARS,
    plot_histogram_estimate,
    require_matplotlib,
    shown_labels,
)

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
#: A long label, and the tallest bar last: where a legend inside the axes used to sit.
LABELS = ["Lyon", "Paris", "Rome", "Nice", "Marseille-Provence"]
WEIGHTS = [0.1, 0.15, 0.2, 0.15, 0.4]


def test_the_checker_sees_a_clipped_title_and_a_legend_over_bars():
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    try:
        ax.bar(range(5), [1, 2, 3, 4, 10], label="estimate")
        ax.legend(loc="upper right")
        ax.set_title("a title far too long for a figure six inches wide, " * 2)
        fig.tight_layout()
        problems = figure_checks.readability_problems(fig)
    finally:
        plt.close(fig)
    assert any("is clipped" in p for p in problems)
    assert any("a legend covers Rectangle" in p for p in problems)


def test_the_checker_sees_a_tick_label_cut_by_the_edge():
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    try:
        ax.plot([0, 1], [1000, 2000])
        fig.subplots_adjust(left=0.0)  # the y tick labels fall off the left edge
        problems = figure_checks.readability_problems(fig)
        ax.set_ylim(1000, 2000)
        fig.subplots_adjust(left=0.2)  # room again: nothing is cut
        fine = figure_checks.readability_problems(fig)
    finally:
        plt.close(fig)
    assert any(p.startswith("y tick label") and p.endswith("is clipped") for p in problems)
    assert fine == []


#: Kinds of airport, so that the labels' lengths differ (54 to 77 characters).
KINDS = ("régional", "international de la métropole", "municipal", "de la ville")


def _long_labels(d: int) -> list[str]:
    return [f"Aéroport {KINDS[j % 4]} numéro {j} de Saint-Quelque-Part ({j:03d})" for j in range(d)]


def test_the_checker_sees_the_old_run_plots_failures():
    """The run plot of 0.2: vertical bars, every fourth of 87 labels, rotated 60°; at 50
    bars (the top of a larger domain) each label rotated onto its neighbours."""
    plt = require_matplotlib()
    problems = []
    for d, step in ((87, 4), (50, 1)):
        fig, ax = plt.subplots(figsize=(min(16.0, 0.12 * d + 3.0), 4.5), layout="constrained")
        try:
            x = np.arange(d)
            ax.bar(x, np.linspace(100, 1, d), label="estimate")
            labels = _long_labels(d)
            ax.set_xticks(x[::step], labels[::step], rotation=60, fontsize=8)
            problems.append(figure_checks.readability_problems(fig))
        finally:
            plt.close(fig)
    assert "65 bars of axes 0 have no label on the x axis" in problems[0]
    assert any(p.startswith("rotated x tick labels") for p in problems[1]), problems[1]


def test_the_checker_sees_a_series_under_another():
    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(6, 4.5), layout="constrained")
    try:
        x = np.arange(5)
        ax.bar(x, [1, 2, 3, 4, 5], width=0.4, color="#dd8452", label="true count")
        ax.bar(x, [2, 3, 4, 5, 6], width=0.8, color="#4c72b0", label="estimate")
        ax.set_xticks(x, list("abcde"))
        problems = figure_checks.readability_problems(fig)
    finally:
        plt.close(fig)
    assert problems == ["bars 'true count' hidden under bars 'estimate' in axes 0"]


def _spy_on_figures(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Record, for each figure plot_histogram_estimate saves, what its first axes shows."""
    import shuffledp.plotting as plotting

    seen: list[dict[str, object]] = []
    original = plotting.save_readable

    def spy(fig, path, **options):
        ax = fig.axes[0]
        written = original(fig, path, **options)  # titles wrapped, then measured
        seen.append(
            {
                "ylabel": ax.get_ylabel(),
                "xlabel": ax.get_xlabel(),
                "title": ax.get_title().replace("\n", " "),
                "names": [t.get_text() for t in ax.get_yticklabels()],
                "bars": [len(c.patches) for c in ax.containers if hasattr(c, "orientation")],
                "horizontal": all(c.orientation == "horizontal" for c in ax.containers
                                  if hasattr(c, "orientation")),
            }
        )  # fmt: skip
        return written

    monkeypatch.setattr(plotting, "save_readable", spy)
    return seen


@pytest.mark.parametrize("d", [10, 87, 336])
def test_run_flip_plot_at_many_long_labels(d, tmp_path, monkeypatch, capsys):
    labels = _long_labels(d)
    weights = 1.0 / np.arange(1, d + 1) ** 1.1
    rng = np.random.default_rng(d)
    values = rng.choice(labels, p=weights / weights.sum(), size=20_000)
    data = tmp_path / "airports.csv"
    data.write_text("destination_airport\n" + "\n".join(values) + "\n")
    (tmp_path / "domain.txt").write_text("\n".join(labels) + "\n")
    seen = _spy_on_figures(monkeypatch)
    plot = tmp_path / "flip.png"
    argv = [
        "run", "flip", "--input", str(data), "--column", "destination_airport",
        "--domain-file", str(tmp_path / "domain.txt"), "--epsilon", "1", "--delta", "1e-6",
        "--seed", "1", "--output", str(tmp_path / "r.json"), "--plot", str(plot), "--quiet",
    ]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    assert figure_checks.checked(plot)
    (figure,) = seen
    release = json.loads((tmp_path / "r.json").read_text())
    counts = np.array(release["estimate"]["counts"], dtype=np.float64)
    drawn = min(d, TOP_BARS)
    if d > MAX_BARS:
        order = np.argsort(-counts, kind="stable")[:TOP_BARS]
        assert f"top {TOP_BARS} of {d} labels by estimate" in figure["title"]
        assert "all labels are in the JSON release" in figure["title"]
    else:
        order = np.arange(d)
        assert "top" not in figure["title"]
    assert figure["names"] == shown_labels([release["domain"][i] for i in order])[0]
    assert figure["bars"] == [drawn] and figure["horizontal"]
    assert figure["ylabel"] == "destination_airport" and figure["xlabel"] == "users"
    assert "shortened" in figure["title"]  # the labels are 54 to 77 characters long


@pytest.fixture
def city_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(4)
    values = rng.choice(LABELS, p=WEIGHTS, size=4000)
    path = tmp_path / "d.csv"
    path.write_text("destination_airport_of_the_flight\n" + "\n".join(values) + "\n")
    return path


@pytest.mark.parametrize("protocol", ["flip", "krr", "correlated", "augmented"])
def test_run_plots(protocol, city_file, tmp_path, capsys):
    plot = tmp_path / f"{protocol}.png"
    code = main(
        [
            "run",
            protocol,
            "--input",
            str(city_file),
            "--column",
            "destination_airport_of_the_flight",
            "--domain",
            ",".join(LABELS),
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--seed",
            "1",
            "--output",
            str(tmp_path / "r.json"),
            "--plot",
            str(plot),
            "--quiet",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert figure_checks.checked(plot)


def test_segmented_run_plot_says_what_it_counts(tmp_path, capsys):
    rng = np.random.default_rng(5)
    rows = ["user,item,level"]
    for u in range(1200):
        for item in rng.choice(LABELS, size=rng.integers(1, 5), replace=False):
            rows.append(f"u{u},{item},{('1', '2')[u % 2]}")
    data = tmp_path / "sets.csv"
    data.write_text("\n".join(rows) + "\n")
    plot = tmp_path / "seg.png"
    argv = [
        "run",
        "segmented",
        "--input",
        str(data),
        "--user-column",
        "user",
        "--item-column",
        "item",
        "--level-column",
        "level",
        "--levels",
        "1,2",
        "--delta",
        "1e-5",
        "--items-per-user",
        "2",
        "--padding",
        "--domain",
        ",".join(LABELS),
        "--blanket",
        "1.5",
        "--seed",
        "2",
        "--output",
        str(tmp_path / "r.json"),
        "--plot",
        str(plot),
    ]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert figure_checks.checked(plot)
    summary = err.splitlines()[0]
    assert "estimates the share of users whose set, sampled to 2 items, holds each item" in summary
    assert "sets had more than 2 items and were sampled" in summary


def test_segmented_count_axis_is_the_estimand(monkeypatch, tmp_path):
    seen = _spy_on_figures(monkeypatch)
    est = HistogramEstimate(LABELS, np.arange(5.0), np.ones(5), 10, "segmented-pooled", True)
    ylabel = "users whose set holds the item\n(sets of more than 2 items sampled to 2)"
    plot_histogram_estimate(est, tmp_path / "p.png", ylabel=ylabel, label_name="item")
    assert seen[0]["xlabel"] == ylabel and seen[0]["ylabel"] == "item"


def test_many_bins_and_the_demo(tmp_path, capsys):
    d = MAX_BARS + 50
    counts = np.linspace(1.0, 500.0, d)
    est = HistogramEstimate(
        [f"a rather long value label {j}" for j in range(d)],
        counts,
        np.full(d, 12.0),
        10_000,
        "inversion",
        True,
    )
    path = plot_histogram_estimate(
        est, tmp_path / "many.png", title="k-RR (inversion) estimate of 'x' " * 4
    )
    assert figure_checks.checked(path)
    code = main(["demo", "--n", "20000", "--seed", "3", "--output-dir", str(tmp_path / "demo")])
    assert code == 0, capsys.readouterr().err
    assert figure_checks.checked(tmp_path / "demo" / "flip_demo.png")


@pytest.mark.parametrize("ks", [(5,), (5, 10)], ids=["one data set", "two data sets"])
def test_krr_vs_gaussian(ks, tmp_path):
    config = ExperimentConfig(ks=ks, ns=(300,), epsilons=(0.5, 4.0), repetitions=2, x0s=(1,))
    run_krr_vs_gaussian(config, tmp_path)
    for name in ("community", "sweep", "individual"):
        assert figure_checks.checked(tmp_path / f"krr_vs_gaussian_{name}.png")


@pytest.mark.parametrize(
    ("script", "figure"),
    [
        ("make_flip_figures.py", "flip_delta_vs_epsilon.png"),
        pytest.param(
            "make_accounting_figures.py", "accounting_epsilon_vs_n.png", marks=pytest.mark.slow
        ),
        pytest.param(
            "make_near_central_figures.py", "near_central_by_epsilon.png", marks=pytest.mark.slow
        ),
    ],
)
def test_docs_figure_scripts(script, figure, tmp_path, monkeypatch, capsys):
    folder = ROOT / "docs" / "figures"
    monkeypatch.syspath_prepend(str(folder))
    argv = [script, "--quick", "--figures-dir", str(tmp_path)]
    drawn = tmp_path  # where the figure is drawn, then measured
    options = subprocess.run(
        [sys.executable, str(folder / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    if "--output-dir" in options:  # drawn there, copied to the figures
        drawn = tmp_path / "out"
        argv += ["--output-dir", str(drawn)]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(folder / script), run_name="__main__")
    assert figure_checks.checked(drawn / figure) and (tmp_path / figure).is_file()
