"""Per-user histograms from files: counts H ∈ ℕ^d for every user (per-user histograms paper, §2).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

Two layouts, CSV (plain or gzip) or Parquet, read in batches with
:class:`~shuffledp.data.loaders.ColumnReader`:

* long (:func:`load_long_histograms`): one row per (user, class), with a count
  column or without one (then every row counts 1, e.g. one row per event).
  Rows repeating a user and class add up.
* wide (:func:`load_wide_histograms`): one row per user, one column per
  class; the user column is optional (without it, row k is user ``k``,
  counted from 1). Every other column is a class and must be a label of the
  declared domain; domain classes without a column count 0 for everyone.

Users are kept in input order (order of first appearance). Errors are
:class:`~shuffledp._validation.DataError` naming the user and the value: a
negative or non-integer count (``3.0`` is the integer 3; ``2.5``, ``x``
and a missing count are errors), a class outside the domain, a missing user
id or class, a user whose total is 0 (nothing to normalize), and in the wide
layout a user id that appears twice.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from shuffledp._optional import require
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.domains import check_domain
from shuffledp.data.encoding import DEFAULT_NA_VALUES, TextBatch, describe_missing, factorize
from shuffledp.data.loaders import ColumnReader

__all__ = [
    "CountMatrix",
    "LoadedHistograms",
    "UserHistograms",
    "load_long_histograms",
    "load_wide_histograms",
    "parse_count",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


class CountMatrix:
    """n and d of a class holding ``counts``, an n × d user-by-class count matrix.

    A mixin (no fields of its own): the class using it declares ``counts``.
    """

    counts: IntArray

    @property
    def n(self) -> int:
        """Number of users."""
        return int(self.counts.shape[0])

    @property
    def d(self) -> int:
        """Number of classes."""
        return int(self.counts.shape[1])


@dataclass(frozen=True, repr=False)
class UserHistograms(CountMatrix):
    """Counts over public classes, one histogram per user.

    Attributes:
        counts: n × d non-negative integer counts (row u: user u).
        user_ids: The users' identifiers, in row order.
        classes: The class labels, in column order.
        source: Where the data come from.
    """

    counts: IntArray
    user_ids: tuple[str, ...]
    classes: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        if self.counts.ndim != 2 or self.counts.shape != (len(self.user_ids), len(self.classes)):
            raise DataError(
                f"counts must be {len(self.user_ids)} x {len(self.classes)}, got "
                f"{self.counts.shape}"
            )

    @property
    def totals(self) -> IntArray:
        """s_H of every user."""
        return np.asarray(self.counts.sum(axis=1), dtype=np.int64)

    def normalized(self) -> FloatArray:
        """H̄ = H/s_H of every user."""
        return self.counts / self.totals[:, None]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n}, d={self.d}, source={self.source!r})"


@dataclass(frozen=True, repr=False)
class LoadedHistograms(UserHistograms):
    """Per-user histograms read from a file, with what the release may say about them.

    Attributes:
        domain_source: ``"declared"``, ``"file"``, ``"builtin:NAME"`` or
            ``"header"`` (wide layout without a declared domain).
        layout: ``"long"`` or ``"wide"``.
        rows_read: Data rows in the file.
        notes: Operator-facing statements, possibly with counts (stderr only).
        release_notes: Data-independent statements of the rules applied.
    """

    domain_source: str = "declared"
    layout: str = "long"
    rows_read: int = 0
    notes: tuple[str, ...] = ()
    release_notes: tuple[str, ...] = ()


def parse_count(text: str) -> int | None:
    """Return the count a cell states, or ``None`` if it is not a non-negative integer.

    ``"3"``, ``" 3 "``, ``"3.0"`` and ``"1e3"`` are integers; ``"2.5"``,
    ``"-1"``, ``"inf"`` and ``"x"`` are not.
    """
    stripped = text.strip()
    try:
        value = int(stripped)
    except ValueError:
        try:
            number = float(stripped)
        except ValueError:
            return None
        if not math.isfinite(number) or number != math.floor(number) or abs(number) > 2.0**53:
            return None
        value = int(number)
    return value if value >= 0 else None


class _Users:
    """User ids in order of first appearance, batch by batch."""

    def __init__(self, na_values: Collection[str], where: str) -> None:
        self.na = set(na_values)
        self.where = where
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.rows = 0

    def encode(self, batch: TextBatch, *, unique: bool = False) -> IntArray:
        labels, local = factorize(batch)
        offset = self.rows
        self.rows += len(local)
        codes = np.empty(len(labels), dtype=np.int64)
        for i, label in enumerate(labels):
            if label in self.na:
                codes[i] = -1
                continue
            code = self.index.get(label)
            if code is None:
                code = self.index[label] = len(self.ids)
                self.ids.append(label)
            elif unique:
                raise DataError(
                    f"user {label!r} appears on more than one row of {self.where}; the wide "
                    "layout has one row per user"
                )
            codes[i] = code
        rows = codes[local] if len(labels) else np.full(len(local), -1, dtype=np.int64)
        rows[local < 0] = -1
        if np.any(rows < 0):
            row = int(np.flatnonzero(rows < 0)[0])
            raise DataError(
                f"data row {offset + row + 1} has no user id in {self.where} "
                f"({describe_missing(self.na)}); every row must name its user"
            )
        if unique and len(labels) and np.bincount(local, minlength=len(labels)).max() > 1:
            repeated = labels[int(np.argmax(np.bincount(local, minlength=len(labels))))]
            raise DataError(
                f"user {repeated!r} appears on more than one row of {self.where}; the wide "
                "layout has one row per user"
            )
        return rows


def _parse_counts(
    batch: TextBatch, users: IntArray, ids: Sequence[str], where: str, na: Collection[str]
) -> IntArray:
    """Parse a batch of count cells; a bad one is an error naming its user and value."""
    labels, local = factorize(batch)
    values = np.empty(len(labels), dtype=np.int64)
    for i, label in enumerate(labels):
        value = -1 if label in na else parse_count(label)
        values[i] = -2 if value is None else value
    rows = values[local] if len(labels) else np.full(len(local), -1, dtype=np.int64)
    rows[local < 0] = -1
    bad = np.flatnonzero(rows < 0)
    if bad.size:
        row = int(bad[0])
        user = ids[int(users[row])]
        if rows[row] == -1:
            raise DataError(
                f"user {user!r} has a missing count in {where} ({describe_missing(set(na))}); "
                "every count must be a non-negative integer"
            )
        raise DataError(
            f"user {user!r} has count {labels[int(local[row])]!r} in {where}: counts must be "
            "non-negative integers"
        )
    return rows


class _Matrix:
    """A users × classes count matrix that grows as users appear."""

    def __init__(self, d: int) -> None:
        self.data = np.zeros((1024, d), dtype=np.int64)

    def add(self, users: IntArray, classes: IntArray, counts: IntArray, n_users: int) -> None:
        if n_users > self.data.shape[0]:
            grown = np.zeros((max(n_users, 2 * self.data.shape[0]), self.data.shape[1]), np.int64)
            grown[: self.data.shape[0]] = self.data
            self.data = grown
        np.add.at(self.data, (users, classes), counts)

    def finish(self, n_users: int) -> IntArray:
        return self.data[:n_users].copy()


def _check_totals(counts: IntArray, ids: Sequence[str], where: str) -> None:
    totals = counts.sum(axis=1)
    zero = np.flatnonzero(totals == 0)
    if zero.size:
        raise DataError(
            f"user {ids[int(zero[0])]!r} has total count 0 in {where} ({zero.size:,} user(s) "
            "do); a histogram needs at least one count to be normalized"
        )


def _no_rows(reader: ColumnReader) -> DataError:
    what = "a header but " if reader.format.kind == "csv" else ""
    return DataError(f"{reader.path} has {what}no data rows")


def load_long_histograms(
    path: str | Path,
    *,
    user_column: str,
    class_column: str,
    domain: Sequence[str],
    count_column: str | None = None,
    domain_source: str = "declared",
    delimiter: str | None = None,
    encoding: str = "utf-8",
    na_values: Collection[str] = DEFAULT_NA_VALUES,
    show_progress: bool = True,
    use_pyarrow: bool | None = None,
) -> LoadedHistograms:
    """Read per-user histograms in the long layout (one row per user and class).

    Args:
        path: CSV with a header row (plain or gzip) or Parquet file.
        user_column: Column identifying the user.
        class_column: Column holding the class (a label of ``domain``).
        domain: The public class labels, in column order.
        count_column: Column holding the count; without it every row counts 1.
        domain_source: Where ``domain`` came from, for the report.
        delimiter: CSV field separator (sniffed when ``None``).
        encoding: CSV text encoding.
        na_values: Cell texts that mean "missing" (nulls always do).
        show_progress: Show a progress bar on a terminal.
        use_pyarrow: CSV reader (see :class:`~shuffledp.data.loaders.ColumnReader`).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        InvalidParameterError: If two roles name one column, or on a bad domain.
        DataError: On malformed data (module docstring).
    """
    labels = check_domain(domain)
    columns = [user_column, class_column] + ([count_column] if count_column is not None else [])
    if len(set(columns)) != len(columns):
        raise InvalidParameterError(
            f"user, class and count columns must be different columns, got {columns!r}"
        )
    na = set(na_values)
    reader = ColumnReader(
        path,
        columns,
        delimiter=delimiter,
        encoding=encoding,
        use_pyarrow=use_pyarrow,
        show_progress=show_progress,
    )
    users = _Users(na, f"column {user_column!r} of {reader.path}")
    class_index = {label: i for i, label in enumerate(labels)}
    class_where = f"column {class_column!r} of {reader.path}"
    count_where = f"column {count_column!r} of {reader.path}"
    matrix = _Matrix(len(labels))
    for batch in reader:
        user_rows = users.encode(batch[0])
        names, local = factorize(batch[1])
        codes = np.array([class_index.get(name, -1) for name in names], dtype=np.int64)
        class_rows = codes[local] if len(names) else np.full(len(local), -1, dtype=np.int64)
        class_rows[local < 0] = -1
        bad = np.flatnonzero(class_rows < 0)
        if bad.size:
            row = int(bad[0])
            user = users.ids[int(user_rows[row])]
            if local[row] < 0 or names[int(local[row])] in na:
                raise DataError(
                    f"user {user!r} has a row with no class in {class_where} "
                    f"({describe_missing(na)}); every row must name a class"
                )
            raise DataError(
                f"user {user!r} has class {names[int(local[row])]!r} in {class_where}, which is "
                f"not in the domain ({len(labels)} classes: "
                f"{', '.join(repr(x) for x in labels[:8])}{', ...' if len(labels) > 8 else ''})"
            )
        if count_column is None:
            count_rows = np.ones(len(user_rows), dtype=np.int64)
        else:
            count_rows = _parse_counts(batch[2], user_rows, users.ids, count_where, na)
        matrix.add(user_rows, class_rows, count_rows, len(users.ids))
    if users.rows == 0:
        raise _no_rows(reader)
    counts = matrix.finish(len(users.ids))
    _check_totals(counts, users.ids, f"{reader.path}")
    rules = [
        "users are in order of first appearance in the input",
        "rows repeating a user and class were added up",
    ]
    if count_column is None:
        rules.append("every row counted 1 (no count column)")
    return LoadedHistograms(
        counts=counts,
        user_ids=tuple(users.ids),
        classes=tuple(labels),
        source=str(reader.path),
        domain_source=domain_source,
        layout="long",
        rows_read=users.rows,
        notes=tuple(reader.notes),
        release_notes=tuple(rules),
    )


def _header(path: str | Path, delimiter: str | None, encoding: str) -> list[str]:
    reader = ColumnReader(path, [], delimiter=delimiter, encoding=encoding, show_progress=False)
    if reader.layout is not None:
        return list(reader.layout.header)
    pq = require("pyarrow.parquet", extra="parquet")
    return list(pq.read_schema(reader.path).names)


def load_wide_histograms(
    path: str | Path,
    *,
    user_column: str | None = None,
    domain: Sequence[str] | None = None,
    domain_source: str = "declared",
    delimiter: str | None = None,
    encoding: str = "utf-8",
    na_values: Collection[str] = DEFAULT_NA_VALUES,
    show_progress: bool = True,
    use_pyarrow: bool | None = None,
) -> LoadedHistograms:
    """Read per-user histograms in the wide layout (one row per user, one column per class).

    Args:
        path: CSV with a header row (plain or gzip) or Parquet file.
        user_column: Column identifying the user (its values must be distinct);
            without it row k (from 1) is user ``k``.
        domain: The public class labels, in output order. Every column other
            than ``user_column`` must be one of them; a label without a
            column counts 0 for everyone. ``None``: the classes are the
            columns, in file order (``domain_source`` becomes ``"header"``).
        domain_source: Where ``domain`` came from, for the report.
        delimiter: CSV field separator (sniffed when ``None``).
        encoding: CSV text encoding.
        na_values: Cell texts that mean "missing" (nulls always do).
        show_progress: Show a progress bar on a terminal.
        use_pyarrow: CSV reader (see :class:`~shuffledp.data.loaders.ColumnReader`).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        InvalidParameterError: On a bad domain.
        DataError: On malformed data (module docstring), a column outside the
            domain, or a missing user column.
    """
    header = _header(path, delimiter, encoding)
    if user_column is not None and user_column not in header:
        shown = ", ".join(repr(h) for h in header[:10])
        raise DataError(f"column {user_column!r} is not in {path} (columns: {shown})")
    class_columns = [name for name in header if name != user_column]
    repeated = sorted({name for name in class_columns if class_columns.count(name) > 1})
    if repeated:
        raise DataError(f"{path} has several columns named {repeated[0]!r}")
    notes: list[str] = []
    rules = ["users are in input order (one row per user)"]
    if domain is None:
        labels = check_domain(class_columns, f"the class columns of {path}")
        domain_source = "header"
    else:
        labels = check_domain(domain)
        outside = [name for name in class_columns if name not in labels]
        if outside:
            raise DataError(
                f"column {outside[0]!r} of {path} is not a class of the domain "
                f"({len(outside)} column(s) are not); with the wide layout every column but the "
                "user column is a class"
            )
        absent = [label for label in labels if label not in class_columns]
        if absent:
            rules.append("domain classes without a column in the input counted 0 for every user")
            notes.append(
                f"{len(absent)} domain class(es) have no column in {path} and count 0: "
                + ", ".join(repr(x) for x in absent[:8])
            )
    if not class_columns:
        raise DataError(f"{path} has no class column")
    if user_column is None:
        rules.append("user k is the k-th data row (no user column)")
    na = set(na_values)
    columns = class_columns + ([user_column] if user_column is not None else [])
    reader = ColumnReader(
        path,
        columns,
        delimiter=delimiter,
        encoding=encoding,
        use_pyarrow=use_pyarrow,
        show_progress=show_progress,
    )
    position = np.array([labels.index(name) for name in class_columns], dtype=np.int64)
    users = _Users(na, f"column {user_column!r} of {reader.path}")
    chunks: list[IntArray] = []
    ids: list[str] = users.ids
    for batch in reader:
        size = len(batch[0])
        if user_column is not None:
            user_rows = users.encode(batch[-1], unique=True)
        else:
            start = len(ids)
            ids.extend(str(k) for k in range(start + 1, start + size + 1))
            user_rows = np.arange(start, start + size, dtype=np.int64)
            users.rows += size
        block = np.zeros((size, len(labels)), dtype=np.int64)
        for k, name in enumerate(class_columns):
            where = f"column {name!r} of {reader.path}"
            block[:, position[k]] = _parse_counts(batch[k], user_rows, ids, where, na)
        chunks.append(block)
    if users.rows == 0:
        raise _no_rows(reader)
    counts = np.concatenate(chunks)
    _check_totals(counts, ids, f"{reader.path}")
    return LoadedHistograms(
        counts=counts,
        user_ids=tuple(ids),
        classes=tuple(labels),
        source=str(reader.path),
        domain_source=domain_source,
        layout="wide",
        rows_read=users.rows,
        notes=(*reader.notes, *notes),
        release_notes=tuple(rules),
    )
