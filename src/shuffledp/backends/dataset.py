"""Message datasets: shuffled messages as Parquet files plus one small metadata file.

What the backends read (:class:`~shuffledp.backends.base.Backend`) and what
``shuffledp analyzer export`` writes from the analyzer's store. A dataset is a
directory (a local path, or a URI pyarrow and Spark both understand:
``hdfs://…``, ``s3://…``/``s3a://…``, ``gs://…``):

``_shuffledp.json`` (:data:`METADATA_FILE`), written last, so a directory
without it is an incomplete export::

    {
      "schema": "urn:shuffledp:schema:message-dataset:1",
      "format": "shuffledp-messages/1",
      "kind": "ciphertext" | "plaintext",
      "message_format": 1,            # the wire format version
      "message_bytes": 53 | 5,        # CIPHERTEXT_LENGTH or PLAINTEXT_LENGTH
      "task_id": "32 hex digits" | null,   # ciphertexts: the task bound into them
      "domain_size": d,
      "columns": {"batch": "int32", "message": "binary"},
      "files": ["part-00000.parquet", ...],
      "batches": [{"batch_id": "32 hex digits", "n_users": 1000, "n_messages": 1043}, ...],
      "n_users": total users, "n_messages": total messages,
      "created_by": "shuffledp 0.x"
    }

``part-NNNNN.parquet``: one row per message, two columns:

* ``batch`` (int32, not null): the batch's position in ``batches`` (the batch
  id itself lives in the metadata, so the files do not repeat 32 characters
  per row);
* ``message`` (binary, not null): one wire message
  (:mod:`shuffledp.service.wire`): an HPKE ciphertext of the task, or a
  5-byte plaintext ``version | index``.

Rows of one batch are its messages in the order the shuffler permuted them;
the row order carries nothing and no backend depends on it. ``n_users`` per
batch is what the shuffler stated (public in the shuffle model): it is what the
release's n and the smallest batch's guarantee come from, since a FLIP user
sends a random number of messages. The metadata holds no secret: ciphertexts
are sealed to the analyzer and batch sizes are public.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from numpy.typing import NDArray

from shuffledp import __version__
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.backends.kernels import (
    CIPHERTEXT_LENGTH,
    PLAINTEXT_LENGTH,
    PLAINTEXT_VERSION,
    MessageKind,
    binary_array,
)
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.service.store_protocols import AnalyzerStore
    from shuffledp.service.task import Task

__all__ = [
    "DATASET_FORMAT",
    "DATASET_SCHEMA",
    "METADATA_FILE",
    "DatasetBatch",
    "DatasetWriter",
    "MessageDataset",
    "export_analyzer_store",
    "message_schema",
    "open_dataset",
    "stored_batch_ids",
    "write_metadata",
]

#: Format name of the metadata file.
DATASET_FORMAT = "shuffledp-messages/1"
#: ``schema`` of the metadata file (the ``$id`` of its JSON Schema; absent in files of 0.1).
DATASET_SCHEMA = schema_id("message-dataset")
#: The metadata file's name (a leading ``_``: Spark and pyarrow skip it as data).
METADATA_FILE = "_shuffledp.json"
#: Default most rows per Parquet file (about 200 MB of ciphertexts).
DEFAULT_ROWS_PER_FILE = 1 << 22
#: Rows per Parquet row group (the unit Spark splits files on).
ROW_GROUP_ROWS = 1 << 16

_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]*\.parquet$")


def message_schema() -> Any:
    """The Parquet schema of every data file: ``batch`` int32, ``message`` binary."""
    return pa.schema(
        [pa.field("batch", pa.int32(), nullable=False), pa.field("message", pa.binary(), False)]
    )


def _message_bytes(kind: str) -> int:
    if kind == "ciphertext":
        return CIPHERTEXT_LENGTH
    if kind == "plaintext":
        return PLAINTEXT_LENGTH
    raise InvalidParameterError(f"kind must be 'ciphertext' or 'plaintext', got {kind!r}")


#: Hadoop's names for S3, which pyarrow knows as ``s3://``.
_HADOOP_S3 = ("s3a://", "s3n://")


def _resolve(location: str | Path) -> tuple[Any, str, str]:
    """Return (pyarrow filesystem, path inside it, URI for Spark) of a dataset location.

    Raises:
        InvalidParameterError: If pyarrow knows no filesystem for the URI's scheme.
    """
    text = str(location)
    if "://" in text:
        for_arrow = "s3://" + text[6:] if text.startswith(_HADOOP_S3) else text
        try:
            fs, path = pafs.FileSystem.from_uri(for_arrow)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InvalidParameterError(f"cannot open {text!r}: {exc}") from None
        return fs, path.rstrip("/"), text.rstrip("/")
    absolute = Path(text).expanduser().absolute()
    return pafs.LocalFileSystem(), absolute.as_posix(), absolute.as_uri()


@dataclass(frozen=True)
class DatasetBatch:
    """One batch of a dataset (public facts only).

    Attributes:
        batch_id: The shuffler's batch id.
        n_users: Users in the batch, as the shuffler stated it.
        n_messages: Rows of the batch in the data files.
    """

    batch_id: str
    n_users: int
    n_messages: int


@dataclass(frozen=True)
class MessageDataset:
    """A message dataset's metadata and where its files are (see the module docstring).

    Attributes:
        location: The directory, as given (local path or URI).
        kind: ``"ciphertext"`` or ``"plaintext"``.
        domain_size: d.
        task_id: The task of the ciphertexts (``None`` for plaintexts outside a task).
        batches: The batches, in index order.
        files: Data file names, relative to ``location``.
    """

    location: str
    kind: MessageKind
    domain_size: int
    task_id: str | None
    batches: tuple[DatasetBatch, ...]
    files: tuple[str, ...]

    @property
    def message_bytes(self) -> int:
        """Bytes of one message of this kind."""
        return _message_bytes(self.kind)

    @property
    def n_users(self) -> int:
        """Users over every batch."""
        return sum(b.n_users for b in self.batches)

    @property
    def n_messages(self) -> int:
        """Messages over every batch."""
        return sum(b.n_messages for b in self.batches)

    @property
    def smallest_batch_users(self) -> int | None:
        """Users in the smallest batch (None without batches)."""
        return min((b.n_users for b in self.batches), default=None)

    def to_dict(self) -> dict[str, Any]:
        """The metadata document."""
        return {
            "schema": DATASET_SCHEMA,
            "format": DATASET_FORMAT,
            "kind": self.kind,
            "message_format": PLAINTEXT_VERSION,
            "message_bytes": self.message_bytes,
            "task_id": self.task_id,
            "domain_size": self.domain_size,
            "columns": {"batch": "int32", "message": "binary"},
            "files": list(self.files),
            "batches": [
                {"batch_id": b.batch_id, "n_users": b.n_users, "n_messages": b.n_messages}
                for b in self.batches
            ],
            "n_users": self.n_users,
            "n_messages": self.n_messages,
            "created_by": f"shuffledp {__version__}",
        }

    def file_uris(self) -> list[str]:
        """Every data file as a URI (``file:///…`` for a local directory), for Spark."""
        _, _, base = _resolve(self.location)
        return [f"{base}/{name}" for name in self.files]

    def iter_record_batches(
        self, chunk_rows: int = 1 << 18, columns: Sequence[str] = ("batch", "message")
    ) -> Iterator[Any]:
        """Yield the rows as pyarrow record batches (``batch``, ``message``), file by file.

        Memory stays bounded by ``chunk_rows`` rows (plus one Parquet row group).
        ``columns`` reads fewer columns.
        """
        chunk_rows = check_int(chunk_rows, "chunk_rows", minimum=1)
        fs, base, _ = _resolve(self.location)
        for name in self.files:
            with fs.open_input_file(posixpath.join(base, name)) as handle:
                reader = pq.ParquetFile(handle)
                yield from reader.iter_batches(
                    batch_size=chunk_rows, columns=list(columns), use_threads=False
                )


def _field(data: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise DataError(f"{where}: field {name!r} is missing or of the wrong type")
    return value


def _parse_metadata(data: Any, location: str) -> MessageDataset:
    where = f"dataset {location!r}"
    if not isinstance(data, dict) or data.get("format") != DATASET_FORMAT:
        raise DataError(f"{where}: {METADATA_FILE} is not a {DATASET_FORMAT!r} document")
    if "schema" in data and data["schema"] != DATASET_SCHEMA:
        raise DataError(f"{where}: schema must be {DATASET_SCHEMA!r}, got {data['schema']!r}")
    kind = data.get("kind")
    if kind not in ("ciphertext", "plaintext"):
        raise DataError(f"{where}: kind must be 'ciphertext' or 'plaintext', got {kind!r}")
    if data.get("message_format") != PLAINTEXT_VERSION:
        raise DataError(f"{where}: message_format must be {PLAINTEXT_VERSION}")
    if data.get("message_bytes") != _message_bytes(kind):
        raise DataError(f"{where}: {kind} messages have {_message_bytes(kind)} bytes")
    domain_size = _field(data, "domain_size", int, where)
    if domain_size < 1:
        raise DataError(f"{where}: domain_size must be >= 1")
    task_id = data.get("task_id")
    if task_id is not None and not isinstance(task_id, str):
        raise DataError(f"{where}: task_id must be a string or null")
    if kind == "ciphertext" and task_id is None:
        raise DataError(f"{where}: a ciphertext dataset must name its task")
    files = _field(data, "files", list, where)
    if not all(isinstance(f, str) and _FILE_NAME.match(f) for f in files):
        raise DataError(f"{where}: files must be plain *.parquet names inside the directory")
    if len(set(files)) != len(files):
        raise DataError(f"{where}: a file is listed twice")
    batches = []
    for entry in _field(data, "batches", list, where):
        if not isinstance(entry, dict):
            raise DataError(f"{where}: every batch must be an object")
        batch = DatasetBatch(
            _field(entry, "batch_id", str, where),
            _field(entry, "n_users", int, where),
            _field(entry, "n_messages", int, where),
        )
        if batch.n_users < 1 or batch.n_messages < 0:
            raise DataError(f"{where}: batch {batch.batch_id} has a negative or zero size")
        batches.append(batch)
    if len({b.batch_id for b in batches}) != len(batches):
        raise DataError(f"{where}: a batch id is listed twice")
    if len(batches) > 2**31 - 1:
        raise DataError(f"{where}: too many batches for an int32 batch column")
    dataset = MessageDataset(
        str(location), kind, domain_size, task_id, tuple(batches), tuple(files)
    )
    if data.get("n_users") != dataset.n_users or data.get("n_messages") != dataset.n_messages:
        raise DataError(f"{where}: n_users or n_messages differ from the sum over its batches")
    return dataset


def open_dataset(location: str | Path) -> MessageDataset:
    """Read and check a dataset's metadata.

    Raises:
        FileNotFoundError: If the directory has no metadata file (missing or incomplete).
        DataError: If the metadata are not a valid document.
    """
    fs, base, _ = _resolve(location)
    path = posixpath.join(base, METADATA_FILE)
    if fs.get_file_info(path).type != pafs.FileType.File:
        raise FileNotFoundError(
            f"{str(location)!r} is not a message dataset: it has no {METADATA_FILE} "
            "(missing, or an export that did not finish)"
        )
    with fs.open_input_stream(path) as handle:
        raw = handle.read()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise DataError(f"{path!r} is not JSON") from None
    return _parse_metadata(data, str(location))


class DatasetWriter:
    """Writes a new message dataset; the metadata file goes last, on :meth:`close`.

    Usage::

        with DatasetWriter(out, "ciphertext", d, task_id=task.task_id) as writer:
            index = writer.add_batch(batch_id, n_users)
            writer.write(index, rows)          # (m, 53) uint8; may be called again
        dataset = writer.dataset

    Args:
        location: A new or empty directory (local path or URI).
        kind: ``"ciphertext"`` or ``"plaintext"``.
        domain_size: d.
        task_id: The task of the ciphertexts (required for ciphertexts).
        rows_per_file: Most rows per Parquet file.

    Raises:
        InvalidParameterError: If the directory exists and is not empty, or on a bad option.
    """

    def __init__(
        self,
        location: str | Path,
        kind: MessageKind,
        domain_size: int,
        *,
        task_id: str | None = None,
        rows_per_file: int = DEFAULT_ROWS_PER_FILE,
    ) -> None:
        self.location = str(location)
        self.kind = kind
        self.width = _message_bytes(kind)
        self.domain_size = check_int(domain_size, "domain_size", minimum=1)
        if kind == "ciphertext" and task_id is None:
            raise InvalidParameterError("a ciphertext dataset needs its task id")
        self.task_id = task_id
        self.rows_per_file = check_int(rows_per_file, "rows_per_file", minimum=1)
        self._fs, self._base, _ = _resolve(location)
        info = self._fs.get_file_info(self._base)
        if info.type == pafs.FileType.File:
            raise InvalidParameterError(f"{self.location!r} is a file, not a directory")
        if info.type == pafs.FileType.Directory and self._fs.get_file_info(
            pafs.FileSelector(self._base)
        ):
            raise InvalidParameterError(f"{self.location!r} exists and is not empty")
        self._fs.create_dir(self._base, recursive=True)
        self._batches: list[list[Any]] = []
        self._files: list[str] = []
        self._writer: Any = None
        self._rows_in_file = 0
        self.dataset: MessageDataset | None = None

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        if kind is None:
            self.close()
        elif self._writer is not None:  # leave no metadata: the dataset is incomplete
            self._writer.close()
            self._writer = None

    def add_batch(self, batch_id: str, n_users: int) -> int:
        """Declare a batch; return its index (the ``batch`` column's value)."""
        if not isinstance(batch_id, str) or not batch_id:
            raise InvalidParameterError(f"batch_id must be a non-empty string, got {batch_id!r}")
        if any(b[0] == batch_id for b in self._batches):
            raise InvalidParameterError(f"batch {batch_id} is already in the dataset")
        self._batches.append([batch_id, check_int(n_users, "n_users", minimum=1), 0])
        return len(self._batches) - 1

    def write(self, index: int, rows: NDArray[np.uint8] | bytes) -> None:
        """Append messages to batch ``index``: an ``(m, width)`` byte matrix, or the bytes."""
        if not 0 <= index < len(self._batches):
            raise InvalidParameterError(f"no batch with index {index}")
        matrix = np.frombuffer(rows, dtype=np.uint8) if isinstance(rows, bytes) else rows
        matrix = np.asarray(matrix, dtype=np.uint8)
        if matrix.size % self.width:
            raise DataError(f"messages are not a whole number of {self.width}-byte rows")
        matrix = matrix.reshape(-1, self.width)
        start = 0
        while start < matrix.shape[0]:
            if self._writer is None:
                self._open_file()
            room = self.rows_per_file - self._rows_in_file
            piece = matrix[start : start + min(room, ROW_GROUP_ROWS * 16)]
            table = pa.Table.from_arrays(
                [pa.array(np.full(piece.shape[0], index, dtype=np.int32)), binary_array(piece)],
                schema=message_schema(),
            )
            self._writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
            self._rows_in_file += piece.shape[0]
            self._batches[index][2] += piece.shape[0]
            start += piece.shape[0]
            if self._rows_in_file >= self.rows_per_file:
                self._writer.close()
                self._writer = None

    def _open_file(self) -> None:
        name = f"part-{len(self._files):05d}.parquet"
        self._files.append(name)
        self._rows_in_file = 0
        ciphertexts = self.kind == "ciphertext"  # random bytes: neither compress nor repeat
        self._writer = pq.ParquetWriter(
            self._fs.open_output_stream(posixpath.join(self._base, name)),
            message_schema(),
            compression="none" if ciphertexts else "zstd",
            use_dictionary=not ciphertexts,
        )

    def close(self) -> MessageDataset:
        """Finish the last file and write the metadata; return the dataset."""
        if self.dataset is not None:
            return self.dataset
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        dataset = MessageDataset(
            self.location,
            self.kind,
            self.domain_size,
            self.task_id,
            tuple(DatasetBatch(b[0], b[1], b[2]) for b in self._batches),
            tuple(self._files),
        )
        write_metadata(dataset)
        self.dataset = dataset
        return dataset


def write_metadata(dataset: MessageDataset) -> None:
    """Write the dataset's metadata file (last: it marks the dataset complete).

    A local file is written to a temporary name and renamed into place.
    """
    fs, base, _ = _resolve(dataset.location)
    text = json.dumps(dataset.to_dict(), indent=2) + "\n"
    if isinstance(fs, pafs.LocalFileSystem):
        from shuffledp._files import write_text_atomically

        write_text_atomically(Path(base) / METADATA_FILE, text)
    else:
        with fs.open_output_stream(posixpath.join(base, METADATA_FILE)) as out:
            out.write(text.encode("utf-8"))


def stored_batch_ids(store: AnalyzerStore) -> list[str]:
    """Ids of every batch in the analyzer's store (aggregated or not), in arrival order."""
    return store.batch_ids()


def export_analyzer_store(
    task: Task,
    store: AnalyzerStore,
    location: str | Path,
    *,
    rows_per_file: int = DEFAULT_ROWS_PER_FILE,
) -> MessageDataset:
    """Write every batch stored by the analyzer as a ciphertext dataset (one batch in memory).

    The batches are exported as received (permuted ciphertexts, the shuffler's
    number of users, replayed copies included), aggregated or not, in the
    order the analyzer stored them, so a backend that aggregates the dataset
    counts what the analyzer service counts once it has aggregated them: each
    encapsulated key at most once, the first good message with it in the
    order (batch, ciphertext) (:mod:`shuffledp.backends.replays`).

    Args:
        task: The task of the store.
        store: The analyzer's store (read only).
        location: A new or empty directory.
        rows_per_file: Most rows per Parquet file.

    Raises:
        DataError: If the store holds no batch.
    """
    ids = stored_batch_ids(store)
    if not ids:
        raise DataError("the analyzer's store holds no batch: nothing to export")
    with DatasetWriter(
        location, "ciphertext", task.domain_size, task_id=task.task_id, rows_per_file=rows_per_file
    ) as writer:
        for batch_id in ids:
            batch = store.load_batch(batch_id)
            index = writer.add_batch(batch.batch_id, batch.n_users)
            writer.write(index, batch.payload)
    assert writer.dataset is not None
    return writer.dataset
