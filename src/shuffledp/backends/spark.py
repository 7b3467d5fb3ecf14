"""The Spark backend: the same kernels in ``mapInArrow`` tasks, combined with a Spark aggregation.

Counting (:meth:`SparkBackend.count`) reads the dataset's Parquet files as a
DataFrame (``batch`` int, ``message`` binary) and runs
:class:`~shuffledp.backends.kernels.ChunkCounter` on every Arrow batch of every
partition, the code the local backend runs (plaintexts: on the distinct
messages of each batch with their multiplicities, counted in the JVM first,
since moving every row through Arrow to Python costs more than decoding
it). Each task emits its partial
``(batch, bin, count)`` rows, Spark sums them per (batch, bin) and the driver
combines the few resulting rows. The counts are exact int64 sums, so they equal
the local backend's bit for bit. Ciphertexts are counted each key at most once
(:mod:`shuffledp.backends.replays`): a first job groups the rows by their
key's 8-byte prefix (public bytes, no decryption) and brings the prefixes that
repeat to the driver; the counting job leaves the rows with such a prefix out
and a third job brings those rows (copies and what they copy: few) to the
driver, which decrypts them and counts each key once. No decrypted value
leaves an executor but as a count.

The analyzer's private key reaches the executors as a broadcast variable
(32 bytes), read inside the task and destroyed (on the driver and every
executor) when the job ends; it is never part of a closure, a DataFrame, a
file the job writes or the shared storage. ``docs/scaling.md`` lists the Spark
settings (RPC authentication and encryption, encrypted local disks) that keep
it off the network and disks in clear.

Shuffles. A simulation (:meth:`SparkBackend.simulate`) generates each task's
messages on the executors (one :class:`~numpy.random.SeedSequence` child per
task) and shuffles them by their keys: hash-partitioned on the key, then
sorted by the key within each partition. The resulting order is the order of
(partition of the key, key), an injective function of i.i.d. uniform keys, so
it is a uniformly random permutation whenever the keys are distinct, without
the extra sampling pass a global range sort needs. The batch permutation
(:meth:`SparkBackend.permute`) does the same with 128-bit keys from ChaCha20
keyed by a fresh 256-bit secret (``secrets``) that is broadcast for the job
and destroyed after it: a CSPRNG whose output Spark reproduces exactly if it
has to run a task again, so no message is lost or duplicated by a retry.
"""

from __future__ import annotations

import functools
import os
import secrets
import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from shuffledp._optional import require
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.backends.counts import (
    BinTriples,
    MessageCounts,
    code_width,
    combine_triples,
    count_bins,
)
from shuffledp.backends.dataset import (
    DatasetBatch,
    MessageDataset,
    _resolve,
    open_dataset,
    write_metadata,
)
from shuffledp.backends.kernels import (
    ChunkCounter,
    MessageKind,
    candidate_rows,
    ciphertext_prefixes,
)
from shuffledp.backends.simulation import SimulationPlan

# pyspark 4.x warns on every job that it does not fully support pandas 3; the
# backend uses Arrow batches only (mapInArrow), never pandas, so the warning
# says nothing about this code and would only bury the command's own output.
warnings.filterwarnings(
    "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkBackend", "spark_session"]

_TRIPLES_SCHEMA = "batch INT, bin INT, count LONG"
_COMBINE_EVERY = 64


def spark_session(
    master: str | None = None,
    app_name: str = "shuffledp",
    config: Mapping[str, str] | None = None,
) -> tuple[Any, bool]:
    """Return (session, created): the active Spark session, or a new one.

    An active session is returned as it is (``master`` and ``config`` then do
    not apply). Classic Spark is needed, not Spark Connect: the key travels as
    a broadcast variable. For a local master (or none, outside ``spark-submit``) the Python workers
    run this interpreter (``PYSPARK_PYTHON``, unless already set), so they see
    the same installed packages.

    Args:
        master: The master URL of a new session.
        app_name: Its application name.
        config: Spark settings of a new session (``{"spark.ui.enabled": "false"}``).

    Raises:
        MissingExtraError: If pyspark is not installed (the ``spark`` extra).
    """
    require("pyspark", extra="spark")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    if (master is None and not submitted) or (master or "").startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for name, value in (config or {}).items():
        builder = builder.config(name, value)
    return builder.getOrCreate(), True


def _triples_batch(triples: BinTriples) -> Any:
    return pa.RecordBatch.from_arrays(
        [
            pa.array(triples.batch.astype(np.int32)),
            pa.array(triples.bin.astype(np.int32)),
            pa.array(triples.count.astype(np.int64)),
        ],
        names=["batch", "bin", "count"],
    )


def _count_partition(
    kind: MessageKind,
    domain_size: int,
    task_id: str | None,
    key: Any,
    repeated: Any,
    batches: Iterator[Any],
) -> Iterator[Any]:
    """Executor side of :meth:`SparkBackend.count`: one partition's partial counts."""
    counter = ChunkCounter(
        kind,
        domain_size,
        task_id=task_id,
        private_key=None if key is None else key.value,
        repeated=None if repeated is None else repeated.value,
    )
    width = code_width(domain_size)
    parts: list[BinTriples] = []
    for batch in batches:
        parts.append(counter.count_record_batch(batch))
        if len(parts) >= _COMBINE_EVERY:
            parts = [combine_triples(parts, width)]
    combined = combine_triples(parts, width)
    if len(combined):
        yield _triples_batch(combined)


def _prefix_partition(batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side of :meth:`SparkBackend.count`: every ciphertext's key prefix."""
    for batch in batches:
        prefixes = ciphertext_prefixes(batch.column("message"))
        if prefixes.size:
            yield pa.RecordBatch.from_arrays([pa.array(prefixes)], names=["prefix"])


def _candidate_partition(repeated: Any, batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side of :meth:`SparkBackend.count`: the rows whose key prefix repeats."""
    from shuffledp.backends.kernels import binary_array

    for batch in batches:
        codes, rows = candidate_rows(batch, repeated.value)
        if codes.size:
            yield pa.RecordBatch.from_arrays(
                [pa.array(codes.astype(np.int32)), binary_array(rows)], names=["batch", "message"]
            )


def _generate_partition(plan: SimulationPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side of :meth:`SparkBackend.simulate`: the messages of the tasks listed."""
    for batch in batches:
        for task in batch.column(0).to_numpy(zero_copy_only=False):
            for replicate, keys, bins in plan.generate(int(task)):
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.full(bins.size, replicate, dtype=np.int32)),
                        pa.array(keys.view(np.int64)),
                        pa.array(bins.astype(np.int32)),
                    ],
                    names=["batch", "key", "bin"],
                )


def _count_bins_partition(width: int, batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side of :meth:`SparkBackend.simulate`: count the shuffled messages."""
    parts: list[BinTriples] = []
    for batch in batches:
        codes = batch.column("batch").to_numpy(zero_copy_only=False)
        bins = batch.column("bin").to_numpy(zero_copy_only=False)
        parts.append(count_bins(codes, bins, width))
        if len(parts) >= _COMBINE_EVERY:
            parts = [combine_triples(parts, width)]
    combined = combine_triples(parts, width)
    if len(combined):
        yield _triples_batch(combined)


def _key_partition(secret: Any, batches: Iterator[Any]) -> Iterator[Any]:
    """Executor side of :meth:`SparkBackend.permute`: two 64-bit CSPRNG keys per row.

    The keys are ChaCha20's keystream under the job's secret, with a nonce
    naming the input partition: the same rows get the same keys if Spark
    recomputes the partition.
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = 0 if context is None else context.partitionId()
    nonce = bytes(4) + partition.to_bytes(8, "little") + bytes(4)
    stream = Cipher(algorithms.ChaCha20(secret.value, nonce), mode=None).encryptor()
    for batch in batches:
        m = batch.num_rows
        keys = np.frombuffer(stream.update(bytes(16 * m)), dtype=np.int64).reshape(m, 2)
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("batch"),
                batch.column("message"),
                pa.array(keys[:, 0]),
                pa.array(keys[:, 1]),
            ],
            names=["batch", "message", "k1", "k2"],
        )


class SparkBackend:
    """Runs the backend steps on Spark (see the module docstring).

    Args:
        spark: A session to use (left running by :meth:`close`); by default the
            active session, or a new one for ``master``.
        master: The master URL for a new session (``local[2]``, ``spark://…``,
            ``yarn``, ``k8s://…``); by default ``spark-submit``'s, or local.
        config: Spark settings of a new session.

    Raises:
        MissingExtraError: If pyspark is not installed.
    """

    name = "spark"

    def __init__(
        self,
        spark: SparkSession | None = None,
        *,
        master: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        if spark is None:
            self.spark, self._owned = spark_session(master, config=config)
        else:
            self.spark, self._owned = spark, False

    @property
    def parallelism(self) -> int:
        """Cores Spark runs tasks on (``defaultParallelism``)."""
        return int(self.spark.sparkContext.defaultParallelism)

    def _read(self, dataset: MessageDataset) -> DataFrame:
        frame: DataFrame = self.spark.read.schema("batch INT, message BINARY").parquet(
            *dataset.file_uris()
        )
        return frame

    def _collect(self, frame: DataFrame, domain_size: int, n_batches: int) -> MessageCounts:
        summed = frame.groupBy("batch", "bin").sum("count").toDF("batch", "bin", "count")
        if hasattr(summed, "toArrow"):
            table = summed.toArrow()
            columns = [
                table.column(c).to_numpy().astype(np.int64) for c in ("batch", "bin", "count")
            ]
        else:  # pragma: no cover - pyspark < 4
            rows = summed.collect()
            columns = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
        return MessageCounts.from_parts([BinTriples(*columns)], domain_size, n_batches)

    def _repeated_prefixes(self, frame: DataFrame) -> Any:
        """The key prefixes that occur more than once (sorted int64), grouped by Spark."""
        repeated = (
            frame.mapInArrow(_prefix_partition, "prefix LONG")
            .groupBy("prefix")
            .count()
            .where("count > 1")
            .select("prefix")
        )
        if hasattr(repeated, "toArrow"):
            values = repeated.toArrow().column("prefix").to_numpy()
        else:  # pragma: no cover - pyspark < 4
            values = np.array([row[0] for row in repeated.collect()], dtype=np.int64)
        return np.unique(np.asarray(values, dtype=np.int64))

    def _candidates(self, frame: DataFrame, repeated: Any) -> tuple[Any, Any]:
        """The rows whose key prefix repeats: (batch indices, ``(m, 53)`` bytes) on the driver."""
        from shuffledp.backends.kernels import CIPHERTEXT_LENGTH, fixed_width_rows

        rows = frame.mapInArrow(
            functools.partial(_candidate_partition, repeated), "batch INT, message BINARY"
        )
        if hasattr(rows, "toArrow"):
            table = rows.toArrow()
            codes = table.column("batch").to_numpy().astype(np.int64)
            matrix, _ = fixed_width_rows(table.column("message"), CIPHERTEXT_LENGTH)
        else:  # pragma: no cover - pyspark < 4
            collected = rows.collect()
            codes = np.array([r[0] for r in collected], dtype=np.int64)
            matrix = np.frombuffer(b"".join(bytes(r[1]) for r in collected), dtype=np.uint8)
            matrix = matrix.reshape(-1, CIPHERTEXT_LENGTH)
        return codes, matrix

    def count(self, dataset: MessageDataset, *, private_key: bytes | None = None) -> MessageCounts:
        """See :meth:`shuffledp.backends.base.Backend.count`.

        Plaintexts are first grouped by (batch, message) in the JVM (a valid
        plaintext is one of d byte strings), and the distinct messages decoded
        by the kernel with their multiplicities: Arrow and Python then see
        B·d rows, not every message. A ciphertext dataset read into fewer
        partitions than Spark has cores is spread over them first (decryption
        dominates the cost); its keys are counted at most once each (see the
        module docstring).
        """
        d, n_batches = dataset.domain_size, len(dataset.batches)
        ciphertexts = dataset.kind == "ciphertext"
        if ciphertexts and private_key is None:
            raise InvalidParameterError("counting ciphertexts needs the analyzer's private key")
        if not dataset.files:
            return MessageCounts.from_parts([], d, n_batches)
        key = repeated = None
        context = self.spark.sparkContext
        try:
            frame = self._read(dataset)
            parts: list[BinTriples] = []
            if dataset.kind == "plaintext":
                # At most d valid plaintexts exist: count equal messages in the JVM first.
                frame = frame.groupBy("batch", "message").count()
            else:
                assert private_key is not None
                prefixes = self._repeated_prefixes(frame)
                if prefixes.size:
                    repeated = context.broadcast(prefixes)
                    codes, rows = self._candidates(frame, repeated)
                    driver = ChunkCounter(
                        "ciphertext", d, task_id=dataset.task_id, private_key=bytes(private_key)
                    )
                    parts.append(driver.count_candidates(codes, rows))
                key = context.broadcast(bytes(private_key))
                if frame.rdd.getNumPartitions() < self.parallelism:
                    frame = frame.repartition(self.parallelism)
            task = functools.partial(
                _count_partition, dataset.kind, d, dataset.task_id, key, repeated
            )
            counted = self._collect(frame.mapInArrow(task, _TRIPLES_SCHEMA), d, n_batches)
            return MessageCounts.from_parts([counted.triples, *parts], d, n_batches)
        finally:
            for variable in (key, repeated):
                if variable is not None:
                    variable.destroy()

    def simulate(self, plan: SimulationPlan) -> MessageCounts:
        """See :meth:`shuffledp.backends.base.Backend.simulate`."""
        slices = max(1, min(plan.tasks, 4 * self.parallelism))
        tasks = self.spark.range(0, plan.tasks, 1, numPartitions=slices)
        messages = tasks.mapInArrow(
            functools.partial(_generate_partition, plan), "batch INT, key LONG, bin INT"
        )
        shuffled = messages.repartition(
            plan.shuffle_partitions(self.parallelism), "key"
        ).sortWithinPartitions("key")
        counted = shuffled.mapInArrow(
            functools.partial(_count_bins_partition, code_width(plan.domain_size)),
            _TRIPLES_SCHEMA,
        )
        return self._collect(counted, plan.domain_size, plan.replicates)

    def permute(self, dataset: MessageDataset, location: str) -> MessageDataset:
        """See :meth:`shuffledp.backends.base.Backend.permute`.

        Every row gets a 128-bit key (ChaCha20 under a per-job secret, see the
        module docstring); rows are hash-partitioned on the key and sorted by
        it within each partition, and written as Parquet (one file per
        partition: the file order, then the row order, is the permuted order).
        Rows of all batches are permuted together; each batch's rows end up in
        uniformly random relative order. Two equal keys, which have
        probability at most m²/2¹²⁹ for m messages, would keep those two rows'
        input order.

        Raises:
            InvalidParameterError: If ``location`` exists and is not empty.
            MissingExtraError: If ``cryptography`` (the ``service`` extra) is missing.
        """
        require("cryptography", extra="service")
        fs, base, uri = _resolve(location)
        import pyarrow.fs as pafs

        info = fs.get_file_info(base)
        if info.type == pafs.FileType.File or (
            info.type == pafs.FileType.Directory and fs.get_file_info(pafs.FileSelector(base))
        ):
            raise InvalidParameterError(f"{location!r} exists and is not empty")
        if not dataset.files:
            raise DataError(f"{dataset.location!r} holds no messages to permute")
        secret = self.spark.sparkContext.broadcast(secrets.token_bytes(32))
        try:
            keyed = self._read(dataset).mapInArrow(
                functools.partial(_key_partition, secret),
                "batch INT, message BINARY, k1 LONG, k2 LONG",
            )
            partitions = max(
                self.parallelism,
                -(-dataset.n_messages * dataset.message_bytes // (128 * 1024 * 1024)),
            )
            (
                keyed.repartition(partitions, "k1", "k2")
                .sortWithinPartitions("k1", "k2")
                .select("batch", "message")
                .write.option("compression", "none")
                .parquet(uri)
            )
        finally:
            secret.destroy()
        files = sorted(
            info.base_name
            for info in fs.get_file_info(pafs.FileSelector(base))
            if info.base_name.endswith(".parquet") and not info.base_name.startswith(("_", "."))
        )
        result = MessageDataset(
            str(location),
            dataset.kind,
            dataset.domain_size,
            dataset.task_id,
            tuple(DatasetBatch(b.batch_id, b.n_users, b.n_messages) for b in dataset.batches),
            tuple(files),
        )
        write_metadata(result)
        return open_dataset(location)

    def close(self) -> None:
        """Stop the session if this backend created it."""
        if self._owned:
            self.spark.stop()
            self._owned = False
