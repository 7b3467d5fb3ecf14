"""What every ``run`` protocol shares: the data and domain options, loading, and the report.

The domain is public input (every client needs it to randomize), so one of
``--domain``, ``--domain-file`` or ``--domain-name`` is required; deriving it
from the data needs ``--unsafe-domain-from-data`` and the report then says
that the domain is not covered by the guarantee. Everything the run adjusts
(rows dropped, values mapped to ``--other``, rows beyond one per user, a
parameter chosen on the user's behalf) is stated on stderr and in the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp import __version__
from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp._wording import command_line_document, for_command_line
from shuffledp.cli._choices import DEFAULT_NA_VALUES
from shuffledp.cli._common import checked, integer, number, writable, write_atomically
from shuffledp.data.domains import (
    builtin_domain,
    builtin_domain_names,
    parse_domain,
    read_domain_file,
)
from shuffledp.schemas import schema_id

if TYPE_CHECKING:  # the parser is built without numpy and the protocols (lazy imports)
    import numpy as np

    from shuffledp.analyzers.estimate import HistogramEstimate
    from shuffledp.data.ingest import LoadedHistogram, LoadedValues
    from shuffledp.privacy import PrivacyReport
    from shuffledp.protocols.base import ExecutionPath, ProtocolRun, ShuffleProtocol

__all__ = [
    "ReleaseContext",
    "RunInput",
    "add_csv_arguments",
    "add_domain_sources",
    "add_execution_arguments",
    "add_run_options",
    "check_distinct_paths",
    "check_plot_format",
    "csv_options",
    "declared_domain",
    "finish_run",
    "load_input",
    "output_and_plot_paths",
    "prepare_run",
    "run_to_dict",
    "same_file",
    "write_release",
]

#: Image formats the plot can be written in (matplotlib's raster and vector backends).
PLOT_FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")


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
        choices=("error", "first", "sample"),
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
    privacy.add_argument("--epsilon", required=True, type=number, help="target epsilon > 0")
    privacy.add_argument("--delta", required=True, type=number, help="target delta in (0, 1)")

    add_execution_arguments(parser)


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


def csv_options(args: argparse.Namespace) -> tuple[str | None, tuple[str, ...]]:
    """Return the CSV delimiter (``tab`` or a backslash-t meaning a tab) and the missing texts."""
    na_values = DEFAULT_NA_VALUES if args.na_values is None else ("", *args.na_values.split(","))
    delimiter = args.delimiter
    if delimiter is not None:
        delimiter = {"\\t": "\t", "tab": "\t"}.get(delimiter, delimiter)
    return delimiter, na_values


def add_domain_sources(
    source: argparse._MutuallyExclusiveGroup, *, domain_help: str, label: str = "label"
) -> None:
    """Declare ``--domain``, ``--domain-file`` and ``--domain-name`` in ``source``."""
    source.add_argument("--domain", default=None, help=domain_help)
    source.add_argument(
        "--domain-file",
        default=None,
        help=f"file with one {label} per line, kept exactly (labels may contain commas)",
    )
    source.add_argument(
        "--domain-name",
        default=None,
        help=f"a built-in domain: {', '.join(builtin_domain_names())}, or range:LO-HI",
    )


def declared_domain(args: argparse.Namespace, undeclared: str) -> tuple[list[str] | None, str]:
    """Return the domain the options declare and its source (``None``, ``undeclared`` if none)."""
    if args.domain is not None:
        return parse_domain(args.domain), "declared"
    if args.domain_file is not None:
        return read_domain_file(args.domain_file, encoding=args.encoding), "file"
    if args.domain_name is not None:
        return builtin_domain(args.domain_name), f"builtin:{args.domain_name}"
    return None, undeclared


def add_execution_arguments(
    parser: argparse.ArgumentParser,
    *,
    seed_help: str = "reproducible run with a seeded (not cryptographic) shuffle; for tests only",
) -> None:
    """Declare the "execution and output" group: --seed, --path, --output, --plot, --quiet."""
    execution = parser.add_argument_group("execution and output")
    execution.add_argument("--seed", type=integer, default=None, help=seed_help)
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


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file (existing or not)."""
    try:
        if a.exists() and b.exists():
            return a.samefile(b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def check_distinct_paths(source: Path, named: Sequence[tuple[str, Path | None]]) -> None:
    """Refuse an output path that is the input ``source``, or two outputs that are one file.

    ``named`` holds two ``(flag, path)`` pairs; a ``None`` path is not given.
    """
    for flag, path in named:
        if path is not None and same_file(path, source):
            raise InvalidParameterError(
                f"{flag} {str(path)!r} is the input file; refusing to overwrite it"
            )
    (flag_a, a), (flag_b, b) = named
    if a is not None and b is not None and same_file(a, b):
        raise InvalidParameterError(f"{flag_a} and {flag_b} are the same file {str(a)!r}")


def check_plot_format(plot: Path, *, name_missing_extension: bool = True) -> None:
    """Check that ``plot`` names an image format (a missing extension said apart, or not)."""
    suffix = plot.suffix.lower()
    if not suffix and name_missing_extension:
        raise InvalidParameterError(
            f"--plot: {str(plot)!r} has no extension; name the format, e.g. {plot.name}.png"
        )
    if suffix not in PLOT_FORMATS:
        raise InvalidParameterError(
            f"--plot: unsupported image format {suffix or '(none)'!r}; use one of "
            f"{', '.join(PLOT_FORMATS)}"
        )


def output_and_plot_paths(
    args: argparse.Namespace, *, name_missing_extension: bool = True
) -> tuple[Path | None, Path | None]:
    """Check ``--output`` and ``--plot`` against ``--input`` and each other; return them.

    With a plot, its format is checked and matplotlib must be installed.
    """
    output = writable(args.output, "--output")
    plot = writable(args.plot, "--plot")
    check_distinct_paths(Path(args.input), [("--output", output), ("--plot", plot)])
    if plot is not None:
        check_plot_format(plot, name_missing_extension=name_missing_extension)
        from shuffledp.plotting import require_matplotlib

        require_matplotlib()
    return output, plot


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


@dataclass
class RunInput:
    """The loaded data with what the release must say about them.

    Attributes:
        loaded: Encoded users (one bin index per user, or with ``--path count``
            the histogram only, counted chunk by chunk) and what loading adjusted.
        assumptions: Statements the guarantee relies on (for ``privacy.assumptions``).
        not_covered: What the release shows outside the guarantee.
        release_notes: The rules that adjusted the data, stated without any
            data-dependent count (they go into the JSON release).
        operator_notes: The same with counts (stderr only: counts of dropped or
            remapped rows are statistics of the private data).
        seed: ``--seed`` (``None``: OS entropy and the cryptographic shuffle).
        protocol_seed: The protocol's stream: a child of ``seed`` independent of
            the one that sampled the data (``None`` without a seed).
    """

    loaded: LoadedValues | LoadedHistogram
    assumptions: list[str] = field(default_factory=list)
    not_covered: list[str] = field(default_factory=list)
    release_notes: list[str] = field(default_factory=list)
    operator_notes: list[str] = field(default_factory=list)
    seed: int | None = None
    protocol_seed: np.random.Generator | None = None

    @property
    def n(self) -> int:
        """Number of users."""
        return self.loaded.n

    def run(self, protocol: ShuffleProtocol, path: ExecutionPath) -> ProtocolRun:
        """Run ``protocol`` on these users: their values, or their histogram on the count path."""
        from shuffledp.data.ingest import LoadedValues

        if isinstance(self.loaded, LoadedValues):
            return protocol.run(self.loaded.indices, path=path, seed=self.protocol_seed)
        return protocol.run_counts(self.loaded.histogram, seed=self.protocol_seed)

    @property
    def context(self) -> ReleaseContext:
        """What the release must state about these data."""
        return ReleaseContext(
            domain_source=self.loaded.domain_source,
            assumptions=tuple(self.assumptions),
            not_covered=tuple(self.not_covered),
            release_notes=tuple(self.release_notes),
            seed=self.seed,
        )


@dataclass(frozen=True)
class ReleaseContext:
    """What a release states about where its data and domain came from.

    Attributes:
        domain_source: ``declared``, ``file``, ``builtin:NAME``, ``inferred-from-data``
            or ``synthetic``.
        assumptions: Statements the guarantee relies on.
        not_covered: What the release shows outside the guarantee.
        release_notes: Data-independent statements of the rules that adjusted the data.
        seed: ``--seed`` when given (the release states it in ``parameters.seed``).
    """

    domain_source: str
    assumptions: tuple[str, ...] = ()
    not_covered: tuple[str, ...] = ()
    release_notes: tuple[str, ...] = ()
    seed: int | None = None


def load_input(args: argparse.Namespace) -> RunInput:
    """Read and encode the input column over the public domain."""
    from shuffledp._rng import child_seeds
    from shuffledp.data.ingest import load_histogram, load_values

    domain, domain_source = declared_domain(args, "inferred-from-data")
    delimiter, na_values = csv_options(args)
    # One seed, two consumers (the per-user sample and the protocol): independent children.
    data_seed, protocol_seed = child_seeds(args.seed, 2)
    # The count path needs the histogram only: without --user-column it is counted
    # chunk by chunk, in memory bounded by the domain and the chunk, whatever the rows.
    load = load_histogram if getattr(args, "path", "message") == "count" else load_values
    loaded = load(
        args.input,
        args.column,
        domain=domain,
        domain_source=domain_source,
        infer_domain=args.unsafe_domain_from_data,
        other=args.other,
        user_column=args.user_column,
        per_user=args.per_user,
        delimiter=delimiter,
        encoding=args.encoding,
        na_values=na_values,
        drop_missing=args.drop_missing,
        drop_missing_ids=args.drop_missing_ids,
        seed=data_seed,
    )
    result = RunInput(
        loaded=loaded,
        operator_notes=list(loaded.notes),
        seed=args.seed,
        protocol_seed=protocol_seed,
    )
    if args.other is not None:
        result.release_notes.append(
            f"values outside the declared domain were counted in the bin {args.other!r} (--other)"
        )
    if args.drop_missing:
        result.release_notes.append(
            "rows with a missing value were dropped (--drop-missing); their number is not released"
        )
    if args.drop_missing_ids:
        result.release_notes.append(
            "rows without a user id were dropped (--drop-missing-ids); their number is not released"
        )
    if args.user_column is not None and args.per_user != "error":
        rule = "the first row" if args.per_user == "first" else "one row chosen at random"
        result.release_notes.append(f"a user with several rows contributed {rule} (--per-user)")
    if args.user_column is None:
        result.assumptions.append(
            "each row of the input is a different user (no --user-column given): a user "
            "with several rows would count several times and is not protected as one user"
        )
    else:
        result.assumptions.append(
            f"each user (column {args.user_column!r}) contributes exactly one value "
            f"(--per-user {args.per_user})"
        )
    result.assumptions.append(
        "the shuffler is trusted to hide who sent each message and in which order"
    )
    if loaded.domain_source == "inferred-from-data":
        result.not_covered.append(
            "the domain: its labels were derived from the private data "
            "(--unsafe-domain-from-data) and are released as they are; a label held by one "
            "user reveals that user's value"
        )
    # Stated whenever the option is given, so that the release does not tell whether
    # any row was dropped (that count is the operator's, on stderr).
    if args.drop_missing:
        result.not_covered.append(
            f"which users have no value: rows with a missing value in column {args.column!r} "
            "were dropped before the run (--drop-missing), so n counts only users with a value"
        )
    if args.drop_missing_ids:
        result.not_covered.append(
            f"which rows name no user: rows without an id in column {args.user_column!r} were "
            "dropped before the run (--drop-missing-ids), so n counts only users with an id"
        )
    if args.seed is not None:
        from shuffledp._rng import SEEDED_NOT_COVERED

        result.not_covered.append(SEEDED_NOT_COVERED)
    return result


def run_to_dict(
    run: ProtocolRun,
    context: ReleaseContext,
    *,
    target_delta: float,
    calibration: str,
    parameters: dict[str, Any],
    notes: tuple[str, ...] = (),
    expected_messages_per_user: float | None = None,
    local_epsilon: float | None = None,
) -> dict[str, Any]:
    """Return the JSON result of a run (schema ``release``; see :mod:`shuffledp.schemas`)."""
    report: PrivacyReport = run.privacy.with_context(
        assumptions=context.assumptions, not_covered=context.not_covered
    )
    privacy = report.to_dict()
    privacy["target_delta"] = target_delta
    privacy["calibration"] = calibration
    privacy["domain_covered"] = context.domain_source != "inferred-from-data"
    if local_epsilon is not None:
        privacy["local_epsilon"] = local_epsilon
    out = {
        "schema": schema_id("release"),
        "protocol": run.protocol,
        "shuffledp_version": __version__,
        "n": run.estimate.n,
        "domain": list(run.estimate.domain),
        "domain_source": context.domain_source,
        "path": run.path,
        "estimate": run.estimate.to_dict(),
        "privacy": privacy,
        "parameters": parameters if context.seed is None else {**parameters, "seed": context.seed},
        "messages": run.messages,
        "messages_per_user": run.messages_per_user,
        "notes": [*context.release_notes, *notes],
    }
    if expected_messages_per_user is not None:
        out["expected_messages_per_user"] = expected_messages_per_user
    return out


def _summary(result: dict[str, Any], data: RunInput, destination: str) -> list[str]:
    privacy = result["privacy"]
    lines = [
        f"shuffledp run {result['protocol']}: {result['n']} users, {len(result['domain'])} bins "
        f"(domain: {result['domain_source']}), ({privacy['epsilon']:g}, "
        f"{privacy['delta']:.3g})-DP certified [{privacy['method']}]; result: {destination}"
    ]
    if data.loaded.user_column is None:
        lines.append("assumed one row per user (give --user-column to enforce one value per user)")
    calibration_notes = [note for note in result["notes"] if note not in data.release_notes]
    lines += [
        f"note: {for_command_line(note)}" for note in (*data.operator_notes, *calibration_notes)
    ]
    lines += [
        f"warning: not covered by the guarantee: {for_command_line(item)}"
        for item in privacy["not_covered"]
    ]
    return lines


def finish_run(
    result: dict[str, Any],
    run: ProtocolRun,
    data: RunInput,
    args: argparse.Namespace,
    output: Path | None,
    plot: Path | None,
    title: str,
) -> int:
    """Plot (if asked), then write the JSON result; nothing is written before both succeed."""
    result["input"] = {
        "file": str(args.input),
        "column": args.column,
        "user_column": args.user_column,
    }
    destination = write_release(result, run.estimate, output, plot, title)
    if not args.quiet:
        for line in _summary(result, data, destination):
            print(line, file=sys.stderr)
    return 0


def write_release(
    result: dict[str, Any],
    estimate: HistogramEstimate,
    output: Path | None,
    plot: Path | None,
    title: str,
    ylabel: str = "users",
) -> str:
    """Plot ``estimate`` (if asked), then write ``result`` as JSON; return where it went.

    The JSON goes to ``output`` (atomically) or to stdout; nothing is written
    before the plot succeeds. ``ylabel`` says what the plot's counts count.
    """
    if plot is not None:
        from shuffledp.plotting import plot_histogram_estimate

        plot_histogram_estimate(estimate, plot, title=title, ylabel=ylabel)
    text = json.dumps(command_line_document(result), indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
        destination = "stdout"
    else:
        write_atomically(output, text)
        destination = str(output)
    if plot is not None:
        destination += f", plot {plot}"
    return destination
