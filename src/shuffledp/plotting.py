"""Plots of histogram estimates, and what every figure of the package shares (the ``plot`` extra).

Every figure the package draws is readable at its default size: it is laid
out by matplotlib's constrained layout, its titles are wrapped to the room
they have (:func:`fit_titles`), and its legends sit outside the axes
(:func:`legend_outside`, or a figure legend at ``"outside …"``), so they
cover no data. :func:`save_readable` does the fitting and writes the file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp import _files
from shuffledp._optional import require
from shuffledp.analyzers.estimate import HistogramEstimate

__all__ = [
    "MAX_BARS",
    "TOP_BARS",
    "fit_titles",
    "legend_outside",
    "plot_histogram_estimate",
    "require_matplotlib",
    "save_readable",
]

#: Two-sided 95% normal quantile used for error bars.
Z95 = 1.959963984540054
#: Above this many bins a bar per bin is illegible: only the top bins are drawn.
MAX_BARS = 200
#: How many bins are drawn when the domain has more than MAX_BARS.
TOP_BARS = 50


def require_matplotlib() -> Any:
    """Return ``matplotlib.pyplot`` with a non-interactive backend, or raise naming the extra."""
    matplotlib = require("matplotlib", extra="plot")
    matplotlib.use("Agg")
    return require("matplotlib.pyplot", extra="plot")


#: Room kept between a title and the figure's edge or the next panel, in points.
TITLE_MARGIN_PT = 3.0
#: Shortest line (in characters) a title is wrapped to.
_MIN_WRAP = 8


def legend_outside(ax: Any, *args: Any, **kwargs: Any) -> Any:
    """Draw ``ax``'s legend to the right of the axes, top-aligned, where it covers no data.

    Arguments are those of ``Axes.legend`` (handles, labels, ``fontsize``, ...);
    the constrained layout makes room for it.
    """
    kwargs.setdefault("fontsize", 8)
    return ax.legend(
        *args, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs
    )


def _titles(fig: Any) -> list[tuple[Any, Any]]:
    """The figure's suptitle and every axes' titles with text, each with its axes (or None)."""
    out: list[tuple[Any, Any]] = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text():
        out.append((suptitle, None))
    for ax in fig.axes:
        for text in (ax.title, ax._left_title, ax._right_title):
            if text.get_text():
                out.append((text, ax))
    return out


def _room(fig: Any, text: Any, ax: Any, margin: float) -> float:
    """How wide (pixels) ``text`` may be: inside the figure, clear of the panels beside its axes."""
    width = fig.bbox.width
    left, right = margin, width - margin
    if ax is not None:
        box = ax.get_position()
        x0, x1 = box.x0 * width, box.x1 * width
        for other in fig.axes:
            if other is ax or not other.get_visible():
                continue
            o = other.get_position()
            if o.y1 <= box.y0 or o.y0 >= box.y1:  # not on the same row
                continue
            if o.x1 * width <= x0:
                left = max(left, o.x1 * width + margin)
            elif o.x0 * width >= x1:
                right = min(right, o.x0 * width - margin)
    anchor = text.get_transform().transform(text.get_unitless_position())[0]
    align = text.get_horizontalalignment()
    if align == "left":
        return float(right - anchor)
    if align == "right":
        return float(anchor - left)
    return float(2.0 * min(anchor - left, right - anchor))


def _wrap(text: Any, original: str, room: float, renderer: Any) -> None:
    """Set ``text`` to ``original`` wrapped at the widest line length that fits ``room``."""
    lines = original.split("\n")
    for chars in range(max(len(line) for line in lines) - 1, _MIN_WRAP - 1, -1):
        text.set_text(
            "\n".join(textwrap.fill(line, chars, break_on_hyphens=False) or line for line in lines)
        )
        if text.get_window_extent(renderer).width <= room:
            return


def fit_titles(fig: Any) -> None:
    """Wrap the suptitle and every axes title of ``fig`` so that each fits in its room.

    A title may span its axes and the gaps beside it but never cross into a
    neighbouring panel or past the figure's edge. The figure is laid out
    again after each wrapping (a title with more lines takes more height),
    until every title fits.
    """
    titles = _titles(fig)
    originals = [text.get_text() for text, _ in titles]
    margin = TITLE_MARGIN_PT * fig.dpi / 72.0
    for _ in range(4):
        fig.draw_without_rendering()  # the layout (constrained) and the text extents
        renderer = fig.canvas.get_renderer()
        changed = False
        for (text, ax), original in zip(titles, originals, strict=True):
            room = _room(fig, text, ax, margin)
            if text.get_window_extent(renderer).width > room:
                _wrap(text, original, room, renderer)
                changed = True
        if not changed:
            return


def save_readable(fig: Any, path: str | Path, *, dpi: int, close: bool = False) -> Path:
    """Fit the titles of ``fig`` (:func:`fit_titles`) and write it atomically to ``path``.

    Args:
        fig: The matplotlib figure.
        path: Where to write it (the format follows the suffix).
        dpi: Resolution.
        close: Close the figure afterwards, also when writing fails.

    Returns:
        The path written.
    """
    try:
        fit_titles(fig)
        return _files.save_figure(fig, Path(path), dpi=dpi)
    finally:
        if close:
            require_matplotlib().close(fig)


def plot_histogram_estimate(
    estimate: HistogramEstimate,
    path: str | Path,
    *,
    true_counts: NDArray[np.integer] | None = None,
    title: str = "",
    ylabel: str = "users",
) -> Path:
    """Write a bar chart of the estimated counts with 95% error bars.

    Above :data:`MAX_BARS` bins only the :data:`TOP_BARS` bins with the largest
    estimates are drawn, in decreasing order, and the title says so. Choosing
    them from the estimate is post-processing of the release, so it costs no
    privacy (choosing them from the true counts would not be). The title is
    wrapped to the figure's width and the legend sits beside the axes.

    Args:
        estimate: The estimate to draw.
        path: Where to write the image (the format follows the suffix, e.g. ``.png``).
        true_counts: Known true counts to overlay (only a demo or a simulation has them).
        title: Figure title.
        ylabel: What a count is (the y axis), default ``"users"``.

    Returns:
        The path written.
    """
    plt = require_matplotlib()
    counts = np.asarray(estimate.counts, dtype=np.float64)
    total_bins = len(counts)
    stderr = None if estimate.stderr is None else np.asarray(estimate.stderr, dtype=np.float64)
    labels = list(estimate.domain)
    title = title or f"{estimate.estimator} estimate (n={estimate.n})"
    if total_bins > MAX_BARS:
        shown = np.argsort(-counts, kind="stable")[:TOP_BARS]
        counts = counts[shown]
        stderr = None if stderr is None else stderr[shown]
        labels = [labels[i] for i in shown]
        if true_counts is not None:
            true_counts = np.asarray(true_counts)[shown]
        title = f"{title}\ntop {TOP_BARS} of {total_bins:,} bins by estimate"
    d = len(counts)
    x = np.arange(d)
    width = min(16.0, max(6.0, 0.12 * d + 3.0))
    yerr = None if stderr is None else Z95 * stderr
    if true_counts is None:
        fig, ax = plt.subplots(figsize=(width, 4.5), layout="constrained")
        axes = [ax]
    else:
        fig, axes = plt.subplots(
            2,
            1,
            figsize=(width, 7.0),
            sharex=True,
            gridspec_kw={"height_ratios": [3, 2]},
            layout="constrained",
        )
        ax = axes[0]
    ax.bar(x, counts, color="#4c72b0", label="estimate")
    if yerr is not None:
        ax.errorbar(
            x,
            counts,
            yerr=yerr,
            fmt="none",
            ecolor="#222222",
            elinewidth=0.8,
            capsize=1.5,
            label="95% interval",
        )
    if true_counts is not None:
        truth = np.asarray(true_counts, dtype=np.float64)
        ax.plot(x, truth, "_", color="#dd4444", markersize=9, mew=2, label="true count")
        resid = axes[1]
        resid.axhline(0.0, color="#888888", linewidth=0.6)
        if yerr is not None:
            resid.fill_between(
                x, -yerr, yerr, step="mid", color="#4c72b0", alpha=0.2, label="±95% of the error"
            )
        resid.plot(x, counts - truth, "o", color="#4c72b0", markersize=3, label="estimate − truth")
        resid.set_ylabel(f"error ({ylabel})")
        legend_outside(resid)
    ax.axhline(0.0, color="#888888", linewidth=0.6)
    bottom = axes[-1]
    if d <= 60:
        bottom.set_xticks(x, [str(label) for label in labels], rotation=60, fontsize=8)
    else:
        step = int(np.ceil(d / 25))
        bottom.set_xticks(x[::step], [str(labels[i]) for i in x[::step]], rotation=60, fontsize=8)
    bottom.set_xlabel("value")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    legend_outside(ax)
    out = Path(path)
    save_readable(fig, out, dpi=120, close=True)  # a temporary file renamed into place
    return out
