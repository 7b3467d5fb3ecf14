"""``shuffledp account correlated``: the exact calibration against the papers' rule."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shuffledp._validation import InvalidParameterError
from shuffledp.cli._choices import CORRELATED_PAPER_GAMMA
from shuffledp.cli._common import fmt, fmt_bound, open_unit_number
from shuffledp.cli.account._shared import add_target_arguments, target_arguments
from shuffledp.cli.run.correlated import (
    add_correlated_arguments,
    min_honest_option,
    slack_option,
)
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.accounting.reproductions.correlated_paper import PaperCorrelatedRule
    from shuffledp.protocols.correlated import CorrelatedCalibration

NAME = "correlated"
HELP = "correlated noise: exact calibration vs the papers' rule"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    add_target_arguments(parser)
    add_correlated_arguments(parser)
    parser.add_argument(
        "--gamma",
        type=open_unit_number,
        default=CORRELATED_PAPER_GAMMA,
        help="the papers' rule: share of epsilon given to the flooding "
        f"(default {CORRELATED_PAPER_GAMMA:g})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=execute)


def _paper_dict(calibration: CorrelatedCalibration, rule: PaperCorrelatedRule) -> dict[str, Any]:
    out = calibration.to_dict()
    out.update(
        gamma=rule.gamma,
        flood_epsilon=rule.flood_epsilon,
        flood_delta=rule.flood_delta,
        exact_epsilon=rule.exact_epsilon,
        delta_at_exact_epsilon=rule.delta_at_exact_epsilon,
    )
    return out


def execute(args: argparse.Namespace) -> int:
    """Print the exact calibration and the papers' rule side by side."""
    from shuffledp._progress import working
    from shuffledp.protocols.correlated import calibrate_correlated, paper_correlated_calibration

    n, d, epsilon, delta = target_arguments(args)
    slack = slack_option(args)
    min_honest = min_honest_option(args, n)
    gamma = args.gamma
    if not 0.0 < gamma < 1.0:
        raise InvalidParameterError(f"--gamma must be in the open interval (0, 1), got {gamma!r}")
    with working("calibrating the correlated noise"):
        exact = calibrate_correlated(
            n, d, epsilon, delta, slack=slack, min_honest=min_honest, neighbours=args.neighbours
        )
    paper: tuple[CorrelatedCalibration, PaperCorrelatedRule] | None
    paper_note = ""
    try:
        paper = paper_correlated_calibration(
            n, d, epsilon, delta, gamma=gamma, min_honest=min_honest, neighbours=args.neighbours
        )
    except InvalidParameterError as exc:
        paper, paper_note = None, str(exc)
    if args.json:
        out: dict[str, Any] = {
            "schema": schema_id("account-correlated"),
            "n": n,
            "domain_size": d,
            **exact.to_dict(),
            "notes": list(exact.notes),
            "paper": None if paper is None else _paper_dict(*paper),
        }
        if paper is None:
            out["paper_unavailable"] = paper_note
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    rows: list[tuple[str, Callable[[CorrelatedCalibration], str]]] = [
        ("discrete Laplace parameter a", lambda c: fmt(c.a)),
        ("flooding shape r", lambda c: fmt(c.flood_r)),
        ("flooding probability q", lambda c: fmt(c.flood_q)),
        ("flooding messages E[W] per bin", lambda c: fmt(c.flood_mean)),
        ("certified delta at epsilon", lambda c: fmt_bound(c.delta, up=True)),
        ("delta at min_honest users (lower bound)", lambda c: fmt_bound(c.delta_lower, up=False)),
        (f"per-bin std at {exact.min_honest} users", lambda c: fmt_bound(c.per_bin_std, up=True)),
        (f"per-bin std at all {n} users", lambda c: fmt_bound(c.per_bin_std_all_users, up=True)),
        ("std / central discrete Laplace's", lambda c: fmt_bound(c.std_ratio, up=True)),
        ("expected messages per user", lambda c: fmt_bound(c.expected_messages_per_user, up=True)),
    ]
    print(
        f"correlated noise at n={n}, d={d}, epsilon={epsilon:g}, target delta={delta:g} "
        f"({args.neighbours}, min_honest={exact.min_honest})"
    )
    print(f"{'':42s}{'exact':>14s}{f'papers (gamma={gamma:g})':>22s}")
    for label, get in rows:
        right = get(paper[0]) if paper is not None else "n/a"
        print(f"{label:42s}{get(exact):>14s}{right:>22s}")
    if paper is None:
        print(f"papers' rule unavailable: {paper_note}")
    else:
        rule = paper[1]
        print(
            f"papers' rule: the exact accountant certifies delta={fmt_bound(delta, up=True)} "
            f"already at epsilon={fmt_bound(rule.exact_epsilon, up=True)} (a reproduction of "
            "Ghazi et al.'s rule as we read it, never the certificate)"
        )
    print(f"central discrete Laplace std at epsilon: {fmt(exact.central_std)}")
    return 0
