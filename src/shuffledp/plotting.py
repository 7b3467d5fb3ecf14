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
    "MAX_LABEL_CHARS",
    "TOP_BARS",
    "fit_titles",
    "legend_outside",
    "plot_histogram_estimate",
    "require_matplotlib",
    "save_readable",
    "shown_labels",
]

#: Two-sided 95% normal quantile used for error bars.
Z95 = 1.959963984540054
#: The most bars (labels) a chart draws, each named on its axis; above it only the top bins.
MAX_BARS = 40
#: How many bins are drawn, by decreasing estimate, when the domain has more than MAX_BARS.
TOP_BARS = 40
#: Labels longer than this are shortened in the middle on the chart (the release keeps them).
MAX_LABEL_CHARS = 40


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


def _clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: its start and end around an ellipsis."""
    if len(text) <= limit:
        return text
    head = (2 * limit) // 3
    return f"{text[:head]}…{text[-(limit - head - 1) :]}"


def _common_start(texts: list[str]) -> int:
    """How many leading characters every text of ``texts`` shares."""
    shortest = min(len(text) for text in texts)
    for i in range(shortest):
        if any(text[i] != texts[0][i] for text in texts):
            return i
    return shortest


def _distinguishing(group: list[str], limit: int) -> list[str]:
    """Labels that share a long start and end, shown by the part where they differ.

    The start and end common to the whole group are cut down to the context
    that still fits in ``limit`` characters (two thirds before, one third
    after), with an ellipsis where text was cut.
    """
    prefix = _common_start(group)
    suffix = _common_start([text[::-1] for text in group])
    shown = []
    for text in group:
        end = max(prefix, len(text) - suffix)
        budget = max(0, limit - 2 - (end - prefix))
        before = min(prefix, (2 * budget) // 3)
        after = min(len(text) - end, budget - before)
        start, stop = prefix - before, end + after
        left = "…" if start > 0 else ""
        right = "…" if stop < len(text) else ""
        shown.append(left + _clip(text[start:stop], max(limit - 2, 8)) + right)
    return shown


def shown_labels(labels: list[str], positions: list[int] | None = None) -> tuple[list[str], bool]:
    """Return ``labels`` as a chart shows them, and whether any was shortened.

    A label longer than :data:`MAX_LABEL_CHARS` keeps its start and its end
    around an ellipsis. Labels that this would make equal are shown instead by
    the part where they differ (their common start and end cut, with context);
    any still equal get their position in the domain appended (``[12]``, from
    ``positions``, default their index in ``labels``), the order of the JSON
    release's counts, so every bar can be found there.
    """
    texts = [str(label) for label in labels]
    where = list(range(len(texts))) if positions is None else list(positions)
    shown = [_clip(text, MAX_LABEL_CHARS) for text in texts]
    groups: dict[str, list[int]] = {}
    for i, text in enumerate(shown):
        groups.setdefault(text, []).append(i)
    for members in groups.values():
        if len(members) > 1:
            better = _distinguishing([texts[i] for i in members], MAX_LABEL_CHARS)
            for i, text in zip(members, better, strict=True):
                shown[i] = text
    seen: dict[str, int] = {}
    for text in shown:
        seen[text] = seen.get(text, 0) + 1
    shown = [f"{text} [{where[i]}]" if seen[text] > 1 else text for i, text in enumerate(shown)]
    return shown, any(len(text) > MAX_LABEL_CHARS for text in texts)


def plot_histogram_estimate(
    estimate: HistogramEstimate,
    path: str | Path,
    *,
    true_counts: NDArray[np.integer] | None = None,
    title: str = "",
    ylabel: str = "users",
    label_name: str = "value",
    listing_note: str = "",
) -> Path:
    """Write a horizontal bar chart of the estimated counts with 95% error bars.

    One bar per label, each named on the vertical axis (whose title is
    ``label_name``, the input column's name), in the domain's order. Above
    :data:`MAX_BARS` labels only the :data:`TOP_BARS` with the largest
    estimates are drawn, in decreasing order, and the title says so (with
    ``listing_note``, where the others are). Choosing them from the estimate
    is post-processing of the release, so it costs no privacy (choosing them
    from the true counts would not be). Labels longer than
    :data:`MAX_LABEL_CHARS` are shortened in the middle (:func:`shown_labels`).
    Known true counts are drawn as their own bars beside the estimate's, never
    under them, with a panel of the errors (estimate − truth) at the right.
    The title is wrapped to the figure's width and the legend sits below the
    axes, where it covers no data.

    Args:
        estimate: The estimate to draw.
        path: Where to write the image (the format follows the suffix, e.g. ``.png``).
        true_counts: Known true counts to draw too (only a demo or a simulation has them).
        title: Figure title.
        ylabel: What a count is (the counts' axis, horizontal), default ``"users"``.
        label_name: What the labels are: the input column's name (the labels' axis).
        listing_note: Where every label's estimate is, said when only the top ones
            are drawn (e.g. ``"all labels are in the JSON release"``).

    Returns:
        The path written.
    """
    plt = require_matplotlib()
    counts = np.asarray(estimate.counts, dtype=np.float64)
    total_bins = len(counts)
    stderr = None if estimate.stderr is None else np.asarray(estimate.stderr, dtype=np.float64)
    labels = [str(label) for label in estimate.domain]
    truth = None if true_counts is None else np.asarray(true_counts, dtype=np.float64)
    title = title or f"{estimate.estimator} estimate (n={estimate.n})"
    notes = []
    positions = list(range(total_bins))
    if total_bins > MAX_BARS:
        shown = np.argsort(-counts, kind="stable")[:TOP_BARS]
        counts = counts[shown]
        stderr = None if stderr is None else stderr[shown]
        labels = [labels[i] for i in shown]
        positions = [int(i) for i in shown]
        truth = None if truth is None else truth[shown]
        notes.append(f"top {TOP_BARS} of {total_bins:,} labels by estimate")
        if listing_note:
            notes.append(listing_note)
    names, shortened = shown_labels(labels, positions)
    if shortened:
        notes.append(f"labels over {MAX_LABEL_CHARS} characters shortened with …")
    if notes:
        title = f"{title}\n{'; '.join(notes)}"
    d = len(counts)
    y = np.arange(d)
    xerr = None if stderr is None else Z95 * stderr
    per_label = 0.24 if truth is None else 0.36  # inches: one bar, or two side by side
    height = max(3.2, 2.0 + per_label * d)
    if truth is None:
        fig, ax = plt.subplots(figsize=(8.0, height), layout="constrained")
        ax.barh(y, counts, height=0.7, color="#4c72b0", label="estimate")
        bars_at: NDArray[np.float64] = y.astype(np.float64)
    else:
        fig, (ax, resid) = plt.subplots(
            1,
            2,
            figsize=(11.0, height),
            sharey=True,
            gridspec_kw={"width_ratios": [3, 2]},
            layout="constrained",
        )
        bars_at = y.astype(np.float64) - 0.2
        ax.barh(bars_at, counts, height=0.4, color="#4c72b0", label="estimate")
        ax.barh(y + 0.2, truth, height=0.4, color="#dd8452", label="true count")
        resid.axvline(0.0, color="#888888", linewidth=0.6)
        if xerr is not None:
            resid.fill_betweenx(
                y, -xerr, xerr, step="mid", color="#4c72b0", alpha=0.2, label="±95% of the error"
            )
        resid.plot(counts - truth, y, "o", color="#4c72b0", markersize=3, label="estimate − truth")
        resid.set_xlabel(f"error ({ylabel})")
        resid.tick_params(axis="y", labelleft=False)
    if xerr is not None:
        ax.errorbar(
            counts,
            bars_at,
            xerr=xerr,
            fmt="none",
            ecolor="#222222",
            elinewidth=0.8,
            capsize=1.5,
            label="95% interval",
        )
    ax.axvline(0.0, color="#888888", linewidth=0.6)
    ax.set_yticks(y, names, fontsize=8)
    ax.set_ylim(d - 0.5, -0.5)  # the first label at the top
    ax.set_ylabel(textwrap.fill(label_name, 40, break_on_hyphens=False))  # fits a short chart
    ax.set_xlabel(ylabel)
    ax.set_title(title)
    handles, legend_labels = [], []
    for axes in fig.axes:
        for handle, text in zip(*axes.get_legend_handles_labels(), strict=True):
            handles.append(handle)
            legend_labels.append(text)
    fig.legend(handles, legend_labels, loc="outside lower center", ncol=len(handles), fontsize=8)
    out = Path(path)
    save_readable(fig, out, dpi=120, close=True)  # a temporary file renamed into place
    return out
