"""``shuffledp account augmented``: the dummy law for a target, against the central DLap(ε/2)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from shuffledp.cli._common import fmt, fmt_bound
from shuffledp.cli.account._shared import add_target_arguments, target_arguments
from shuffledp.cli.run.augmented import add_augmented_arguments, augmented_options
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.protocols.augmented import AugmentedCalibration

NAME = "augmented"
HELP = "augmented shuffle: dummy law, exact delta and per-bin std vs central DLap"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    add_target_arguments(parser, domain_alias="--d", domain_help="bins d")
    add_augmented_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=execute)


def _comparison(n: int, d: int, epsilon: float, delta: float) -> list[AugmentedCalibration]:
    """The three variants at their defaults (beta 1 for sageo and sbin), for the table."""
    from shuffledp.protocols.augmented import calibrate_augmented

    return [
        calibrate_augmented(n, d, epsilon, delta, variant=variant)
        for variant in ("sageo", "s1geo", "sbin")
    ]


def execute(args: argparse.Namespace) -> int:
    """Print the chosen law, its certified delta and per-bin error, and the variants."""
    n, d, epsilon, delta = target_arguments(args)
    options = augmented_options(args, epsilon)
    from shuffledp.protocols.augmented import calibrate_augmented

    cal = calibrate_augmented(
        n,
        d,
        epsilon,
        delta,
        variant=options.variant,
        beta=options.beta,
        nu=options.nu,
        trials=options.trials,
        calibration=options.calibration,
    )
    variants = _comparison(n, d, epsilon, delta)
    if args.json:
        out: dict[str, Any] = {
            "schema": schema_id("account-augmented"),
            "n": n,
            "domain_size": d,
            **cal.to_dict(),
            "variants": [row.to_dict() for row in variants],
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    print(
        f"augmented shuffle ({cal.variant}) at n={n}, d={d}, epsilon={epsilon:g}, "
        f"target delta={delta:g}"
    )
    if cal.trials is not None:
        law = f"Bin({cal.trials}, 1/2)"
    else:
        law = f"SAGeo(nu={cal.nu}, q_left={fmt(cal.q_left or 0.0)}, "
        law += f"q_right={fmt(cal.q_right or 0.0)})"
    print(f"  dummies per bin            {law}, mean {fmt(cal.noise_mean)}")
    print(f"  beta (messages kept)       {fmt(cal.beta)}")
    print(f"  certified delta            {fmt_bound(cal.delta, up=True)}  [{cal.method}]")
    if cal.paper_nu is not None:
        print(
            f"  paper's closed-form nu     {cal.paper_nu} "
            f"(certified delta {fmt_bound(cal.paper_nu_delta or 0.0, up=True)})"
        )
    print(f"  per-bin std (uniform data) {fmt(cal.per_bin_std)}")
    print(f"  central DLap(eps/2) std    {fmt(cal.dlap_std)}  (ratio {cal.std_ratio:.4f})")
    print(f"  messages per user          1 (plus {fmt(cal.expected_dummies)} dummies in all)")
    print(f"{'variant':10s}{'beta':>10s}{'dummies':>26s}{'delta':>12s}{'std':>9s}{'ratio':>8s}")
    for row in variants:
        dummies = f"Bin({row.trials},1/2)" if row.trials is not None else f"SAGeo(nu={row.nu})"
        print(
            f"{row.variant:10s}{fmt(row.beta):>10s}{dummies:>26s}"
            f"{fmt_bound(row.delta, up=True):>12s}{fmt(row.per_bin_std):>9s}{row.std_ratio:8.3f}"
        )
    return 0
