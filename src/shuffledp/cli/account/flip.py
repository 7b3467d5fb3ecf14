"""``shuffledp account flip``: FLIP's calibration by the paper's formula against the exact one."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.cli._common import checked, fmt, fmt_bound, integer_at_least
from shuffledp.cli.account._shared import add_target_arguments, target_arguments
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.protocols.flip import FlipCalibration

NAME = "flip"
HELP = "FLIP: paper vs exact calibration"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    add_target_arguments(parser)
    parser.add_argument(
        "--fake-users",
        type=integer_at_least(0),
        default=None,
        help="fake users k per real user (default: 100, or what the paper's formula needs)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Print both calibrations side by side."""
    from shuffledp.protocols.flip import calibrate_flip, default_fake_users

    n, d, epsilon, delta = target_arguments(args)
    k = (
        default_fake_users(n, epsilon, delta)
        if args.fake_users is None
        else checked(check_int, args.fake_users, "--fake-users")
    )
    exact = calibrate_flip(n, d, epsilon, delta, fake_users=k, method="exact")
    paper: FlipCalibration | None
    paper_note = ""
    try:
        paper = calibrate_flip(n, d, epsilon, delta, fake_users=k, method="paper")
    except InvalidParameterError as exc:
        paper, paper_note = None, str(exc)
    if args.json:
        out: dict[str, Any] = {
            "schema": schema_id("account-flip"),
            "n": n,
            "domain_size": d,
            "epsilon": epsilon,
            "target_delta": delta,
            "paper": None if paper is None else paper.to_dict(),
            "exact": exact.to_dict(),
        }
        if paper is None:
            out["paper_unavailable"] = paper_note
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    rows: list[tuple[str, Callable[[FlipCalibration], str]]] = [
        ("flip probability q", lambda c: fmt_bound(c.q, up=True)),
        ("fake users per user k", lambda c: str(c.fake_users)),
        ("certified delta at epsilon", lambda c: fmt_bound(c.delta, up=True)),
        ("delta of a concrete pair (lower bound)", lambda c: fmt_bound(c.delta_lower, up=False)),
        ("expected l-inf error (counts)", lambda c: fmt(c.linf_error)),
        ("per-bin standard error (counts)", lambda c: fmt(c.stderr)),
        ("expected messages per user", lambda c: fmt(c.expected_messages_per_user)),
        ("local epsilon of one report", lambda c: fmt(c.local_epsilon)),
    ]
    print(f"FLIP at n={n}, d={d}, epsilon={epsilon:g}, target delta={delta:g}")
    print(f"{'':40s}{'paper (Claim III.1)':>22s}{'exact':>14s}")
    for label, get in rows:
        left = get(paper) if paper is not None else "n/a"
        print(f"{label:40s}{left:>22s}{get(exact):>14s}")
    if paper is None:
        print(f"paper calibration unavailable: {paper_note}")
    else:
        print(
            f"exact calibration: q {paper.q / exact.q:.2f}x smaller, "
            f"expected l-inf error {paper.linf_error / exact.linf_error:.2f}x smaller"
        )
    return 0
