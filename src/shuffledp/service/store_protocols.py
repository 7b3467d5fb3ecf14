"""Where the shuffler and the analyzer keep their state: the interfaces (store protocols).

This module is the bottom of the store modules: it imports no implementation.
Each role needs only a handful of operations, listed by :class:`ShufflerStore`
and :class:`AnalyzerStore`. Every operation is one transaction and every write
is durable when the call returns, so a service acknowledges a request only
after its effect would survive a crash (``kill -9``, power loss with
SQLite's ``synchronous=FULL`` or PostgreSQL's ``synchronous_commit=on``).
Calls are blocking and thread-safe; the web handlers run them in a worker
thread. A store that cannot do its work (database down, disk full) raises
:class:`StoreError`, which the services answer with 503 (retry later).

One implementation of each, :mod:`shuffledp.service.sql_store`, written once
over two SQL dialects (:mod:`shuffledp.service.sql_dialect`), chosen by the
store URL in :mod:`shuffledp.service.store`
(:func:`~shuffledp.service.store.open_shuffler_store`,
:func:`~shuffledp.service.store.open_analyzer_store`):

* ``sqlite:///PATH``: :mod:`shuffledp.service.sqlite_store` (stdlib; one writer
  thread with group commit; the shuffler's waiting submissions in random
  slots, :mod:`shuffledp.service.sqlite_slots`);
* ``postgresql://…`` or ``postgres://…``: :mod:`shuffledp.service.postgres_store`
  (psycopg 3, the ``service`` extra): the same tables (``BYTEA`` for ``BLOB``,
  ``BOOLEAN`` for 0/1), a pool of connections, ``SELECT … FOR UPDATE`` where
  submissions are added or a batch is cut, waiting submissions in rows; one
  database per role and task.

What is stored, on purpose and no more. Shuffler: submission id, its
ciphertexts until the submission is batched (then only the id is kept, for
deduplication), the batch it went to; batches waiting to be forwarded;
used client ids (one submission per client), with nothing that names a
submission; a lookup of the waiting ciphertexts' replay keys, to refuse a copy
of one (:class:`CiphertextAlreadyHeldError`). No IP address, header or
timestamp anywhere. Analyzer: batches as received
(permuted ciphertexts, number of users), per-batch counts, counters, and the
replay key of every message it counted, for the task's lifetime: a copy of
a counted message, in any later batch or twice in one, is dropped
(:meth:`AnalyzerStore.record_aggregation`).

Replay keys. A message's key is its HPKE encapsulated key, the first
:data:`~shuffledp.service.wire.ENCAPSULATED_KEY_LENGTH` bytes of its
ciphertext: X25519 draws it afresh for every seal, and HPKE binds it into
the key schedule (the KEM's context is enc and the recipient's public key), so
whoever does not hold the ephemeral secret it came from cannot make another
valid ciphertext with it: a copy whose other bytes differ does not decrypt, and
a copy with another enc (even an X25519 encoding of the same point) derives
another key and does not decrypt either. Keying by enc rather than by the whole
ciphertext therefore loses nothing against copies, and also counts once the
several messages a client might seal under one enc (an honest client never
does). The tables do not link a client id to its
submission; in PostgreSQL's files the rows keep their arrival order (and a
request's client ids sit next to its submissions) before the cut and after
it (:mod:`shuffledp.service.postgres_store`); the SQLite store writes nothing
a waiting submission leaves in arrival order (:mod:`shuffledp.service.sqlite_store`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import ShuffleDPError

__all__ = [
    "AggregateTotals",
    "Aggregation",
    "AnalyzerStore",
    "BatchConflictError",
    "CiphertextAlreadyHeldError",
    "ClientAlreadySubmittedError",
    "NewSubmission",
    "OutboxBatch",
    "ReceivedBatch",
    "RecordedAggregation",
    "ShufflerStore",
    "StoreError",
    "SubmitOutcome",
]


class StoreError(ShuffleDPError):
    """The store cannot be opened or does not belong to this task."""


class ClientAlreadySubmittedError(Exception):
    """A client id in the request was already used with another submission id."""


class CiphertextAlreadyHeldError(Exception):
    """A new submission carries a ciphertext (by its replay key) that the shuffler holds already."""


class BatchConflictError(Exception):
    """A batch with the same content as a stored one arrived under another batch id."""


@dataclass(frozen=True)
class NewSubmission:
    """One user's submission as the shuffler stores it.

    Attributes:
        submission_id: The client's idempotency key (32 hex digits).
        messages: The ciphertexts, concatenated (each of fixed length); may be empty.
        client_id: The token's client id when the task allows one submission
            per client; stored apart from the submission.
    """

    submission_id: str
    messages: bytes
    client_id: str | None = None


@dataclass(frozen=True)
class SubmitOutcome:
    """What a request's submissions did.

    Attributes:
        accepted: Submissions stored now.
        duplicates: Submission ids already stored (no-ops).
        unbatched: Users waiting for a batch after this transaction.
        batch: The batch these submissions completed and the same transaction
            cut, if any.
    """

    accepted: int
    duplicates: int
    unbatched: int
    batch: OutboxBatch | None = None


@dataclass(frozen=True)
class OutboxBatch:
    """A batch the shuffler has cut: permuted ciphertexts, no submission ids.

    Attributes:
        batch_id: Random id (32 hex digits).
        payload: The permuted ciphertexts, concatenated.
        n_users: Submissions it holds.
        n_messages: Ciphertexts it holds.
    """

    batch_id: str
    payload: bytes
    n_users: int
    n_messages: int


@dataclass(frozen=True)
class ReceivedBatch:
    """A batch as the analyzer stores it.

    Attributes:
        batch_id: The shuffler's batch id.
        payload: Permuted ciphertexts, concatenated.
        n_users: Users in the batch (as the shuffler states it).
        n_messages: Ciphertexts in the payload.
        content_digest: SHA-256 of the sorted ciphertexts (order-free), to refuse
            the same messages arriving again under another batch id.
    """

    batch_id: str
    payload: bytes
    n_users: int
    n_messages: int
    content_digest: str


@dataclass(frozen=True)
class AggregateTotals:
    """The analyzer's running totals over aggregated batches.

    Attributes:
        counts: Good messages per bin (the sufficient statistic).
        n_users: Users over all aggregated batches.
        n_messages: Good messages counted.
        n_batches: Aggregated batches.
        smallest_batch_users: Users in the smallest aggregated batch (None if none).
        pending_batches: Batches stored but not yet aggregated.
    """

    counts: NDArray[np.int64]
    n_users: int
    n_messages: int
    n_batches: int
    smallest_batch_users: int | None
    pending_batches: int


@dataclass(frozen=True)
class Aggregation:
    """The result of decrypting one batch, recorded in one transaction.

    Attributes:
        batch_id: The batch.
        indices: The message index of every good message (decrypted and decoded).
        keys: Each good message's replay key (its encapsulated key), in the
            order of ``indices``; the store counts a message only if its key
            was never counted before (in another batch, or listed earlier in
            this one: the aggregator lists a batch's good messages by their
            ciphertexts' bytes).
        domain_size: Message indices of the task (the length of the counts).
        undecryptable: Messages that did not decrypt.
        undecodable: Messages that decrypted to an invalid plaintext.
    """

    batch_id: str
    indices: NDArray[np.int64]
    keys: tuple[bytes, ...]
    domain_size: int
    undecryptable: int = 0
    undecodable: int = 0

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.indices):
            raise ValueError(
                f"keys must hold one key per good message: {len(self.keys)} keys "
                f"for {len(self.indices)} messages"
            )


@dataclass(frozen=True)
class RecordedAggregation:
    """What recording an aggregation counted.

    Attributes:
        counted: Good messages counted (their keys were new).
        duplicates: Good messages dropped: copies of a message counted before,
            in an earlier batch or earlier in this one.
    """

    counted: int
    duplicates: int


class ShufflerStore(Protocol):
    """The shuffler's state (see the module docstring for what it holds)."""

    def submit(
        self,
        submissions: Sequence[NewSubmission],
        *,
        min_batch_users: int,
        permute: Callable[[bytes], bytes],
    ) -> SubmitOutcome:
        """Store new submissions in one transaction; known ids are no-ops.

        When the submissions waiting reach ``min_batch_users``, the same
        transaction cuts the batch (as :meth:`cut_batch`), so batches hold
        exactly ``min_batch_users`` users unless one request carries the
        count past it.

        Raises:
            ClientAlreadySubmittedError: If a client id was used before (or twice in the
                request) by a submission not already stored; nothing is stored.
            CiphertextAlreadyHeldError: If a submission not already stored carries a
                ciphertext whose replay key a waiting submission holds (or that
                another one of the request carries); nothing is stored.
        """
        ...

    def cut_batch(self, min_users: int, permute: Callable[[bytes], bytes]) -> OutboxBatch | None:
        """If at least ``min_users`` submissions wait, batch them all in one transaction.

        The transaction takes every unbatched submission, concatenates their
        ciphertexts, applies ``permute`` (one uniformly random permutation of
        all messages), stores the result in the outbox, and sets the
        submissions' messages to NULL. Returns the batch, or None.
        """
        ...

    def unsent_batches(self) -> list[str]:
        """Ids of batches cut but not yet acknowledged by the analyzer, oldest first."""
        ...

    def load_outbox_batch(self, batch_id: str) -> OutboxBatch:
        """Return a batch of the outbox."""
        ...

    def mark_sent(self, batch_id: str) -> None:
        """Record that the analyzer acknowledged the batch (its payload is dropped)."""
        ...

    def stats(self) -> dict[str, int]:
        """Counters derived from the stored state (submissions, batches, unsent, waiting)."""
        ...

    def ping(self) -> None:
        """Check cheaply that the store can work (readiness); raise :class:`StoreError` if not."""
        ...

    def close(self) -> None:
        """Finish pending writes and release the store."""
        ...


class AnalyzerStore(Protocol):
    """The analyzer's state (see the module docstring for what it holds)."""

    def add_batch(self, batch: ReceivedBatch) -> bool:
        """Store a batch durably; return False if its id is already stored (a no-op).

        Raises:
            BatchConflictError: If the same messages are stored under another batch id.
        """
        ...

    def unaggregated_batches(self) -> list[str]:
        """Ids of stored batches not yet aggregated."""
        ...

    def batch_ids(self) -> list[str]:
        """Ids of every stored batch, aggregated or not, in arrival order."""
        ...

    def load_batch(self, batch_id: str) -> ReceivedBatch:
        """Return a stored batch."""
        ...

    def record_aggregation(self, aggregation: Aggregation) -> RecordedAggregation | None:
        """In one transaction: keep the new replay keys, count their messages, mark the batch.

        A good message is counted only if its replay key was never counted
        (nor seen earlier in this batch); its key is then kept for the task's
        lifetime, in the same transaction as the counts, so a crash neither
        counts a copy nor loses a count. Copies are counted under the
        ``messages_duplicate`` metric.

        Returns None (and changes nothing) if the batch was aggregated already.
        """
        ...

    def add_metrics(self, deltas: Mapping[str, int]) -> None:
        """Add to persistent counters."""
        ...

    def totals(self, domain_size: int) -> AggregateTotals:
        """The running totals over aggregated batches."""
        ...

    def metrics(self) -> dict[str, int]:
        """Persistent counters plus counts derived from the stored state."""
        ...

    def ping(self) -> None:
        """Check cheaply that the store can work (readiness); raise :class:`StoreError` if not."""
        ...

    def close(self) -> None:
        """Finish pending writes and release the store."""
        ...
