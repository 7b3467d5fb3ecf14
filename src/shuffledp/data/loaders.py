"""Read one categorical column, one row per user, from CSV or Parquet."""

from __future__ import annotations

import csv
from pathlib import Path

from shuffledp._optional import require
from shuffledp._validation import DataError

__all__ = ["read_column"]

_PARQUET_SUFFIXES = (".parquet", ".pq")


def _read_csv(path: Path, column: str) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            try:
                header = next(reader)
            except StopIteration:
                raise DataError(f"{path} is empty: expected a header row") from None
            if column not in header:
                shown = ", ".join(repr(h) for h in header[:10])
                raise DataError(f"column {column!r} is not in {path} (columns: {shown})")
            col = header.index(column)
            values: list[str] = []
            blank_line = 0
            for line, row in enumerate(reader, start=2):
                if not row:
                    blank_line = blank_line or line
                    continue
                if blank_line:
                    raise DataError(
                        f"{path} line {blank_line} is blank (only trailing blank lines are allowed)"
                    )
                if len(row) != len(header):
                    raise DataError(
                        f"{path} line {line} has {len(row)} fields, the header has {len(header)}"
                    )
                value = row[col].strip()
                if value == "":
                    raise DataError(f"{path} line {line} has an empty value in column {column!r}")
                values.append(value)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path} is not UTF-8 text: {exc.reason}") from None
    except csv.Error as exc:
        raise DataError(f"{path} is not valid CSV: {exc}") from None
    return values


def _read_parquet(path: Path, column: str) -> list[str]:
    pq = require("pyarrow.parquet", extra="parquet")
    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for bad files
        raise DataError(f"{path} is not a readable Parquet file: {exc}") from None
    if column not in schema.names:
        shown = ", ".join(repr(h) for h in schema.names[:10])
        raise DataError(f"column {column!r} is not in {path} (columns: {shown})")
    values = pq.read_table(path, columns=[column]).column(column).to_pylist()
    for row, value in enumerate(values, start=1):
        if value is None or str(value).strip() == "":
            raise DataError(f"{path} row {row} has an empty value in column {column!r}")
    return [str(v).strip() for v in values]


def read_column(path: str | Path, column: str) -> list[str]:
    """Return the values of ``column``, one per row, as text.

    CSV files need a header row; files ending in ``.parquet`` or ``.pq`` are read
    with pyarrow (the ``parquet`` extra). Surrounding whitespace is stripped;
    empty cells are an error rather than silently dropped.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        DataError: If the file is empty or malformed, lacks ``column``, has an
            empty value in it, or holds no data rows.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"input file {str(path)!r} does not exist")
    if path.suffix.lower() in _PARQUET_SUFFIXES:
        values = _read_parquet(path, column)
    else:
        values = _read_csv(path, column)
    if not values:
        raise DataError(f"{path} has a header but no data rows")
    return values
