"""Figures for :mod:`shuffledp.experiments.krr_vs_gaussian` (needs the ``plot`` extra)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.plotting import require_matplotlib

__all__ = ["plot_krr_vs_gaussian"]

_COLOURS = {
    "gaussian": "#4c72b0",
    "laplace": "#8172b3",
    "shuffle": "#dd8452",
    "shuffle+INV": "#55a868",
}
_MECHS = ("gaussian", "laplace", "shuffle", "shuffle+INV")
_SOURCES = {
    "paper": "δ from the paper's printed formula",
    "exact": "exact worst-case δ (certified)",
}


def _pick_epsilon(rows: list[dict[str, Any]]) -> float:
    """A target ε below ε₀ where δ > 0 (1 if run), else the smallest one."""
    eps = sorted({r["epsilon"] for r in rows})
    return 1.0 if 1.0 in eps else eps[0]


def _boxes(ax: Any, groups: list[list[float]], labels: list[str], colours: list[str]) -> None:
    clean = [[v for v in g if not math.isnan(v)] or [math.nan] for g in groups]
    parts = ax.boxplot(clean, patch_artist=True, widths=0.6)
    for patch, colour in zip(parts["boxes"], colours, strict=True):
        patch.set_facecolor(colour)
        patch.set_alpha(0.7)
    ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=7, rotation=30)


def plot_krr_vs_gaussian(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """Write the community box plots, the ε sweep and the individual box plots."""
    plt = require_matplotlib()
    data_names = list(dict.fromkeys(r["data"] for r in rows))
    eps_star = _pick_epsilon(rows)
    written = []

    # 1. Community utility at the Table-4 ε.
    fig, axes = plt.subplots(
        2, len(data_names), figsize=(3.2 * len(data_names) + 1, 6.5), squeeze=False
    )
    for i, source in enumerate(_SOURCES):
        for j, name in enumerate(data_names):
            ax = axes[i][j]
            sel = [
                r
                for r in rows
                if r["data"] == name
                and r["delta_source"] == source
                and r["metric"] == "tv"
                and r["epsilon"] == eps_star
            ]
            groups = [[r["value"] for r in sel if r["mechanism"] == m] for m in _MECHS]
            _boxes(ax, groups, list(_MECHS), [_COLOURS[m] for m in _MECHS])
            delta = sel[0]["delta"] if sel else math.nan
            ax.set_title(f"{name}\n{source}: δ={delta:.2g}", fontsize=8)
            ax.set_yscale("log")
            if j == 0:
                ax.set_ylabel("TV distance to the truth")
    eps0 = rows[0]["epsilon0"]
    fig.suptitle(
        f"Community utility at ε = {eps_star:g}, ε₀ = {eps0:g}\n"
        f"top: {_SOURCES['paper']}; bottom: {_SOURCES['exact']}",
        fontsize=10,
    )
    fig.tight_layout()
    path = out / "krr_vs_gaussian_community.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # 2. Sweep over ε: median TV with the interquartile range.
    fig, axes = plt.subplots(
        2, len(data_names), figsize=(3.2 * len(data_names) + 1, 6.5), squeeze=False, sharex=True
    )
    for i, source in enumerate(_SOURCES):
        for j, name in enumerate(data_names):
            ax = axes[i][j]
            for mech in _MECHS:
                eps_values = sorted({r["epsilon"] for r in rows if r["data"] == name})
                med, lo, hi = [], [], []
                for eps in eps_values:
                    vals = np.array(
                        [
                            r["value"]
                            for r in rows
                            if r["data"] == name
                            and r["delta_source"] == source
                            and r["metric"] == "tv"
                            and r["mechanism"] == mech
                            and r["epsilon"] == eps
                        ]
                    )
                    vals = vals[~np.isnan(vals)]
                    if vals.size == 0:
                        med.append(np.nan)
                        lo.append(np.nan)
                        hi.append(np.nan)
                    else:
                        med.append(np.median(vals))
                        lo.append(np.percentile(vals, 25))
                        hi.append(np.percentile(vals, 75))
                ax.plot(eps_values, med, "o-", color=_COLOURS[mech], label=mech, ms=3)
                ax.fill_between(eps_values, lo, hi, color=_COLOURS[mech], alpha=0.2)
            ax.set_yscale("log")
            ax.set_title(f"{name} ({source} δ)", fontsize=8)
            if i == 1:
                ax.set_xlabel(f"target ε (ε₀ = {rows[0]['epsilon0']:g})")
            if j == 0:
                ax.set_ylabel("median TV distance")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    path = out / "krr_vs_gaussian_sweep.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # 3. Individual-specific utility at the same ε, grouped by x0.
    fig, axes = plt.subplots(
        2, len(data_names), figsize=(3.2 * len(data_names) + 1, 6.5), squeeze=False
    )
    width = 0.8 / len(_MECHS)
    for i, source in enumerate(_SOURCES):
        for j, name in enumerate(data_names):
            ax = axes[i][j]
            sel = [
                r
                for r in rows
                if r["data"] == name
                and r["delta_source"] == source
                and r["metric"] == "individual"
                and r["epsilon"] == eps_star
            ]
            x0s = sorted({r["x0"] for r in sel})
            for m_index, mech in enumerate(_MECHS):
                groups = [
                    [
                        max(r["value"], 0.1)
                        for r in sel
                        if r["x0"] == x and r["mechanism"] == mech and not math.isnan(r["value"])
                    ]
                    or [math.nan]
                    for x in x0s
                ]
                positions = [g + (m_index - (len(_MECHS) - 1) / 2) * width for g in range(len(x0s))]
                parts = ax.boxplot(
                    groups,
                    positions=positions,
                    widths=width * 0.9,
                    patch_artist=True,
                    manage_ticks=False,
                    showfliers=False,
                )
                for patch in parts["boxes"]:
                    patch.set_facecolor(_COLOURS[mech])
                    patch.set_alpha(0.7)
            ax.set_xticks(range(len(x0s)), [f"x₀={x}" for x in x0s], fontsize=7)
            ax.set_yscale("log")
            ax.set_title(f"{name} ({source} δ)", fontsize=8)
            if j == 0:
                ax.set_ylabel("|n·π̂_x0 − n·π_x0| (floored at 0.1)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=_COLOURS[m], alpha=0.7) for m in _MECHS]
    axes[0][-1].legend(handles, list(_MECHS), fontsize=7)
    fig.suptitle(
        f"Individual-specific utility at ε = {eps_star:g}, ε₀ = {rows[0]['epsilon0']:g}",
        fontsize=10,
    )
    fig.tight_layout()
    path = out / "krr_vs_gaussian_individual.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written
