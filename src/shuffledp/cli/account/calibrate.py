"""``shuffledp account calibrate``: the least noisy local parameter for a target (ε, δ)."""

from __future__ import annotations

import argparse
import json
import sys

from shuffledp._validation import check_delta, check_epsilon, check_int
from shuffledp.accounting import api as accounting_api
from shuffledp.cli._common import checked, fmt, number
from shuffledp.cli.account._shared import MECHANISM_OPTIONS, add_mechanism_options

NAME = "calibrate"
HELP = "least noisy local parameter for a target (epsilon, delta)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument("--epsilon", required=True, type=number)
    parser.add_argument("--delta", required=True, type=number)
    parser.add_argument(
        "--parameter", choices=("report_probability", "blanket_messages"), default=None
    )
    add_mechanism_options(parser, calibrating=True)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Print the calibrated parameter."""
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    n = checked(check_int, args.n, "--n", minimum=1)
    params = {
        key: getattr(args, attr)
        for key, attr in MECHANISM_OPTIONS
        if getattr(args, attr, None) is not None
    }
    method = "best" if args.method == "all" else args.method
    result = accounting_api.calibrate(
        epsilon,
        delta,
        n=n,
        mechanism=args.mechanism,
        method=method,
        parameter=args.parameter,
        **params,
    )
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        r = result.result
        print(
            f"{result.parameter} = {result.value:.6g} ({r.method}: certified delta "
            f"{fmt(r.delta or 0.0)} at epsilon={epsilon:g}, n={n})"
        )
    return 0
