"""``shuffledp experiment near-central``: every protocol's per-bin error against central DP."""

from __future__ import annotations

import argparse
from dataclasses import replace

from shuffledp._validation import check_int
from shuffledp.cli._common import (
    checked,
    existing_dir_or_new,
    fmt,
    fmt_bound,
    integer_at_least,
)

NAME = "near-central"
HELP = "per-bin error of every protocol against the central Laplace, DLap and Gaussian"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="two sizes, three epsilons, fewer runs (about a minute)",
    )
    parser.add_argument(
        "--output-dir",
        default="experiment-output",
        help="where the CSV, JSON summary and PNG files go (default: experiment-output)",
    )
    parser.add_argument(
        "--repetitions",
        type=integer_at_least(2),
        default=None,
        help="runs per message-path row (default: 20, or 8 with --quick)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write the CSV and JSON only")
    parser.add_argument(
        "--seed", type=integer_at_least(0), default=2026, help="seed (default: 2026)"
    )
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run the grid, print one line per row at the main epsilon and the verdicts.

    Certified deltas are printed rounded up (:func:`~shuffledp.cli._common.fmt_bound`).
    """
    from shuffledp.experiments.near_central import NearCentralConfig, run_near_central

    if not args.no_plots:
        from shuffledp.plotting import require_matplotlib

        require_matplotlib()
    seed = checked(check_int, args.seed, "--seed", minimum=0)
    out_dir = existing_dir_or_new(args.output_dir, "--output-dir")
    config = NearCentralConfig.quick(seed) if args.quick else NearCentralConfig(seed=seed)
    if args.repetitions is not None:
        reps = checked(check_int, args.repetitions, "--repetitions", minimum=2)
        config = replace(config, repetitions=reps)
    result = run_near_central(config, out_dir, plots=not args.no_plots)
    print(
        f"per-bin error at epsilon={config.epsilon:g}, delta={config.delta:g}, d={config.d} "
        "(replacement neighbours; ratio: analytic std over the central DLap(epsilon/2)'s)"
    )
    print(f"{'protocol':28s}{'n':>10s}{'std':>9s}{'ratio':>8s}{'msgs/user':>11s}{'delta':>11s}")
    for row in result["rows"]:
        if row.epsilon != config.epsilon:
            continue
        messages = "-" if row.path == "central" else fmt(row.messages_per_user)
        std = fmt(row.per_bin_std)
        print(
            f"{row.protocol:28s}{row.n:>10,d}{std:>9s}{fmt(row.ratio_to_central_dlap):>8s}"
            f"{messages:>11s}{fmt_bound(row.certified_delta, up=True):>11s}"
        )
    for verdict in result["verdicts"]:
        print(f"{verdict['verdict']:>9s}: {verdict['claim']}")
    for path in result["files"]:
        print(f"wrote {path}")
    return 0
