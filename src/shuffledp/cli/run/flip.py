"""``shuffledp run flip``: FLIP (bit flipping plus fake users) on a data file."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_int
from shuffledp.cli._choices import FLIP_CALIBRATION_METHODS, FLIP_DEFAULT_FAKE_USERS
from shuffledp.cli._common import checked, integer_at_least
from shuffledp.cli.run._input import load_input
from shuffledp.cli.run._options import add_run_options, prepare_run
from shuffledp.cli.run._output import finish_run
from shuffledp.release.runs import flip_run_to_dict

NAME = "flip"
HELP = "FLIP: bit flipping plus fake users"


def add_flip_arguments(parser: argparse.ArgumentParser, *, fake_users_note: str = "") -> None:
    """Declare the "FLIP" group (``--fake-users``, ``--calibration``) of ``run`` and ``simulate``.

    ``fake_users_note`` follows the default in ``--fake-users``'s help.
    """
    flip = parser.add_argument_group("FLIP")
    flip.add_argument(
        "--fake-users",
        type=integer_at_least(0),
        default=None,
        help=f"fake users k per real user (default {FLIP_DEFAULT_FAKE_USERS}{fake_users_note})",
    )
    flip.add_argument(
        "--calibration",
        choices=FLIP_CALIBRATION_METHODS,
        default="exact",
        help="exact: smallest q the exact accountant certifies (default); paper: Claim III.1",
    )


def fake_users_option(args: argparse.Namespace) -> int | None:
    """Return the checked ``--fake-users`` (``None``: the default)."""
    return None if args.fake_users is None else checked(check_int, args.fake_users, "--fake-users")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run flip``'s options."""
    add_run_options(parser)
    add_flip_arguments(parser, fake_users_note="; the paper calibration may need more and says so")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run FLIP on the input column."""
    from shuffledp._progress import working
    from shuffledp.specs import FlipSpec

    epsilon, delta, output, plot = prepare_run(args)
    fake = fake_users_option(args)
    data = load_input(args)
    with working("calibrating FLIP's flip probability"):
        protocol = FlipSpec.calibrated(
            data.n,
            data.loaded.domain,
            epsilon,
            delta,
            fake_users=fake,
            calibration=args.calibration,
        ).protocol
    run = data.run(protocol, args.path)
    title = (
        f"FLIP estimate of {args.column!r} (n={data.n}, ε={epsilon:g}, δ={run.privacy.delta:.2g})"
    )
    result = flip_run_to_dict(run, protocol.calibration, data.context)
    return finish_run(result, run, data, args, output, plot, title)
