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

from _common import copy_figures, directories, experiment_parser

from shuffledp.experiments.krr_vs_gaussian import ExperimentConfig, run_krr_vs_gaussian

#: The experiment's figures that are kept in docs/figures.
KEPT = ("krr_vs_gaussian_sweep.png", "krr_vs_gaussian_community.png")


def main() -> None:
    parser = experiment_parser(
        __doc__.splitlines()[0], quick_help="the reduced --quick grid", kept="CSV"
    )
    args = parser.parse_args()
    keep, figures = directories(args, prefix="krr-")
    config = ExperimentConfig.quick() if args.quick else ExperimentConfig()
    result = run_krr_vs_gaussian(config, keep)
    copy_figures(result["files"], figures, lambda path: path.name if path.name in KEPT else None)


if __name__ == "__main__":
    main()
