"""Figures for :mod:`shuffledp.experiments.krr_vs_gaussian` (needs the ``plot`` extra)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.plotting import require_matplotlib, save_readable

__all__ = ["plot_krr_vs_gaussian"]

_COLOURS = {
    "gaussian": "#4c72b0",
    "laplace": "#8172b3",
    "shuffle": "#dd8452",
    "shuffle+INV": "#55a868",
}
_MECHS = tuple(_COLOURS)
_SOURCES = {
    "paper": "δ from the paper's printed formula",
    "exact": "exact worst-case δ (certified)",
}

Values = dict[tuple[Any, ...], list[float]]


def _pick_epsilon(rows: list[dict[str, Any]]) -> float:
    """A target ε below ε₀ where δ > 0 (1 if run), else the smallest one."""
    eps = sorted({r["epsilon"] for r in rows})
    return 1.0 if 1.0 in eps else eps[0]


def _group(rows: list[dict[str, Any]]) -> Values:
    """Values by (metric, data, δ source, ε, mechanism, x0), NaNs dropped, in one pass."""
    out: Values = defaultdict(list)
    for r in rows:
        if not math.isnan(r["value"]):
            key = (r["metric"], r["data"], r["delta_source"], r["epsilon"], r["mechanism"], r["x0"])
            out[key].append(r["value"])
    return out


def _panels(
    plt: Any,
    data_names: list[str],
    path: Path,
    draw: Callable[[Any, str, str], None],
    *,
    title: str = "",
    sharex: bool = False,
) -> Path:
    """One row per δ source, one column per data set; ``draw(ax, source, data)`` fills each."""
    fig, axes = plt.subplots(
        2,
        len(data_names),
        figsize=(3.4 * len(data_names) + 1.2, 7.0),
        squeeze=False,
        sharex=sharex,
        layout="constrained",
    )
    for i, source in enumerate(_SOURCES):
        for j, name in enumerate(data_names):
            draw(axes[i][j], source, name)
    handles = [plt.Rectangle((0, 0), 1, 1, color=_COLOURS[m], alpha=0.7) for m in _MECHS]
    # Below the panels, where it covers no box or line.
    fig.legend(handles, list(_MECHS), loc="outside lower center", ncol=len(_MECHS), fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_readable(fig, path, dpi=110, close=True)


def _boxes(
    ax: Any, groups: list[list[float]], positions: list[float], colour: str, width: float
) -> None:
    parts = ax.boxplot(
        [g or [math.nan] for g in groups],
        positions=positions,
        widths=width,
        patch_artist=True,
        manage_ticks=False,
        showfliers=False,
    )
    for patch in parts["boxes"]:
        patch.set_facecolor(colour)
        patch.set_alpha(0.7)


def plot_krr_vs_gaussian(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """Write the community box plots, the ε sweep and the individual box plots."""
    plt = require_matplotlib()
    data_names = list(dict.fromkeys(r["data"] for r in rows))
    eps_star = _pick_epsilon(rows)
    eps0 = rows[0]["epsilon0"]
    eps_values = sorted({r["epsilon"] for r in rows})
    values = _group(rows)
    deltas = {
        (r["data"], r["delta_source"], r["epsilon"]): r["delta"]
        for r in rows
        if r["metric"] == "tv"
    }

    def community(ax: Any, source: str, name: str) -> None:
        for m_index, mech in enumerate(_MECHS):
            tv = values.get(("tv", name, source, eps_star, mech, ""), [])
            _boxes(ax, [tv], [m_index], _COLOURS[mech], 0.6)
        ax.set_xticks(range(len(_MECHS)), list(_MECHS), fontsize=7, rotation=30)
        delta = deltas.get((name, source, eps_star), math.nan)
        ax.set_title(f"{name}\n{source}: δ={delta:.2g}", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("TV distance to the truth")

    def sweep(ax: Any, source: str, name: str) -> None:
        for mech in _MECHS:
            stats = [values.get(("tv", name, source, e, mech, ""), []) for e in eps_values]
            med = [np.median(v) if v else np.nan for v in stats]
            lo = [np.percentile(v, 25) if v else np.nan for v in stats]
            hi = [np.percentile(v, 75) if v else np.nan for v in stats]
            ax.plot(eps_values, med, "o-", color=_COLOURS[mech], ms=3)
            ax.fill_between(eps_values, lo, hi, color=_COLOURS[mech], alpha=0.2)
        ax.set_yscale("log")
        ax.set_title(f"{name} ({source} δ)", fontsize=8)
        ax.set_xlabel(f"target ε (ε₀ = {eps0:g})")
        ax.set_ylabel("median TV distance")

    def individual(ax: Any, source: str, name: str) -> None:
        x0s = sorted({key[5] for key in values if key[0] == "individual" and key[1] == name})
        width = 0.8 / len(_MECHS)
        for m_index, mech in enumerate(_MECHS):
            groups = [
                [
                    max(v, 0.1)
                    for v in values.get(("individual", name, source, eps_star, mech, x), [])
                ]
                for x in x0s
            ]
            offset = (m_index - (len(_MECHS) - 1) / 2) * width
            _boxes(ax, groups, [g + offset for g in range(len(x0s))], _COLOURS[mech], width * 0.9)
        ax.set_xticks(range(len(x0s)), [f"x₀={x}" for x in x0s], fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{name} ({source} δ)", fontsize=8)
        ax.set_ylabel("|n·π̂_x0 − n·π_x0| (floored at 0.1)")

    rows_title = f"top: {_SOURCES['paper']}; bottom: {_SOURCES['exact']}"
    return [
        _panels(
            plt,
            data_names,
            out / "krr_vs_gaussian_community.png",
            community,
            title=f"Community utility at ε = {eps_star:g}, ε₀ = {eps0:g}\n{rows_title}",
        ),
        _panels(
            plt,
            data_names,
            out / "krr_vs_gaussian_sweep.png",
            sweep,
            sharex=True,
            title=f"Median TV distance against the target ε\n{rows_title}",
        ),
        _panels(
            plt,
            data_names,
            out / "krr_vs_gaussian_individual.png",
            individual,
            title=f"Individual-specific utility at ε = {eps_star:g}, ε₀ = {eps0:g}\n{rows_title}",
        ),
    ]
