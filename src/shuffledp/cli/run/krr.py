"""``shuffledp run krr``: k-randomized response, one message per user, on a data file."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_epsilon
from shuffledp.cli._choices import KRR_ESTIMATORS
from shuffledp.cli._common import checked, positive_number
from shuffledp.cli.run._input import load_input
from shuffledp.cli.run._options import add_run_options, prepare_run
from shuffledp.cli.run._output import finish_run
from shuffledp.release.runs import krr_run_to_dict

NAME = "krr"
HELP = "k-randomized response, one message per user"


def add_krr_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the "k-RR" group (``--epsilon0``, ``--estimator``) of ``run`` and ``simulate``."""
    krr = parser.add_argument_group("k-RR")
    krr.add_argument(
        "--epsilon0",
        type=positive_number,
        default=None,
        help="local epsilon of each report (default: the largest the target allows)",
    )
    krr.add_argument(
        "--estimator",
        choices=KRR_ESTIMATORS,
        default="inversion",
        help="inversion: unbiased, with standard errors (default); raw; clip; simplex",
    )


def epsilon0_option(args: argparse.Namespace) -> float | None:
    """Return the checked ``--epsilon0`` (``None``: the largest the target allows)."""
    epsilon0: float | None = args.epsilon0
    if epsilon0 is not None:
        epsilon0 = checked(check_epsilon, epsilon0, "--epsilon0")
    return epsilon0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run krr``'s options."""
    add_run_options(parser)
    add_krr_arguments(parser)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run k-RR on the input column."""
    from shuffledp._progress import working
    from shuffledp.specs import KRRSpec

    epsilon, delta, output, plot = prepare_run(args)
    epsilon0 = epsilon0_option(args)
    data = load_input(args)
    with working("calibrating k-RR's local epsilon"):
        protocol = KRRSpec.calibrated(
            data.n, data.loaded.domain, epsilon, delta, epsilon0=epsilon0, estimator=args.estimator
        ).protocol
    run = data.run(protocol, args.path)
    cal = protocol.calibration
    result = krr_run_to_dict(run, cal, protocol.parameters(), data.context)
    title = (
        f"k-RR ({args.estimator}) estimate of {args.column!r} "
        f"(n={data.n}, ε={epsilon:g}, δ={run.privacy.delta:.2g}, ε₀={cal.epsilon0:.3g})"
    )
    return finish_run(result, run, data, args, output, plot, title)
