"""Draw docs/figures/krr_vs_gaussian_*.png by running the k-RR vs central mechanisms experiment.

Runs :func:`shuffledp.experiments.krr_vs_gaussian.run_krr_vs_gaussian` with its
default configuration (synthetic N(0, 2) data, k = 5, 10, 15, n = 1,000 and
100,000, ε₀ = 4, 10 runs: what ``shuffledp experiment krr-vs-gaussian`` runs),
keeps its CSV in ``--output-dir`` (a temporary directory by default) and copies
the figures docs/protocols/krr.md uses into docs/figures.

Usage:
    python docs/figures/make_krr_figures.py [--quick] [--output-dir DIR] [--figures-dir DIR]

A progress bar shows on a terminal. ``--quick`` runs the reduced grid (k = 5,
10, n = 1,000, three values of ε): a check, not the page's figures, so they go
to ``--figures-dir``, by default the output directory, never docs/figures.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from _common import figures_dir, output_dir

from shuffledp.experiments.krr_vs_gaussian import ExperimentConfig, run_krr_vs_gaussian

#: The experiment's figures that are kept in docs/figures.
KEPT = ("krr_vs_gaussian_sweep.png", "krr_vs_gaussian_community.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the reduced --quick grid")
    parser.add_argument(
        "--figures-dir",
        default=None,
        help="where the PNGs go (default: docs/figures; with --quick, the output directory)",
    )
    parser.add_argument("--output-dir", default=None, help="keep the CSV here")
    args = parser.parse_args()
    keep = output_dir(args.output_dir, prefix="krr-")
    figures = figures_dir(
        args.figures_dir, quick=args.quick, quick_default=lambda: keep / "figures"
    )
    config = ExperimentConfig.quick() if args.quick else ExperimentConfig()
    result = run_krr_vs_gaussian(config, keep)
    for name in result["files"]:
        path = Path(name)
        if path.name in KEPT:
            target = figures / path.name
            shutil.copyfile(path, target)
            print(f"wrote {target}")
        else:
            print(f"kept {path}")


if __name__ == "__main__":
    main()
