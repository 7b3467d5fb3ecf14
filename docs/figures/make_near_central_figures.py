"""Draw docs/figures/near_central_*.png by running the near-central experiment.

Runs :func:`shuffledp.experiments.near_central.run_near_central` with its
default configuration (d = 100, δ = 10⁻⁶, n = 10⁴, 10⁵, 10⁶ at ε = 1 and five
values of ε at n = 10⁵, seed 2026: what ``shuffledp experiment near-central``
runs), keeps its CSV and summary in ``--output-dir`` (a temporary directory by
default) and copies the figures the protocol pages use into docs/figures.

Usage:
    python docs/figures/make_near_central_figures.py [--quick] [--output-dir DIR]
        [--figures-dir DIR]

A progress bar shows on a terminal. ``--quick`` runs the reduced grid: a check,
not the pages' figures, so they go to ``--figures-dir``, by default the output
directory, never docs/figures.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from _common import figures_dir, output_dir

from shuffledp.experiments.near_central import NearCentralConfig, run_near_central

#: The experiment's figures that are kept in docs/figures.
KEPT = ("near_central_by_n.png", "near_central_by_epsilon.png", "near_central_messages.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the reduced --quick grid")
    parser.add_argument(
        "--figures-dir",
        default=None,
        help="where the PNGs go (default: docs/figures; with --quick, the output directory)",
    )
    parser.add_argument("--output-dir", default=None, help="keep the CSV and summary here")
    args = parser.parse_args()
    keep = output_dir(args.output_dir, prefix="near-central-")
    figures = figures_dir(
        args.figures_dir, quick=args.quick, quick_default=lambda: keep / "figures"
    )
    config = NearCentralConfig.quick() if args.quick else NearCentralConfig()
    result = run_near_central(config, keep)
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
