"""The per-chunk work every backend runs: rows of a message dataset -> counts per (batch, bin).

The same functions run in the local backend's loop and inside Spark's
``mapInArrow`` tasks, so both backends decode, decrypt and count with one
code path and return the same counts.

Messages are the wire format of :mod:`shuffledp.service.wire`:

* plaintexts: 5 bytes, ``version (= 1) | index (uint32, big-endian)``; decoded
  here with numpy, all rows at once (:func:`decode_plaintexts`);
* ciphertexts: :data:`~shuffledp.service.wire.CIPHERTEXT_LENGTH` bytes, opened
  one by one with HPKE by :meth:`~shuffledp.service.wire.MessageOpener.open_payload`
  (the service's own loop: about 10k messages per core-second).

Nothing here raises on message content: a row of the wrong length, a null, a
ciphertext that does not decrypt and a plaintext that does not decode are
counted under the failure codes of :mod:`shuffledp.backends.counts`.

Copies. A ciphertext counter given the dataset's repeated key prefixes
(:mod:`shuffledp.backends.replays`) leaves out every row whose key may occur
twice; the driver decrypts those and counts each key at most once
(:meth:`ChunkCounter.count_candidates`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.typing import NDArray

from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.backends.counts import (
    BinTriples,
    code_width,
    count_bins,
    undecodable_code,
    undecryptable_code,
)
from shuffledp.backends.replays import candidate_mask, count_candidates, key_prefixes

if TYPE_CHECKING:
    from shuffledp.service.wire import MessageOpener

__all__ = [
    "PLAINTEXT_LENGTH",
    "PLAINTEXT_VERSION",
    "ChunkCounter",
    "MessageKind",
    "binary_array",
    "candidate_rows",
    "ciphertext_prefixes",
    "decode_plaintexts",
    "encode_plaintexts",
    "fixed_width_rows",
]

#: ``"ciphertext"``: HPKE-sealed messages of one task; ``"plaintext"``: wire plaintexts.
MessageKind = Literal["ciphertext", "plaintext"]

#: Version byte of a plaintext (= :data:`shuffledp.service.wire.WIRE_VERSION`; a test
#: checks they agree). Kept here so that plaintext datasets need no ``cryptography``.
PLAINTEXT_VERSION = 1
#: Bytes of one plaintext (= :data:`shuffledp.service.wire.PLAINTEXT_LENGTH`).
PLAINTEXT_LENGTH = 5
#: Bytes of one ciphertext (= :data:`shuffledp.service.wire.CIPHERTEXT_LENGTH`).
CIPHERTEXT_LENGTH = 53


def encode_plaintexts(bins: NDArray[np.integer], domain_size: int) -> NDArray[np.uint8]:
    """Return the 5-byte plaintexts of messages carrying ``bins``, as an ``(m, 5)`` matrix.

    The vectorized form of :func:`shuffledp.service.wire.encode_plaintext`.

    Raises:
        DataError: If a bin is outside ``[0, domain_size)``.
    """
    values = np.asarray(bins)
    if values.size and (int(values.min()) < 0 or int(values.max()) >= domain_size):
        raise DataError(f"a message index is outside the domain [0, {domain_size})")
    rows = np.empty((values.size, PLAINTEXT_LENGTH), dtype=np.uint8)
    rows[:, 0] = PLAINTEXT_VERSION
    rows[:, 1:] = values.astype(">u4").view(np.uint8).reshape(-1, 4)
    return rows


def decode_plaintexts(rows: NDArray[np.uint8], domain_size: int) -> NDArray[np.int64]:
    """Return the bin each 5-byte plaintext carries, or the undecodable code ``d + 1``.

    The vectorized form of :func:`shuffledp.service.wire.decode_plaintext`: a
    row decodes if its version byte is 1 and its index is below ``domain_size``.

    Args:
        rows: ``(m, 5)`` plaintexts.
        domain_size: d.
    """
    rows = np.asarray(rows, dtype=np.uint8)
    if rows.ndim != 2 or rows.shape[1] != PLAINTEXT_LENGTH:
        raise InvalidParameterError(f"rows must be (m, {PLAINTEXT_LENGTH}), got {rows.shape}")
    index = np.ascontiguousarray(rows[:, 1:]).view(">u4").reshape(-1).astype(np.int64)
    ok = (rows[:, 0] == PLAINTEXT_VERSION) & (index < domain_size)
    return np.where(ok, index, undecodable_code(domain_size))


def binary_array(rows: NDArray[np.uint8]) -> Any:
    """Return an ``(m, w)`` byte matrix as a pyarrow binary array of m values (no copy of data)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    m, width = rows.shape
    large = m * width >= 2**31
    offsets = np.arange(m + 1, dtype=np.int64 if large else np.int32) * width
    kind = pa.large_binary() if large else pa.binary()
    return pa.Array.from_buffers(kind, m, [None, pa.py_buffer(offsets), pa.py_buffer(rows)])


def fixed_width_rows(messages: Any, width: int) -> tuple[NDArray[np.uint8], NDArray[np.bool_]]:
    """Return the values of exactly ``width`` bytes as an ``(k, width)`` matrix, and which they are.

    Reads the Arrow buffers directly (binary, large binary or fixed-size
    binary arrays, sliced or not); nulls and values of another length are left
    out and marked ``False`` in the mask.

    Args:
        messages: A pyarrow binary-like array (or chunked array).
        width: The expected length.

    Raises:
        DataError: If ``messages`` is not binary.
    """
    arr = messages.combine_chunks() if isinstance(messages, pa.ChunkedArray) else messages
    kind = arr.type
    fixed = pa.types.is_fixed_size_binary(kind)
    if not (fixed or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        raise DataError(f"the message column must be binary, got {kind}")
    lengths = pc.binary_length(arr).fill_null(-1).to_numpy(zero_copy_only=False)
    good = np.asarray(lengths == width, dtype=bool)
    if not good.all():
        arr = arr.filter(pa.array(good))
    k = len(arr)
    if k == 0:
        return np.empty((0, width), dtype=np.uint8), good
    buffers = arr.buffers()
    if fixed:
        start = arr.offset * width
        data = np.frombuffer(buffers[1], dtype=np.uint8)[start : start + k * width]
    else:
        dtype = np.int64 if pa.types.is_large_binary(kind) else np.int32
        itemsize = np.dtype(dtype).itemsize
        offsets = np.frombuffer(buffers[1], dtype=dtype, count=k + 1, offset=arr.offset * itemsize)
        data = np.frombuffer(buffers[2], dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]
    return data.reshape(k, width), good


def ciphertext_prefixes(messages: Any) -> NDArray[np.int64]:
    """The key prefix of every ciphertext-length value of a binary array (others are skipped)."""
    rows, _ = fixed_width_rows(messages, CIPHERTEXT_LENGTH)
    return key_prefixes(rows)


def candidate_rows(
    record_batch: Any, repeated: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.uint8]]:
    """The rows of a record batch (``batch``, ``message``) whose key prefix is in ``repeated``.

    Returns their batch indices and their ``(m, CIPHERTEXT_LENGTH)`` bytes: what a
    :class:`ChunkCounter` given ``repeated`` leaves out. Rows of another length
    are never candidates (they cannot decrypt; the counter counts them).
    """
    codes = np.asarray(record_batch.column("batch").to_numpy(zero_copy_only=False), np.int64)
    rows, good = fixed_width_rows(record_batch.column("message"), CIPHERTEXT_LENGTH)
    mine = candidate_mask(rows, np.asarray(repeated, dtype=np.int64))
    return codes[good][mine], rows[mine]


class ChunkCounter:
    """Counts one chunk of a message dataset: decrypt (ciphertexts), decode, count per bin.

    Args:
        kind: ``"ciphertext"`` or ``"plaintext"``.
        domain_size: d; a message must carry an index below it.
        task_id: The task bound into the ciphertexts (ciphertexts only).
        private_key: The analyzer's raw 32-byte X25519 private key (ciphertexts only).
        repeated: Ciphertexts only: the dataset's repeated key prefixes (sorted,
            :func:`~shuffledp.backends.replays.repeated_prefixes`); rows with one
            are left out, for :meth:`count_candidates`. ``None``: count every
            row (only right when no key repeats).

    Raises:
        InvalidParameterError: If a ciphertext counter lacks the task or the key.
    """

    def __init__(
        self,
        kind: MessageKind,
        domain_size: int,
        *,
        task_id: str | None = None,
        private_key: bytes | None = None,
        repeated: NDArray[np.int64] | None = None,
    ) -> None:
        self.kind = kind
        self.domain_size = check_int(domain_size, "domain_size", minimum=1)
        self.width = code_width(self.domain_size)
        self._repeated = None if repeated is None else np.asarray(repeated, dtype=np.int64)
        self._opener: MessageOpener | None = None
        if kind == "ciphertext":
            if task_id is None or private_key is None:
                raise InvalidParameterError("counting ciphertexts needs the task id and the key")
            from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

            from shuffledp.service.wire import MessageOpener

            key = X25519PrivateKey.from_private_bytes(bytes(private_key))
            self._opener = MessageOpener(key, task_id, self.domain_size)
        elif kind != "plaintext":
            raise InvalidParameterError(f"kind must be 'ciphertext' or 'plaintext', got {kind!r}")

    def count_record_batch(self, batch: Any) -> BinTriples:
        """Count a pyarrow record batch (or table) with columns ``batch`` and ``message``.

        A ``count`` column, when present, says how many identical messages
        each row stands for (plaintexts grouped beforehand).
        """
        codes = batch.column("batch").to_numpy(zero_copy_only=False)
        weights = None
        if "count" in batch.schema.names:
            weights = batch.column("count").to_numpy(zero_copy_only=False)
        return self.count(codes, batch.column("message"), weights)

    def count(
        self,
        batch: NDArray[np.integer],
        messages: Any,
        weights: NDArray[np.integer] | None = None,
    ) -> BinTriples:
        """Count messages (a binary array) of the given batches.

        Args:
            batch: Batch index of each row.
            messages: The rows' messages, a pyarrow binary array.
            weights: Plaintexts only: how many identical messages each row stands for.
        """
        codes = np.asarray(batch, dtype=np.int64)
        if codes.shape[0] != len(messages):
            raise DataError("batch and message columns differ in length")
        if self._opener is None:
            rows, good = fixed_width_rows(messages, PLAINTEXT_LENGTH)
            bins = np.full(codes.shape[0], undecodable_code(self.domain_size), dtype=np.int64)
            bins[good] = decode_plaintexts(rows, self.domain_size)
            return count_bins(codes, bins, self.width, weights)
        if weights is not None:
            raise InvalidParameterError("ciphertexts are counted one by one, not weighted")
        return self._count_ciphertexts(codes, messages)

    def _count_ciphertexts(self, codes: NDArray[np.int64], messages: Any) -> BinTriples:
        assert self._opener is not None
        d = self.domain_size
        rows, good = fixed_width_rows(messages, CIPHERTEXT_LENGTH)
        parts: list[BinTriples] = []
        if not good.all():  # not a ciphertext of this format: cannot decrypt
            bad = codes[~good]
            parts.append(count_bins(bad, np.full(bad.size, undecryptable_code(d)), self.width))
        good_codes = codes[good]
        if self._repeated is not None and self._repeated.size:
            keep = ~candidate_mask(rows, self._repeated)  # the driver counts the others
            rows, good_codes = rows[keep], good_codes[keep]
        if good_codes.size == 0:
            return _concat(parts)
        lo, hi = int(good_codes.min()), int(good_codes.max())
        batches = [lo] if lo == hi else [int(b) for b in np.unique(good_codes)]
        for b in batches:
            mine = rows if lo == hi else rows[good_codes == b]
            opened = self._opener.open_payload(mine.tobytes())
            counts = np.zeros(self.width, dtype=np.int64)
            counts[:d] = np.bincount(opened.indices, minlength=d)
            counts[undecryptable_code(d)] = opened.undecryptable
            counts[undecodable_code(d)] = opened.undecodable
            nonzero = np.flatnonzero(counts)
            parts.append(
                BinTriples(np.full(nonzero.size, b, dtype=np.int64), nonzero, counts[nonzero])
            )
        return _concat(parts)

    def count_candidates(self, codes: NDArray[np.integer], rows: NDArray[np.uint8]) -> BinTriples:
        """Count the rows :meth:`count` left out, each key at most once (driver side).

        See :func:`~shuffledp.backends.replays.count_candidates`.
        """
        if self._opener is None:
            raise InvalidParameterError("only ciphertexts have keys that can repeat")
        return count_candidates(self._opener, codes, rows, self.domain_size)


def _concat(parts: list[BinTriples]) -> BinTriples:
    if not parts:
        return BinTriples.empty()
    if len(parts) == 1:
        return parts[0]
    return BinTriples(
        np.concatenate([p.batch for p in parts]),
        np.concatenate([p.bin for p in parts]),
        np.concatenate([p.count for p in parts]),
    )
