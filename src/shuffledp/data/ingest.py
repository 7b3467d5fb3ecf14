"""From a user's data file to one bin index per user, stating everything adjusted.

:func:`load_values` streams a CSV (plain or gzip) or Parquet file in batches,
encodes each batch against the public domain as it arrives, and keeps one
value per user. Memory grows by a few bytes per row (a one-byte code per row
for up to 126 labels, then one 8-byte bin index per user; with a user column
also every row's id in Arrow or numpy buffers and its 8-byte hash), never by
a Python object per row on the pyarrow path.

:func:`load_histogram` keeps only the users per bin. Without a user column it
counts each batch's codes and drops the batch, so its memory is bounded by the
domain and the batch size, whatever the number of rows (``benchmarks/ingest.py``
on a 2-core VM: 283 MB at 10⁷ rows while pyarrow's read-ahead fills, then 310 MB
at both 2.5·10⁷ and 5·10⁷); with one it must find each user among all rows
first, as :func:`load_values` does.

Both also read a pandas DataFrame or a pyarrow Table already in memory (with
pyarrow installed), with the same options and checks.

Nothing the file holds is silently dropped or changed: every adjustment is an
error by default, and when an option allows it, the count is returned and
described in :attr:`LoadedValues.notes` for the operator.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._progress import working
from shuffledp._rng import SeedLike
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp._wording import Parameter, Worded
from shuffledp.data.domains import check_domain_source
from shuffledp.data.encoding import DEFAULT_NA_VALUES, INFERRED, BinEncoder
from shuffledp.data.frames import frame_kind
from shuffledp.data.loaders import ColumnReader, FrameReader
from shuffledp.data.users import UserIds, check_per_user

__all__ = [
    "DEFAULT_NA_VALUES",
    "LoadedHistogram",
    "LoadedValues",
    "load_histogram",
    "load_values",
]


@dataclass(frozen=True)
class LoadedValues:
    """One bin index per user, with what loading adjusted.

    Attributes:
        indices: One bin index per user: in file order without a user column,
            in the order of each user's first row with a value with one.
        domain: Bin labels (declared, plus the ``other`` label if appended, or inferred).
        domain_source: ``"declared"``, ``"builtin:<name>"``, ``"file"`` or
            ``"inferred-from-data"`` (then the domain is NOT covered by the guarantee).
        rows_read: Data rows in the file (or frame).
        missing_dropped: Rows dropped because their value was missing.
        mapped_to_other: Rows whose value was outside the domain, counted in ``other``.
        user_column: The user id column, or ``None``.
        duplicate_rows_dropped: Rows beyond one per user (``first`` / ``sample``).
        one_row_per_user_assumed: No user column was given, so each row was
            taken to be a different user.
        notes: Operator-facing statements of everything adjusted or detected.
            They contain counts computed from the private data: show them to
            the data owner, do not release them.
    """

    indices: NDArray[np.int64]
    domain: list[str]
    domain_source: str
    rows_read: int
    missing_dropped: int
    mapped_to_other: int
    user_column: str | None
    duplicate_rows_dropped: int
    one_row_per_user_assumed: bool
    notes: tuple[str, ...]

    @property
    def n(self) -> int:
        """Number of users."""
        return len(self.indices)

    @property
    def histogram(self) -> NDArray[np.int64]:
        """Number of users per bin."""
        return np.bincount(self.indices, minlength=len(self.domain)).astype(np.int64)


@dataclass(frozen=True)
class LoadedHistogram:
    """Users per bin, with what loading adjusted (:func:`load_histogram`).

    Attributes:
        histogram: Number of users per bin, in bin order.
        domain: Bin labels (declared, plus the ``other`` label if appended, or inferred).
        domain_source: As :attr:`LoadedValues.domain_source`.
        rows_read: Data rows in the file.
        missing_dropped: Rows dropped because their value was missing.
        mapped_to_other: Rows whose value was outside the domain, counted in ``other``.
        user_column: The user id column, or ``None``.
        duplicate_rows_dropped: Rows beyond one per user (``first`` / ``sample``).
        one_row_per_user_assumed: No user column was given, so each row was
            taken to be a different user.
        notes: Operator-facing statements of everything adjusted or detected
            (counts of the private data: not for release).
    """

    histogram: NDArray[np.int64]
    domain: list[str]
    domain_source: str
    rows_read: int
    missing_dropped: int
    mapped_to_other: int
    user_column: str | None
    duplicate_rows_dropped: int
    one_row_per_user_assumed: bool
    notes: tuple[str, ...]

    @property
    def n(self) -> int:
        """Number of users."""
        return int(self.histogram.sum())


def _check_domain_source(domain_source: str, declared: bool) -> str:
    return check_domain_source(domain_source) if declared else INFERRED


def _check_na_values(na_values: Collection[str] | None, in_memory: bool) -> tuple[str, ...]:
    if na_values is None:  # a file's cells are text; a frame has nulls of its own
        return () if in_memory else DEFAULT_NA_VALUES
    if isinstance(na_values, str | bytes) or not all(isinstance(v, str) for v in na_values):
        raise InvalidParameterError(
            f"na_values must be a collection of strings (e.g. ['', 'NA']), got {na_values!r}"
        )
    return tuple(na_values)


def _row(i: int) -> str:
    return f"data row {i + 1}"


def load_values(
    path: str | Path | Any,
    column: str,
    *,
    domain: Iterable[Any] | None = None,
    domain_source: str = "declared",
    infer_domain: bool = False,
    other: str | None = None,
    user_column: str | None = None,
    per_user: str = "error",
    delimiter: str | None = None,
    encoding: str = "utf-8",
    na_values: Collection[str] | None = None,
    drop_missing: bool = False,
    drop_missing_ids: bool = False,
    normalize_labels: bool = False,
    show_progress: bool = True,
    seed: SeedLike = None,
    use_pyarrow: bool | None = None,
) -> LoadedValues:
    """Read ``column`` of a data file and encode it as one bin index per user.

    The file is a CSV with a header row (plain, or gzip-compressed: detected by
    the ``.gz`` extension or the gzip magic bytes) or a Parquet file (``PAR1``
    magic bytes or a ``.parquet`` / ``.pq`` extension). CSV cells are taken
    exactly as written: no trimming, no case folding, no type conversion. The
    delimiter, when not given, is sniffed from the header line: if exactly one
    of ``,`` ``;`` tab ``|`` appears there (outside quotes) it is used; if none
    appears the file has one column; if several appear, give it explicitly.

    A pandas DataFrame or a pyarrow Table in memory is read the same way
    (with pyarrow installed): its value column may hold text, integers
    (matched to integer labels, as :func:`~shuffledp.data.encoding.encode_values`
    does) or categories; its user ids anything with a text form.

    Args:
        path: The data file, or a pandas DataFrame or pyarrow Table.
        column: The column holding each user's value.
        domain: The public domain: every possible label, in bin order, as a
            list or any ordered collection of labels (a pandas ``Index``, a
            numpy array, ...; see :func:`shuffledp.data.domains.check_domain`).
            Required unless ``infer_domain``.
        domain_source: Where ``domain`` came from, for the report:
            ``"declared"``, ``"file"`` or ``"builtin:<name>"``.
        infer_domain: Take the domain from the data (sorted distinct values).
            The result is then ``domain_source="inferred-from-data"``: the
            domain is not public input and the guarantee does not cover it.
        other: Count values outside ``domain`` in this bin (appended to the
            domain if new) instead of raising an error.
        user_column: Column identifying users; each user then contributes
            exactly one value (see ``per_user``). Without it every row is
            taken to be a different user.
        per_user: With ``user_column``, for a user with several rows:
            ``"error"`` (default), ``"first"`` (the first row in file order)
            or ``"sample"`` (one row uniformly at random, drawn with ``seed``).
            Rows with a missing value are dropped (``drop_missing``) before this.
        delimiter: CSV field separator (e.g. ``";"``, a tab, ``"|"``).
        encoding: CSV text encoding (e.g. ``"latin-1"``); a UTF-8 byte-order mark is skipped.
        na_values: Texts that mean "missing" (nulls, ``None`` and NaN always
            do). A text that is also a label of the declared domain counts as
            that label. Default: the empty cell, ``NA`` and ``N/A`` in a file
            (:data:`DEFAULT_NA_VALUES`), none in a frame (whose missing values
            are nulls).
        drop_missing: Drop rows whose value is missing instead of raising an error.
        drop_missing_ids: With ``user_column``, drop rows whose user id is
            missing (``na_values`` or null) instead of raising an error; they
            belong to no user. Their number is in :attr:`LoadedValues.notes`.
        normalize_labels: Match values to the domain's labels (and to
            ``na_values``) ignoring case and surrounding spaces (both stripped,
            then case folded: :func:`shuffledp.data.domains.normalize_label`).
            The bins keep the declared labels; two labels that normalize alike
            are an error. A release should state the rule
            (:data:`shuffledp.data.encoding.NORMALIZE_LABELS_RULE`).
        show_progress: Show a progress bar when stderr is a terminal.
        seed: Randomness for ``per_user="sample"``.
        use_pyarrow: CSV reader: pyarrow (``True``), the standard library
            (``False``) or pyarrow when installed (``None``); same results.

    Returns:
        The indices, domain and the counts and notes of every adjustment.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        InvalidParameterError: On a bad or inconsistent option (including no
            domain without ``infer_domain``).
        DataError: If the file is empty, malformed, undecodable or lacks a
            column; if a value is outside the domain (without ``other``), a
            value is missing (without ``drop_missing``), a user id is missing
            (without ``drop_missing_ids``), or a user has several rows
            (``per_user="error"``); or if no user is left.

    Example:
        >>> loaded = load_values("visits.csv", "city", domain=["Lyon", "Paris", "Rome"],
        ...                      user_column="user", per_user="first")  # doctest: +SKIP
        >>> loaded.histogram, loaded.notes  # doctest: +SKIP
    """
    # Every argument, as given, to the one reader both functions share.
    loaded = _load(**locals(), counts_only=False)
    assert isinstance(loaded, LoadedValues)
    return loaded


def load_histogram(
    path: str | Path | Any,
    column: str,
    *,
    domain: Iterable[Any] | None = None,
    domain_source: str = "declared",
    infer_domain: bool = False,
    other: str | None = None,
    user_column: str | None = None,
    per_user: str = "error",
    delimiter: str | None = None,
    encoding: str = "utf-8",
    na_values: Collection[str] | None = None,
    drop_missing: bool = False,
    drop_missing_ids: bool = False,
    normalize_labels: bool = False,
    show_progress: bool = True,
    seed: SeedLike = None,
    use_pyarrow: bool | None = None,
) -> LoadedHistogram:
    """Read ``column`` of a data file and count its users per bin.

    The same reading, checks and notes as :func:`load_values` (see it for the
    arguments), but only the histogram is kept. Without ``user_column`` the
    rows are counted batch by batch, so memory is bounded by the domain and
    the batch size whatever the number of rows (what ``shuffledp run ...
    --path count`` reads). With ``user_column`` each user must be found among
    all rows first, which holds every row's id and a few bytes per row, as in
    :func:`load_values`.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        InvalidParameterError: On a bad or inconsistent option, as :func:`load_values`.
        DataError: On an empty, malformed or out-of-domain file, as :func:`load_values`.
    """
    # Every argument, as given, to the one reader both functions share.
    loaded = _load(**locals(), counts_only=True)
    assert isinstance(loaded, LoadedHistogram)
    return loaded


def _load(
    path: str | Path | Any,
    column: str,
    *,
    domain: Iterable[Any] | None,
    domain_source: str,
    infer_domain: bool,
    other: str | None,
    user_column: str | None,
    per_user: str,
    delimiter: str | None,
    encoding: str,
    na_values: Collection[str] | None,
    drop_missing: bool,
    drop_missing_ids: bool,
    show_progress: bool,
    seed: SeedLike,
    use_pyarrow: bool | None,
    counts_only: bool,
    normalize_labels: bool,
) -> LoadedValues | LoadedHistogram:
    per_user = check_per_user(per_user)
    if user_column is None and per_user != "error":
        raise InvalidParameterError(f"per_user={per_user!r} needs a user_column")
    if user_column is None and drop_missing_ids:
        raise InvalidParameterError(
            Worded(
                "{drop} needs {user}: without a user column there are no user ids to miss",
                drop=Parameter("drop_missing_ids", True),
                user=Parameter("user_column", placeholder="COLUMN"),
            )
        )
    if user_column is not None and user_column == column:
        raise InvalidParameterError(f"user_column and column are the same column {column!r}")
    in_memory = frame_kind(path) is not None
    na = _check_na_values(na_values, in_memory)
    source = _check_domain_source(domain_source, declared=domain is not None)
    columns = [column] if user_column is None else [column, user_column]
    reader: ColumnReader | FrameReader
    if in_memory:  # CSV options (delimiter, encoding, reader) do not apply, as for Parquet
        reader = FrameReader(path, columns)
        row_label = reader.row_label
    else:
        reader = ColumnReader(
            path,
            columns,
            delimiter=delimiter,
            encoding=encoding,
            use_pyarrow=use_pyarrow,
            show_progress=show_progress,
        )
        row_label = _row
    where = f"column {column!r} of {reader.path}"
    encoder = BinEncoder(
        domain,
        infer_domain=infer_domain,
        other=other,
        na_values=na,
        where=where,
        row_label=row_label,
        normalize_labels=normalize_labels,
    )
    ids = None
    if user_column is not None:
        ids = UserIds(na, where=f"column {user_column!r} of {reader.path}", row_label=row_label)
    # Without a user column a histogram needs no row codes: count them batch by batch.
    streaming = counts_only and ids is None
    chunks: list[NDArray[np.signedinteger[Any]]] = []
    code_counts = np.zeros(0, dtype=np.int64)
    for batches in reader:
        codes = encoder.encode(batches[0])
        if streaming:
            part = np.bincount(codes[codes >= 0].astype(np.intp, copy=False))
            if len(part) > len(code_counts):
                code_counts = np.concatenate(
                    [code_counts, np.zeros(len(part) - len(code_counts), np.int64)]
                )
            code_counts[: len(part)] += part
        else:
            chunks.append(codes)
        if ids is not None:
            ids.add(batches[1])
        del codes
    rows_read = encoder.rows
    if rows_read == 0:
        what = "a header but " if reader.layout is not None else ""
        raise DataError(f"{reader.path} has {what}no data rows")
    remedy = Worded(
        "; drop such rows with {drop}, which reports how many",
        drop=Parameter("drop_missing", True),
    )
    id_remedy = Worded(
        "; drop such rows with {drop}, which reports how many",
        drop=Parameter("drop_missing_ids", True),
    )
    for error in (
        None if ids is None or drop_missing_ids else ids.missing_error(id_remedy),
        encoder.outside_error(),
        None if drop_missing else encoder.missing_error(remedy),
    ):
        if error is not None:
            raise error
    notes = list(reader.notes)
    if encoder.missing:
        notes.append(
            Worded(
                "{count} row(s) with a missing value in {where} were dropped ({drop})",
                count=f"{encoder.missing:,}",
                where=where,
                drop=Parameter("drop_missing", True),
            )
        )
    if ids is not None and ids.missing:
        notes.append(
            Worded(
                "{count} row(s) without a user id in {where} were dropped ({drop})",
                count=f"{ids.missing:,}",
                where=ids.where,
                drop=Parameter("drop_missing_ids", True),
            )
        )
    duplicates = 0
    indices: NDArray[np.int64] | None = None
    if streaming:
        kept = int(code_counts.sum())
    else:
        codes = np.concatenate(chunks)
        del chunks
        keep = codes >= 0
        if ids is None:
            selected = codes[keep] if encoder.missing else codes
        else:
            with working("grouping rows by user") if show_progress else nullcontext():
                one = ids.one_per_user(keep, per_user, seed)
            selected = codes[one.rows]
            duplicates = one.rows_beyond_one
            if one.users_without_value:
                notes.append(
                    f"{one.users_without_value:,} user(s) had only rows with a missing value "
                    "and are not counted"
                )
            if duplicates:
                rule = "the first row" if per_user == "first" else "one row chosen at random"
                notes.append(
                    Worded(
                        "{users} user(s) had several rows: each contributed {rule} ({per_user}) "
                        "and {duplicates} other row(s) were dropped",
                        users=f"{one.users_with_several_rows:,}",
                        rule=rule,
                        per_user=Parameter("per_user", per_user),
                        duplicates=f"{duplicates:,}",
                    )
                )
        del codes, keep
        kept = len(selected)
    if kept == 0:
        raise DataError(
            f"no user is left in {where}: all {rows_read:,} rows have a missing value"
            + ("" if ids is None or not ids.missing else " or no user id")
        )
    if streaming:
        histogram, labels = encoder.finish_counts(code_counts)
    else:
        indices, labels = encoder.finish(selected)
        del selected
    adjusted: dict[str, Any] = {
        "domain": labels,
        "domain_source": source,
        "rows_read": rows_read,
        "missing_dropped": encoder.missing,
        "mapped_to_other": encoder.mapped_to_other,
        "user_column": user_column,
        "duplicate_rows_dropped": duplicates,
        "one_row_per_user_assumed": user_column is None,
        "notes": (*encoder.notes(), *notes),
    }
    if not counts_only:
        assert indices is not None
        return LoadedValues(indices=indices, **adjusted)
    if indices is not None:
        histogram = np.bincount(indices, minlength=len(labels)).astype(np.int64)
    return LoadedHistogram(histogram=histogram, **adjusted)
