"""Draw docs/figures/segmented_*.png by running the segmented experiment (Wang et al. §6).

Runs :func:`shuffledp.experiments.segmented.run_segmented_experiment` for each
data source, keeps its CSV and summary JSON in ``--output-dir`` (a temporary
directory by default) and copies the figures into docs/figures. The numbers in
docs/protocols/segmented.md come from the summary JSON of the same run.

Usage:
    python docs/figures/make_segmented_figures.py [--quick] [--data synthetic,movies]
        [--repetitions R] [--output-dir DIR] [--figures-dir DIR]

The full run (synthetic and movies, 50 repetitions) takes about 5 minutes on
two cores; ``--quick`` about half a minute (it draws only the n = 5,000
figures and the λ figures, from the reduced grids: a check, not the page's, so
they go to ``--figures-dir``, by default the output directory, never
docs/figures). Progress bars show on a terminal.
"""

from __future__ import annotations

from _common import copy_figures, directories, experiment_parser

from shuffledp.experiments.segmented import SegmentedExperimentConfig, run_segmented_experiment


def main() -> None:
    parser = experiment_parser(
        __doc__.splitlines()[0], quick_help="the reduced --quick grids", kept="CSV and JSON"
    )
    parser.add_argument("--data", default="synthetic,movies", help="comma-separated sources")
    parser.add_argument("--repetitions", type=int, default=None, help="runs per setting")
    args = parser.parse_args()
    keep, figures = directories(args, prefix="seg-")
    for data in [d.strip() for d in args.data.split(",") if d.strip()]:
        config = SegmentedExperimentConfig.for_data(
            data, quick=args.quick, repetitions=args.repetitions
        )
        result = run_segmented_experiment(config, keep / data)
        copy_figures(
            result["files"], figures, lambda path: path.name if path.suffix == ".png" else None
        )
        runtime = result["summary"]["runtime_seconds"]
        print(f"{data}: {runtime['total']:.0f} s")
        for key, verdict in result["summary"]["verdicts"].items():
            print(f"  {key}: {verdict['verdict']} {verdict.get('verdict_by_accounting', {})}")


if __name__ == "__main__":
    main()
