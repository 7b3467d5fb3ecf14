"""``shuffledp run krr``: k-randomized response, one message per user, on a data file."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_epsilon
from shuffledp.analyzers.krr_estimators import ESTIMATORS
from shuffledp.cli._common import checked, number
from shuffledp.cli.run._shared import (
    add_run_options,
    finish_run,
    load_input,
    prepare_run,
    run_to_dict,
)
from shuffledp.protocols.krr import KRRProtocol

NAME = "krr"
HELP = "k-randomized response, one message per user"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run krr``'s options."""
    add_run_options(parser)
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
    """Run k-RR on the input column."""
    epsilon, delta, output, plot = prepare_run(args)
    epsilon0 = args.epsilon0
    if epsilon0 is not None:
        epsilon0 = checked(check_epsilon, epsilon0, "--epsilon0")
    data = load_input(args)
    protocol = KRRProtocol.calibrated(
        data.n, data.loaded.domain, epsilon, delta, epsilon0=epsilon0, estimator=args.estimator
    )
    run = protocol.run(data.loaded.indices, path=args.path, seed=args.seed)
    cal = protocol.calibration
    result = run_to_dict(
        run,
        data.context,
        target_delta=delta,
        calibration=cal.method,
        parameters=protocol.parameters(),
        notes=cal.notes,
        local_epsilon=cal.epsilon0,
    )
    title = (
        f"k-RR ({args.estimator}) estimate of {args.column!r} "
        f"(n={data.n}, ε={epsilon:g}, δ={run.privacy.delta:.2g}, ε₀={cal.epsilon0:.3g})"
    )
    return finish_run(result, run, data, args, output, plot, title)
