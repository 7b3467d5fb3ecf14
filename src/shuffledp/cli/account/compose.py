"""``shuffledp account compose``: the total guarantee of several saved runs on the same users."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shuffledp._validation import DataError, InvalidParameterError, check_delta, check_epsilon
from shuffledp._wording import Worded, command_line_document, for_command_line
from shuffledp.cli._common import checked, fmt, open_unit_number, positive_number
from shuffledp.schemas import schema_id

NAME = "compose"
HELP = "total (epsilon, delta) of several releases on the same users (JSON outputs of run)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "results",
        nargs="+",
        metavar="RESULT.json",
        help="JSON written by run, analyzer publish, demo, simulate or account compose --json "
        "(or its 'privacy' object); each guarantee is re-derived from the parameters the file "
        "records; a file may be repeated",
    )
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--delta",
        type=open_unit_number,
        default=None,
        help="state the total epsilon at this delta (default: the sum of the releases' deltas)",
    )
    target.add_argument(
        "--epsilon",
        type=positive_number,
        default=None,
        help="state the total delta at this epsilon",
    )
    parser.add_argument(
        "--same-users",
        action="store_true",
        help="the releases cover the same people although they record a different n, domain, "
        "user column or input (without it such releases are an error); the output states it",
    )
    parser.add_argument(
        "--accept-stated",
        action="store_true",
        help="take a release whose guarantee no certificate here re-derives from its "
        "parameters (another library's method, a privacy object of an unknown method) at the "
        "(epsilon, delta) it states, as your own claim (without it such a file is an error); "
        "the output states it. Releases the package writes are always re-derived",
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


def _bases(composed: Any, reports: list[Any]) -> list[str]:
    """How each release entered, in short: re-derived, recomposed or taken as stated."""
    by_key = {
        (c["method"], c["n"], c["epsilon"], c["delta"]): str(c.get("basis", ""))
        for c in composed.parameters["components"]
    }
    short = []
    for report in reports:
        basis = by_key.get((report.method, report.n, report.epsilon, report.delta), "")
        if basis.startswith("re-derived"):
            short.append("re-derived from its parameters")
        elif basis.startswith("recomposed"):
            short.append("recomposed from its components")
        else:
            short.append("taken as stated (--accept-stated)")
    return short


def execute(args: argparse.Namespace) -> int:
    """Print the composed guarantee."""
    from shuffledp.accounting.composition.compose import (
        compose,
        populations_from_json,
        reports_from_json,
    )

    delta = None if args.delta is None else checked(check_delta, args.delta, "--delta")
    epsilon = None if args.epsilon is None else checked(check_epsilon, args.epsilon, "--epsilon")
    objects = [_load(path) for path in args.results]
    # Errors name each file by its path (and its position when it is given twice).
    sources = [
        path if args.results.count(path) == 1 else f"{path} (argument {i + 1})"
        for i, path in enumerate(args.results)
    ]
    # What the files record is checked before their guarantees are re-derived (slower).
    populations = populations_from_json(objects, sources=sources)
    reports = reports_from_json(objects, accept_stated=args.accept_stated, sources=sources)
    try:
        composed = compose(
            *reports,
            delta=delta,
            epsilon=epsilon,
            same_users=args.same_users,
            populations=populations,
        )
    except InvalidParameterError as exc:
        # Keep the message's command-line spelling (same_users=True is --same-users here).
        raise InvalidParameterError(
            Worded(
                "{message} (files in the order given: {files})",
                message=exc.args[0] if exc.args else exc,
                files=args.results,
            )
        ) from None
    if args.json:
        document = {
            "schema": schema_id("account-compose"),
            **command_line_document(composed.to_dict()),
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return 0
    same = composed.parameters["same_users"]
    if len(reports) == 1:
        print("1 release:")
    elif same["basis"] == "asserted":
        print(
            f"{len(reports)} releases, composed as releases on the same people because "
            f"--same-users says so (they differ in {' and '.join(same['differences'])}):"
        )
    else:
        print(
            f"{len(reports)} releases, taken to be on the same users (the same "
            f"{', '.join(same['compared'])}):"
        )
    bases = _bases(composed, reports)
    for path, report, basis in zip(args.results, reports, bases, strict=True):
        levels = report.parameters.get("level_epsilons") if report.parameters else None
        weakest = f", its weakest of {len(levels)} levels" if isinstance(levels, list) else ""
        print(
            f"  {path}: ({report.epsilon:g}, {fmt(report.delta)}) "
            f"[{report.method}{weakest}; {basis}]"
        )
    print(
        f"together: ({composed.epsilon:.6g}, {fmt(composed.delta)})-DP "
        f"[{composed.method}, an upper bound]"
    )
    basic = composed.parameters.get("basic")
    if isinstance(basic, dict) and "epsilon" in basic:
        print(f"basic composition would give ({basic['epsilon']:.6g}, {fmt(basic['delta'])})")
    for item in composed.not_covered:
        print(f"warning: not covered by the guarantee: {for_command_line(item)}")
    return 0
