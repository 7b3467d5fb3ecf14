"""What kind of file a data file is: Parquet or CSV, compression, encoding, delimiter.

Rules (documented for users in :func:`shuffledp.data.ingest.load_values`):

* Parquet: the file starts with ``PAR1`` or ends in ``.parquet`` / ``.pq``.
* gzip: the file starts with the gzip magic bytes ``1f 8b`` or ends in ``.gz``.
* Encoding: ``encoding`` (default UTF-8); a UTF-8 byte-order mark is skipped.
* Delimiter: the ``delimiter`` given, else sniffed from the header line (with
  quoted parts removed) among ``,`` ``;`` tab ``|``: exactly one of them
  present → that one; none → a single column (``,``); several → an error
  asking for an explicit delimiter.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp._wording import Parameter, Worded

__all__ = [
    "SNIFFED_DELIMITERS",
    "CsvLayout",
    "FileFormat",
    "check_encoding",
    "detect_format",
    "open_binary",
    "read_csv_layout",
    "sniff_delimiter",
]

#: Delimiters the header sniffer recognizes.
SNIFFED_DELIMITERS = (",", ";", "\t", "|")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_GZIP_MAGIC = b"\x1f\x8b"
_PARQUET_MAGIC = b"PAR1"
_HEADER_BYTES = 1 << 20
_QUOTED = re.compile(r'"(?:[^"]|"")*"')


@dataclass(frozen=True)
class FileFormat:
    """The container of a data file.

    Attributes:
        kind: ``"csv"`` or ``"parquet"``.
        compression: ``"gzip"`` or ``None``.
        how: How the format was recognized, e.g. ``"gzip magic bytes"``.
    """

    kind: Literal["csv", "parquet"]
    compression: Literal["gzip"] | None
    how: str


def detect_format(path: Path) -> FileFormat:
    """Recognize a data file by its first bytes and its name (see the module rules).

    Raises:
        DataError: If the file is empty.
    """
    with path.open("rb") as handle:
        head = handle.read(4)
    if not head:
        raise DataError(f"{path} is empty: expected a header row")
    suffix = path.suffix.lower()
    if head == _PARQUET_MAGIC or suffix in _PARQUET_SUFFIXES:
        how = "Parquet magic bytes" if head == _PARQUET_MAGIC else f"the {suffix} extension"
        return FileFormat("parquet", None, how)
    if head.startswith(_GZIP_MAGIC):
        return FileFormat("csv", "gzip", "gzip magic bytes")
    if suffix == ".gz":
        return FileFormat("csv", "gzip", "the .gz extension")
    return FileFormat("csv", None, "text")


def check_encoding(encoding: str) -> str:
    """Return the canonical codec name of ``encoding`` (e.g. ``"latin-1"`` → ``"iso8859-1"``).

    Raises:
        InvalidParameterError: If Python does not know the encoding.
    """
    try:
        return codecs.lookup(encoding).name
    except (LookupError, TypeError):
        raise InvalidParameterError(
            f"encoding {encoding!r} is not a known text encoding (e.g. 'utf-8', 'latin-1')"
        ) from None


def open_binary(
    source: Path | BinaryIO | io.BufferedIOBase, compression: str | None
) -> BinaryIO | io.BufferedIOBase:
    """Open ``source`` (a path or an open binary file) for reading bytes, decompressing gzip."""
    if compression == "gzip":
        return gzip.open(source, "rb")
    if isinstance(source, Path):
        return source.open("rb")
    return source


def decode_error(path: Path, encoding: str, reason: str) -> DataError:
    """The error for bytes that are not valid text in ``encoding``."""
    return DataError(
        Worded(
            "{path} is not valid {encoding} text ({reason}); give the file's encoding with "
            "{option}, e.g. 'latin-1' or 'cp1252'",
            path=path,
            encoding=encoding,
            reason=reason,
            option=Parameter("encoding", placeholder="..."),
        )
    )


def gzip_error(path: Path, exc: BaseException) -> DataError:
    """The error for a file that was taken to be gzip-compressed but is not readable as such."""
    return DataError(f"{path} is not a readable gzip file: {exc}")


def sniff_delimiter(header_line: str) -> str | None:
    """Return the one delimiter present in ``header_line`` (outside quotes), ``","`` if none.

    Returns:
        The delimiter, or ``None`` if several candidates are present (ambiguous).
    """
    unquoted = _QUOTED.sub("", header_line)
    present = [d for d in SNIFFED_DELIMITERS if d in unquoted]
    if len(present) > 1:
        return None
    return present[0] if present else ","


def _check_delimiter(delimiter: str) -> str:
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
        raise InvalidParameterError(
            f"delimiter must be a single character other than a quote or a line break, "
            f"got {delimiter!r}"
        )
    if not delimiter.isascii():
        raise InvalidParameterError(f"delimiter must be an ASCII character, got {delimiter!r}")
    return delimiter


@dataclass(frozen=True)
class CsvLayout:
    """How to split a CSV file into fields.

    Attributes:
        encoding: Canonical codec name.
        delimiter: Field separator.
        sniffed: Whether the delimiter was chosen from the header line.
        header: Column names, as in the file.
    """

    encoding: str
    delimiter: str
    sniffed: bool
    header: list[str]

    @property
    def is_utf8(self) -> bool:
        """Whether the file is read as UTF-8 (a byte-order mark is then skipped)."""
        return self.encoding == "utf-8"


def read_csv_layout(
    path: Path, fmt: FileFormat, *, encoding: str, delimiter: str | None
) -> CsvLayout:
    """Read the header of a CSV file and settle its delimiter (see the module rules).

    Raises:
        InvalidParameterError: On a bad ``encoding`` or ``delimiter``.
        DataError: If the file is empty, undecodable, not valid gzip, has an
            empty header or an ambiguous delimiter.
    """
    codec = check_encoding(encoding)
    if delimiter is not None:
        delimiter = _check_delimiter(delimiter)
    try:
        with open_binary(path, fmt.compression) as handle:
            head = handle.read(_HEADER_BYTES)
            at_end = len(head) < _HEADER_BYTES
    except (OSError, EOFError, zlib.error) as exc:
        raise gzip_error(path, exc) from None
    try:
        text = codecs.getincrementaldecoder(codec)().decode(head, final=at_end)
    except UnicodeError as exc:
        raise decode_error(path, encoding, str(exc)) from None
    if codec == "utf-8":
        text = text.removeprefix("\ufeff")
    if text == "":
        raise DataError(f"{path} is empty: expected a header row")
    first_line = text.split("\n", 1)[0].removesuffix("\r")
    sniffed = delimiter is None
    if delimiter is None:
        delimiter = sniff_delimiter(first_line)
        if delimiter is None:
            found = " ".join(repr(d) for d in SNIFFED_DELIMITERS if d in first_line)
            raise DataError(
                Worded(
                    "{path}: the header line contains several possible delimiters ({found}); "
                    "give the delimiter explicitly with {option}",
                    path=path,
                    found=found,
                    option=Parameter("delimiter", placeholder="..."),
                )
            )
    try:
        header = next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), [])
    except csv.Error as exc:
        raise DataError(f"{path} is not valid CSV: {exc}") from None
    if not header or header == [""]:
        raise DataError(f"{path} has an empty header line: expected column names")
    return CsvLayout(encoding=codec, delimiter=delimiter, sniffed=sniffed, header=header)
