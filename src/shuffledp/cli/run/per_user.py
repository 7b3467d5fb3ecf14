"""``shuffledp run per-user``: per-user histograms with cluster-then-shuffle (Alg. 1).

Input: every user's counts over public classes, in the long layout (one row
per user and class, optional count column) or the wide layout (``--wide``:
one row per user, one column per class). Output: one estimated histogram per
user, a wide table (the user id column, then one column per class, users in
input order), as CSV or Parquet, and a JSON report holding the guarantee,
the parameters and the values' standard errors (``stderr``: one per class,
the released copy's Laplace noise, see :data:`STDERR_MEANING`): the
worst-case (ε, 0, c)-hDP per user, under the reading of Def. 1 given by
``--neighbouring`` (moved items by default; the report states it in words).
Group labels and sizes never enter the release; a summary of group sizes
goes to stderr.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp._files import write_file_atomically
from shuffledp._optional import require
from shuffledp._validation import InvalidParameterError, check_epsilon, check_int
from shuffledp._wording import plural
from shuffledp.cli._choices import (
    CLUSTERINGS,
    EMBEDDINGS,
    PER_USER_NEIGHBOURINGS,
    PER_USER_WEIGHTINGS,
)
from shuffledp.cli._common import (
    above_zero_number,
    checked,
    fraction_number,
    integer_at_least,
    positive_number,
    writable,
    write_atomically,
)
from shuffledp.cli.run._domain import add_domain_sources, declared_domain
from shuffledp.cli.run._input import csv_options
from shuffledp.cli.run._options import add_csv_arguments
from shuffledp.cli.run._paths import check_distinct_paths
from shuffledp.release.per_user import STDERR_MEANING, per_user_report_to_dict

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from shuffledp.data.per_user import LoadedHistograms
    from shuffledp.protocols.per_user import PerUserHistograms

NAME = "per-user"
HELP = "per-user histograms: Laplace copies, clustering and a shuffle within groups"

__all__ = ["OUTPUT_SUFFIXES", "STDERR_MEANING", "add_arguments", "execute", "write_estimates"]

#: Table formats of --output.
OUTPUT_SUFFIXES = (".csv", ".parquet", ".pq")
#: Release variants the command line offers (the others are for experiments).
CLI_RELEASES = ("t", "r")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``run per-user``'s options."""
    data = parser.add_argument_group("input data")
    data.add_argument(
        "--input",
        required=True,
        help="CSV with a header row (plain or gzip-compressed) or Parquet file",
    )
    data.add_argument(
        "--wide",
        action="store_true",
        help="wide layout: one row per user, one column per class (every column but "
        "--user-column is a class); default: long layout, one row per user and class",
    )
    data.add_argument(
        "--user-column",
        default=None,
        help="column identifying the user (required in the long layout; with --wide, "
        "optional: without it row k is user k)",
    )
    data.add_argument(
        "--class-column",
        default=None,
        help="long layout: column holding the class (a label of the domain)",
    )
    data.add_argument(
        "--count-column",
        default=None,
        help="long layout: column holding the count, a non-negative integer (default: "
        "every row counts 1); rows repeating a user and class add up",
    )
    add_csv_arguments(data, na_note="a missing user, class or count is an error")

    domain = parser.add_argument_group(
        "public classes (one is required in the long layout; with --wide the class columns "
        "are checked against it)"
    )
    source = domain.add_mutually_exclusive_group()
    add_domain_sources(
        source, domain_help="comma-separated class labels, in output order", label="class label"
    )

    privacy = parser.add_argument_group("privacy (Alg. 1)")
    privacy.add_argument(
        "--epsilon", required=True, type=positive_number, help="total epsilon of every user, > 0"
    )
    privacy.add_argument(
        "--epsilon1",
        required=True,
        type=positive_number,
        help="epsilon of the clustering copy W, in (0, epsilon); the released copy T gets "
        "epsilon - epsilon1",
    )
    privacy.add_argument(
        "--c",
        required=True,
        type=fraction_number,
        help="neighbouring fraction c in (0, 1] of Def. 1: histograms with the same total s "
        "that differ in at most floor(c s) counts are protected (--neighbouring says how "
        "counts differ)",
    )
    privacy.add_argument(
        "--neighbouring",
        choices=PER_USER_NEIGHBOURINGS,
        default="moved-items",
        help="the reading of Def. 1 the guarantee holds for. moved-items (default): up to "
        "floor(c s) items moved from one class to another (||H - H'||_1 <= 2 floor(c s)); "
        "Laplace scale 2c/epsilon per copy as Alg. 1 prints it, which also covers the other "
        "reading. l1-distance: ||H - H'||_1 <= floor(c s); scale c/epsilon (half the noise), "
        "but only 2 epsilon if items may move",
    )
    privacy.add_argument(
        "--calibration",
        default=None,
        help=argparse.SUPPRESS,
    )
    privacy.add_argument(
        "--weighting",
        choices=PER_USER_WEIGHTINGS,
        default="min-variance",
        help="weights of R = a W + (1 - a) T with --release r: min-variance (App. D, "
        "default) or printed (Alg. 1 line 5 as printed)",
    )
    privacy.add_argument(
        "--release",
        choices=CLI_RELEASES,
        default="t",
        help="t: release the shuffled second copy T only (default); r: release the shuffled "
        "R = a W + (1 - a) T, Alg. 1 as printed",
    )

    grouping = parser.add_argument_group("grouping (Alg. 1 line 9)")
    grouping.add_argument(
        "--clustering",
        choices=CLUSTERINGS,
        default="kmeans",
        help="kmeans (needs --clusters, default) or dbscan with the Jensen-Shannon distance "
        "(needs --eps-radius)",
    )
    grouping.add_argument(
        "--clusters",
        type=integer_at_least(1),
        default=None,
        help="k-means: the number of groups G >= 1",
    )
    grouping.add_argument(
        "--embedding",
        choices=EMBEDDINGS,
        default="simplex",
        help="k-means space: simplex (the clipped, renormalized W; default) or hellinger "
        "(its square root)",
    )
    grouping.add_argument(
        "--eps-radius",
        type=fraction_number,
        default=None,
        help="dbscan: neighbourhood radius, a Jensen-Shannon distance in bits, in (0, 1]",
    )
    grouping.add_argument(
        "--min-samples",
        type=integer_at_least(1),
        default=5,
        help="dbscan: users within --eps-radius (itself included) that make a core user "
        "(default 5)",
    )
    grouping.add_argument(
        "--max-diameter",
        type=above_zero_number,
        default=None,
        help="split off every user farther than D/2 (Jensen-Shannon, bits) from its group's "
        "centroid into a group of its own, so every group has diameter <= D (section 4)",
    )

    execution = parser.add_argument_group("execution and output")
    execution.add_argument(
        "--seed",
        type=integer_at_least(0),
        default=None,
        help="reproducible run (noise, clustering and a seeded, not cryptographic, shuffle); "
        "for tests only",
    )
    execution.add_argument(
        "--output",
        required=True,
        help="the estimated histograms: a wide table (user id, then one column per class), "
        f"as {' or '.join(OUTPUT_SUFFIXES)} by the file's extension",
    )
    execution.add_argument(
        "--report",
        default=None,
        help="write the JSON report (guarantee, parameters and the estimates' standard "
        "errors) here (default: stdout)",
    )
    execution.add_argument(
        "--quiet", action="store_true", help="print no summary on stderr (errors still are)"
    )
    parser.set_defaults(handler=execute)


def _check_paths(args: argparse.Namespace) -> tuple[Path, Path | None]:
    output = writable(args.output, "--output")
    report = writable(args.report, "--report")
    assert output is not None
    suffix = output.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise InvalidParameterError(
            f"--output: unsupported table format {suffix or '(no extension)'!r}; use one of "
            f"{', '.join(OUTPUT_SUFFIXES)}"
        )
    if suffix != ".csv":
        require("pyarrow.parquet", extra="parquet")
    check_distinct_paths(Path(args.input), [("--output", output), ("--report", report)])
    return output, report


def _check_layout(args: argparse.Namespace) -> None:
    if args.wide:
        for flag, value in (
            ("--class-column", args.class_column),
            ("--count-column", args.count_column),
        ):
            if value is not None:
                raise InvalidParameterError(
                    f"{flag} is for the long layout; with --wide every column but "
                    "--user-column is a class"
                )
        return
    missing = [
        flag
        for flag, value in (
            ("--user-column", args.user_column),
            ("--class-column", args.class_column),
        )
        if value is None
    ]
    if missing:
        raise InvalidParameterError(
            f"the long layout needs {' and '.join(missing)} (or give --wide for one row per "
            "user and one column per class)"
        )
    if args.domain is None and args.domain_file is None and args.domain_name is None:
        raise InvalidParameterError(
            "the long layout needs the public classes: --domain, --domain-file or --domain-name"
        )


def _protocol(args: argparse.Namespace) -> PerUserHistograms:
    from shuffledp.protocols.per_user import PerUserHistograms
    from shuffledp.randomizers.laplace import check_c

    if args.calibration is not None:
        raise InvalidParameterError(
            f"--calibration was replaced by --neighbouring (got --calibration "
            f"{args.calibration}): the old default 'proven' (Laplace scale c/epsilon) is "
            "--neighbouring l1-distance, 'paper' (2c/epsilon) is --neighbouring moved-items, "
            "now the default"
        )
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    epsilon1 = checked(check_epsilon, args.epsilon1, "--epsilon1")
    if not epsilon1 < epsilon:
        raise InvalidParameterError(
            f"--epsilon1 must be < --epsilon = {epsilon:g} (the released copy gets "
            f"epsilon - epsilon1 > 0), got {epsilon1:g}"
        )
    c = checked(check_c, args.c, "--c")
    if args.clustering == "kmeans":
        if args.eps_radius is not None:
            raise InvalidParameterError("--eps-radius is for --clustering dbscan")
        if args.clusters is None:
            raise InvalidParameterError("--clustering kmeans needs --clusters G (>= 1)")
        checked(check_int, args.clusters, "--clusters", minimum=1)
    else:
        if args.clusters is not None:
            raise InvalidParameterError("--clusters is for --clustering kmeans")
        if args.eps_radius is None:
            raise InvalidParameterError(
                "--clustering dbscan needs --eps-radius (a Jensen-Shannon distance in (0, 1])"
            )
        if not 0 < args.eps_radius <= 1:
            raise InvalidParameterError(f"--eps-radius must be in (0, 1], got {args.eps_radius:g}")
        checked(check_int, args.min_samples, "--min-samples", minimum=1)
    if args.max_diameter is not None and not args.max_diameter > 0:
        raise InvalidParameterError(f"--max-diameter must be > 0, got {args.max_diameter:g}")
    if args.seed is not None:
        checked(check_int, args.seed, "--seed")
    return PerUserHistograms(
        epsilon,
        epsilon1,
        c,
        neighbouring=args.neighbouring,
        weighting=args.weighting,
        clustering=args.clustering,
        clusters=args.clusters,
        eps_radius=args.eps_radius,
        min_samples=args.min_samples,
        max_diameter=args.max_diameter,
        embedding=args.embedding,
        release=args.release,
    )


def _load(args: argparse.Namespace) -> LoadedHistograms:
    from shuffledp.data.per_user import load_long_histograms, load_wide_histograms

    domain, domain_source = declared_domain(args, "header")
    delimiter, na_values = csv_options(args)
    if args.wide:
        return load_wide_histograms(
            args.input,
            user_column=args.user_column,
            domain=domain,
            domain_source=domain_source,
            delimiter=delimiter,
            encoding=args.encoding,
            na_values=na_values,
        )
    assert domain is not None
    return load_long_histograms(
        args.input,
        user_column=args.user_column,
        class_column=args.class_column,
        count_column=args.count_column,
        domain=domain,
        domain_source=domain_source,
        delimiter=delimiter,
        encoding=args.encoding,
        na_values=na_values,
    )


def write_estimates(
    path: Path,
    id_column: str,
    user_ids: tuple[str, ...] | list[str],
    classes: tuple[str, ...] | list[str],
    estimates: NDArray[np.float64],
) -> None:
    """Write the estimates as a wide table (CSV or Parquet by suffix), atomically.

    Through :func:`shuffledp._files.write_file_atomically`: a temporary file
    renamed over ``path``, removed if anything fails (Ctrl-C included).

    Args:
        path: The output file (``.csv``, ``.parquet`` or ``.pq``).
        id_column: Name of the user id column.
        user_ids: One id per row.
        classes: One label per column of ``estimates``.
        estimates: n × d values.

    Raises:
        InvalidParameterError: If ``id_column`` is also a class label.
    """
    if id_column in classes:
        raise InvalidParameterError(
            f"the user id column {id_column!r} is also a class label; the output table needs "
            "distinct column names (name the user column differently)"
        )

    def write(tmp: Path) -> None:
        if path.suffix.lower() == ".csv":
            with open(tmp, "w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow([id_column, *classes])
                step = 1 << 14
                for start in range(0, len(user_ids), step):
                    block = estimates[start : start + step].tolist()
                    ids = user_ids[start : start + step]
                    writer.writerows([uid, *row] for uid, row in zip(ids, block, strict=True))
        else:
            import numpy as np

            pa = require("pyarrow", extra="parquet")
            pq = require("pyarrow.parquet", extra="parquet")
            columns: dict[str, Any] = {id_column: pa.array(list(user_ids), pa.string())}
            for j, label in enumerate(classes):
                columns[label] = pa.array(np.ascontiguousarray(estimates[:, j]))
            pq.write_table(pa.table(columns), tmp)

    write_file_atomically(path, write)


def execute(args: argparse.Namespace) -> int:
    """Run the per-user histogram protocol on the input file."""
    from shuffledp._progress import working

    _check_layout(args)
    protocol = _protocol(args)
    output, report_path = _check_paths(args)
    data = _load(args)
    id_column = args.user_column if args.user_column is not None else "user"
    if id_column in data.classes:
        raise InvalidParameterError(
            f"the user id column {id_column!r} is also a class label; the output table needs "
            "distinct column names"
        )
    if args.clustering == "kmeans" and args.clusters > data.n:
        raise InvalidParameterError(
            f"--clusters must be at most the number of users, {data.n}, got {args.clusters}"
        )
    with working("per-user: noise, clustering, shuffling within groups"):
        run = protocol.run(data.counts, seed=args.seed)
    result = per_user_report_to_dict(
        run,
        data,
        seed=args.seed,
        input_file=str(args.input),
        user_column=args.user_column,
        class_column=args.class_column,
        count_column=args.count_column,
        output_file=str(args.output),
        id_column=id_column,
    )
    text = json.dumps(result, indent=2) + "\n"
    write_estimates(output, id_column, data.user_ids, data.classes, run.estimates)
    if report_path is None:
        sys.stdout.write(text)
        destination = "report on stdout"
    else:
        write_atomically(report_path, text)
        destination = f"report {report_path}"
    if not args.quiet:
        privacy = result["privacy"]
        print(
            f"shuffledp run per-user: {run.n} users, {len(data.classes)} classes (domain: "
            f"{data.domain_source}), ({privacy['epsilon']:g}, 0, {protocol.c:g})-hDP per user "
            f"with {protocol.neighbouring} neighbours [{privacy['method']}], release "
            f"{protocol.release!r}; estimates {output} (stderr {run.stderr[0]:.3g} per value, "
            f"the noise's; in the report), {destination}",
            file=sys.stderr,
        )
        for note in data.notes:
            print(f"note: {note}", file=sys.stderr)
        sizes = run.analysis.group_size_summary()
        shown = ", ".join(f"{bucket}: {count}" for bucket, count in sizes.items())
        print(
            f"operator only (not released): {plural(run.analysis.n_groups, 'group')}; groups "
            f"by size {shown}",
            file=sys.stderr,
        )
        for item in privacy["not_covered"]:
            print(f"warning: not covered by the guarantee: {item}", file=sys.stderr)
    return 0
