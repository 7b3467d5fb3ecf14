"""``shuffledp account segmented``: λ per level and the blanket rate for segmented privacy.

Wang et al., "Segmented private data aggregation in the multi-message shuffle
model", arXiv 2407.19639, §5.2: for levels E_1 < … < E_K with user shares, the largest λ_k
the exact accountant certifies at each blanket rate m, and the m with the
smallest error bound (nm + sΛ)/Λ². Each level shows its certified δ, the δ of a
concrete dataset pair (lower bound) and the λ the paper's Eq. 7 would choose.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from shuffledp._validation import InvalidParameterError, check_delta, check_int
from shuffledp.cli._choices import SEGMENTED_BLANKET_GRID, SEGMENTED_VARIANTS
from shuffledp.cli._common import (
    checked,
    fmt,
    fmt_bound,
    integer_at_least,
    open_unit_number,
)
from shuffledp.cli.run.segmented import parse_blanket, parse_levels
from shuffledp.schemas import schema_id

NAME = "segmented"
HELP = "segmented privacy: lambda per level and the blanket rate (section 5.2)"


def parse_shares(text: str, count: int, flag: str = "--shares") -> tuple[float, ...]:
    """Parse ``0.25,0.5,0.25``: one share ≥ 0 per level, summing to 1.

    Raises:
        InvalidParameterError: Naming ``flag``, the text and what is allowed.
    """
    try:
        shares = tuple(float(part) for part in str(text).split(","))
    except ValueError:
        raise InvalidParameterError(
            f"{flag} must be comma-separated numbers (e.g. 0.25,0.5,0.25), got {text!r}"
        ) from None
    if len(shares) != count:
        raise InvalidParameterError(
            f"{flag} has {len(shares)} entries for {count} levels; give one share per level"
        )
    if any(not math.isfinite(x) or x < 0 for x in shares):
        raise InvalidParameterError(f"{flag} must be finite numbers >= 0, got {text!r}")
    total = sum(shares)
    if abs(total - 1.0) > 1e-6:
        raise InvalidParameterError(f"{flag} must sum to 1, got {text!r} (sum {total:g})")
    return shares


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument("--n", required=True, type=integer_at_least(1), help="number of users")
    parser.add_argument(
        "--domain-size",
        required=True,
        type=integer_at_least(2),
        help="d, the number of items (>= 2)",
    )
    parser.add_argument(
        "--levels", required=True, help="privacy levels epsilon_1 < ... < epsilon_K, e.g. 0.5,1,2"
    )
    parser.add_argument(
        "--shares",
        required=True,
        help="fraction of users at each level, summing to 1, e.g. 0.25,0.5,0.25 (turned into "
        "user counts summing to n by largest remainder)",
    )
    parser.add_argument(
        "--items-per-user", required=True, type=integer_at_least(1), help="s, item slots per user"
    )
    parser.add_argument(
        "--delta",
        required=True,
        type=open_unit_number,
        help="target delta of every level, in (0, 1)",
    )
    parser.add_argument(
        "--blanket",
        default="auto",
        help="blanket messages per user m (a number > 0), or 'auto' (default): search "
        f"{len(SEGMENTED_BLANKET_GRID)} rates from {SEGMENTED_BLANKET_GRID[0]:g} to "
        f"{SEGMENTED_BLANKET_GRID[-1]:g} for the smallest error bound (slow: tens of seconds)",
    )
    parser.add_argument(
        "--variant",
        choices=SEGMENTED_VARIANTS,
        default="paper",
        help="paper: an unreported item sends nothing (default); dummy: a uniform item",
    )
    parser.add_argument(
        "--padding",
        action="store_true",
        help="the message domain includes a padding symbol (d + 1 values), as when sets "
        "smaller than s are padded",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Calibrate and print the parameters."""
    from shuffledp._progress import working
    from shuffledp.accounting.segmented_parameters import optimize_parameters
    from shuffledp.protocols.segmented import largest_remainder

    n = checked(check_int, args.n, "--n", minimum=1)
    d = checked(check_int, args.domain_size, "--domain-size", minimum=2)
    s = checked(check_int, args.items_per_user, "--items-per-user", minimum=1)
    delta = checked(check_delta, args.delta, "--delta")
    levels = parse_levels(args.levels)
    shares = parse_shares(args.shares, len(levels))
    blanket = parse_blanket(args.blanket)
    counts = largest_remainder(shares, n)
    with working("calibrating lambda per level" + (" over the m grid" if blanket is None else "")):
        params = optimize_parameters(
            levels,
            counts,
            delta,
            domain_size=d,
            items_per_user=s,
            padding=args.padding,
            variant="paper" if args.variant == "paper" else "dummy",
            blanket_rate=blanket,
        )
    out: dict[str, Any] = {"schema": schema_id("account-segmented"), **params.to_dict()}
    out["blanket_choice"] = "auto" if blanket is None else "fixed"
    for level, share in zip(out["levels"], shares, strict=True):
        level["requested_share"] = share
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    print(
        f"segmented at n={n}, d={d} (message domain {params.message_domain}), s={s}, "
        f"target delta={delta:g}, variant {params.variant}"
    )
    print(
        f"blanket rate m = {params.blanket_rate:g} ({out['blanket_choice']}), "
        f"expected messages per user {fmt(params.messages_per_user)}, "
        f"error bound sum_j E(w_j - hat w_j)^2 <= {fmt(params.error_bound)}"
    )
    header = (
        f"{'epsilon':>8s}{'users':>10s}{'lambda':>11s}{'delta':>12s}{'lower bound':>13s}"
        f"{'paper lambda':>14s}{'its delta':>12s}"
    )
    print(header)
    for level in params.levels:
        # Shown on the safe side: λ down (less reporting), certified δs up, the lower
        # bound down.
        lower = (
            "-" if level.lower_bound_delta is None else fmt_bound(level.lower_bound_delta, up=False)
        )
        paper_delta = (
            fmt(level.paper_delta)
            if math.isnan(level.paper_delta)
            else fmt_bound(level.paper_delta, up=True)
        )
        print(
            f"{level.epsilon:>8g}{level.users:>10d}"
            f"{fmt_bound(level.report_probability, up=False):>11s}"
            f"{fmt_bound(level.delta, up=True):>12s}{lower:>13s}"
            f"{fmt(level.paper_report_probability):>14s}{paper_delta:>12s}"
        )
    print(
        "delta: certified upper bound at the level's epsilon; lower bound: delta of a concrete "
        "pair of datasets ('-': none, e.g. the domain is too small for the pair or the level "
        "has no user); paper lambda: Eq. 7 with Lemma 3 (a reproduction, with the delta "
        "our accountant certifies for it)"
    )
    return 0
