"""Draw docs/figures/per_user_*.png by running the per-user histogram experiment.

Runs :func:`shuffledp.experiments.per_user.run_per_user_experiment` on each
data source, keeps its CSVs and summary JSON in ``--output-dir`` (a temporary
directory by default) and copies the figures into docs/figures as
``per_user_<data>_<figure>.png``. The numbers in docs/protocols/per_user.md
come from the same runs (``shuffledp experiment per-user`` prints them).

Usage:
    python docs/figures/make_per_user_figures.py [--quick] [--data synthetic,movielens]
        [--output-dir DIR] [--figures-dir DIR]

The full run takes about 40 s on two cores; ``--quick`` about 25 s (a check,
not the page's figures: they go to ``--figures-dir``, by default the output
directory, never docs/figures). Progress bars show on a terminal.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from _common import figures_dir, output_dir

from shuffledp.experiments.per_user import PerUserExperimentConfig, run_per_user_experiment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the reduced --quick settings")
    parser.add_argument("--data", default="synthetic,movielens", help="comma-separated sources")
    parser.add_argument(
        "--figures-dir",
        default=None,
        help="where the PNGs go (default: docs/figures; with --quick, the output directory)",
    )
    parser.add_argument("--output-dir", default=None, help="keep the CSVs and JSON here")
    args = parser.parse_args()
    keep = output_dir(args.output_dir, prefix="per-user-")
    figures = figures_dir(
        args.figures_dir, quick=args.quick, quick_default=lambda: keep / "figures"
    )
    for data in [d.strip() for d in args.data.split(",") if d.strip()]:
        config = PerUserExperimentConfig.for_data(data, quick=args.quick)
        result = run_per_user_experiment(config, keep / data)
        for name in result["files"]:
            path = Path(name)
            if path.suffix == ".png":
                target = figures / f"per_user_{data}_{path.name}"
                shutil.copyfile(path, target)
                print(f"wrote {target}")
            else:
                print(f"kept {path}")


if __name__ == "__main__":
    main()
