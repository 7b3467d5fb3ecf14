"""``shuffledp run flip``: FLIP (bit flipping plus fake users) on a data file."""

from __future__ import annotations

import argparse
from typing import Any

from shuffledp._validation import check_delta, check_epsilon, check_int
from shuffledp.cli._common import checked, integer
from shuffledp.cli.run._shared import (
    add_run_options,
    finish_run,
    load_encoded,
    prepare_run,
    run_to_dict,
)
from shuffledp.protocols.base import ProtocolRun
from shuffledp.protocols.flip import CALIBRATION_METHODS, FlipCalibration, FlipProtocol

NAME = "flip"
HELP = "FLIP: bit flipping plus fake users"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run flip``'s options."""
    add_run_options(parser)
    parser.add_argument("--fake-users", type=integer, default=None, help="k (default: 100 or more)")
    parser.add_argument("--calibration", choices=CALIBRATION_METHODS, default="exact")
    parser.set_defaults(handler=execute)


def flip_run_to_dict(run: ProtocolRun, calibration: FlipCalibration) -> dict[str, Any]:
    """Return the JSON result of a FLIP run."""
    return run_to_dict(
        run,
        target_delta=calibration.target_delta,
        calibration=calibration.method,
        parameters={
            "q": calibration.q,
            "k": calibration.fake_users,
            "calibration": calibration.method,
            "local_epsilon": calibration.local_epsilon,
        },
        expected_messages_per_user=calibration.expected_messages_per_user,
    )


def execute(args: argparse.Namespace) -> int:
    """Run FLIP on the input column."""
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    fake = None if args.fake_users is None else checked(check_int, args.fake_users, "--fake-users")
    output, plot = prepare_run(args)
    encoded = load_encoded(args)
    n = len(encoded.indices)
    protocol = FlipProtocol.calibrated(
        n, len(encoded.domain), epsilon, delta, fake_users=fake, calibration=args.calibration
    )
    run = protocol.run(encoded.indices, path=args.path, seed=args.seed, domain=encoded.domain)
    title = f"FLIP estimate of {args.column!r} (n={n}, ε={epsilon:g}, δ={run.privacy.delta:.2g})"
    return finish_run(flip_run_to_dict(run, protocol.calibration), run, args, output, plot, title)
