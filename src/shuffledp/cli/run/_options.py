"""The options every ``run`` protocol shares: the option groups, and their checks before any work.

The domain is public input (every client needs it to randomize), so one of
``--domain``, ``--domain-file`` or ``--domain-name`` is required; deriving it
from the data needs ``--unsafe-domain-from-data`` and the report then says
that the domain is not covered by the guarantee.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.cli._choices import DEFAULT_NA_VALUES, PER_USER_POLICIES
from shuffledp.cli._common import (
    checked,
    integer_at_least,
    open_unit_number,
    positive_number,
)
from shuffledp.cli.run._domain import add_domain_sources
from shuffledp.cli.run._memory import add_memory_argument
from shuffledp.cli.run._paths import PLOT_FORMATS, output_and_plot_paths

__all__ = ["add_csv_arguments", "add_execution_arguments", "add_run_options", "prepare_run"]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Declare the options every ``run`` protocol takes."""
    data = parser.add_argument_group("input data")
    data.add_argument(
        "--input",
        required=True,
        help="CSV with a header row (plain or gzip-compressed) or Parquet file",
    )
    data.add_argument("--column", required=True, help="column holding each user's value")
    data.add_argument(
        "--user-column",
        default=None,
        help="column identifying the user: each user then contributes exactly one value "
        "(without it every row is taken to be a different user)",
    )
    data.add_argument(
        "--per-user",
        choices=PER_USER_POLICIES,
        default="error",
        help="with --user-column, what to do with a user who has several rows: stop with an "
        "error (default), keep the first row, or keep one row chosen uniformly at random",
    )
    add_csv_arguments(data, na_note="a text that is also a domain label counts as that label")
    data.add_argument(
        "--drop-missing",
        action="store_true",
        help="drop rows whose value is missing (default: stop with an error)",
    )
    data.add_argument(
        "--drop-missing-ids",
        action="store_true",
        help="with --user-column, drop rows whose user id is missing (default: stop with an "
        "error); how many goes to stderr",
    )
    data.add_argument(
        "--normalize-labels",
        action="store_true",
        help="match values to the domain's labels ignoring case and surrounding spaces (both "
        "stripped, then case folded; --na-values too): 'Android ' counts in the bin 'android'. "
        "The bins keep the declared labels, the release states the rule, and two labels that "
        "differ only so are an error (default: labels are matched exactly)",
    )

    domain = parser.add_argument_group("public domain (one of these is required)")
    source = domain.add_mutually_exclusive_group(required=True)
    add_domain_sources(source, domain_help="comma-separated labels, in bin order (spaces trimmed)")
    source.add_argument(
        "--unsafe-domain-from-data",
        action="store_true",
        help="derive the labels from the data itself; the release then shows every distinct "
        "value, which the privacy guarantee does NOT cover",
    )
    domain.add_argument(
        "--other",
        default=None,
        metavar="LABEL",
        help="map values outside the domain to this bin (default: they are an error)",
    )

    privacy = parser.add_argument_group("privacy target")
    privacy.add_argument(
        "--epsilon", required=True, type=positive_number, help="target epsilon > 0"
    )
    privacy.add_argument(
        "--delta", required=True, type=open_unit_number, help="target delta in (0, 1)"
    )

    add_memory_argument(add_execution_arguments(parser))


def add_csv_arguments(group: argparse._ArgumentGroup, *, na_note: str) -> None:
    """Declare ``--delimiter``, ``--encoding`` and ``--na-values`` (``na_note`` ends its help)."""
    group.add_argument(
        "--delimiter",
        default=None,
        help="CSV field separator, e.g. ';' or '\\t' (default: sniffed from the header "
        "when unambiguous, else ',')",
    )
    group.add_argument("--encoding", default="utf-8", help="text encoding (default: utf-8)")
    group.add_argument(
        "--na-values",
        default=None,
        help="comma-separated cell texts that mean 'missing' (default: empty cell, "
        f"{', '.join(v for v in DEFAULT_NA_VALUES if v)}); {na_note}",
    )


def add_execution_arguments(
    parser: argparse.ArgumentParser,
    *,
    seed_help: str = "reproducible run with a seeded (not cryptographic) shuffle; for tests only",
) -> argparse._ArgumentGroup:
    """Declare the "execution and output" group: --seed, --path, --output, --plot, --quiet.

    Returns the group, for a command's own execution options.
    """
    execution = parser.add_argument_group("execution and output")
    execution.add_argument("--seed", type=integer_at_least(0), default=None, help=seed_help)
    execution.add_argument(
        "--path",
        choices=("message", "count"),
        default="message",
        help="message: real messages and a real shuffle (default); count: draw the "
        "analyzer's counts directly (same distribution, faster)",
    )
    execution.add_argument(
        "--output", default=None, help="write the JSON result here (default: stdout)"
    )
    execution.add_argument(
        "--plot",
        default=None,
        help=f"write a bar chart with 95%% error bars ({', '.join(PLOT_FORMATS[:3])}, ...)",
    )
    execution.add_argument(
        "--quiet", action="store_true", help="print no summary on stderr (errors still are)"
    )
    return execution


def prepare_run(args: argparse.Namespace) -> tuple[float, float, Path | None, Path | None]:
    """Check the options every ``run`` shares; return ε, δ and the output and plot paths.

    Nothing is read or written here, so a bad option stops the run before any work.
    """
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    if args.seed is not None:
        checked(check_int, args.seed, "--seed")
    output, plot = output_and_plot_paths(args)
    if args.other is not None and args.unsafe_domain_from_data:
        raise InvalidParameterError(
            "--other needs a declared domain: with --unsafe-domain-from-data no value is outside it"
        )
    if args.per_user != "error" and args.user_column is None:
        raise InvalidParameterError(f"--per-user {args.per_user} needs --user-column")
    if args.drop_missing_ids and args.user_column is None:
        raise InvalidParameterError(
            "--drop-missing-ids needs --user-column: without it there are no user ids to miss"
        )
    return epsilon, delta, output, plot
