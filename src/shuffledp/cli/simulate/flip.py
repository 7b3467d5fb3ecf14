"""``shuffledp simulate flip``: FLIP's messages for many synthetic users, locally or on Spark."""

from __future__ import annotations

import argparse
from typing import Any

from shuffledp._validation import check_int
from shuffledp.cli._common import checked, integer
from shuffledp.cli.run._shared import ReleaseContext
from shuffledp.cli.run.flip import flip_run_to_dict
from shuffledp.cli.simulate._shared import (
    add_simulate_options,
    prepare_simulation,
    run_simulation,
)
from shuffledp.protocols.base import ProtocolRun
from shuffledp.protocols.flip import CALIBRATION_METHODS, DEFAULT_FAKE_USERS, FlipProtocol

NAME = "flip"
HELP = "FLIP: bit flipping plus fake users"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``simulate flip``'s options."""
    add_simulate_options(parser)
    flip = parser.add_argument_group("FLIP")
    flip.add_argument(
        "--fake-users",
        type=integer,
        default=None,
        help=f"fake users k per real user (default {DEFAULT_FAKE_USERS})",
    )
    flip.add_argument(
        "--calibration",
        choices=CALIBRATION_METHODS,
        default="exact",
        help="exact: smallest q the exact accountant certifies (default); paper: Claim III.1",
    )
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Calibrate FLIP for n users and simulate it (Alg. 1-3 of the FLIP paper)."""
    setup = prepare_simulation(args)
    fake = None if args.fake_users is None else checked(check_int, args.fake_users, "--fake-users")
    protocol = FlipProtocol.calibrated(
        setup.n,
        setup.domain,
        setup.epsilon,
        setup.delta,
        fake_users=fake,
        calibration=args.calibration,
    )

    def to_dict(run: ProtocolRun, context: ReleaseContext) -> dict[str, Any]:
        return flip_run_to_dict(run, protocol.calibration, context)

    return run_simulation(args, setup, protocol, protocol.randomizer, to_dict)
