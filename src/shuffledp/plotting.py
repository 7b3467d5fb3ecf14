"""Plots of histogram estimates (needs the ``plot`` extra: matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._files import save_figure
from shuffledp._optional import require
from shuffledp.analyzers.estimate import HistogramEstimate

__all__ = ["MAX_BARS", "TOP_BARS", "plot_histogram_estimate", "require_matplotlib"]

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


def plot_histogram_estimate(
    estimate: HistogramEstimate,
    path: str | Path,
    *,
    true_counts: NDArray[np.integer] | None = None,
    title: str = "",
) -> Path:
    """Write a bar chart of the estimated counts with 95% error bars.

    Above :data:`MAX_BARS` bins only the :data:`TOP_BARS` bins with the largest
    estimates are drawn, in decreasing order, and the title says so. Choosing
    them from the estimate is post-processing of the release, so it costs no
    privacy (choosing them from the true counts would not be).

    Args:
        estimate: The estimate to draw.
        path: Where to write the image (the format follows the suffix, e.g. ``.png``).
        true_counts: Known true counts to overlay (only a demo or a simulation has them).
        title: Figure title.

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
        fig, ax = plt.subplots(figsize=(width, 4.5))
        axes = [ax]
    else:
        fig, axes = plt.subplots(
            2, 1, figsize=(width, 7.0), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
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
        resid.set_ylabel("error (users)")
        resid.legend(loc="upper right", fontsize=8)
    ax.axhline(0.0, color="#888888", linewidth=0.6)
    bottom = axes[-1]
    if d <= 60:
        bottom.set_xticks(x, [str(label) for label in labels], rotation=60, fontsize=8)
    else:
        step = int(np.ceil(d / 25))
        bottom.set_xticks(x[::step], [str(labels[i]) for i in x[::step]], rotation=60, fontsize=8)
    bottom.set_xlabel("value")
    ax.set_ylabel("users")
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    out = Path(path)
    try:
        save_figure(fig, out, dpi=120)  # a temporary file renamed into place
    finally:
        plt.close(fig)
    return out
