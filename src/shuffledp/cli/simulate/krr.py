"""``shuffledp simulate krr``: k-RR reports of many synthetic users, locally or on Spark."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from shuffledp.cli.run.krr import add_krr_arguments, epsilon0_option
from shuffledp.cli.simulate._shared import (
    add_simulate_options,
    prepare_simulation,
    run_simulation,
)
from shuffledp.release.document import ReleaseContext, run_to_dict

if TYPE_CHECKING:
    from shuffledp.protocols.base import ProtocolRun

NAME = "krr"
HELP = "k-randomized response, one message per user"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``simulate krr``'s options."""
    add_simulate_options(parser)
    add_krr_arguments(parser)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Calibrate k-RR for n users and simulate it (Def. 5, App. B of arXiv 2205.08858)."""
    from shuffledp.protocols.krr import KRRProtocol

    setup = prepare_simulation(args)
    epsilon0 = epsilon0_option(args)
    protocol = KRRProtocol.calibrated(
        setup.n,
        setup.domain,
        setup.epsilon,
        setup.delta,
        epsilon0=epsilon0,
        estimator=args.estimator,
    )
    cal = protocol.calibration

    def to_dict(run: ProtocolRun, context: ReleaseContext) -> dict[str, Any]:
        return run_to_dict(
            run,
            context,
            target_delta=setup.delta,
            calibration=cal.method,
            parameters=protocol.parameters(),
            notes=cal.notes,
            local_epsilon=cal.epsilon0,
        )

    return run_simulation(args, setup, protocol, protocol.randomizer, to_dict)
