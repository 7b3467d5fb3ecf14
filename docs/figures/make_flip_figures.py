"""Draw docs/figures/flip_delta_vs_epsilon.png: FLIP's δ(ε) at the two calibrations.

Usage:
    python docs/figures/make_flip_figures.py [--quick] [--figures-dir DIR]

The full figure (46 values of ε) takes a few seconds, with a progress bar on
a terminal. ``--quick`` evaluates 10 values of ε and writes into
``--figures-dir`` (default: a temporary directory, so a check never replaces
the page's figure).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from _common import figures_dir

from shuffledp import calibrate_flip, flip_delta, flip_delta_lower_bound
from shuffledp._progress import progress
from shuffledp.plotting import legend_outside, require_matplotlib, save_readable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 values of epsilon")
    parser.add_argument("--figures-dir", default=None, help="where the PNG goes (see above)")
    args = parser.parse_args()
    figures = figures_dir(
        args.figures_dir,
        quick=args.quick,
        quick_default=lambda: Path(tempfile.mkdtemp(prefix="flip-figures-")),
    )
    plt = require_matplotlib()
    n, d, eps_target, delta_target = 100_000, 100, 1.0, 1e-6
    fig, ax = plt.subplots(figsize=(9, 4.5), layout="constrained")
    eps = np.linspace(0.2, 2.0, 10 if args.quick else 46)
    for method, colour in (("exact", "#4c72b0"), ("paper", "#dd8452")):
        cal = calibrate_flip(n, d, eps_target, delta_target, method=method)
        upper, lower = [], []
        for e in progress(eps.tolist(), desc=f"{method} calibration"):
            upper.append(flip_delta(e, cal.q, cal.fake_users, n))
            lower.append(flip_delta_lower_bound(e, cal.q, cal.fake_users, n, d))
        label = f"{method} calibration, q={cal.q:.3g}, k={cal.fake_users}"
        ax.semilogy(eps, upper, "-", color=colour, label=f"{label}: certified δ")
        ax.semilogy(
            eps, np.maximum(lower, 1e-30), ":", color=colour, label=f"{label}: concrete pair"
        )
    ax.axhline(delta_target, color="#444444", linewidth=0.8)
    ax.axvline(eps_target, color="#444444", linewidth=0.8)
    ax.set_ylim(1e-14, 1)
    ax.set_xlabel("ε")
    ax.set_ylabel("δ(ε)")
    ax.set_title(f"FLIP, n={n:,}, d={d}: target (ε, δ) = ({eps_target:g}, {delta_target:g})")
    legend_outside(ax, fontsize=7)
    out = save_readable(fig, figures / "flip_delta_vs_epsilon.png", dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
