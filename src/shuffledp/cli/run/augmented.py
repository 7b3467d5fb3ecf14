"""``shuffledp run augmented``: users send their value, the shuffler adds the noise."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.cli._choices import AUGMENTED_CALIBRATIONS, AUGMENTED_VARIANTS
from shuffledp.cli._common import checked, integer_at_least, number
from shuffledp.cli.run._input import load_input
from shuffledp.cli.run._options import add_run_options, prepare_run
from shuffledp.cli.run._output import finish_run
from shuffledp.release.runs import augmented_run_to_dict

if TYPE_CHECKING:
    from shuffledp.accounting.certificates.augmented import Variant
    from shuffledp.protocols.augmented import Calibration

NAME = "augmented"
HELP = "augmented shuffle: one plain message per user, the shuffler adds the noise"


def add_augmented_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the "augmented shuffle" group of ``run`` and ``account``."""
    group = parser.add_argument_group("augmented shuffle")
    group.add_argument(
        "--variant",
        choices=AUGMENTED_VARIANTS,
        default="sageo",
        help="dummy law: sageo (asymmetric two-sided geometric, default; at beta 1 the "
        "central discrete Laplace), s1geo (pure epsilon-DP), sbin (binomial)",
    )
    group.add_argument(
        "--beta",
        type=number,
        default=None,
        help="probability that the shuffler keeps each message (default 1; sageo needs "
        "beta >= 1 - e^(-epsilon/2); s1geo fixes it)",
    )
    group.add_argument(
        "--nu",
        type=integer_at_least(0),
        default=None,
        help="sageo: a fixed shift nu to certify (default: the smallest the exact accountant "
        "certifies)",
    )
    group.add_argument(
        "--trials",
        type=integer_at_least(1),
        default=None,
        help="sbin: a fixed number M of binomial trials to certify (default: the smallest)",
    )
    group.add_argument(
        "--calibration",
        choices=AUGMENTED_CALIBRATIONS,
        default="exact",
        help="exact: smallest nu or M the exact accountant certifies (default); paper: "
        "sageo's nu from the paper's closed form, certified exactly",
    )


@dataclass(frozen=True)
class AugmentedOptions:
    """The checked augmented options."""

    variant: Variant
    beta: float | None
    nu: int | None
    trials: int | None
    calibration: Calibration


def augmented_options(args: argparse.Namespace, epsilon: float) -> AugmentedOptions:
    """Check the augmented options against each other; errors name the flags."""
    from shuffledp.accounting.certificates.augmented import check_beta

    variant: Variant = args.variant
    beta: float | None = args.beta
    if beta is not None:
        if variant == "s1geo":
            raise InvalidParameterError(
                f"--beta: variant s1geo fixes beta = 1 - e^(-epsilon/2); got --beta {beta:g}"
            )
        beta = check_beta(beta, epsilon if variant == "sageo" else None, name="--beta")
    nu: int | None = args.nu
    if nu is not None:
        if variant != "sageo":
            raise InvalidParameterError(f"--nu is sageo's shift; variant {variant} takes none")
        nu = checked(check_int, nu, "--nu", minimum=0)
    trials: int | None = args.trials
    if trials is not None:
        if variant != "sbin":
            raise InvalidParameterError(f"--trials is sbin's M; variant {variant} takes none")
        trials = checked(check_int, trials, "--trials", minimum=1)
    calibration: Calibration = args.calibration
    if calibration == "paper" and variant != "sageo":
        raise InvalidParameterError(
            f"--calibration paper is sageo's closed-form nu; variant {variant} has none"
        )
    return AugmentedOptions(variant, beta, nu, trials, calibration)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run augmented``'s options."""
    add_run_options(parser)
    add_augmented_arguments(parser)
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run the augmented protocol on the input column."""
    from shuffledp._progress import working
    from shuffledp.specs import AugmentedSpec

    epsilon, delta, output, plot = prepare_run(args)
    options = augmented_options(args, epsilon)
    data = load_input(args)
    with working("calibrating the shuffler's dummies"):
        protocol = AugmentedSpec.calibrated(
            data.n,
            data.loaded.domain,
            epsilon,
            delta,
            beta=options.beta,
            variant=options.variant,
            nu=options.nu,
            trials=options.trials,
            calibration=options.calibration,
        ).protocol
    run = data.run(protocol, args.path)
    cal = protocol.calibration
    title = (
        f"augmented ({cal.variant}) estimate of {args.column!r} "
        f"(n={data.n}, ε={epsilon:g}, δ={run.privacy.delta:.2g}, β={cal.beta:.3g})"
    )
    result = augmented_run_to_dict(run, cal, protocol.parameters(), data.context)
    return finish_run(result, run, data, args, output, plot, title)
