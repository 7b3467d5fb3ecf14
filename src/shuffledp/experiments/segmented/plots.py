"""Figures for :mod:`shuffledp.experiments.segmented` (needs the ``plot`` extra).

* ``segmented_<data>_n<n>_s<s>.png``: MSE against the blanket rate m (the
  paper's Figs 2–6), one panel per share setting; our protocol with the exact
  and the paper (Eq. 7) accounting, with error bars (± one standard error),
  the ``dummy`` variant where it ran, and each baseline as a horizontal line
  with its ± one standard error band. Integer m are marked: there the exact δ
  jumps (γ = 1).
* ``segmented_<data>_lambda.png``: λ_k(m) from the exact accountant and from
  Eq. 7, what the exact accountant certifies for Eq. 7's λ_k (δ over the
  target), and the exact per-slot δ′ over Lemma 3's at Eq. 7's λ_k. Lines
  join only the grid points inside one interval (k, k + 1); every integer m
  in the grid's range (computed for this figure when the grid lacks it) is a
  point of its own, because λ jumps there (γ = 1).

Imports nothing else of this package: it draws from the rows and the summary
it is given.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp._wording import plural
from shuffledp.plotting import legend_outside, require_matplotlib, save_readable

__all__ = ["plot_segmented"]

_BASELINE_STYLE = {
    "subexp-local": ("#7f7f7f", "Subexp, local (ε=2)"),
    "subexp-shuffle": ("#937860", "Subexp, shuffle"),
    "mm-shuffle": ("#dd8452", "MM, shuffle"),
    "sepmm": ("#c44e52", "SepMM"),
    "weighted-sepmm": ("#da8bc3", "Weighted SepMM"),
}
_OURS_STYLE = {
    ("paper", "exact"): ("#4c72b0", "o", "-", "ours, exact accountant (certified)"),
    ("paper", "paper"): ("#55a868", "s", "--", "ours, Eq. 7 + Lemma 3 (paper)"),
    ("dummy", "exact"): ("#64b5cd", "^", ":", "ours, dummy variant (certified)"),
}
_M_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 10.0)
#: Ticks of a narrow panel whose grid spans more than two decades (the others run together).
_M_TICKS_COARSE = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
_LEVEL_COLOURS = ("#c44e52", "#dd8452", "#55a868", "#4c72b0", "#8172b3")


def plot_segmented(
    rows: list[dict[str, Any]], summary: dict[str, Any], out: Path, data: str
) -> list[Path]:
    """Write the MSE-against-m figures (one per (n, s)) and the λ figure; return their paths."""
    plt = require_matplotlib()
    written = []
    settings = sorted({(r["n"], r["items_per_user"]) for r in rows})
    for n, s in settings:
        written.append(_mse_figure(plt, rows, out, data, n, s))
    eq7 = summary.get("eq7", {})
    if eq7.get("points"):
        written.append(_lambda_figure(plt, eq7, summary["config"]["levels"], out, data))
    return written


def _mse_figure(plt: Any, rows: list[dict[str, Any]], out: Path, data: str, n: int, s: int) -> Path:
    mine = [r for r in rows if r["n"] == n and r["items_per_user"] == s]
    shares = list(dict.fromkeys(r["shares"] for r in mine))
    d = mine[0]["domain_size"]
    width = max(7.5, 5.0 * len(shares))
    fig, axes = plt.subplots(
        1, len(shares), figsize=(width, 5.6), squeeze=False, layout="constrained"
    )
    for ax, share in zip(axes[0], shares, strict=True):
        panel = [r for r in mine if r["shares"] == share]
        base = [r for r in panel if r["accounting"] == "own" and math.isfinite(r["mse_mean"])]
        ours = [r for r in panel if r["mechanism"] == "segmented"]
        finite = [r["mse_mean"] for r in ours + base if math.isfinite(r["mse_mean"])]
        top = 20.0 * max((r["mse_mean"] for r in base), default=max(finite, default=1.0))
        bottom = 0.5 * min(finite, default=top / 1e3)
        grid = sorted({r["blanket_rate"] for r in ours})
        for m in grid:
            if m == math.floor(m):
                ax.axvline(m, color="#bbbbbb", linewidth=0.6, linestyle=":", zorder=0)
        for r in base:
            colour, label = _BASELINE_STYLE.get(r["mechanism"], ("#444444", r["mechanism"]))
            mean, se = r["mse_mean"], r["mse_se"] if math.isfinite(r["mse_se"]) else 0.0
            ax.axhline(mean, color=colour, linewidth=1.2, label=label)
            ax.axhspan(max(mean - se, bottom), mean + se, color=colour, alpha=0.15, linewidth=0)
        for (variant, accounting), (colour, marker, style, label) in _OURS_STYLE.items():
            curve = sorted(
                (r for r in ours if r["variant"] == variant and r["accounting"] == accounting),
                key=lambda r: r["blanket_rate"],
            )
            if not curve:
                continue
            m = np.array([r["blanket_rate"] for r in curve])
            mse = np.array([r["mse_mean"] for r in curve], dtype=np.float64)
            se = np.array([r["mse_se"] for r in curve], dtype=np.float64)
            se = np.where(np.isfinite(se), se, 0.0)
            shown = np.isfinite(mse) & (mse <= top)
            ax.errorbar(
                m[shown],
                mse[shown],
                yerr=se[shown],
                color=colour,
                marker=marker,
                linestyle=style,
                markersize=4,
                capsize=2,
                linewidth=1.2,
                label=label,
            )
            off = ~shown
            if np.any(off):
                ax.scatter(
                    m[off],
                    np.full(int(off.sum()), top * 0.8),
                    marker="^",
                    color=colour,
                    s=30,
                    label=f"{label.split(',')[0]}: off scale (MSE > {top:.2g})",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom, top)
        ticks = [t for t in _M_TICKS if grid and grid[0] * 0.9 <= t <= grid[-1] * 1.1]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_xlabel("blanket messages per user m")
        ax.set_ylabel("Σ_j (ŵ_j − w_j)²  (w: the data's own frequencies)")
        reps = max((r["repetitions"] for r in panel), default=0)
        ax.set_title(f"{share}, {plural(reps, 'repetition')}", fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
    unique: dict[str, Any] = {}
    for ax in axes[0]:  # every panel's entries (an off-scale marker may be in one only)
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            unique.setdefault(label, handle)
    # Below the panels, where it covers no curve or band.
    fig.legend(
        list(unique.values()), list(unique.keys()), loc="outside lower center", ncol=3, fontsize=7.5
    )
    fig.suptitle(
        f"Segmented protocol vs baselines: {data}, d={d}, s={s}, n={n:,}\n"
        "levels (0.5, 1, 2), δ = 0.01/n; bars and bands: ± one standard error",
        fontsize=10,
    )
    path = out / f"segmented_{data}_n{n}_s{s}.png"
    return save_readable(fig, path, dpi=110, close=True)


def _runs(m: np.ndarray) -> list[np.ndarray]:
    """Indices of the non-integer m, in runs that share one interval (k, k + 1)."""
    inside = [i for i in np.argsort(m) if m[i] != math.floor(m[i])]
    runs: list[list[int]] = []
    for i in inside:
        if runs and math.floor(m[runs[-1][-1]]) == math.floor(m[i]):
            runs[-1].append(int(i))
        else:
            runs.append([int(i)])
    return [np.array(r, dtype=np.int64) for r in runs]


def _draw(
    ax: Any, m: np.ndarray, y: np.ndarray, colour: str, marker: str, style: str, label: str
) -> None:
    """Plot y against m: lines within each (k, k + 1), the integer m as points of their own."""
    for j, run in enumerate(_runs(m)):
        ax.plot(
            m[run],
            y[run],
            marker=marker,
            linestyle=style,
            color=colour,
            ms=3,
            label=label if j == 0 else None,
        )
    integer = np.array([v == math.floor(v) for v in m], dtype=bool)
    if np.any(integer):
        ax.plot(
            m[integer],
            y[integer],
            marker=marker,
            linestyle="none",
            color=colour,
            ms=6,
            markerfacecolor="none",
        )


def _lambda_figure(
    plt: Any, eq7: dict[str, Any], levels: list[float], out: Path, data: str
) -> Path:
    groups: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for p in eq7["points"]:
        groups[(p["n"], p["items_per_user"])].append(p)
    keys = sorted(groups)
    fig, axes = plt.subplots(
        3,
        len(keys),
        figsize=(max(8.5, 4.4 * len(keys) + 1.6), 9.5),
        squeeze=False,
        layout="constrained",
    )
    for col, key in enumerate(keys):
        pts = sorted(groups[key], key=lambda p: p["blanket_rate"])
        m = np.array([p["blanket_rate"] for p in pts])
        for k, eps in enumerate(levels):
            colour = _LEVEL_COLOURS[k % len(_LEVEL_COLOURS)]
            exact = np.array([p["lambda_exact"][k] for p in pts])
            paper = np.array([p["lambda_eq7"][k] for p in pts])
            _draw(axes[0][col], m, exact, colour, "o", "-", f"E={eps:g}: exact")
            _draw(axes[0][col], m, paper, colour, "s", "--", f"E={eps:g}: Eq. 7")
            ratio = np.array([p["eq7_certified_delta_over_target"][k] for p in pts])
            _draw(axes[1][col], m, np.maximum(ratio, 1e-3), colour, "o", "-", f"E={eps:g}")
            slot = np.array(
                [
                    p["slot_delta_exact"][k] / p["slot_delta_lemma3"][k]
                    if p["slot_delta_lemma3"][k] > 0 and p["lambda_eq7"][k] < 1.0
                    else np.nan
                    for p in pts
                ]
            )
            _draw(axes[2][col], m, slot, colour, "o", "-", f"E={eps:g}")
        n, s = key
        axes[0][col].set_title(f"n={n:,}, s={s}", fontsize=9)
        axes[0][col].set_ylabel("λ_k")
        axes[1][col].axhline(1.0, color="#444444", linewidth=0.8)
        axes[1][col].set_yscale("log")
        axes[1][col].set_ylabel("certified δ(λ_Eq7) / target δ")
        axes[2][col].axhline(1.0, color="#444444", linewidth=0.8)
        axes[2][col].set_yscale("log")
        axes[2][col].set_ylabel("exact δ′ / Lemma 3's δ′\n(per slot, λ_Eq7 < 1)")
        choice = _M_TICKS_COARSE if m[-1] > 100 * m[0] else _M_TICKS
        ticks = [t for t in choice if m[0] * 0.9 <= t <= m[-1] * 1.1]
        for row in range(3):
            axes[row][col].set_xscale("log")
            axes[row][col].set_xticks(ticks, [f"{t:g}" for t in ticks])
            axes[row][col].xaxis.set_minor_formatter(plt.NullFormatter())
            axes[row][col].set_xlabel("m")
            axes[row][col].grid(True, alpha=0.3)
            for m_value in m:
                if m_value == math.floor(m_value):
                    axes[row][col].axvline(m_value, color="#bbbbbb", linewidth=0.6, linestyle=":")
    legend_outside(axes[0][-1], *axes[0][0].get_legend_handles_labels(), fontsize=6.5)
    legend_outside(axes[1][-1], *axes[1][0].get_legend_handles_labels(), fontsize=6.5)
    fig.suptitle(
        f"{data}: report probabilities from the exact accountant and from Eq. 7 (Lemma 3, Thm 3)\n"
        "lines join m inside one (k, k + 1); open markers: integer m, where λ jumps (γ = 1)",
        fontsize=10,
    )
    path = out / f"segmented_{data}_lambda.png"
    return save_readable(fig, path, dpi=110, close=True)
