"""Figures for :mod:`shuffledp.experiments.near_central` (needs the ``plot`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shuffledp.experiments.near_central_grid import NearCentralConfig, NearCentralRow
from shuffledp.plotting import legend_outside, require_matplotlib, save_readable

__all__ = ["plot_near_central"]

_STYLE: dict[str, tuple[str, str, str]] = {
    # protocol: (label, colour, line style)
    "flip": ("FLIP", "#dd8452", "-"),
    "krr": ("k-RR + inversion", "#c44e52", "-"),
    "correlated": ("correlated", "#55a868", "-"),
    "augmented": ("augmented", "#4c72b0", "-"),
    "central_laplace": ("central Laplace", "#8172b3", ":"),
    "central_discrete_laplace": ("central DLap(ε/2)", "#333333", "--"),
    "central_analytic_gaussian": ("central analytic Gaussian", "#937860", ":"),
}


def _series(
    rows: list[NearCentralRow], name: str, key: str, *, epsilon: float | None, n: int | None
) -> tuple[list[float], list[float], list[float]]:
    chosen = [
        r
        for r in rows
        if r.protocol == name
        and (epsilon is None or r.epsilon == epsilon)
        and (n is None or r.n == n)
    ]
    chosen.sort(key=lambda r: r.n if key == "n" else r.epsilon)
    xs = [float(r.n if key == "n" else r.epsilon) for r in chosen]
    ys = [r.per_bin_std for r in chosen]
    errs = [2.0 * r.per_bin_std_se if r.per_bin_std_se == r.per_bin_std_se else 0.0 for r in chosen]
    return xs, ys, errs


def _plain_ticks(ax: Any) -> None:
    """Tick labels as plain numbers (2, 3, 6) rather than powers of ten.

    Over more than a decade only the minor ticks at 2 and 5 times a power of
    ten are labelled (all of them would run into each other).
    """
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _: f"{value:g}")

    def minor_formatter(axis: Any) -> Any:
        def label(value: float, _: int) -> str:
            low, high = sorted(axis.get_view_interval())
            if low > 0 and high / low > 10 and f"{value:.0e}"[0] not in "25":
                return ""
            return f"{value:g}"

        return FuncFormatter(label)

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(minor_formatter(axis))


def _data_ticks(ax: Any, xs: set[float], key: str) -> None:
    """Label the x axis at the grid's values only (n with thousands separators, ε plain)."""
    from matplotlib.ticker import NullFormatter

    ticks = sorted(xs)
    ax.set_xticks(ticks, [f"{x:,.0f}" if key == "n" else f"{x:g}" for x in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())


def _lines(ax: Any, rows: list[NearCentralRow], key: str, **where: Any) -> None:
    drawn: set[float] = set()
    for name, (label, colour, style) in _STYLE.items():
        xs, ys, errs = _series(rows, name, key, **where)
        drawn.update(xs)
        if xs:
            ax.errorbar(
                xs,
                ys,
                yerr=errs,
                label=label,
                color=colour,
                linestyle=style,
                marker="o",
                markersize=3,
                capsize=2,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_ticks(ax)
    if drawn:
        _data_ticks(ax, drawn, key)
    ax.set_ylabel("per-bin std of the error (users)")
    ax.grid(True, which="both", alpha=0.3)


def plot_near_central(
    rows: list[NearCentralRow], config: NearCentralConfig, out: Path
) -> list[Path]:
    """Write the error against n, the error against ε and the messages per user."""
    plt = require_matplotlib()
    written = []
    setting = f"d = {config.d}, δ = {config.delta:g}, replacement"
    bars = "; bars: ± 2 standard errors"

    fig, ax = plt.subplots(figsize=(7.5, 5.0), layout="constrained")
    _lines(ax, rows, "n", epsilon=config.epsilon, n=None)
    ax.set_xlabel("users n")
    ax.set_title(f"Per-bin error against n at ε = {config.epsilon:g}\n{setting}{bars}")
    legend_outside(ax)
    written.append(save_readable(fig, out / "near_central_by_n.png", dpi=120, close=True))

    fig, ax = plt.subplots(figsize=(7.5, 5.0), layout="constrained")
    _lines(ax, rows, "epsilon", epsilon=None, n=config.sweep_n)
    ax.set_xlabel("ε")
    ax.set_title(f"Per-bin error against ε at n = {config.sweep_n:,}\n{setting}{bars}")
    legend_outside(ax)
    written.append(save_readable(fig, out / "near_central_by_epsilon.png", dpi=120, close=True))

    fig, ax = plt.subplots(figsize=(7.5, 5.0), layout="constrained")
    sizes: set[float] = set()
    for name in ("flip", "krr", "correlated", "augmented"):
        label, colour, style = _STYLE[name]
        chosen = sorted(
            (r for r in rows if r.protocol == name and r.epsilon == config.epsilon),
            key=lambda r: r.n,
        )
        sizes.update(float(r.n) for r in chosen)
        if chosen:
            ax.plot(
                [r.n for r in chosen],
                [r.messages_per_user for r in chosen],
                label=label,
                color=colour,
                linestyle=style,
                marker="o",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_ticks(ax)
    if sizes:
        _data_ticks(ax, sizes, "n")
    ax.set_xlabel("users n")
    ax.set_ylabel("messages per user")
    ax.set_title(f"Messages per user at ε = {config.epsilon:g}\n{setting}")
    ax.grid(True, which="both", alpha=0.3)
    legend_outside(ax)
    written.append(save_readable(fig, out / "near_central_messages.png", dpi=120, close=True))
    return written
