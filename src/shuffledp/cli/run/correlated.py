"""``shuffledp run correlated``: signed messages with correlated noise on a data file."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from shuffledp._validation import check_epsilon
from shuffledp.cli._choices import CORRELATED_DEFAULT_SLACK, CORRELATED_NEIGHBOURS
from shuffledp.cli._common import checked, positive_number
from shuffledp.cli.run._input import load_input
from shuffledp.cli.run._options import add_run_options, prepare_run
from shuffledp.cli.run._output import finish_run
from shuffledp.release.runs import correlated_run_to_dict

if TYPE_CHECKING:
    from shuffledp.protocols.correlated import MinHonest

NAME = "correlated"
HELP = "signed messages with correlated noise: near-central error"


def min_honest_type(text: str) -> int | float:
    """Parse ``--min-honest``: a count of users (``90000``, ``9e4``) or a fraction (``0.9``)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0.0):
        raise argparse.ArgumentTypeError(
            f"expected a count of users or a fraction of them in (0, 1], got {text!r}"
        )
    if value > 1.0 and value == math.floor(value):
        return int(value)
    return value


def add_correlated_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the "correlated" group (``--slack``, ``--min-honest``, ``--neighbours``)."""
    group = parser.add_argument_group("correlated noise")
    group.add_argument(
        "--slack",
        type=positive_number,
        default=CORRELATED_DEFAULT_SLACK,
        help="per-bin standard deviation at most (1 + slack) times the central discrete "
        f"Laplace's (default {CORRELATED_DEFAULT_SLACK:g})",
    )
    group.add_argument(
        "--min-honest",
        type=min_honest_type,
        default=None,
        metavar="M",
        help="users whose noise shares the guarantee counts on: a count, or a fraction of n "
        "in (0, 1] (default: all users; dropouts or colluders below M void the guarantee)",
    )
    group.add_argument(
        "--neighbours",
        choices=CORRELATED_NEIGHBOURS,
        default="replacement",
        help="replacement: one user's value changes (default); add-remove: one user "
        "present or absent, an absent user sending nothing (noise shares included)",
    )


def slack_option(args: argparse.Namespace) -> float:
    """Return the checked ``--slack``."""
    slack: float = checked(check_epsilon, args.slack, "--slack")
    return slack


def min_honest_option(args: argparse.Namespace, n: int) -> MinHonest:
    """Return ``--min-honest`` after checking it against n (``None``: all users)."""
    value: MinHonest = args.min_honest
    if value is not None:
        from shuffledp.protocols.correlated import resolve_min_honest

        resolve_min_honest(value, n, "--min-honest")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run correlated``'s options."""
    add_run_options(parser)
    add_correlated_arguments(parser)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run the correlated protocol on the input column."""
    from shuffledp._progress import working
    from shuffledp.specs import CorrelatedSpec

    epsilon, delta, output, plot = prepare_run(args)
    slack = slack_option(args)
    data = load_input(args)
    min_honest = min_honest_option(args, data.n)
    with working("calibrating the correlated noise"):
        protocol = CorrelatedSpec.calibrated(
            data.n,
            data.loaded.domain,
            epsilon,
            delta,
            slack=slack,
            min_honest=min_honest,
            neighbours=args.neighbours,
        ).protocol
    run = data.run(protocol, args.path)
    title = (
        f"Correlated-noise estimate of {args.column!r} "
        f"(n={data.n}, ε={epsilon:g}, δ={run.privacy.delta:.2g})"
    )
    result = correlated_run_to_dict(run, protocol.calibration, data.context)
    return finish_run(result, run, data, args, output, plot, title)
