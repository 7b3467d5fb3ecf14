"""Read a store's files as an attacker would: what do the bytes say about arrival order?

The shuffler must not reveal in which order submissions arrived, nor which
client id sent which submission. Whoever copies its files (a backup, a stolen
disk) sees raw bytes, not SQL; these functions look at them that way, knowing
the ids to look for (as a client, or the task owner who issued the tokens,
would; a ciphertext is looked for by its first bytes, as whoever saw it sent,
or an analyzer who decrypts what it finds, would):

* :func:`order_leak` finds each id's first byte offset and measures how well
  offsets follow arrival order: Spearman's ρ over the whole bytes (a WAL
  appends page images commit after commit), and a within-page Kendall
  statistic (SQLite allocates a page's cells one after another, so the
  order of offsets inside a page follows the order of insertion);
* :func:`linked_pairs` pairs the i-th submission id with the i-th client id in
  byte order and counts the pairs that belong together.

Under no leak (offsets independent of arrival order), ρ has mean 0 and
variance 1/(n − 1), the within-page statistic is close to N(0, 1) (its exact
variance under independence is used), and the number of right pairs is that
of the fixed points of a random permutation (mean 1; 9 or more with
probability about 10⁻⁶). The tests and ``benchmarks/service_abuse.py`` use
these to check what ``docs/deployment.md`` says the files hold;
:func:`file_report` gives every figure for the files of one store at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "OrderLeak",
    "file_report",
    "first_offsets",
    "linked_pairs",
    "order_leak",
    "read_files",
]

#: An id to look for: ASCII text (an id) or raw bytes (the start of a ciphertext).
Needle = str | bytes

#: SQLite's default page size (the shuffler's store uses it).
PAGE_SIZE = 4096


@dataclass(frozen=True)
class OrderLeak:
    """How much of the arrival order a byte string reveals.

    Attributes:
        ids: Ids looked for.
        found: Ids present in the bytes.
        spearman: Rank correlation of arrival rank and first byte offset
            (NaN with fewer than 3 found).
        within_page_z: Kendall's S summed over the pairs of ids whose first
            offsets fall in the same page, divided by its standard deviation
            under independence (NaN when no page holds two).
        pages: Pages holding at least one id.
    """

    ids: int
    found: int
    spearman: float
    within_page_z: float
    pages: int

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-ready (NaN as None)."""
        return {
            "ids": self.ids,
            "found": self.found,
            "spearman": _finite(self.spearman),
            "within_page_z": _finite(self.within_page_z),
            "pages": self.pages,
        }


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def read_files(paths: Iterable[Path]) -> bytes:
    """The bytes of every existing file of ``paths``, concatenated in the given order."""
    return b"".join(p.read_bytes() for p in paths if p.exists())


def _bytes(needle: Needle) -> bytes:
    return needle.encode("ascii") if isinstance(needle, str) else needle


def first_offsets(data: bytes, ids: Sequence[Needle]) -> np.ndarray:
    """The byte offset of each id's first occurrence in ``data`` (-1 if absent).

    A ``str`` id is looked for as ASCII, a ``bytes`` one as it is.
    """
    return np.array([data.find(_bytes(i)) for i in ids], dtype=np.int64)


def _ranks(values: np.ndarray) -> np.ndarray:
    out = np.empty(values.size, dtype=np.float64)
    out[np.argsort(values, kind="stable")] = np.arange(values.size)
    return out


def order_leak(
    data: bytes, ids_in_arrival_order: Sequence[Needle], page_size: int = PAGE_SIZE
) -> OrderLeak:
    """Measure how the ids' byte offsets in ``data`` follow their arrival order.

    Args:
        data: The files' bytes.
        ids_in_arrival_order: Ids (ASCII text, or raw bytes), first arrived first.
        page_size: Bytes per page for the within-page statistic.
    """
    offsets = first_offsets(data, ids_in_arrival_order)
    present = offsets >= 0
    arrival = np.arange(offsets.size)[present]
    where = offsets[present]
    spearman = float("nan")
    if where.size >= 3:
        spearman = float(np.corrcoef(_ranks(arrival), _ranks(where))[0, 1])
    s_total = 0
    variance = 0.0
    pages = where // page_size
    for page in np.unique(pages):
        members = pages == page
        n = int(members.sum())
        if n < 2:
            continue
        a, o = arrival[members], where[members]
        signs = np.sign(a[:, None] - a[None, :]) * np.sign(o[:, None] - o[None, :])
        s_total += int(signs.sum()) // 2
        variance += n * (n - 1) * (2 * n + 5) / 18
    z = s_total / math.sqrt(variance) if variance else float("nan")
    return OrderLeak(
        ids=len(ids_in_arrival_order),
        found=int(present.sum()),
        spearman=spearman,
        within_page_z=z,
        pages=int(np.unique(pages).size),
    )


def linked_pairs(data: bytes, left: Sequence[Needle], right: Sequence[Needle]) -> int:
    """Pair ids of ``left`` and ``right`` by their rank in byte order; count right pairs.

    ``left[i]`` and ``right[i]`` belong together (a submission id and its
    client id). Ids absent from ``data`` are left out of both rankings.
    """
    if len(left) != len(right):
        raise ValueError(f"left and right must have the same length, got {len(left)}, {len(right)}")
    lo, ro = first_offsets(data, left), first_offsets(data, right)
    both = (lo >= 0) & (ro >= 0)
    if not both.any():
        return 0
    return int(np.sum(_ranks(lo[both]) == _ranks(ro[both])))


def file_report(
    files: Sequence[Path],
    ids: dict[str, Sequence[Needle]],
    links: Sequence[tuple[str, str]] = (),
) -> dict[str, object]:
    """Every figure for one store's files: sizes, and per kind of id its :func:`order_leak`.

    The leaks are measured on the first file (the database: its pages are
    aligned, so the within-page statistic applies), on the others (the WAL:
    how many ids it still holds, and the order of their offsets) and on all of
    them concatenated; the links (pairs of kinds whose i-th ids belong together)
    by :func:`linked_pairs` on all of them.

    Args:
        files: The database file first, then its companions (``-wal``, ``-shm``).
        ids: Ids to look for by kind (e.g. ``{"client_ids": [...]}``), each in
            arrival order.
        links: Pairs of kinds to pair by byte order.
    """
    main, rest = read_files(files[:1]), read_files(files[1:])
    everything = main + rest
    return {
        "file_bytes": {p.name: p.stat().st_size for p in files if p.exists()},
        **{
            kind: {
                "database": order_leak(main, needles).to_dict(),
                "others": order_leak(rest, needles).to_dict(),
                "all": order_leak(everything, needles).to_dict(),
            }
            for kind, needles in ids.items()
        },
        "linked_pairs": {f"{a}~{b}": linked_pairs(everything, ids[a], ids[b]) for a, b in links},
    }
