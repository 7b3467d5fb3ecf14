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

from _common import copy_figures, directories, experiment_parser

from shuffledp.experiments.near_central import NearCentralConfig, run_near_central

#: The experiment's figures that are kept in docs/figures.
KEPT = ("near_central_by_n.png", "near_central_by_epsilon.png", "near_central_messages.png")


def main() -> None:
    parser = experiment_parser(
        __doc__.splitlines()[0], quick_help="the reduced --quick grid", kept="CSV and summary"
    )
    args = parser.parse_args()
    keep, figures = directories(args, prefix="near-central-")
    config = NearCentralConfig.quick() if args.quick else NearCentralConfig()
    result = run_near_central(config, keep)
    copy_figures(result["files"], figures, lambda path: path.name if path.name in KEPT else None)


if __name__ == "__main__":
    main()
