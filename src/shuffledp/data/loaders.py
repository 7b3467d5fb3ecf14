"""Stream named columns of a CSV or Parquet file as batches of text.

:class:`ColumnReader` reads only the columns asked for, in bounded memory:

* CSV (plain or gzip, any encoding) with pyarrow's streaming reader
  (``pyarrow.csv.open_csv``) when pyarrow is installed, else with the standard
  library's :mod:`csv` in chunks of rows; both give the same values. Every cell
  is text exactly as in the file (no trimming, no type or null conversion):
  what counts as missing is decided later (``na_values``). Quoted fields may
  contain delimiters, quotes (doubled) and line breaks. Blank lines are skipped
  in a file with several columns; in a single-column file a blank line is an
  empty cell.
* Parquet with ``pyarrow.parquet.ParquetFile.iter_batches``; columns that are
  not text are converted to their text form (pyarrow's cast to string, e.g.
  ``1``, ``2.5``, ``true``, ``2020-01-31``) and nulls stay missing.

:class:`FrameReader` does the same for a pandas DataFrame or a pyarrow Table
already in memory (with pyarrow): the value column as Arrow arrays (text,
integers or categories, encoded as :func:`shuffledp.data.encoding.encode_values`
does), user ids as text.

:func:`read_column` returns one column as a list, for small files; use
:func:`shuffledp.data.ingest.load_values` to encode large ones.
"""

from __future__ import annotations

import csv
import importlib
import io
import itertools
import zlib
from collections.abc import Collection, Hashable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from shuffledp._optional import require
from shuffledp._progress import progress_bar
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.encoding import DEFAULT_NA_VALUES, TextBatch, describe_missing, text_error
from shuffledp.data.fileformat import (
    CsvLayout,
    FileFormat,
    decode_error,
    detect_format,
    gzip_error,
    open_binary,
    read_csv_layout,
)
from shuffledp.data.frames import describe_frame, frame_kind, row_label_of, select_column

__all__ = ["ColumnReader", "FrameReader", "arrow_text", "read_column"]

#: Bytes of CSV per pyarrow block (one batch).
CSV_BLOCK_BYTES = 4 << 20
#: Rows per batch of the standard-library CSV reader and of Parquet.
BATCH_ROWS = 1 << 16


def _pyarrow() -> ModuleType | None:
    try:
        return importlib.import_module("pyarrow.csv")
    except ImportError:
        return None


class _CountingFile(io.RawIOBase):
    """A read-only file that counts the bytes read from it (for the progress bar)."""

    def __init__(self, raw: io.BufferedIOBase) -> None:
        super().__init__()
        self._raw = raw
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = self._raw.readinto(buffer)
        self.bytes_read += count
        return count

    def close(self) -> None:
        self._raw.close()
        super().close()


def _one_line(message: str) -> str:
    return " ".join(message.split())


class ColumnReader:
    """Stream some columns of a CSV or Parquet file as aligned text batches.

    Iterating yields one list per batch, holding one :data:`TextBatch` per
    requested column (all of the same length): pyarrow string arrays on the
    pyarrow paths, numpy object arrays of ``str`` on the standard-library path.

    Args:
        path: The data file (see :mod:`shuffledp.data.fileformat` for how its
            format, compression and delimiter are recognized).
        columns: Names of the columns to read.
        delimiter: CSV field separator; sniffed from the header when ``None``.
        encoding: CSV text encoding (ignored for Parquet).
        use_pyarrow: Read CSV with pyarrow (``True``), the standard library
            (``False``) or pyarrow when installed (``None``). Parquet always needs pyarrow.
        show_progress: Show a progress bar (bytes for CSV, rows for Parquet)
            when stderr is a terminal.

    Attributes:
        path: The file.
        format: Its container.
        layout: Delimiter and header of a CSV file (``None`` for Parquet).
        notes: Statements of what was detected on the user's behalf.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        InvalidParameterError: On a bad option.
        DataError: If the file is empty, malformed, or lacks a column.
        MissingExtraError: If pyarrow is needed (Parquet, ``use_pyarrow=True``) but missing.
    """

    def __init__(
        self,
        path: str | Path,
        columns: Sequence[str],
        *,
        delimiter: str | None = None,
        encoding: str = "utf-8",
        use_pyarrow: bool | None = None,
        show_progress: bool = True,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            what = "is not a regular file" if self.path.exists() else "does not exist"
            raise FileNotFoundError(f"input file {str(self.path)!r} {what}")
        if use_pyarrow not in (None, True, False):
            raise InvalidParameterError(
                f"use_pyarrow must be None, True or False, got {use_pyarrow!r}"
            )
        self.columns = list(columns)
        self.show_progress = show_progress
        self.format: FileFormat = detect_format(self.path)
        self.notes: list[str] = []
        self.layout: CsvLayout | None = None
        self._parquet: Any = None
        if self.format.kind == "parquet":
            self._open_parquet()
            return
        if self.format.compression == "gzip" and self.path.suffix.lower() != ".gz":
            self.notes.append(f"{self.path} read as gzip-compressed CSV ({self.format.how})")
        self.layout = read_csv_layout(
            self.path, self.format, encoding=encoding, delimiter=delimiter
        )
        if self.layout.sniffed and self.layout.delimiter != ",":
            self.notes.append(
                f"{self.path}: delimiter {self.layout.delimiter!r} detected from the header line"
            )
        self._check_columns(self.layout.header)
        if use_pyarrow is None:
            self._use_pyarrow = _pyarrow() is not None
        else:
            if use_pyarrow:
                require("pyarrow.csv", extra="parquet")
            self._use_pyarrow = use_pyarrow

    def _open_parquet(self) -> None:
        pq = require("pyarrow.parquet", extra="parquet")
        try:
            self._parquet = pq.ParquetFile(self.path)
            names = self._parquet.schema_arrow.names
        except Exception as exc:  # pyarrow raises several types for bad files
            raise DataError(
                f"{self.path} is not a readable Parquet file: {_one_line(str(exc))}"
            ) from None
        self._check_columns(names)

    def _check_columns(self, names: Sequence[str]) -> None:
        for column in self.columns:
            count = list(names).count(column)
            if count == 0:
                shown = ", ".join(repr(h) for h in names[:10])
                more = f", ... ({len(names)} in all)" if len(names) > 10 else ""
                raise DataError(f"column {column!r} is not in {self.path} (columns: {shown}{more})")
            if count > 1:
                raise DataError(f"{self.path} has {count} columns named {column!r}")

    @property
    def rows_total(self) -> int | None:
        """Number of data rows when the file says so (Parquet), else ``None``."""
        if self._parquet is not None:
            return int(self._parquet.metadata.num_rows)
        return None

    def __iter__(self) -> Iterator[list[TextBatch]]:
        if self._parquet is not None:
            return self._iter_parquet()
        if self._use_pyarrow:
            return self._iter_csv_arrow()
        return self._iter_csv_stdlib()

    # -- Parquet ---------------------------------------------------------------------------

    def _iter_parquet(self) -> Iterator[list[TextBatch]]:
        with progress_bar(
            total=self.rows_total, desc=self.path.name, unit="rows", enabled=self.show_progress
        ) as bar:
            try:
                batches = self._parquet.iter_batches(batch_size=BATCH_ROWS, columns=self.columns)
                for batch in batches:
                    yield [
                        arrow_text(batch.column(name), f"column {name!r} of {self.path}")
                        for name in self.columns
                    ]
                    bar.update(batch.num_rows)
            except DataError:
                raise
            except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
                raise DataError(
                    f"{self.path} is not a readable Parquet file: {_one_line(str(exc))}"
                ) from None

    # -- CSV with pyarrow ------------------------------------------------------------------

    def _iter_csv_arrow(self) -> Iterator[list[TextBatch]]:
        import pyarrow as pa
        import pyarrow.csv as pcsv

        layout = self.layout
        assert layout is not None
        read_options = pcsv.ReadOptions(
            block_size=CSV_BLOCK_BYTES,
            encoding="utf8" if layout.is_utf8 else layout.encoding,
        )
        parse_options = pcsv.ParseOptions(
            delimiter=layout.delimiter,
            quote_char='"',
            double_quote=True,
            escape_char=False,
            newlines_in_values=True,
            ignore_empty_lines=len(layout.header) > 1,
        )
        convert_options = pcsv.ConvertOptions(
            include_columns=self.columns,
            column_types={name: pa.string() for name in self.columns},
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            check_utf8=True,
        )
        size = self.path.stat().st_size
        bar = progress_bar(total=size, desc=self.path.name, unit="B", enabled=self.show_progress)
        with _CountingFile(self.path.open("rb")) as raw, bar:
            stream: Any = pa.PythonFile(io.BufferedReader(raw, 1 << 20), mode="r")
            if self.format.compression == "gzip":
                stream = pa.CompressedInputStream(stream, "gzip")
            try:
                reader = pcsv.open_csv(
                    stream,
                    read_options=read_options,
                    parse_options=parse_options,
                    convert_options=convert_options,
                )
                for batch in reader:
                    yield [batch.column(name) for name in self.columns]
                    bar.update(raw.bytes_read - bar.n)
            except UnicodeError as exc:
                raise decode_error(self.path, layout.encoding, str(exc)) from None
            except (pa.ArrowException, OSError) as exc:
                message = _one_line(str(exc))
                if "invalid UTF8" in message:
                    raise decode_error(self.path, "utf-8", "invalid UTF-8 data") from None
                if self.format.compression == "gzip" and not isinstance(exc, pa.ArrowInvalid):
                    raise gzip_error(self.path, exc) from None
                if "gzip" in message.lower() or "zlib" in message.lower():
                    raise gzip_error(self.path, exc) from None
                raise DataError(f"{self.path} is not valid CSV: {message}") from None

    # -- CSV with the standard library -----------------------------------------------------

    def _iter_csv_stdlib(self) -> Iterator[list[TextBatch]]:
        layout = self.layout
        assert layout is not None
        positions = [layout.header.index(name) for name in self.columns]
        width = len(layout.header)
        size = self.path.stat().st_size
        seen = 0
        bar = progress_bar(total=size, desc=self.path.name, unit="B", enabled=self.show_progress)
        with _CountingFile(self.path.open("rb")) as raw, bar:
            buffered = io.BufferedReader(raw, 1 << 20)
            binary: Any = open_binary(buffered, self.format.compression)
            text = io.TextIOWrapper(
                binary, encoding="utf-8-sig" if layout.is_utf8 else layout.encoding, newline=""
            )
            reader = csv.reader(text, delimiter=layout.delimiter, quotechar='"', doublequote=True)
            try:
                next(reader)  # the header, already read by read_csv_layout
                while True:
                    rows = list(itertools.islice(reader, BATCH_ROWS))
                    if not rows:
                        break
                    # A blank line is no record in a multi-column file, an empty cell otherwise.
                    rows = [r for r in rows if r] if width > 1 else [r or [""] for r in rows]
                    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
                    bad = np.flatnonzero(lengths != width)
                    if bad.size:
                        row = int(bad[0])
                        raise DataError(
                            f"{self.path} is not valid CSV: data row {seen + row + 1} has "
                            f"{lengths[row]} fields, the header has {width}"
                        )
                    seen += len(rows)
                    if rows:
                        yield [np.array([r[i] for r in rows], dtype=object) for i in positions]
                    bar.update(raw.bytes_read - bar.n)
            except UnicodeError as exc:
                raise decode_error(self.path, layout.encoding, str(exc)) from None
            except csv.Error as exc:
                raise DataError(f"{self.path} is not valid CSV: {exc}") from None
            except (EOFError, zlib.error) as exc:
                raise gzip_error(self.path, exc) from None
            except OSError as exc:
                if self.format.compression == "gzip":
                    raise gzip_error(self.path, exc) from None
                raise


def arrow_text(array: Any, where: str) -> TextBatch:
    """Return an Arrow array as text (nulls kept), converting other types to their text form.

    Strings and dictionaries of strings stay as they are; other types go
    through pyarrow's cast to string (``1``, ``2.5``, ``true``, ``2020-01-31``),
    which keeps distinct values distinct within a column.

    Args:
        array: The Arrow array.
        where: What it is, for messages (``"column 'user' of data.parquet"``).

    Raises:
        DataError: If the values are nested (lists, structs) or cannot be cast to text.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return array
    if pa.types.is_dictionary(kind):
        values = array.dictionary
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            return array
        return pa.DictionaryArray.from_arrays(array.indices, arrow_text(values, where))
    if pa.types.is_nested(kind):
        raise DataError(f"{where} holds {kind} values, not single values")
    try:
        return pc.cast(array, pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise DataError(f"{where} ({kind}) cannot be read as text: {_one_line(str(exc))}") from None


class FrameReader:
    """Stream some columns of a pandas DataFrame or a pyarrow Table as aligned Arrow batches.

    The in-memory counterpart of :class:`ColumnReader` (same iteration, same
    attributes as far as they apply): the first column (the values) is
    yielded as Arrow arrays of its own type, text, integers or categories,
    which :class:`~shuffledp.data.encoding.BinEncoder` encodes as
    :func:`~shuffledp.data.encoding.encode_values` does (floats are refused,
    not cast: ``1.0`` is no label); every other column (user ids) as text
    (:func:`arrow_text`).

    Args:
        frame: A pandas DataFrame or a pyarrow Table or RecordBatch.
        columns: Names of the columns to read (the value column first).

    Attributes:
        path: What messages call the frame (``"the DataFrame"``).
        layout: ``None`` (no CSV header).
        notes: Statements of what was detected on the user's behalf (none).

    Raises:
        InvalidParameterError: If a column is not in the frame (or named
            twice), or the value column holds neither text nor integers.
        MissingExtraError: If pyarrow is not installed.
    """

    layout: CsvLayout | None = None

    def __init__(self, frame: Any, columns: Sequence[Hashable]) -> None:
        pa = require("pyarrow", extra="parquet")
        if frame_kind(frame) is None:
            raise InvalidParameterError(
                f"expected a pandas DataFrame or a pyarrow Table, got {type(frame).__name__}"
            )
        self.path = describe_frame(frame)
        self.notes: list[str] = []
        self.columns = list(columns)
        self._arrays: list[Any] = []
        for position, column in enumerate(self.columns):
            selected = select_column(frame, column)
            where = f"column {column!r} of {self.path}"
            try:
                array = pa.array(selected, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                if position == 0:
                    raise text_error(
                        f"{where}, which pyarrow cannot read as one type ({_one_line(str(exc))})"
                    ) from None
                raise DataError(
                    f"{where} mixes types pyarrow cannot read as one ({_one_line(str(exc))}): "
                    "give user ids of one type"
                ) from None
            if isinstance(array, pa.ChunkedArray):
                array = array.combine_chunks()
            self._arrays.append(array if position == 0 else arrow_text(array, where))
        self.row_label = row_label_of(select_column(frame, self.columns[0]))

    @property
    def rows_total(self) -> int:
        """Number of rows."""
        return len(self._arrays[0]) if self._arrays else 0

    def __iter__(self) -> Iterator[list[TextBatch]]:
        for start in range(0, self.rows_total, BATCH_ROWS):
            yield [array.slice(start, BATCH_ROWS) for array in self._arrays]


def read_column(
    path: str | Path,
    column: str,
    *,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    na_values: Collection[str] = DEFAULT_NA_VALUES,
    use_pyarrow: bool | None = None,
    show_progress: bool = True,
) -> list[str]:
    """Return the values of ``column``, one per row, as text exactly as in the file.

    For small files and inspection; it builds one Python string per row. To
    encode a large file against a domain use
    :func:`shuffledp.data.ingest.load_values`, which streams.

    Args:
        path: CSV (with a header row; plain or gzip) or Parquet file.
        column: The column to read.
        delimiter: CSV field separator; sniffed from the header when ``None``.
        encoding: CSV text encoding.
        na_values: Cell texts that mean "missing" (nulls always do).
        use_pyarrow: See :class:`ColumnReader`.
        show_progress: Show a progress bar when stderr is a terminal.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        DataError: If the file is empty or malformed, lacks ``column``, has a
            missing value in it, or holds no data rows.
    """
    reader = ColumnReader(
        path,
        [column],
        delimiter=delimiter,
        encoding=encoding,
        use_pyarrow=use_pyarrow,
        show_progress=show_progress,
    )
    na = set(na_values)
    values: list[str] = []
    missing = 0
    first: tuple[int, str | None] | None = None
    for (batch,) in reader:
        chunk = batch.tolist() if isinstance(batch, np.ndarray) else batch.to_pylist()
        is_missing = [value is None or value in na for value in chunk]
        if any(is_missing):
            missing += sum(is_missing)
            if first is None:
                row = is_missing.index(True)
                first = (len(values) + row, chunk[row])
        values.extend(chunk)
    if first is not None:
        raise DataError(
            f"{missing:,} value(s) in column {column!r} of {reader.path} are missing "
            f"({describe_missing(na)}), first "
            f"{first[1]!r} at data row {first[0] + 1}"
        )
    if not values:
        what = "a header but " if reader.format.kind == "csv" else ""
        raise DataError(f"{reader.path} has {what}no data rows")
    return values
