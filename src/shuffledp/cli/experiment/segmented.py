"""``shuffledp experiment segmented``: the segmented paper's §6, redone with verdicts."""

from __future__ import annotations

import argparse
import math
from typing import Any

from shuffledp._validation import InvalidParameterError
from shuffledp._wording import plural
from shuffledp.cli._common import existing_dir_or_new, fmt, integer_at_least, number
from shuffledp.cli.experiment._shared import run_options

NAME = "segmented"
HELP = "segmented multi-message shuffle vs baselines (Wang et al. §6)"


def _grid(text: str) -> list[float]:
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            values.append(number(part))
        except argparse.ArgumentTypeError:
            raise InvalidParameterError(
                f"--blanket-grid: expected comma-separated numbers, got {text!r}"
            ) from None
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="n = 5,000 (first s), S1 only, 6 blanket rates, 5 repetitions (well under a minute)",
    )
    parser.add_argument(
        "--data",
        choices=("synthetic", "movies", "pizza"),
        default="synthetic",
        help="synthetic d=128, s in {4, 8} (default); ggplot2movies genres (d=7, s=2); "
        "gt pizza orders (d=32, s=4); the real data need the 'datasets' extra",
    )
    parser.add_argument(
        "--output-dir",
        default="experiment-output",
        help="where the CSV, JSON and PNG files go (default: experiment-output)",
    )
    parser.add_argument(
        "--repetitions",
        type=integer_at_least(1),
        default=None,
        help="runs per setting, independent seeds (default: 50, or 5 with --quick)",
    )
    parser.add_argument(
        "--blanket-grid",
        default=None,
        help="comma-separated blanket rates m (default: 22 points in [0.1, 10], with points "
        "just below and above 1-4; real data add 6 points from 0.01)",
    )
    parser.add_argument(
        "--workers",
        type=integer_at_least(1),
        default=None,
        help="processes for the calibrations (default: up to 2)",
    )
    parser.add_argument(
        "--seed", type=integer_at_least(0), default=2024, help="root seed (default: 2024)"
    )
    parser.add_argument("--no-plots", action="store_true", help="write the CSV and JSON only")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run the experiment and print the best-m table and the verdicts."""
    from shuffledp.experiments.segmented import SegmentedExperimentConfig, run_segmented_experiment

    seed, reps, workers = run_options(args)
    grid = None if args.blanket_grid is None else _grid(args.blanket_grid)
    out_dir = existing_dir_or_new(args.output_dir, "--output-dir")
    try:
        config = SegmentedExperimentConfig.for_data(
            args.data,
            quick=args.quick,
            seed=seed,
            repetitions=reps,
            blanket_grid=grid,
            workers=workers,
        )
    except InvalidParameterError as exc:
        flag = "--blanket-grid" if grid is not None and "blanket" in str(exc) else None
        raise InvalidParameterError(f"{flag}: {exc}" if flag else str(exc)) from None
    result = run_segmented_experiment(config, out_dir, plots=not args.no_plots)
    _print(result["summary"])
    for path in result["files"]:
        print(f"wrote {path}")
    return 0


def _print(summary: dict[str, Any]) -> None:
    cfg = summary["config"]
    print(
        f"segmented protocol (Wang et al. §6), data={cfg['data']}, levels "
        f"{tuple(cfg['levels'])}, delta=0.01/n, {plural(cfg['repetitions'], 'repetition')}; "
        "MSE = sum_j (w_hat_j - w_j)^2, w = the data's own frequencies"
    )
    print(
        f"{'n':>7s}{'s':>3s}{'shares':>7s}{'best m':>8s}{'MSE exact':>11s}{'msg/u':>7s}"
        f"{'best m':>8s}{'MSE Eq.7':>11s}  {'best baseline':<16s}{'MSE':>10s}{'ours/base':>10s}"
    )
    for entry in summary["settings"]:
        ex = entry["ours"].get("exact", {})
        pa = entry["ours"].get("paper", {})
        name = entry.get("best_baseline", "-")
        base = entry["baselines"].get(name, {})
        ratio = entry.get("reduction", {}).get("exact", {}).get("ratio_to_best_baseline", math.nan)
        print(
            f"{entry['n']:>7d}{entry['items_per_user']:>3d}{entry['shares']:>7s}"
            f"{ex.get('best_m', math.nan):>8.3g}{fmt(ex.get('mse', math.nan)):>11s}"
            f"{ex.get('messages_per_user', math.nan):>7.2f}"
            f"{pa.get('best_m', math.nan):>8.3g}{fmt(pa.get('mse', math.nan)):>11s}  "
            f"{name:<16s}{fmt(base.get('mse', math.nan)):>10s}{ratio:>10.3f}"
        )
    print("verdicts (exact accounting; paper accounting in brackets; per n where they differ):")
    untested = []
    for key, verdict in summary["verdicts"].items():
        other = verdict.get("verdict_by_accounting", {}).get("paper")
        extra = f" [{other}]" if other else ""
        groups = verdict.get("groups", {}).get("exact", {})
        if len(set(groups.values())) > 1:
            extra += " (" + "; ".join(f"{g}: {v}" for g, v in groups.items()) + ")"
        print(f"  {key:<24s}{verdict['verdict']}{extra}: {verdict['claim']}")
        if verdict["verdict"] == "untested":
            untested.append(f"{key} ({verdict.get('note') or 'no evidence'})")
    if untested:
        label = "--quick cannot test" if cfg.get("quick") else "this run cannot test"
        print(f"{label}: " + "; ".join(untested))
    eq7 = summary["eq7"]
    shown = eq7["shown_not_private_count"]
    print(
        f"Eq. 7: its lambda is not certified at {eq7['uncertified_count']} of "
        f"{eq7['operating_points']} (level, m) points ({eq7['uncertified_at_integer_m']} at "
        f"integer m); a concrete dataset pair shows {shown} of them not private"
    )
    dummy = summary.get("dummy_vs_paper")
    if dummy and "best" in dummy:
        print(
            f"dummy variant at n={dummy['n']:,}, s={dummy['items_per_user']}, {dummy['shares']}: "
            f"best-m MSE {dummy['best']['mse_ratio_dummy_over_paper']:.2f}x the paper variant's"
        )
    runtime = summary["runtime_seconds"]
    print(f"runtime: {runtime['total']:.0f} s ({runtime['calibration']:.0f} s calibrating)")
