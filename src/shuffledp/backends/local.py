"""The local backend: pyarrow and numpy in one process, streaming in chunks with bounded memory.

Counting reads the dataset's Parquet files row group by row group
(``chunk_rows`` rows at a time), runs :class:`~shuffledp.backends.kernels.ChunkCounter`
on each chunk and keeps only the combined counts. Decryption is one HPKE open
per message in the service's own loop (about 10k messages per core-second);
this backend uses one core. Ciphertexts are read twice: first every key's
8-byte prefix, sorted in memory (8 bytes per message, the one part of the
memory that grows with the dataset) to find the keys that may repeat, then to
count, each key at most once (:mod:`shuffledp.backends.replays`).

A simulation generates the plan's tasks one after another, gives every
message its shuffle key and shuffles by sorting on the keys: in memory when
the expected messages fit in one bucket, otherwise by spilling each task's
messages to ``2^b`` temporary buckets by the keys' top bits and sorting one
bucket at a time (a bucket sort: the order is the keys' order either way).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from shuffledp._progress import progress, progress_bar
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.backends.counts import (
    BinTriples,
    MessageCounts,
    code_width,
    combine_triples,
    count_bins,
)
from shuffledp.backends.dataset import DatasetWriter, MessageDataset
from shuffledp.backends.kernels import (
    ChunkCounter,
    candidate_rows,
    ciphertext_prefixes,
    fixed_width_rows,
)
from shuffledp.backends.replays import repeated_prefixes
from shuffledp.backends.simulation import SimulationPlan

__all__ = ["LocalBackend"]

#: Partial results kept before they are combined into one.
_COMBINE_EVERY = 64


class LocalBackend:
    """Runs the backend steps in this process (see the module docstring).

    Args:
        chunk_rows: Rows read and counted per step.
        bucket_messages: Messages per in-memory bucket of a simulation's shuffle
            (about 24 bytes each while sorting).
        show_progress: Progress bars on a terminal.
    """

    name = "local"

    def __init__(
        self,
        *,
        chunk_rows: int = 1 << 18,
        bucket_messages: int = 1 << 22,
        show_progress: bool = True,
    ) -> None:
        self.chunk_rows = check_int(chunk_rows, "chunk_rows", minimum=1)
        self.bucket_messages = check_int(bucket_messages, "bucket_messages", minimum=1)
        self.show_progress = show_progress

    def count(self, dataset: MessageDataset, *, private_key: bytes | None = None) -> MessageCounts:
        """See :meth:`shuffledp.backends.base.Backend.count`."""
        d = dataset.domain_size
        ciphertexts = dataset.kind == "ciphertext"
        if ciphertexts and private_key is None:
            raise InvalidParameterError("counting ciphertexts needs the analyzer's private key")
        repeated = self._repeated_prefixes(dataset) if ciphertexts else None
        counter = ChunkCounter(
            dataset.kind,
            d,
            task_id=dataset.task_id,
            private_key=private_key if ciphertexts else None,
            repeated=repeated,
        )
        parts: list[BinTriples] = []
        candidates: list[tuple[NDArray[np.int64], NDArray[np.uint8]]] = []
        with progress_bar(
            total=dataset.n_messages, desc="counting", unit="messages", enabled=self.show_progress
        ) as bar:
            for chunk in dataset.iter_record_batches(self.chunk_rows):
                parts.append(counter.count_record_batch(chunk))
                if repeated is not None and repeated.size:
                    candidates.append(candidate_rows(chunk, repeated))
                bar.update(chunk.num_rows)
                if len(parts) >= _COMBINE_EVERY:
                    parts = [combine_triples(parts, code_width(d))]
        if candidates:
            parts.append(
                counter.count_candidates(
                    np.concatenate([c for c, _ in candidates]),
                    np.concatenate([r for _, r in candidates]),
                )
            )
        return MessageCounts.from_parts(parts, d, len(dataset.batches))

    def _repeated_prefixes(self, dataset: MessageDataset) -> NDArray[np.int64]:
        """The key prefixes that occur more than once in a ciphertext dataset (a first pass)."""
        prefixes = [
            ciphertext_prefixes(chunk.column("message"))
            for chunk in dataset.iter_record_batches(self.chunk_rows, columns=["message"])
        ]
        if not prefixes:
            return np.empty(0, dtype=np.int64)
        return repeated_prefixes(np.concatenate(prefixes))

    def simulate(self, plan: SimulationPlan) -> MessageCounts:
        """See :meth:`shuffledp.backends.base.Backend.simulate`."""
        ratio = plan.expected_messages / self.bucket_messages
        bits = 0 if ratio <= 1 else min(16, math.ceil(math.log2(ratio)))
        if bits == 0:
            return self._simulate_in_memory(plan)
        with tempfile.TemporaryDirectory(prefix="shuffledp-sim-") as tmp:
            return self._simulate_spilled(plan, bits, Path(tmp))

    def _tasks(self, plan: SimulationPlan) -> Iterable[int]:
        tasks = range(plan.tasks)
        if not self.show_progress:
            return tasks
        return progress(tasks, total=plan.tasks, desc="simulating", delay=1.0)

    def _simulate_in_memory(self, plan: SimulationPlan) -> MessageCounts:
        batches, keys, bins = [], [], []
        for task in self._tasks(plan):
            for replicate, k, b in plan.generate(task):
                batches.append(np.full(b.size, replicate, dtype=np.int64))
                keys.append(k)
                bins.append(b)
        return MessageCounts.from_parts(
            [
                _sort_and_count(
                    np.concatenate(batches), np.concatenate(keys), np.concatenate(bins), plan
                )
            ],
            plan.domain_size,
            plan.replicates,
        )

    def _simulate_spilled(self, plan: SimulationPlan, bits: int, tmp: Path) -> MessageCounts:
        buckets = 1 << bits
        written = 0
        for task in self._tasks(plan):
            for replicate, keys, bins in plan.generate(task):
                bucket = (keys >> np.uint64(64 - bits)).astype(np.int64)
                order = np.argsort(bucket, kind="stable")
                edges = np.searchsorted(bucket[order], np.arange(buckets + 1))
                for b in range(buckets):
                    rows = order[edges[b] : edges[b + 1]]
                    if rows.size:
                        block = np.stack(
                            [
                                np.full(rows.size, replicate, dtype=np.int64),
                                keys[rows].view(np.int64),
                                bins[rows],
                            ]
                        )
                        np.save(tmp / f"{b:05d}-{written:08d}.npy", block)
                written += 1
        parts = []
        for b in range(buckets):
            blocks = [np.load(path) for path in sorted(tmp.glob(f"{b:05d}-*.npy"))]
            if blocks:
                block = np.concatenate(blocks, axis=1)
                parts.append(_sort_and_count(block[0], block[1].view(np.uint64), block[2], plan))
        return MessageCounts.from_parts(parts, plan.domain_size, plan.replicates)

    def permute(self, dataset: MessageDataset, location: str) -> MessageDataset:
        """See :meth:`shuffledp.backends.base.Backend.permute`.

        Holds the whole dataset in memory; each batch gets one permutation from
        :func:`~shuffledp.shuffler.uniform.secure_permutation` (OS CSPRNG keys,
        sorted), as the shuffler service applies to a batch.

        Raises:
            DataError: If a row is not a message of the dataset's length.
        """
        from shuffledp.shuffler.uniform import secure_permutation

        codes_parts: list[NDArray[np.int64]] = []
        rows_parts: list[NDArray[np.uint8]] = []
        for chunk in dataset.iter_record_batches(self.chunk_rows):
            rows, good = fixed_width_rows(chunk.column("message"), dataset.message_bytes)
            if not good.all():
                raise DataError(
                    f"a row of {dataset.location!r} is not a {dataset.message_bytes}-byte message"
                )
            codes_parts.append(chunk.column("batch").to_numpy(zero_copy_only=False))
            rows_parts.append(rows)
        width = dataset.message_bytes
        codes = np.concatenate(codes_parts) if codes_parts else np.empty(0, dtype=np.int64)
        rows = np.concatenate(rows_parts) if rows_parts else np.empty((0, width), np.uint8)
        if codes.size and (int(codes.min()) < 0 or int(codes.max()) >= len(dataset.batches)):
            raise DataError(f"a row of {dataset.location!r} names a batch that is not listed")
        order = np.argsort(codes, kind="stable")
        edges = np.searchsorted(codes[order], np.arange(len(dataset.batches) + 1))
        with DatasetWriter(
            location, dataset.kind, dataset.domain_size, task_id=dataset.task_id
        ) as writer:
            for i, batch in enumerate(dataset.batches):
                index = writer.add_batch(batch.batch_id, batch.n_users)
                mine = rows[order[edges[i] : edges[i + 1]]]
                writer.write(index, mine[secure_permutation(mine.shape[0])])
        assert writer.dataset is not None
        return writer.dataset

    def close(self) -> None:
        """Nothing to release."""


def _sort_and_count(
    batch: NDArray[np.int64],
    keys: NDArray[np.uint64],
    bins: NDArray[np.int64],
    plan: SimulationPlan,
) -> BinTriples:
    """Shuffle (sort by key) and count per (replicate, bin)."""
    order = np.argsort(keys, kind="stable")
    return count_bins(batch[order], bins[order], code_width(plan.domain_size))
