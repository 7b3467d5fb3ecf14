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

from _common import copy_figures, directories, experiment_parser

from shuffledp.experiments.per_user import PerUserExperimentConfig, run_per_user_experiment


def main() -> None:
    parser = experiment_parser(
        __doc__.splitlines()[0], quick_help="the reduced --quick settings", kept="CSVs and JSON"
    )
    parser.add_argument("--data", default="synthetic,movielens", help="comma-separated sources")
    args = parser.parse_args()
    keep, figures = directories(args, prefix="per-user-")
    for data in [d.strip() for d in args.data.split(",") if d.strip()]:
        config = PerUserExperimentConfig.for_data(data, quick=args.quick)
        result = run_per_user_experiment(config, keep / data)
        copy_figures(
            result["files"],
            figures,
            lambda path, data=data: (
                f"per_user_{data}_{path.name}" if path.suffix == ".png" else None
            ),
        )


if __name__ == "__main__":
    main()
