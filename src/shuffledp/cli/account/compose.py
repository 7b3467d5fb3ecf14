"""``shuffledp account compose``: the total guarantee of several saved runs on the same users."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shuffledp._validation import DataError, InvalidParameterError, check_delta, check_epsilon
from shuffledp.cli._common import checked, fmt, number
from shuffledp.schemas import schema_id

NAME = "compose"
HELP = "total (epsilon, delta) of several releases on the same users (JSON outputs of run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "results",
        nargs="+",
        metavar="RESULT.json",
        help="JSON written by 'shuffledp run' (or its 'privacy' object); a file may be repeated",
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--delta",
        type=number,
        default=None,
        help="state the total epsilon at this delta (default: the sum of the releases' deltas)",
    )
    target.add_argument(
        "--epsilon", type=number, default=None, help="state the total delta at this epsilon"
    )
    parser.add_argument("--json", action="store_true", help="print the composed report as JSON")
    parser.set_defaults(handler=execute)


def _load(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"result file {path!r} does not exist")
    try:
        obj = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path} is not a JSON file: {exc}") from None
    if not isinstance(obj, dict):
        raise DataError(f"{path} holds a JSON {type(obj).__name__}, expected an object")
    return obj


def execute(args: argparse.Namespace) -> int:
    """Print the composed guarantee."""
    from shuffledp.accounting.compose import compose, reports_from_json

    delta = None if args.delta is None else checked(check_delta, args.delta, "--delta")
    epsilon = None if args.epsilon is None else checked(check_epsilon, args.epsilon, "--epsilon")
    objects = [_load(path) for path in args.results]
    try:
        reports = reports_from_json(objects)
    except InvalidParameterError as exc:
        raise InvalidParameterError(f"{exc} (files in the order given: {args.results})") from None
    composed = compose(*reports, delta=delta, epsilon=epsilon)
    if args.json:
        document = {"schema": schema_id("account-compose"), **composed.to_dict()}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return 0
    print(f"{len(reports)} releases on the same users:")
    for path, report in zip(args.results, reports, strict=True):
        print(f"  {path}: ({report.epsilon:g}, {fmt(report.delta)}) [{report.method}]")
    print(
        f"together: ({composed.epsilon:.6g}, {fmt(composed.delta)})-DP "
        f"[{composed.method}, an upper bound]"
    )
    basic = composed.parameters.get("basic")
    if isinstance(basic, dict) and "epsilon" in basic:
        print(f"basic composition would give ({basic['epsilon']:.6g}, {fmt(basic['delta'])})")
    for item in composed.not_covered:
        print(f"warning: not covered by the guarantee: {item}")
    return 0
