"""``shuffledp account amplify``: the amplified ε at a δ, one row per bound."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_delta
from shuffledp.cli._common import checked, open_unit_number
from shuffledp.cli.account._shared import account_rows, add_mechanism_options, print_rows

NAME = "amplify"
HELP = "amplified epsilon at a delta, every bound"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "--delta",
        required=True,
        type=open_unit_number,
        help="delta at which to state epsilon, in (0, 1)",
    )
    add_mechanism_options(parser)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Print ε at the given δ."""
    delta = checked(check_delta, args.delta, "--delta")
    rows = account_rows(args, epsilon=None, delta=delta)
    print_rows(
        rows,
        args.json,
        f"epsilon at delta={delta:g} ({args.mechanism}, n={args.n}); delta: the method's "
        "own value at that epsilon",
        given="delta",
    )
    return 0
