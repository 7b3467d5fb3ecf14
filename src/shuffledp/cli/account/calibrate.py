"""``shuffledp account calibrate``: the least noisy local parameter for a target (ε, δ)."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext
from typing import Any

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.cli._common import checked, fmt_bound, open_unit_number, positive_number
from shuffledp.cli.account._shared import add_mechanism_options, mechanism_params
from shuffledp.privacy import BoundKind
from shuffledp.schemas import schema_id

NAME = "calibrate"
HELP = "least noisy local parameter for a target (epsilon, delta)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument("--epsilon", required=True, type=positive_number, help="target epsilon > 0")
    parser.add_argument(
        "--delta", required=True, type=open_unit_number, help="target delta in (0, 1)"
    )
    parser.add_argument(
        "--parameter",
        choices=("report_probability", "blanket_messages"),
        default=None,
        help="Poisson: calibrate lambda for the given blanket messages (default) or the "
        "number of blanket messages for the given lambda",
    )
    add_mechanism_options(parser, calibrating=True)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Print the calibrated parameter (one row per method with ``--method all``).

    The JSON (schema ``account-calibrate``) is the calibration's object for one
    method, and an object whose ``rows`` holds one per method with ``--method all``.
    """
    from shuffledp._progress import progress, working
    from shuffledp.accounting import api as accounting_api
    from shuffledp.accounting.methods import methods_for

    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    n = checked(check_int, args.n, "--n", minimum=1)
    params = mechanism_params(args, need_epsilon0=False)
    if args.method == "all":
        names = [m.name for m in methods_for(args.mechanism) if m.bound is BoundKind.UPPER]
    else:
        names = [args.method]
    rows: list[dict[str, Any]] = []
    for name in progress(names, desc="calibrating per method", delay=1.0):
        try:
            busy = working(f"calibrating with {name}") if len(names) == 1 else nullcontext()
            with busy:
                result = accounting_api.calibrate(
                    epsilon,
                    delta,
                    n=n,
                    mechanism=args.mechanism,
                    method=name,
                    parameter=args.parameter,
                    **params,
                )
        except InvalidParameterError as exc:
            if len(names) == 1:
                raise
            rows.append({"method": name, "parameter": None, "value": None, "note": str(exc)})
            continue
        rows.append({**result.to_dict(), "note": result.result.note})
    if args.json:
        schema = {"schema": schema_id("account-calibrate")}
        out = {**schema, "rows": rows} if args.method == "all" else {**schema, **rows[0]}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    for row in rows:
        if row["value"] is None:
            print(f"{row['method']}: nothing certified ({row['note']})")
            continue
        # Shown towards more noise: a smaller epsilon0 or lambda, a larger q or count.
        noisier_up = row["parameter"] in ("q", "blanket_messages")
        shown = fmt_bound(row["value"], up=noisier_up, digits=6)
        print(
            f"{row['parameter']} = {shown} ({row['method']}: certified delta "
            f"{fmt_bound(row['delta'] or 0.0, up=True)} at epsilon={epsilon:g}, n={n})"
        )
    return 0
