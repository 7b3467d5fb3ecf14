"""Figures for :mod:`shuffledp.experiments.per_user` (needs the ``plot`` extra).

``eps1_sweep.png`` (the ε₁ sweep with the empirical optimum and Thm 4's
recommendation), ``baselines.png`` (error of every release at the chosen ε₁,
all (ε, 0, c)-hDP), ``epsilon_prime.png`` (the per-user ε′ of the shuffled-T
release for every c, conditional on the grouping) and ``thm3.png`` (Thm 3's
per-user bound against the measured error).

Imports nothing else of this package: it draws from the rows, the runs and the
summary it is given.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp._wording import plural
from shuffledp.plotting import legend_outside, require_matplotlib, save_readable

__all__ = ["plot_per_user"]

_COLOURS = {"t": "#4c72b0", "r": "#dd8452"}
_LABELS = {"t": "t: shuffled T (groups from W)", "r": "r: shuffled R (Alg. 1 as printed)"}


def _num(value: Any) -> float:
    """A CSV cell as a float (empty cells are NaN)."""
    if value is None or value == "":
        return math.nan
    return float(value)


def _sweep_figure(plt: Any, rows: list[dict[str, Any]], epsilon: float, path: Path) -> Path:
    fig, axes = plt.subplots(2, 2, figsize=(10, 8.0), sharex=True, layout="constrained")
    panels = (
        ("l1", "mean per-user L1 error (solid: raw; dashed: on the simplex)"),
        ("topk_precision", f"top-{rows[0]['topk']} precision"),
        (
            "pure_group_fraction",
            "users in a pure group (solid); in their group's majority cluster (dashed)",
        ),
        ("ari_groups_vs_true", "ARI of the groups vs the true clusters"),
    )
    thm4 = _num(rows[0]["thm4_epsilon1"])
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        available = False
        for release, colour in _COLOURS.items():
            mine = [r for r in rows if r["release"] == release]
            x = np.array([r["epsilon1"] for r in mine], dtype=np.float64)
            y = np.array([_num(r[f"{key}_mean"]) for r in mine])
            err = np.nan_to_num(np.array([_num(r[f"{key}_se"]) for r in mine]))
            if np.all(np.isnan(y)):
                continue
            available = True
            ax.errorbar(
                x, y, yerr=err, color=colour, marker="o", ms=3, capsize=2, label=_LABELS[release]
            )
            if key == "pure_group_fraction":
                majority = [_num(r["majority_cluster_fraction_mean"]) for r in mine]
                ax.plot(x, majority, color=colour, ls="--", marker=".", ms=3)
            if key == "l1":
                simplex = [_num(r["l1_simplex_mean"]) for r in mine]
                ax.plot(x, simplex, color=colour, ls="--", marker=".", ms=3)
                best = [r for r in mine if r["empirical_optimum"] in (True, "True")]
                for r in best:
                    ax.axvline(r["epsilon1"], color=colour, ls=":", lw=1)
                    right = r["epsilon1"] > 0.6 * float(x.max())
                    ax.annotate(
                        f"optimum {release}: ε₁={r['epsilon1']:.2g}",
                        (r["epsilon1"], r["l1_mean"]),
                        textcoords="offset points",
                        xytext=(-4 if right else 4, 8 if release == "t" else -14),
                        ha="right" if right else "left",
                        fontsize=7,
                        color=colour,
                    )
        if not available:
            ax.text(
                0.5,
                0.5,
                "not available: no true clusters",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=9,
            )
        if math.isfinite(thm4):
            if thm4 <= epsilon:
                ax.axvline(thm4, color="black", ls="-.", lw=1, label="Thm 4's ε₁")
            elif key == "l1":
                title += f"\nThm 4's ε₁ = {thm4:.3g} > ε = {epsilon:g} (off chart)"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(f"ε₁ (ε = {epsilon:g}, c = {rows[0]['c']:g})")
    unique: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            unique.setdefault(label, handle)
    # Below the panels, where it covers no curve.
    fig.legend(
        list(unique.values()), list(unique.keys()), loc="outside lower center", ncol=3, fontsize=8
    )
    fig.suptitle(
        f"Per-user histograms, {rows[0]['data']} (n={rows[0]['n']}, d={rows[0]['d']}, "
        f"G={rows[0]['clusters']}): ε₁ sweep, mean ± s.e. over "
        f"{plural(int(rows[0]['repetitions']), 'run')}",
        fontsize=10,
    )
    return save_readable(fig, path, dpi=110, close=True)


def _baseline_figure(plt: Any, rows: list[dict[str, Any]], path: Path) -> Path:
    ok = [r for r in rows if r["status"] == "ok"]
    missing = [r["release"] for r in rows if r["status"] != "ok"]
    names = [r["release"] for r in ok]
    y = np.arange(len(ok))
    fig, axes = plt.subplots(
        1, 2, figsize=(11, 0.45 * len(ok) + 2.4), sharey=True, layout="constrained"
    )
    for ax, key, title in (
        (axes[0], "l1", "mean per-user L1 (bar: raw; dot: on the simplex)"),
        (axes[1], "topk_precision", f"top-{ok[0]['topk']} precision"),
    ):
        values = [r[f"{key}_mean"] for r in ok]
        errors = np.nan_to_num(np.array([_num(r[f"{key}_se"]) for r in ok]))
        ax.barh(y, values, xerr=errors, color="#4c72b0", alpha=0.75, capsize=2)
        if key == "l1":
            ax.plot([r["l1_simplex_mean"] for r in ok], y, "o", color="#c44e52", ms=4)
        ax.set_title(title, fontsize=9)
    axes[0].set_yticks(y, names, fontsize=8)
    axes[0].invert_yaxis()
    first = ok[0]
    caption = (
        f"ε = {first['epsilon']:g}, ε₁ = {first['epsilon1']:.3g}, c = {first['c']:g}; "
        f"every release is {first['guarantee']}"
    )
    if missing:
        caption += f"; not available: {', '.join(missing)}"
    fig.suptitle(f"Baselines, {first['data']}\n{caption}", fontsize=9)
    return save_readable(fig, path, dpi=110, close=True)


def _epsilon_prime_figure(
    plt: Any, rows: list[dict[str, Any]], summary: dict[str, Any], path: Path
) -> Path:
    cs = sorted({r["c"] for r in rows})
    fig, axes = plt.subplots(
        1, len(cs), figsize=(3.8 * len(cs), 4.4), squeeze=False, layout="constrained"
    )
    for ax, c in zip(axes[0], cs, strict=True):
        mine = [r for r in rows if r["c"] == c and r["grouping"] == "k-means"]
        truth = [r for r in rows if r["c"] == c and r["grouping"] != "k-means"]
        values = np.array([r["epsilon_prime"] for r in mine], dtype=np.float64)
        epsilon, epsilon1 = mine[0]["epsilon"], mine[0]["epsilon1"]
        bins = np.linspace(epsilon1, epsilon, 41)
        ax.hist(
            np.clip(values, epsilon1, epsilon),
            bins=bins,
            color="#4c72b0",
            alpha=0.8,
            label="k-means groups (the run's)",
        )
        if truth:
            other = np.array([r["epsilon_prime"] for r in truth], dtype=np.float64)
            ax.hist(
                np.clip(other, epsilon1, epsilon),
                bins=bins,
                color="#dd8452",
                alpha=0.6,
                label="true clusters as groups",
            )
        ax.axvline(epsilon, color="black", ls="--", lw=1, label=f"ε = {epsilon:g}")
        ax.axvline(epsilon1, color="grey", ls=":", lw=1, label=f"ε₁ = {epsilon1:.3g}")
        paper = [_num(r["paper_epsilon"]) for r in mine if r["paper_epsilon"] != ""]
        if paper:
            ax.plot(
                paper, np.zeros(len(paper)), "x", color="#c44e52", ms=7, label="App. C as printed"
            )
        ceiling = summary["epsilon_prime"][f"{c:g}"]["ceiling_largest_group"]
        ax.axvline(ceiling, color="#55a868", ls="-.", lw=1, label="ceiling (ρ = 0)")
        amplified = float(np.mean(values < epsilon - 1e-9))
        ax.set_title(
            f"c = {c:g}, k-means groups: median ε′ {np.median(values):.3g}, "
            f"{100 * amplified:.0f}% < ε",
            fontsize=9,
        )
        ax.set_xlabel("ε′ (shuffled T, conditional on the groups)")
    unique: dict[str, Any] = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            unique.setdefault(label, handle)
    # Below the panels, where it covers no bar or line.
    fig.legend(
        list(unique.values()), list(unique.keys()), loc="outside lower center", ncol=3, fontsize=7
    )
    axes[0][0].set_ylabel(f"users (sample of {rows[0]['sample_size']})")
    fig.suptitle(
        f"Per-user ε′ at δ = {rows[0]['delta']:g}, {rows[0]['data']} (analysis numbers, "
        "never released)",
        fontsize=10,
    )
    return save_readable(fig, path, dpi=110, close=True)


def _thm3_figure(plt: Any, runs: dict[str, list[dict[str, Any]]], path: Path) -> Path:
    available = [(release, items[0]) for release, items in runs.items() if items]
    fig, axes = plt.subplots(
        1, len(available), figsize=(6.0 * len(available), 4.4), squeeze=False, layout="constrained"
    )
    for ax, (release, run) in zip(axes[0], available, strict=True):
        bound = run["spread"] + run["expected_noise"]
        ax.scatter(
            bound,
            run["averaged"],
            s=4,
            alpha=0.4,
            color=_COLOURS[release],
            label="shuffle-averaged error",
        )
        ax.scatter(bound, run["measured"], s=2, alpha=0.2, color="grey", label="one realisation")
        top = float(max(bound.max(), run["measured"].max()))
        ax.plot([0, top], [0, top], color="black", lw=1)
        ax.set_title(
            f"{_LABELS[release]}\nprinted bound adds {run['printed_term']:.3g} "
            f"(vs E|noise|₁ = {run['expected_noise']:.3g})",
            fontsize=8,
        )
        ax.set_xlabel("Thm 3 bound, expectation version (spread + E‖noise‖₁)")
        ax.set_ylabel("‖Ĥ_i − H̄_i‖₁")
        legend_outside(ax, fontsize=7, markerscale=2)
    return save_readable(fig, path, dpi=110, close=True)


def plot_per_user(
    sweep_rows: list[dict[str, Any]],
    baseline_rows: list[dict[str, Any]],
    epsilon_rows: list[dict[str, Any]],
    thm3_runs: dict[str, list[dict[str, Any]]],
    summary: dict[str, Any],
    out: Path,
    *,
    epsilon: float,
) -> list[Path]:
    """Write the four figures; return their paths."""
    plt = require_matplotlib()
    return [
        _sweep_figure(plt, sweep_rows, epsilon, out / "eps1_sweep.png"),
        _baseline_figure(plt, baseline_rows, out / "baselines.png"),
        _epsilon_prime_figure(plt, epsilon_rows, summary, out / "epsilon_prime.png"),
        _thm3_figure(plt, thm3_runs, out / "thm3.png"),
    ]
