"""The analyzer's aggregation on a backend: a task's exported batches -> the service's totals.

:func:`aggregate_dataset` checks a ciphertext dataset against the task (the
same refusals the analyzer service applies when a batch arrives: its task, at
least ``min_batch_users`` users per batch, no more messages than that many
users can send), has a backend decrypt and count the messages, each HPKE
encapsulated key at most once over the whole dataset as the service does
(:mod:`shuffledp.backends.replays`: a replayed copy is not counted), checks
that every batch's rows were all read, and returns the
:class:`~shuffledp.service.store_protocols.AggregateTotals` that
:func:`shuffledp.service.release.build_release` turns into the release, the
same JSON ``shuffledp analyzer publish`` writes for the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from shuffledp._validation import DataError
from shuffledp.backends.counts import MessageCounts
from shuffledp.backends.dataset import MessageDataset

if TYPE_CHECKING:
    from shuffledp.backends.base import Backend
    from shuffledp.service.store_protocols import AggregateTotals
    from shuffledp.service.task import Task

__all__ = ["AggregationResult", "aggregate_dataset", "check_dataset"]


@dataclass(frozen=True)
class AggregationResult:
    """What aggregating a dataset gives.

    Attributes:
        totals: The analyzer's totals over every batch (the release's input).
        counts: Per batch and bin, with the messages that did not decrypt or
            decode and the copies not counted.
    """

    totals: AggregateTotals
    counts: MessageCounts


def check_dataset(task: Task, dataset: MessageDataset) -> None:
    """Refuse a dataset the analyzer service would not have aggregated for this task.

    Raises:
        DataError: If it is not ciphertexts of this task over its domain, holds
            no batch, a batch has fewer than ``min_batch_users`` users, or a
            batch has more messages than its users can send (k-RR: other than
            one per user).
    """
    where = f"dataset {dataset.location!r}"
    if dataset.kind != "ciphertext":
        raise DataError(f"{where} holds {dataset.kind}s; the analyzer aggregates ciphertexts")
    if dataset.task_id != task.task_id:
        raise DataError(f"{where} is for task {dataset.task_id}, not {task.task_id}")
    if dataset.domain_size != task.domain_size:
        raise DataError(f"{where} has {dataset.domain_size} bins, the task {task.domain_size}")
    if not dataset.batches:
        raise DataError(
            f"{where} holds no batch: nothing is published until a batch of at least "
            f"{task.min_batch_users} users has arrived"
        )
    for batch in dataset.batches:
        if batch.n_users < task.min_batch_users:
            raise DataError(
                f"batch {batch.batch_id} has {batch.n_users} users, fewer than the task's "
                f"min_batch_users={task.min_batch_users}: its guarantee is not certified, "
                "refusing to aggregate"
            )
        if not (
            batch.n_users * task.spec.fewest_messages_per_user()
            <= batch.n_messages
            <= batch.n_users * task.max_messages_per_submission
        ):
            raise DataError(
                f"batch {batch.batch_id}: {batch.n_messages} messages cannot come from "
                f"{batch.n_users} users"
            )


def aggregate_dataset(
    task: Task, dataset: MessageDataset, backend: Backend, private_key: bytes
) -> AggregationResult:
    """Decrypt and count a task's exported batches on ``backend``; return the totals.

    Args:
        task: The task.
        dataset: Its batches (:func:`~shuffledp.backends.dataset.export_analyzer_store`).
        backend: Where to decrypt and count.
        private_key: The analyzer's raw 32-byte X25519 private key.

    Raises:
        DataError: See :func:`check_dataset`; also if the files do not hold
            exactly the messages the metadata lists for each batch.
    """
    from shuffledp.service.store_protocols import AggregateTotals

    check_dataset(task, dataset)
    counts = backend.count(dataset, private_key=private_key)
    read = counts.messages_per_batch
    for index, batch in enumerate(dataset.batches):
        if int(read[index]) != batch.n_messages:
            raise DataError(
                f"batch {batch.batch_id}: the files hold {int(read[index])} messages, the "
                f"metadata lists {batch.n_messages} (a missing or extra file?)"
            )
    good = counts.counts
    totals = AggregateTotals(
        counts=good,
        n_users=dataset.n_users,
        n_messages=int(good.sum()),
        n_batches=len(dataset.batches),
        smallest_batch_users=dataset.smallest_batch_users,
        pending_batches=0,
    )
    return AggregationResult(totals, counts)
