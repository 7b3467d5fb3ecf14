"""``shuffledp simulate flip``: FLIP's messages for many synthetic users, locally or on Spark."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from shuffledp.cli.run.flip import add_flip_arguments, fake_users_option
from shuffledp.cli.simulate._shared import (
    add_simulate_options,
    prepare_simulation,
    run_simulation,
)
from shuffledp.release.document import ReleaseContext
from shuffledp.release.runs import flip_run_to_dict

if TYPE_CHECKING:
    from shuffledp.protocols.base import ProtocolRun

NAME = "flip"
HELP = "FLIP: bit flipping plus fake users"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``simulate flip``'s options."""
    add_simulate_options(parser)
    add_flip_arguments(parser)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Calibrate FLIP for n users and simulate it (Alg. 1-3 of arXiv 2104.02739)."""
    from shuffledp.protocols.flip import FlipProtocol

    setup = prepare_simulation(args)
    fake = fake_users_option(args)
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
