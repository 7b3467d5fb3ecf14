"""``shuffledp account delta``: δ at an ε, one row per bound."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_epsilon
from shuffledp.cli._common import checked, positive_number
from shuffledp.cli.account._shared import account_rows, add_mechanism_options, print_rows

NAME = "delta"
HELP = "delta at an epsilon, every bound"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "--epsilon",
        required=True,
        type=positive_number,
        help="epsilon at which to state delta, > 0",
    )
    add_mechanism_options(parser)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Print δ at the given ε."""
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    rows = account_rows(args, epsilon=epsilon, delta=None)
    print_rows(rows, args.json, f"delta at epsilon={epsilon:g} ({args.mechanism}, n={args.n})")
    return 0
