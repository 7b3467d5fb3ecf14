"""One contribution per user: group rows by user id and keep one row per user.

User ids are collected batch by batch without building a Python object per row:
each id gets a 64-bit hash (vectorized over the bytes of the Arrow buffers, or
over the code points of a numpy unicode array), rows are grouped by sorting
the hashes, and every group with more than one row is then checked exactly,
id against id, so that a hash collision can never merge two users (a
collision makes the grouping start again with another hash seed).

Policies (:data:`PER_USER_POLICIES`):

* ``"error"``: a user with several rows is an error;
* ``"first"``: keep each user's first row in file order;
* ``"sample"``: keep one of the user's rows chosen uniformly at random.

Users come out in the order of their first row (among the rows kept) in the file.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp._wording import Parameter, Worded, plural
from shuffledp.data.encoding import TextBatch, describe_missing

__all__ = [
    "PER_USER_POLICIES",
    "OnePerUser",
    "UserIds",
    "arrow_missing",
    "check_per_user",
    "tally_missing",
]

#: What to do with a user who has several rows.
PER_USER_POLICIES = ("error", "first", "sample")

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_VERIFY_ROWS = 1 << 20
_ATTEMPTS = 4


def check_per_user(per_user: str) -> str:
    """Return ``per_user`` if it is one of :data:`PER_USER_POLICIES`.

    Raises:
        InvalidParameterError: Otherwise.
    """
    if per_user not in PER_USER_POLICIES:
        raise InvalidParameterError(
            f"per_user must be one of {', '.join(PER_USER_POLICIES)}, got {per_user!r}"
        )
    return per_user


def _mix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """MurmurHash3's 64-bit finalizer (a bijection that spreads every bit)."""
    x = x ^ (x >> np.uint64(33))
    x = x * _C1
    x = x ^ (x >> np.uint64(33))
    x = x * _C2
    return x ^ (x >> np.uint64(33))


def _start(lengths: NDArray[np.int64], seed: int) -> NDArray[np.uint64]:
    return _mix(lengths.astype(np.uint64) * _GOLDEN ^ np.uint64(seed))


def _hash_arrow(array: Any, seed: int) -> NDArray[np.uint64]:
    """Hash each string of an Arrow string / large_string array (nulls hash arbitrarily)."""
    import pyarrow as pa

    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    n = len(array)
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    _, offset_buffer, data_buffer = array.buffers()
    width = 8 if pa.types.is_large_string(array.type) else 4
    offset_type = np.int64 if width == 8 else np.int32
    offsets = np.frombuffer(
        offset_buffer, dtype=offset_type, count=n + 1, offset=array.offset * width
    ).astype(np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    padded = np.zeros(hi - lo + 8, dtype=np.uint8)
    if data_buffer is not None and hi > lo:
        padded[: hi - lo] = np.frombuffer(data_buffer, dtype=np.uint8, count=hi - lo, offset=lo)
    # Every 8-byte window of the data as one little-endian word (unaligned view, no copy).
    words = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    starts = offsets[:-1] - lo
    lengths = offsets[1:] - offsets[:-1]
    h = _start(lengths, seed)
    longest = int(lengths.max()) if n else 0
    for at in range(0, longest, 8):
        active = lengths > at
        left = np.clip(lengths - at, 1, 8).astype(np.uint64)
        mask = _ALL_ONES >> ((np.uint64(8) - left) * np.uint64(8))
        word = words[np.where(active, starts + at, 0)] & mask
        h = np.where(active, _mix(h ^ word), h)
    return h


def _hash_unicode(array: NDArray[np.str_], seed: int) -> NDArray[np.uint64]:
    """Hash each string of a numpy unicode array (zero padding is fixed by the length)."""
    n = len(array)
    points = np.ascontiguousarray(array).view(np.uint32).reshape(n, -1)
    if points.shape[1] % 2:
        points = np.hstack([points, np.zeros((n, 1), dtype=np.uint32)])
    words = np.ascontiguousarray(points).view(np.uint64)
    h = _start(np.char.str_len(array).astype(np.int64), seed)
    for j in range(words.shape[1]):
        h = _mix(h ^ words[:, j])
    return h


def arrow_missing(batch: Any, na: list[str]) -> tuple[Any, NDArray[np.bool_]]:
    """An Arrow batch of ids (dictionaries decoded) and which of its rows are null or in ``na``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(batch.type):
        batch = batch.dictionary_decode()
    missing = pc.fill_null(pc.is_in(batch, value_set=pa.array(na, batch.type)), True)
    return batch, missing.to_numpy(zero_copy_only=False)


def tally_missing(
    missing: NDArray[np.bool_], rows: int, count: int, first: int | None
) -> tuple[int, int, int | None]:
    """Add a batch's missing-id mask to the running (rows, missing, first missing row)."""
    found = int(missing.sum())
    if found and first is None:
        first = rows + int(np.flatnonzero(missing)[0])
    return rows + len(missing), count + found, first


@dataclass(frozen=True)
class OnePerUser:
    """The rows kept, one per user.

    Attributes:
        rows: Row number (0-based, among all rows read) of each user's kept
            row, users in the order of their first kept row.
        users_with_several_rows: Users who had more than one row (with a value).
        rows_beyond_one: Rows dropped because their user already contributed.
        users_without_value: Users all of whose rows were dropped as missing.
    """

    rows: NDArray[np.int64]
    users_with_several_rows: int
    rows_beyond_one: int
    users_without_value: int


class UserIds:
    """Collect user ids batch by batch, then keep one row per user.

    Args:
        na_values: Id texts that mean "no id" (nulls always do).
        where: What the ids are, for messages (e.g. ``"column 'user' of data.csv"``).
        row_label: Describes row ``i`` (0-based) in messages.
    """

    def __init__(
        self,
        na_values: Collection[str],
        *,
        where: str,
        row_label: Callable[[int], str] = lambda i: f"index {i}",
    ) -> None:
        self._na = sorted(set(na_values))
        self.where = where
        self.row_label = row_label
        self._ids: list[Any] = []
        self._missing: list[NDArray[np.bool_]] = []
        self._all: NDArray[np.str_] | None = None
        self.rows = 0
        self.missing = 0
        self.first_missing: int | None = None

    def add(self, batch: TextBatch) -> None:
        """Record the ids of the next batch of rows."""
        if isinstance(batch, np.ndarray):
            missing = np.isin(batch, self._na) if self._na else np.zeros(len(batch), dtype=bool)
            ids: Any = np.asarray(batch, dtype=str)
        else:
            ids, missing = arrow_missing(batch, self._na)
        self.rows, self.missing, self.first_missing = tally_missing(
            missing, self.rows, self.missing, self.first_missing
        )
        self._ids.append(ids)
        self._missing.append(np.asarray(missing, dtype=bool))

    def missing_error(self, remedy: str = "") -> DataError | None:
        """The error for rows without a user id (``None`` if every row has one).

        Args:
            remedy: How the caller can drop such rows, appended to the message.
        """
        if self.first_missing is None:
            return None
        return DataError(
            Worded(
                "{count} row(s) have no user id in {where} ({missing}), first at {row}; "
                "every row must name its user{remedy}",
                count=f"{self.missing:,}",
                where=self.where,
                missing=describe_missing(self._na),
                row=self.row_label(self.first_missing),
                remedy=remedy,
            )
        )

    def missing_rows(self) -> NDArray[np.bool_]:
        """Which rows (all rows read, in file order) have no user id."""
        if not self._missing:
            return np.zeros(0, dtype=bool)
        return np.concatenate(self._missing)

    def _hashes(self, seed: int) -> NDArray[np.uint64]:
        hashes = np.empty(self.rows, dtype=np.uint64)
        at = 0
        for ids in self._ids:
            unicode = isinstance(ids, np.ndarray)
            part = _hash_unicode(ids, seed) if unicode else _hash_arrow(ids, seed)
            hashes[at : at + len(part)] = part
            at += len(part)
        return hashes

    def _same_ids(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> bool:
        """Whether the ids of rows ``a`` and ``b`` are equal pairwise."""
        if isinstance(self._ids[0], np.ndarray):
            if self._all is None:
                self._all = np.concatenate(self._ids)
            return bool(np.array_equal(self._all[a], self._all[b]))
        import pyarrow as pa
        import pyarrow.compute as pc

        chunked = pa.chunked_array(self._ids)
        left, right = chunked.take(pa.array(a)), chunked.take(pa.array(b))
        return bool(pc.all(pc.equal(left, right)).as_py())

    def _verified(
        self, order: NDArray[np.int64], starts: NDArray[np.int64], counts: NDArray[np.int64]
    ) -> bool:
        """Whether every group holds one id only (compared, window by window, to its first row)."""
        for at in range(0, len(order), _VERIFY_ROWS):
            positions = np.arange(at, min(at + _VERIFY_ROWS, len(order)))
            group = np.searchsorted(starts, positions, side="right") - 1
            shared = counts[group] > 1
            if shared.any() and not self._same_ids(
                order[positions[shared]], order[starts[group[shared]]]
            ):
                return False
        return True

    def _group(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Group the rows that have a user id by that id (rows without one are left out).

        Returns:
            The rows sorted user by user (file order within a user), where each
            user's rows start in that array, and how many rows each user has.
        """
        with_id = None if not self.missing else np.flatnonzero(~self.missing_rows())
        for attempt in range(_ATTEMPTS):
            hashes = self._hashes(seed=attempt)
            if with_id is None:
                order = np.argsort(hashes, kind="stable")
            else:
                order = with_id[np.argsort(hashes[with_id], kind="stable")]
            ordered = hashes[order]
            del hashes
            boundary = np.empty(len(order), dtype=bool)
            boundary[:1] = True
            np.not_equal(ordered[1:], ordered[:-1], out=boundary[1:])
            del ordered
            starts = np.flatnonzero(boundary)
            del boundary
            counts = np.diff(np.append(starts, len(order)))
            if self._verified(order, starts, counts):
                self._all = None
                return order, starts, counts
        raise DataError(  # pragma: no cover - needs several 64-bit collisions in a row
            f"could not tell the user ids in {self.where} apart by hashing; please report this"
        )

    def one_per_user(
        self, keep: NDArray[np.bool_], per_user: str, seed: SeedLike = None
    ) -> OnePerUser:
        """Keep one row per user among the rows marked in ``keep``.

        Rows without a user id belong to no user and are never kept (whether
        that is allowed is the caller's decision: see :meth:`missing_error`).

        Args:
            keep: Rows that have a value (the others are dropped as missing).
            per_user: One of :data:`PER_USER_POLICIES`.
            seed: Randomness for ``"sample"``.

        Raises:
            DataError: With ``"error"``, if a user has several rows.
        """
        check_per_user(per_user)
        order, starts, counts = self._group()
        users_without_value = 0
        if not keep.all():
            users = len(counts)
            kept = keep[order]
            owner = np.repeat(np.arange(users), counts)[kept]
            order = order[kept]
            counts = np.bincount(owner, minlength=users)
            del owner, kept
            users_without_value = int((counts == 0).sum())
            counts = counts[counts > 0]
            starts = np.cumsum(counts) - counts
        several = int((counts > 1).sum())
        beyond = int(counts.sum()) - len(counts)
        if several and per_user == "error":
            raise DataError(
                Worded(
                    "{several} in {where} {have} more than one row ({beyond} beyond one per "
                    "user); each user must contribute one value: choose {first} or {sample} to "
                    "keep one row per user",
                    several=plural(several, "user"),
                    where=self.where,
                    have="has" if several == 1 else "have",
                    beyond=plural(beyond, "row"),
                    first=Parameter("per_user", "first"),
                    sample=Parameter("per_user", "sample"),
                )
            )
        first = order[starts]
        by_appearance = np.argsort(first)
        if per_user == "sample" and several:
            starts = starts[by_appearance]
            draws = make_rng(seed).integers(0, counts[by_appearance])
            rows = order[starts + draws]
        else:
            rows = first[by_appearance]
        return OnePerUser(
            rows=rows.astype(np.int64),
            users_with_several_rows=several,
            rows_beyond_one=beyond,
            users_without_value=users_without_value,
        )
