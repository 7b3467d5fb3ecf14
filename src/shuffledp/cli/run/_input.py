"""The input of a ``run``: the data file read and encoded over the public domain.

Everything the run adjusts (rows dropped, values mapped to ``--other``, rows
beyond one per user) is stated: with counts on stderr (the operator's), as
data-independent rules in the JSON release.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shuffledp.cli._choices import DEFAULT_NA_VALUES
from shuffledp.cli.run._domain import declared_domain
from shuffledp.cli.run._memory import check_before_messages, check_before_reading
from shuffledp.privacy import TRUSTED_SHUFFLER
from shuffledp.release.document import ReleaseContext

if TYPE_CHECKING:  # the parser is built without numpy and the protocols (lazy imports)
    import numpy as np

    from shuffledp._memory import MemoryLimit
    from shuffledp.data.ingest import LoadedHistogram, LoadedValues
    from shuffledp.protocols.base import ExecutionPath, ProtocolRun, SingleValueProtocol

__all__ = ["COUNT_PATH_STATUS", "MESSAGE_PATH_STATUS", "RunInput", "csv_options", "load_input"]

#: Status lines on a terminal while a run's path works (after a second; see _progress.working).
MESSAGE_PATH_STATUS = "message path: randomizing, shuffling, counting"
COUNT_PATH_STATUS = "count path: drawing the counts"


def csv_options(args: argparse.Namespace) -> tuple[str | None, tuple[str, ...]]:
    """Return the CSV delimiter (``tab`` or a backslash-t meaning a tab) and the missing texts."""
    na_values = DEFAULT_NA_VALUES if args.na_values is None else ("", *args.na_values.split(","))
    delimiter = args.delimiter
    if delimiter is not None:
        delimiter = {"\\t": "\t", "tab": "\t"}.get(delimiter, delimiter)
    return delimiter, na_values


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
        memory: The run's memory limit (``--memory-limit`` or the machine's
            available memory; ``None``: not known, not checked).
    """

    loaded: LoadedValues | LoadedHistogram
    assumptions: list[str] = field(default_factory=list)
    not_covered: list[str] = field(default_factory=list)
    release_notes: list[str] = field(default_factory=list)
    operator_notes: list[str] = field(default_factory=list)
    seed: int | None = None
    protocol_seed: np.random.Generator | None = None
    memory: MemoryLimit | None = None

    @property
    def n(self) -> int:
        """Number of users."""
        return self.loaded.n

    def run(self, protocol: SingleValueProtocol, path: ExecutionPath) -> ProtocolRun:
        """Run ``protocol`` on these users: their values, or their histogram on the count path.

        Raises:
            InvalidParameterError: If the message path's messages will not fit in
                the memory limit (before any is made).
        """
        from shuffledp._progress import working
        from shuffledp.data.ingest import LoadedValues

        if isinstance(self.loaded, LoadedValues):  # bin indices, whatever the labels look like
            if path == "message":
                check_before_messages(self.memory, protocol, self.n)
            # A status line while no bar of its own (randomizing FLIP, shuffling) shows.
            with working(MESSAGE_PATH_STATUS if path == "message" else COUNT_PATH_STATUS):
                return protocol.run(
                    self.loaded.indices, path=path, seed=self.protocol_seed, values_are="indices"
                )
        with working(COUNT_PATH_STATUS):
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


def load_input(args: argparse.Namespace) -> RunInput:
    """Read and encode the input column over the public domain."""
    from shuffledp._rng import child_seeds
    from shuffledp.data.ingest import load_histogram, load_values

    domain, domain_source = declared_domain(args, "inferred-from-data")
    delimiter, na_values = csv_options(args)
    memory = check_before_reading(args)  # a run that will not fit stops before reading
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
        normalize_labels=args.normalize_labels,
        seed=data_seed,
    )
    result = RunInput(
        loaded=loaded,
        operator_notes=list(loaded.notes),
        seed=args.seed,
        protocol_seed=protocol_seed,
        memory=memory,
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
    if args.normalize_labels:
        from shuffledp.data.encoding import NORMALIZE_LABELS_RULE

        result.release_notes.append(NORMALIZE_LABELS_RULE)
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
    result.assumptions.append(TRUSTED_SHUFFLER)
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
