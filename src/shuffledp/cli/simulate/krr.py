"""``shuffledp simulate krr``: k-RR reports of many synthetic users, locally or on Spark."""

from __future__ import annotations

import argparse
from typing import Any

from shuffledp._validation import check_epsilon
from shuffledp.analyzers.krr_estimators import ESTIMATORS
from shuffledp.cli._common import checked, number
from shuffledp.cli.run._shared import ReleaseContext, run_to_dict
from shuffledp.cli.simulate._shared import (
    add_simulate_options,
    prepare_simulation,
    run_simulation,
)
from shuffledp.protocols.base import ProtocolRun
from shuffledp.protocols.krr import KRRProtocol

NAME = "krr"
HELP = "k-randomized response, one message per user"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``simulate krr``'s options."""
    add_simulate_options(parser)
    krr = parser.add_argument_group("k-RR")
    krr.add_argument(
        "--epsilon0",
        type=number,
        default=None,
        help="local epsilon of each report (default: the largest the target allows)",
    )
    krr.add_argument(
        "--estimator",
        choices=ESTIMATORS,
        default="inversion",
        help="inversion: unbiased, with standard errors (default); raw; clip; simplex",
    )
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Calibrate k-RR for n users and simulate it (Def. 5 and App. B of the k-RR paper)."""
    setup = prepare_simulation(args)
    epsilon0 = args.epsilon0
    if epsilon0 is not None:
        epsilon0 = checked(check_epsilon, epsilon0, "--epsilon0")
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
