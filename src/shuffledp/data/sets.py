"""Set-valued data with a privacy level per user, for the segmented protocol.

Input is in long format: one row per (user, item), with the user's privacy
level on every row (CSV, plain or gzip, or Parquet; read in batches by
:class:`~shuffledp.data.loaders.ColumnReader`). :func:`load_sets` turns it into
what Alg. 2 of Wang et al. (arXiv 2407.19639) consumes: a users × s matrix of item slots and one
level index per user.

Every user gets exactly s slots (Alg. 2 takes |x_i| = s):

* a set larger than s is replaced by a uniform random sample of s of its
  items (seeded when a seed is given). The protocol then estimates
  E[1(j ∈ sampled set)] = E[1(j ∈ x)·min(1, s/|x|)], not the fraction of users
  holding j;
* a set smaller than s is filled with the padding symbol (index d, one more
  value of the message domain) when padding is on; without padding it is an
  error. Padding leaves the estimand of the d real items unchanged.

An item listed twice for the same user counts once (a set). Errors (each a
:class:`~shuffledp._validation.DataError` naming the column, how many rows or
users, and an example): a missing user id, item or level; an item outside the
domain; a level that is not one of the declared levels; a user whose rows name
two different levels; a set smaller than s without padding.

Memory: a few bytes per row (item and level codes, a user index) plus the
user ids in Arrow (or numpy) buffers; all grouping is vectorized (sorts and
``bincount``), never a Python object per row on the pyarrow path.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp._wording import Parameter, Worded
from shuffledp.data.domains import check_domain
from shuffledp.data.encoding import (
    DEFAULT_NA_VALUES,
    BinEncoder,
    TextBatch,
    describe_missing,
    encode_values,
    factorize,
)
from shuffledp.data.loaders import ColumnReader
from shuffledp.data.users import arrow_missing, tally_missing

__all__ = [
    "LoadedSets",
    "SetSlots",
    "check_levels_list",
    "encode_sets",
    "load_sets",
    "set_rules",
    "to_slots",
]

IntArray = NDArray[np.int64]

_MISSING = -1
_OUTSIDE = -2


def check_levels_list(levels: Sequence[float], name: str = "levels") -> tuple[float, ...]:
    """Return the levels E_1 < … < E_K as floats.

    Raises:
        InvalidParameterError: If a level is not a finite number > 0, or they
            are not strictly increasing.
    """
    out: list[float] = []
    for value in levels:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidParameterError(f"{name} must be numbers, got {value!r}")
        number = float(value)
        if not (math.isfinite(number) and number > 0):
            raise InvalidParameterError(f"{name} must be finite numbers > 0, got {value!r}")
        out.append(number)
    if not out:
        raise InvalidParameterError(f"{name} must name at least one epsilon")
    if any(b <= a for a, b in itertools.pairwise(out)):
        raise InvalidParameterError(f"{name} must be strictly increasing, got {list(levels)}")
    return tuple(out)


@dataclass(frozen=True)
class SetSlots:
    """Users' sets as s item slots each.

    Attributes:
        items: users × s item indices in [0, d′) (d is the padding symbol).
        users_sampled: Users whose set had more than s items (sampled to s).
        users_padded: Users whose set had fewer than s items (padded).
        duplicate_rows: (user, item) rows that repeated an item of the same user.
    """

    items: NDArray[np.integer]
    users_sampled: int
    users_padded: int
    duplicate_rows: int


def _item_dtype(message_domain: int) -> type[np.signedinteger[Any]]:
    return np.int16 if message_domain <= np.iinfo(np.int16).max else np.int32


def to_slots(
    user: NDArray[np.integer],
    item: NDArray[np.integer],
    n_users: int,
    items_per_user: int,
    *,
    domain_size: int,
    padding: bool,
    seed: SeedLike = None,
    where: str = "the input",
) -> SetSlots:
    """Group (user, item) pairs into s slots per user: dedupe, sample or pad.

    Args:
        user: User index of each pair, in [0, n_users); every user has a pair.
        item: Item index of each pair, in [0, d).
        n_users: Number of users.
        items_per_user: s.
        domain_size: d; the padding symbol is d.
        padding: Pad sets smaller than s (else they are an error).
        seed: Randomness of the samples (sets larger than s).
        where: What the data are, for messages.

    Raises:
        DataError: If a set is smaller than s without padding.
    """
    s = check_int(items_per_user, "items_per_user", minimum=1)
    users = np.asarray(user, dtype=np.int64)
    codes = np.asarray(item, dtype=np.int64)
    # Duplicates: sort by (user, item), drop repeats.
    order = np.lexsort((codes, users))
    users, codes = users[order], codes[order]
    repeat = np.zeros(len(users), dtype=bool)
    repeat[1:] = (users[1:] == users[:-1]) & (codes[1:] == codes[:-1])
    duplicates = int(repeat.sum())
    if duplicates:
        users, codes = users[~repeat], codes[~repeat]
    del order, repeat
    # A uniform order within each user: the first s of it are a uniform sample.
    rng = make_rng(seed)
    order = np.lexsort((rng.random(len(users)), users))
    users, codes = users[order], codes[order]
    del order
    sizes = np.bincount(users, minlength=n_users)
    starts = np.cumsum(sizes) - sizes
    rank = np.arange(len(users), dtype=np.int64) - starts[users]
    keep = rank < s
    short = sizes < s
    if short.any() and not padding:
        count = int(short.sum())
        smallest = int(sizes.min())
        raise DataError(
            Worded(
                "{count} user(s) in {where} hold fewer than {s} items (the smallest set has "
                "{smallest}); pad them with {padding} or lower {lower}",
                count=f"{count:,}",
                where=where,
                s=Parameter("items_per_user", s),
                smallest=smallest,
                padding=Parameter("padding", True),
                lower=Parameter("items_per_user"),
            )
        )
    d_msg = domain_size + (1 if padding else 0)
    out = np.full((n_users, s), domain_size, dtype=_item_dtype(d_msg))
    out[users[keep], rank[keep]] = codes[keep]
    return SetSlots(
        items=out,
        users_sampled=int((sizes > s).sum()),
        users_padded=int(short.sum()),
        duplicate_rows=duplicates,
    )


def set_rules(items_per_user: int, padding: bool) -> list[str]:
    """The data-independent statements of how sets were brought to s items (for releases)."""
    s = items_per_user
    rules = [
        f"each user's set was brought to exactly s={s} items: a larger set was replaced by a "
        f"uniform random sample of {s} of its items, so the frequencies estimate "
        f"E[1(j in sampled set)] = E[1(j in x) * min(1, {s}/|x|)], which is the fraction of "
        f"users holding j only when no set has more than {s} items",
        "an item listed twice for the same user counted once",
    ]
    if padding:
        rules.append(
            f"a set with fewer than {s} items was padded with a padding symbol (one more "
            "message value, covered by the guarantee; its count is not released)"
        )
    return rules


def encode_sets(
    sets: Sequence[Iterable[str]],
    domain: Sequence[str],
    items_per_user: int,
    *,
    padding: bool = True,
    seed: SeedLike = None,
) -> SetSlots:
    """Encode in-memory sets of labels (one iterable per user) as s item slots per user.

    Example:
        >>> slots = encode_sets([["a", "b"], ["c"]], ["a", "b", "c"], 2, seed=0)
        >>> slots.items.shape, slots.users_padded
        ((2, 2), 1)

    Raises:
        InvalidParameterError: On a bad domain or option.
        DataError: If there is no user, a user has an empty set, an item is
            outside the domain or missing, or a set is smaller than s without padding.
    """
    labels = check_domain(domain)
    lists = [list(x) for x in sets]
    if not lists:
        raise DataError("sets is empty: at least one user is needed")
    sizes = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    if np.any(sizes == 0) and not padding:
        raise DataError(
            f"{int((sizes == 0).sum()):,} user(s) have an empty set; pad them with padding=True"
        )
    flat = [label for x in lists for label in x]
    user = np.repeat(np.arange(len(lists), dtype=np.int64), sizes)
    item = encode_values(flat, labels).indices if flat else np.empty(0, dtype=np.int64)
    return to_slots(
        user,
        item,
        len(lists),
        items_per_user,
        domain_size=len(labels),
        padding=padding,
        seed=seed,
    )


@dataclass(frozen=True)
class LoadedSets:
    """Users' item slots and levels read from a file, with what loading adjusted.

    Attributes:
        items: users × s item indices in [0, d′) (d is the padding symbol).
        levels: Level index of each user (into ``level_values``).
        level_values: The declared levels E_1 < … < E_K.
        domain: Item labels, in item order (d of them).
        domain_source: ``"declared"``, ``"file"`` or ``"builtin:<name>"``.
        padding: Whether sets smaller than s were padded.
        rows_read: Data rows in the file.
        users_sampled: Users whose set was sampled down to s items.
        users_padded: Users whose set was padded.
        duplicate_rows: Rows repeating an item of the same user (counted once).
        notes: Operator-facing statements with counts (do not release them).
        release_notes: Data-independent statements of the rules applied.
    """

    items: NDArray[np.integer]
    levels: NDArray[np.int64]
    level_values: tuple[float, ...]
    domain: list[str]
    domain_source: str
    padding: bool
    rows_read: int
    users_sampled: int
    users_padded: int
    duplicate_rows: int
    notes: tuple[str, ...]
    release_notes: tuple[str, ...]

    @property
    def n(self) -> int:
        """Number of users."""
        return int(self.items.shape[0])

    @property
    def items_per_user(self) -> int:
        """The number of item slots per user, s."""
        return int(self.items.shape[1])

    @property
    def level_counts(self) -> IntArray:
        """n_k, users per level."""
        return np.bincount(self.levels, minlength=len(self.level_values)).astype(np.int64)


def _row(i: int) -> str:
    return f"data row {i + 1}"


class _LevelEncoder:
    """Map level cells (text numbers such as ``0.5``) to level indices, batch by batch."""

    def __init__(self, levels: tuple[float, ...], na_values: Collection[str], where: str) -> None:
        self.levels = np.asarray(levels, dtype=np.float64)
        self.na = set(na_values)
        self.where = where
        self.rows = 0
        self.missing = 0
        self.first_missing: int | None = None
        self.outside = 0
        self.outside_example: tuple[str, int] | None = None

    def _code(self, label: str) -> int:
        if label in self.na:
            return _MISSING
        try:
            value = float(label)
        except ValueError:
            return _OUTSIDE
        match = np.flatnonzero(np.isclose(self.levels, value, rtol=1e-9, atol=0.0))
        return int(match[0]) if match.size else _OUTSIDE

    def encode(self, batch: TextBatch) -> NDArray[np.int8]:
        labels, local = factorize(batch)
        n = len(local)
        offset = self.rows
        self.rows += n
        table = np.fromiter((self._code(label) for label in labels), np.int64, len(labels))
        codes = np.where(local >= 0, table[np.maximum(local, 0)] if labels else _MISSING, _MISSING)
        missing = codes == _MISSING
        if missing.any():
            self.missing += int(missing.sum())
            if self.first_missing is None:
                self.first_missing = offset + int(np.flatnonzero(missing)[0])
        outside = codes == _OUTSIDE
        if outside.any():
            self.outside += int(outside.sum())
            if self.outside_example is None:
                row = int(np.flatnonzero(outside)[0])
                self.outside_example = (labels[int(local[row])], offset + row)
        return codes.astype(np.int8 if len(self.levels) < 127 else np.int32)

    def error(self) -> DataError | None:
        if self.first_missing is not None:
            return DataError(
                f"{self.missing:,} row(s) have no level in {self.where} "
                f"({describe_missing(self.na)}), first at {_row(self.first_missing)}; every "
                "row must state its user's privacy level"
            )
        if self.outside_example is not None:
            value, row = self.outside_example
            allowed = ", ".join(f"{x:g}" for x in self.levels)
            return DataError(
                f"level {value!r} in {self.where} ({_row(row)}) is not one of the levels "
                f"{allowed}; {self.outside:,} row(s) have a level outside --levels"
            )
        return None


class _UserIndex:
    """Collect user ids batch by batch; then give each row its user's index."""

    def __init__(self, na_values: Collection[str], where: str) -> None:
        self.na = sorted(set(na_values))
        self.where = where
        self.batches: list[Any] = []
        self.rows = 0
        self.missing = 0
        self.first_missing: int | None = None

    def add(self, batch: TextBatch) -> None:
        if isinstance(batch, np.ndarray):
            ids: Any = np.asarray(batch, dtype=object)
            missing = np.fromiter(
                (v is None or (isinstance(v, float) and v != v) or v in self.na for v in ids),
                dtype=bool,
                count=len(ids),
            )
        else:
            ids, missing = arrow_missing(batch, self.na)
        self.rows, self.missing, self.first_missing = tally_missing(
            missing, self.rows, self.missing, self.first_missing
        )
        self.batches.append(ids)

    def error(self) -> DataError | None:
        if self.first_missing is None:
            return None
        return DataError(
            f"{self.missing:,} row(s) have no user id in {self.where} "
            f"({describe_missing(self.na)}), first at {_row(self.first_missing)}; every row "
            "must name its user"
        )

    def indices(self) -> tuple[IntArray, int]:
        """Return each row's user index (users in order of first appearance) and the user count."""
        if not self.batches:
            return np.empty(0, dtype=np.int64), 0
        if isinstance(self.batches[0], np.ndarray):
            ids = np.concatenate(self.batches).astype(str)
            _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
            # Renumber users by their first row.
            rank = np.empty(len(first), dtype=np.int64)
            rank[np.argsort(first, kind="stable")] = np.arange(len(first))
            return rank[inverse.reshape(-1)], len(first)
        import pyarrow as pa
        import pyarrow.compute as pc

        chunked = pa.chunked_array(self.batches)
        uniques = pc.unique(chunked)
        out = np.empty(self.rows, dtype=np.int64)
        at = 0
        for chunk in chunked.chunks:
            index = pc.index_in(chunk, value_set=uniques).to_numpy(zero_copy_only=False)
            out[at : at + len(chunk)] = index
            at += len(chunk)
        return out, len(uniques)


def load_sets(
    path: str | Path,
    *,
    user_column: str,
    item_column: str,
    level_column: str,
    levels: Sequence[float],
    domain: Sequence[str],
    items_per_user: int,
    domain_source: str = "declared",
    other: str | None = None,
    padding: bool = True,
    seed: SeedLike = None,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    na_values: Collection[str] = DEFAULT_NA_VALUES,
    show_progress: bool = True,
    use_pyarrow: bool | None = None,
) -> LoadedSets:
    """Read long-format set data (one row per user and item, with the user's level).

    Args:
        path: CSV with a header row (plain or gzip) or Parquet file.
        user_column: Column identifying the user.
        item_column: Column holding one item of the user's set.
        level_column: Column holding the user's privacy level ε (a number
            equal to one of ``levels``; ``1`` and ``1.0`` are the same level).
        levels: The declared levels E_1 < … < E_K.
        domain: The public item domain (labels, in item order).
        items_per_user: s.
        domain_source: Where ``domain`` came from, for the report.
        other: Count items outside ``domain`` as this label (appended to the
            domain if new) instead of raising an error.
        padding: Pad sets smaller than s with the padding symbol (else an error).
        seed: Randomness of the samples of sets larger than s.
        delimiter: CSV field separator (sniffed when ``None``).
        encoding: CSV text encoding.
        na_values: Cell texts that mean "missing" (nulls always do).
        show_progress: Show a progress bar on a terminal.
        use_pyarrow: CSV reader (see :class:`~shuffledp.data.loaders.ColumnReader`).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        InvalidParameterError: On a bad option (two roles for one column, bad levels or domain).
        DataError: On malformed data (module docstring).
    """
    level_values = check_levels_list(levels)
    labels = check_domain(domain)
    s = check_int(items_per_user, "items_per_user", minimum=1)
    roles = {"user_column": user_column, "item_column": item_column, "level_column": level_column}
    if len(set(roles.values())) != 3:
        raise InvalidParameterError(
            "user, item and level columns must be three different columns, got "
            + ", ".join(f"{k}={v!r}" for k, v in roles.items())
        )
    na = tuple(na_values)
    reader = ColumnReader(
        path,
        [item_column, level_column, user_column],
        delimiter=delimiter,
        encoding=encoding,
        use_pyarrow=use_pyarrow,
        show_progress=show_progress,
    )
    item_where = f"column {item_column!r} of {reader.path}"
    items = BinEncoder(labels, other=other, na_values=na, where=item_where, row_label=_row)
    level_enc = _LevelEncoder(level_values, na, f"column {level_column!r} of {reader.path}")
    ids = _UserIndex(na, f"column {user_column!r} of {reader.path}")
    item_chunks: list[NDArray[np.signedinteger[Any]]] = []
    level_chunks: list[NDArray[np.signedinteger[Any]]] = []
    for batch in reader:
        item_chunks.append(items.encode(batch[0]))
        level_chunks.append(level_enc.encode(batch[1]))
        ids.add(batch[2])
    if items.rows == 0:
        what = "a header but " if reader.format.kind == "csv" else ""
        raise DataError(f"{reader.path} has {what}no data rows")
    for error in (
        ids.error(),
        items.missing_error("; every row must name one item"),
        items.outside_error(),
        level_enc.error(),
    ):
        if error is not None:
            raise error
    item_codes, labels = items.finish(np.concatenate(item_chunks))
    level_codes = np.concatenate(level_chunks).astype(np.int64)
    del item_chunks, level_chunks
    user, n_users = ids.indices()
    del ids
    # One level per user: every row of a user must name the same level.
    order = np.argsort(user, kind="stable")
    sorted_users = user[order]
    sorted_levels = level_codes[order]
    clash = (sorted_users[1:] == sorted_users[:-1]) & (sorted_levels[1:] != sorted_levels[:-1])
    if clash.any():
        users_with_clash = int(np.unique(sorted_users[1:][clash]).size)
        raise DataError(
            f"{users_with_clash:,} user(s) in column {user_column!r} of {reader.path} have rows "
            f"with different levels in column {level_column!r}; each user chooses one level"
        )
    first = np.flatnonzero(np.r_[True, sorted_users[1:] != sorted_users[:-1]])
    user_levels = np.empty(n_users, dtype=np.int64)
    user_levels[sorted_users[first]] = sorted_levels[first]
    del order, sorted_users, sorted_levels, clash, level_codes
    slots = to_slots(
        user,
        item_codes,
        n_users,
        s,
        domain_size=len(labels),
        padding=padding,
        seed=seed,
        where=f"{reader.path}",
    )
    notes = [*reader.notes, *items.notes()]
    if slots.users_sampled:
        notes.append(
            f"{slots.users_sampled:,} user(s) had more than {s} items: a uniform sample of {s} "
            "was kept"
        )
    if slots.users_padded:
        notes.append(f"{slots.users_padded:,} user(s) had fewer than {s} items and were padded")
    if slots.duplicate_rows:
        notes.append(
            f"{slots.duplicate_rows:,} row(s) repeated an item of the same user and counted once"
        )
    return LoadedSets(
        items=slots.items,
        levels=user_levels,
        level_values=level_values,
        domain=labels,
        domain_source=domain_source,
        padding=padding,
        rows_read=items.rows,
        users_sampled=slots.users_sampled,
        users_padded=slots.users_padded,
        duplicate_rows=slots.duplicate_rows,
        notes=tuple(notes),
        release_notes=tuple(set_rules(s, padding)),
    )
