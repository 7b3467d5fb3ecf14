"""``shuffledp run segmented``: personalized privacy levels on set-valued data (Wang et al.).

Wang et al., "Segmented private data aggregation in the multi-message shuffle
model", arXiv 2407.19639.

Input in long format: one row per (user, item) with the user's privacy level
on every row. Alg. 1 end to end: the level counts (exact or DP), λ_k and the
blanket rate m (§5.2), then Alg. 2's Poisson randomizer, the shuffle and the
pooled estimator. The JSON holds one privacy object per level.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp._wording import for_command_line
from shuffledp.cli._choices import (
    SEGMENTED_BLANKET_GRID,
    SEGMENTED_LEVEL_COUNT_MODES,
    SEGMENTED_VARIANTS,
)
from shuffledp.cli._common import (
    checked,
    integer_at_least,
    open_unit_number,
    positive_number,
)
from shuffledp.cli.run._domain import add_domain_sources, declared_domain
from shuffledp.cli.run._input import csv_options
from shuffledp.cli.run._options import add_csv_arguments, add_execution_arguments
from shuffledp.cli.run._output import write_release
from shuffledp.cli.run._paths import output_and_plot_paths
from shuffledp.release.segmented import segmented_run_to_dict

if TYPE_CHECKING:
    from shuffledp.data.sets import LoadedSets

NAME = "segmented"
HELP = "segmented privacy levels on set-valued data (multi-message shuffle)"

__all__ = ["add_arguments", "execute", "parse_blanket", "parse_levels"]


def parse_levels(text: str, flag: str = "--levels") -> tuple[float, ...]:
    """Parse ``0.5,1,2`` into strictly increasing positive levels.

    Raises:
        InvalidParameterError: Naming ``flag``, the text and what is allowed.
    """
    parts = [part.strip() for part in str(text).split(",")]
    values: list[float] = []
    for part in parts:
        try:
            values.append(float(part))
        except ValueError:
            raise InvalidParameterError(
                f"{flag} must be comma-separated numbers (e.g. 0.5,1,2), got {text!r}"
            ) from None
    from shuffledp.data.sets import check_levels_list

    return check_levels_list(values, flag)


def parse_blanket(text: str | None, flag: str = "--blanket") -> float | None:
    """Parse ``auto`` (``None``: search the grid) or a blanket rate m > 0.

    Raises:
        InvalidParameterError: Naming ``flag``, the text and what is allowed.
    """
    if text is None or str(text).strip().lower() == "auto":
        return None
    try:
        value = float(text)
    except ValueError:
        raise InvalidParameterError(
            f"{flag} must be 'auto' or a number m > 0 (expected blanket messages per user), "
            f"got {text!r}"
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"{flag} must be 'auto' or a finite number > 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run segmented``'s options."""
    data = parser.add_argument_group("input data (one row per user and item)")
    data.add_argument(
        "--input",
        required=True,
        help="CSV with a header row (plain or gzip-compressed) or Parquet file",
    )
    data.add_argument("--user-column", required=True, help="column identifying the user")
    data.add_argument("--item-column", required=True, help="column holding one item of the set")
    data.add_argument(
        "--level-column",
        required=True,
        help="column holding the user's privacy level (one of --levels, the same on every row "
        "of the user)",
    )
    add_csv_arguments(data, na_note="a missing user, item or level is an error")

    domain = parser.add_argument_group("public item domain (one of these is required)")
    source = domain.add_mutually_exclusive_group(required=True)
    add_domain_sources(
        source,
        domain_help="comma-separated item labels, in order (spaces trimmed)",
        label="item label",
    )
    domain.add_argument(
        "--other",
        default=None,
        metavar="LABEL",
        help="count items outside the domain as this label (default: they are an error)",
    )

    privacy = parser.add_argument_group("privacy levels and parameters")
    privacy.add_argument(
        "--levels",
        required=True,
        help="the privacy levels epsilon_1 < ... < epsilon_K users choose from, e.g. 0.5,1,2",
    )
    privacy.add_argument(
        "--delta",
        required=True,
        type=open_unit_number,
        help="target delta of every level, in (0, 1)",
    )
    privacy.add_argument(
        "--items-per-user",
        required=True,
        type=integer_at_least(1),
        help="s, item slots per user: larger sets are sampled down to s items (uniformly), "
        "smaller ones are padded (--padding) or an error",
    )
    privacy.add_argument(
        "--padding",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="pad sets smaller than s with a padding symbol (one more message value); "
        "default: --no-padding, under which a smaller set is an error",
    )
    privacy.add_argument(
        "--blanket",
        default="auto",
        help="blanket messages per user m (a number > 0), or 'auto' (default): the m of a "
        f"{len(SEGMENTED_BLANKET_GRID)}-point grid from {SEGMENTED_BLANKET_GRID[0]:g} to "
        f"{SEGMENTED_BLANKET_GRID[-1]:g} with the smallest error bound (section 5.2; slow: "
        "tens of seconds)",
    )
    privacy.add_argument(
        "--variant",
        choices=SEGMENTED_VARIANTS,
        default="paper",
        help="paper: an unreported item sends nothing (Alg. 2, default); dummy: it sends a "
        "uniform random item, so every user sends exactly s data messages",
    )
    privacy.add_argument(
        "--level-counts",
        choices=SEGMENTED_LEVEL_COUNT_MODES,
        default="exact",
        help="exact: users' levels are shuffled without noise and the level histogram is "
        "released, NOT covered by any guarantee (the paper's experiments; default); dp: k-RR "
        "over the levels with --level-epsilon and --level-delta",
    )
    privacy.add_argument(
        "--level-epsilon", type=positive_number, default=None, help="epsilon of the DP level counts"
    )
    privacy.add_argument(
        "--level-delta", type=open_unit_number, default=None, help="delta of the DP level counts"
    )

    add_execution_arguments(
        parser,
        seed_help="reproducible run (set samples, randomizers and a seeded, not cryptographic, "
        "shuffle); for tests only",
    )
    parser.set_defaults(handler=execute)


def _level_options(args: argparse.Namespace) -> tuple[float | None, float | None]:
    if args.level_counts == "exact":
        given = [
            f
            for f, v in (
                ("--level-epsilon", args.level_epsilon),
                ("--level-delta", args.level_delta),
            )
            if v is not None
        ]
        if given:
            raise InvalidParameterError(
                f"{' and '.join(given)} need --level-counts dp (with exact level counts the "
                "level histogram is released as it is)"
            )
        return None, None
    if args.level_epsilon is None or args.level_delta is None:
        raise InvalidParameterError(
            "--level-counts dp needs --level-epsilon and --level-delta (the level step's "
            "privacy target)"
        )
    return (
        checked(check_epsilon, args.level_epsilon, "--level-epsilon"),
        checked(check_delta, args.level_delta, "--level-delta"),
    )


def _summary(
    result: dict[str, Any], data: LoadedSets, destination: str, chosen: list[str]
) -> list[str]:
    privacy = result["privacy"]
    levels = ", ".join(
        f"({level['epsilon']:g}, {level['delta']:.3g})" for level in privacy["levels"]
    )
    s = result["parameters"]["items_per_user"]
    if data.users_sampled:
        # Operator-only (stderr): how many sets were sampled is a statistic of the data.
        estimand = (
            f"estimates the share of users whose set, sampled to {s} items, holds each item "
            f"({data.users_sampled:,} of {result['n']:,} sets had more than {s} items and "
            "were sampled)"
        )
    else:
        estimand = (
            f"estimates the share of users holding each item (no set had more than {s} items)"
        )
    lines = [
        f"shuffledp run segmented: {result['n']} users, {len(result['domain'])} items "
        f"(domain: {result['domain_source']}), levels certified {levels} "
        f"[{privacy['method']}], m={result['parameters']['blanket_rate']:g}; {estimand}; "
        f"result: {destination}"
    ]
    lines += [f"note: {for_command_line(note)}" for note in (*data.notes, *chosen)]
    lines += [
        f"warning: not covered by the guarantee: {for_command_line(item)}"
        for item in privacy["not_covered"]
    ]
    return lines


def execute(args: argparse.Namespace) -> int:
    """Run the segmented protocol on the input file."""
    from shuffledp._progress import working
    from shuffledp._rng import child_seeds
    from shuffledp.accounting.segmented_parameters import DEFAULT_BLANKET_GRID
    from shuffledp.data.sets import load_sets
    from shuffledp.protocols.segmented import run_segmented

    levels = parse_levels(args.levels)
    delta = checked(check_delta, args.delta, "--delta")
    s = checked(check_int, args.items_per_user, "--items-per-user", minimum=1)
    blanket = parse_blanket(args.blanket)
    level_epsilon, level_delta = _level_options(args)
    if args.level_counts == "dp" and len(levels) < 2:
        raise InvalidParameterError(
            "--level-counts dp needs at least two levels: with one level the count is n, "
            "which is public"
        )
    if args.seed is not None:
        checked(check_int, args.seed, "--seed")
    output, plot = output_and_plot_paths(args, name_missing_extension=False)
    domain, domain_source = declared_domain(args, "declared")
    assert domain is not None  # one of the domain options is required
    delimiter, na_values = csv_options(args)
    # One seed, two consumers (the sets' samples and the protocol): independent children.
    # Two generators built from the same seed draw the same numbers, which tied the
    # slots' order to the decisions to report them (a biased estimate).
    data_seed, protocol_seed = child_seeds(args.seed, 2)
    data = load_sets(
        args.input,
        user_column=args.user_column,
        item_column=args.item_column,
        level_column=args.level_column,
        levels=levels,
        domain=domain,
        domain_source=domain_source,
        items_per_user=s,
        other=args.other,
        padding=args.padding,
        seed=data_seed,
        delimiter=delimiter,
        encoding=args.encoding,
        na_values=na_values,
    )
    with working("segmented: calibrating the levels, randomizing, shuffling"):
        protocol, run = run_segmented(
            data.items,
            data.levels,
            levels=levels,
            delta=delta,
            domain=data.domain,
            variant=args.variant,
            blanket_rate=blanket,
            padding=args.padding,
            level_counts=args.level_counts,
            level_epsilon=level_epsilon,
            level_delta=level_delta,
            path=args.path,
            seed=protocol_seed,
        )
    extra: list[str] = []
    if args.other is not None:
        extra.append(f"items outside the declared domain were counted as {args.other!r} (--other)")
    if blanket is None:
        choice = f"auto: smallest error bound over {len(DEFAULT_BLANKET_GRID)} rates"
        extra.append(
            f"the blanket rate m={run.parameters.blanket_rate:g} was chosen on your behalf: the "
            f"smallest section 5.2 error bound over {len(DEFAULT_BLANKET_GRID)} rates from "
            f"{DEFAULT_BLANKET_GRID[0]:g} to {DEFAULT_BLANKET_GRID[-1]:g} (--blanket auto)"
        )
    else:
        choice = "fixed"
    result = segmented_run_to_dict(
        protocol,
        run,
        data,
        target_delta=delta,
        blanket_choice=choice,
        extra_notes=tuple(extra),
        seed=args.seed,
    )
    result["input"] = {
        "file": str(args.input),
        "user_column": args.user_column,
        "item_column": args.item_column,
        "level_column": args.level_column,
    }
    title = (
        f"segmented estimate of {args.item_column!r} (n={run.n}, levels "
        f"{','.join(f'{x:g}' for x in levels)}, m={run.parameters.blanket_rate:.3g})"
    )
    ylabel = f"users whose set holds the item\n(sets of more than {s} items sampled to {s})"
    destination = write_release(result, run.estimate, output, plot, title, ylabel=ylabel)
    if not args.quiet:
        chosen = [note for note in extra if "on your behalf" in note]
        for line in _summary(result, data, destination, chosen):
            print(line, file=sys.stderr)
    return 0
