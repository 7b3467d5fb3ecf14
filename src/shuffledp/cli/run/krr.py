"""``shuffledp run krr``: k-randomized response, one message per user, on a data file."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_delta, check_epsilon
from shuffledp.analyzers.krr_estimators import ESTIMATORS
from shuffledp.cli._common import checked, number
from shuffledp.cli.run._shared import (
    add_run_options,
    finish_run,
    load_encoded,
    prepare_run,
    run_to_dict,
)
from shuffledp.protocols.krr import KRRProtocol

NAME = "krr"
HELP = "k-randomized response, one message per user"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run krr``'s options."""
    add_run_options(parser)
    parser.add_argument(
        "--epsilon0",
        type=number,
        default=None,
        help="local epsilon (default: the largest the target allows)",
    )
    parser.add_argument("--estimator", choices=ESTIMATORS, default="inversion")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run k-RR on the input column."""
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    epsilon0 = args.epsilon0
    if epsilon0 is not None:
        epsilon0 = checked(check_epsilon, epsilon0, "--epsilon0")
    output, plot = prepare_run(args)
    encoded = load_encoded(args)
    n = len(encoded.indices)
    protocol = KRRProtocol.calibrated(
        n, len(encoded.domain), epsilon, delta, epsilon0=epsilon0, estimator=args.estimator
    )
    run = protocol.run(encoded.indices, path=args.path, seed=args.seed, domain=encoded.domain)
    cal = protocol.calibration
    result = run_to_dict(
        run,
        target_delta=delta,
        calibration=cal.method,
        parameters=protocol.parameters(),
        local_epsilon=cal.epsilon0,
    )
    title = (
        f"k-RR ({args.estimator}) estimate of {args.column!r} "
        f"(n={n}, ε={epsilon:g}, δ={run.privacy.delta:.2g}, ε₀={cal.epsilon0:.3g})"
    )
    return finish_run(result, run, args, output, plot, title)
