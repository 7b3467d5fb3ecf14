"""Draw docs/figures/accounting_epsilon_vs_n.png and print the Table 3 comparison.

For each of a few ε₀, the amplified ε at δ = 1e-6 against n for every generic
bound (any ε₀-LDP randomizer) and for k-RR with k = 10 (certified upper bound
and a lower bound some dataset attains). Then the k-RR paper's Table 3 cells:
printed, reproduced with its formula, and the exact worst-case δ range.

Usage:
    python docs/figures/make_accounting_figures.py [--quick] [--figures-dir DIR]

The full figure (4 panels, 11 values of n) takes about 20 s on two cores,
with progress bars on a terminal. ``--quick`` (about 7 s) draws two panels at
5 values of n into ``--figures-dir`` (default: a temporary directory, so a
check never replaces the page's figure) and skips the table.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from _common import figures_dir

from shuffledp._progress import progress
from shuffledp.accounting import amplified_epsilon
from shuffledp.accounting.certificates.krr import krr_delta, krr_delta_lower_bound
from shuffledp.accounting.reproductions.biswas import biswas2023_delta
from shuffledp.plotting import legend_outside, require_matplotlib, save_readable
from shuffledp.privacy import BoundKind

DELTA = 1e-6
GENERIC = [
    ("erlingsson2019", "EFMRTT'19 (closed)", ":"),
    ("bbgn2019-hoeffding", "BBGN'19 Hoeffding", "--"),
    ("bbgn2019-bennett", "BBGN'19 Bennett", "-."),
    ("fmt2021-closed", "FMT'21 closed form", ":"),
    ("fmt2021-numeric", "FMT'21 clones (numeric)", "--"),
    ("vr2024", "variation ratio (numeric)", "-"),
]


def _curve(method: str, mechanism: str, n_values: np.ndarray, **params: float) -> list[float]:
    out = []
    for n in n_values:
        row = amplified_epsilon(DELTA, n=int(n), mechanism=mechanism, method=method, **params)
        usable = row.epsilon is not None and (row.certified or row.bound is BoundKind.LOWER)
        out.append(row.epsilon if usable else np.nan)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 panels, 5 values of n, no table")
    parser.add_argument("--figures-dir", default=None, help="where the PNG goes (see above)")
    args = parser.parse_args()
    figures = figures_dir(
        args.figures_dir,
        quick=args.quick,
        quick_default=lambda: Path(tempfile.mkdtemp(prefix="accounting-figures-")),
    )
    plt = require_matplotlib()
    n_values = np.unique(np.logspace(2, 7, 5 if args.quick else 11).round().astype(int))
    eps0s = (1.0, 4.0) if args.quick else (0.4, 1.0, 2.0, 4.0)
    fig, axes = plt.subplots(
        1, len(eps0s), figsize=(4.25 * len(eps0s) + 2.2, 4.6), sharey=True, layout="constrained"
    )
    curves = [
        (ax, eps0, method) for ax, eps0 in zip(axes, eps0s, strict=True) for method in GENERIC
    ]
    for ax, eps0, (method, label, style) in progress(curves, desc="generic bounds"):
        ax.loglog(n_values, _curve(method, "generic", n_values, epsilon0=eps0), style, label=label)
    for ax, eps0 in progress(list(zip(axes, eps0s, strict=True)), desc="k-RR curves"):
        krr = dict(epsilon0=eps0, domain_size=10)
        ax.loglog(
            n_values,
            _curve("krr-blanket", "krr", n_values, **krr),
            "-",
            color="black",
            lw=2,
            label="k-RR k=10: certified (blanket)",
        )
        ax.loglog(
            n_values,
            _curve("krr-two-count", "krr", n_values, **krr),
            "o",
            color="black",
            ms=3,
            label="k-RR k=10: attained (lower bound)",
        )
        ax.axhline(eps0, color="#999999", lw=0.8)
        ax.set_title(f"ε₀ = {eps0:g}")
        ax.set_xlabel("n (users)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(f"amplified ε at δ = {DELTA:g}")
    legend_outside(axes[-1], fontsize=7)
    fig.suptitle(
        "Shuffle amplification: every bound in shuffledp.accounting"
        " (missing points: outside a bound's range)"
    )
    out = save_readable(fig, figures / "accounting_epsilon_vs_n.png", dpi=110)
    print(f"wrote {out}")
    if args.quick:
        return

    print(
        "\n| ε₀ | k | n | n_x0 | ε | printed (Table 3) | formula as printed"
        " | exact worst case: lower | upper |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for eps0, k, n, n_x0, printed in (
        (1, 10, 100, 80, [2.08e-20, 3.42e-43]),
        (2, 10, 100, 80, [2.49e-15, 3.25e-22]),
        (3, 10, 100, 80, [8.79e-11, 5.73e-13]),
        (2, 10, 150, 120, [6.58e-22, 7.83e-32]),
        (2, 5, 100, 80, [1.96e-10, 2.51e-14]),
        (2, 15, 100, 80, [1.66e-18, 7.13e-28]),
    ):
        for eps, cell in zip((0.1, 0.5), printed, strict=True):
            print(
                f"| {eps0} | {k} | {n} | {n_x0} | {eps} | {cell:.3g} | "
                f"{biswas2023_delta(eps, eps0, k, n, n_x0):.3g} | "
                f"{krr_delta_lower_bound(eps, eps0, k, n):.3g} | {krr_delta(eps, eps0, k, n):.3g} |"
            )


if __name__ == "__main__":
    main()
