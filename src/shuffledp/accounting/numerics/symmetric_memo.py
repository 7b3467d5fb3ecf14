"""The symmetric binomial's tails and point masses, kept within one search.

A search for ε(δ) or a calibration evaluates a certificate at many nearby
arguments, and the two-count line kernel (:mod:`.two_counts`) then asks for the
same tails P[Bin(N, ½) ≥ j] and point masses P[Bin(N, ½) = x] again and again:
the blocks of lines and their thresholds barely move between nearby ε, and the
first piece of a block that is cut starts on the block's own line. Inside
:func:`kept_values` these values are kept by their exact arguments and handed
back instead of recomputed. Each is an elementwise function of its two integer
arguments (scipy's ``betainc`` is a ufunc; :func:`.binomial.binomial_pmf` works
elementwise, its series stopping per element once further terms no longer change
the sum), so a kept value is the very double the computation gives: every
certificate is bit for bit what it is without them. Outside :func:`kept_values`
(the default) nothing is kept and the functions below are the plain
computations.

The store is an open-addressing hash table on the exact (N, x) pairs, looked up
and filled with a few vectorized passes (at most four slots per key), so that a
hit costs about a twentieth of a tail evaluation at N ~ 10⁶; calls whose N all
stay below 4096, where a tail costs about what a lookup does, are computed as
they come. The two-count kernel asks for a line's two tails and its point at
one threshold together (:func:`symmetric_line_values`), kept under one key.

Group: the numerical core (``shuffledp.accounting.numerics``); imports only numpy,
scipy, ``shuffledp._validation`` and other modules of the core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from numpy.typing import NDArray
from scipy import special

from shuffledp.accounting.numerics.binomial import binomial_pmf

__all__ = ["kept_values", "symmetric_line_values", "symmetric_points", "symmetric_tails"]

_Values = NDArray[np.float64]

#: Multipliers of the hash (odd 64-bit constants: golden ratio, and one of MurmurHash3's).
_MIX_TRIALS = np.uint64(0x9E3779B97F4A7C15)
_MIX_POINT = np.uint64(0xC2B2AE3D27D4EB4F)
_FIRST_BITS = 16
#: Slots looked at per key, from its hash on. A key not found within them is
#: computed (a miss), and one that finds no empty slot within them is not kept:
#: either way the value handed back is the computed one, and no call loops over
#: a long chain.
_PROBES = 4
#: Entries kept at most; a table that would grow past them starts over (each table
#: stays below about 60 MB whatever the search).
_MAX_ENTRIES = 1 << 20
#: Calls whose trials all stay below this are computed, not looked up: there a tail
#: costs about what a lookup does.
_KEPT_FROM_TRIALS = 4096.0


class _Table:
    """Exact (trials, point) → value pairs: open addressing over at most 4 slots, ≤ ¼ full.

    The slots hold entry numbers (0: empty); the entries (a key and its values)
    are written one after another in dense arrays, so a table touches little
    memory beyond what it keeps. A key is one complex number, trials + i·point;
    entry 0's key is NaN, equal to no key, so an empty slot matches nothing.
    Of several writers claiming one empty slot exactly one entry lands (the
    others are left behind, unreferenced, and probe on). Nothing is ever
    removed (a table only starts over), so a key kept within the first
    :data:`_PROBES` slots from its hash is found there.
    """

    def __init__(self, width: int = 1) -> None:
        self.width = width  # values per key
        self.reset(_FIRST_BITS)

    def reset(self, bits: int) -> None:
        """Empty the table, with 2**bits slots (and room for a quarter as many entries)."""
        self.bits = bits
        self.slots = np.zeros(1 << bits, dtype=np.int32)
        room = (1 << bits) // 4 + 1
        self.keys = np.empty(room, dtype=np.complex128)
        self.keys[0] = complex(np.nan, 0.0)
        self.values = np.empty((room,) if self.width == 1 else (room, self.width))
        self.used = 0  # entries written after entry 0

    def _hash(self, trials: _Values, points: _Values) -> NDArray[np.int64]:
        # Hash of the exact bit patterns (equal doubles other than ±0 have equal bits;
        # a ±0 mismatch only costs a miss).
        mixed = (trials.view(np.uint64) * _MIX_TRIALS) ^ (points.view(np.uint64) * _MIX_POINT)
        return (mixed >> np.uint64(64 - self.bits)).astype(np.int64)

    def find(
        self, trials: _Values, points: _Values
    ) -> tuple[_Values, NDArray[np.bool_], NDArray[np.int32]]:
        """The values kept for these pairs, where one was kept, and its entry (0: none)."""
        wanted = trials + 1j * points
        found = np.zeros(len(trials), dtype=bool)
        mask = (1 << self.bits) - 1
        pending = np.arange(len(trials))
        slots = self._hash(trials, points)
        hits, entries = [], []
        for _ in range(_PROBES):
            entry = self.slots[slots]
            match = self.keys[entry] == wanted[pending]
            hits.append(pending[match])
            entries.append(entry[match])
            going = ~match & (entry != 0)
            if not np.any(going):
                break
            pending, slots = pending[going], (slots[going] + 1) & mask
        out = np.zeros((len(trials), *self.values.shape[1:]))
        where, kept = np.concatenate(hits), np.concatenate(entries)
        found[where] = True
        out[where] = np.take(self.values, kept, axis=0)
        entry = np.zeros(len(trials), dtype=np.int32)
        entry[where] = kept
        return out, found, entry

    def add(self, trials: _Values, points: _Values, values: _Values) -> None:
        """Keep these pairs (not kept yet; repeats among them are kept once).

        A pair with no empty slot among its :data:`_PROBES`, or no room left for
        its entry, is left out.
        """
        if 4 * (self.used + len(trials)) > (1 << self.bits):
            self._grow(self.used + len(trials))
        wanted = trials + 1j * points
        mask = (1 << self.bits) - 1
        pending = np.arange(len(trials))
        slots = self._hash(trials, points)
        for _ in range(_PROBES):
            empty = self.slots[slots] == 0
            writers = pending[empty]
            first = self.used + 1
            last = first + len(writers)
            if last > len(self.keys):
                break
            self.keys[first:last] = wanted[writers]
            self.values[first:last] = values[writers]
            self.slots[slots[empty]] = np.arange(first, last, dtype=np.int32)
            self.used += len(writers)
            landed = self.keys[self.slots[slots]] == wanted[pending]  # its own key or a twin's
            going = ~landed
            if not np.any(going):
                break
            pending, slots = pending[going], (slots[going] + 1) & mask

    def _grow(self, entries: int) -> None:
        bits = self.bits
        while 4 * entries > (1 << bits):
            bits += 1
        live = self.slots[self.slots != 0]
        keys, values = self.keys[live], self.values[live]
        self.reset(bits)
        self.add(np.ascontiguousarray(keys.real), np.ascontiguousarray(keys.imag), values)


class _Kept:
    """The tables of one :func:`kept_values` block (each made when first used)."""

    def __init__(self) -> None:
        self._tables: dict[str, _Table] = {}

    def table(self, name: str, width: int = 1) -> _Table:
        """The table called ``name`` (``width`` values per key), made empty on first use."""
        found = self._tables.get(name)
        if found is None:
            found = self._tables[name] = _Table(width)
        return found


_KEPT: ContextVar[_Kept | None] = ContextVar("shuffledp_kept_binomial_values", default=None)


@contextmanager
def kept_values() -> Iterator[None]:
    """Keep the symmetric binomial's tails and points computed inside the block (see above).

    Nested blocks share the outermost one's values. Each thread (and each
    ``contextvars`` context) has its own.
    """
    if _KEPT.get() is not None:
        yield
        return
    token = _KEPT.set(_Kept())
    try:
        yield
    finally:
        _KEPT.reset(token)


def _through(
    table: _Table,
    compute: Callable[[_Values, _Values], _Values],
    trials: _Values,
    points: _Values,
) -> _Values:
    out, found, _ = table.find(trials, points)
    _fill(table, compute, trials, points, out, ~found)
    return out


def _fill(
    table: _Table,
    compute: Callable[[_Values, _Values], _Values],
    trials: _Values,
    points: _Values,
    out: _Values,
    missing: NDArray[np.bool_],
) -> None:
    """Compute the ``missing`` entries of ``out`` and keep them."""
    if np.any(missing):
        fresh = np.asarray(compute(trials[missing], points[missing]), dtype=np.float64)
        out[missing] = fresh
        if table.used + len(fresh) > _MAX_ENTRIES:
            table.reset(_FIRST_BITS)
        table.add(trials[missing], points[missing], fresh)


def _tails(trials: _Values, at_least: _Values) -> _Values:
    out: _Values = special.betainc(at_least, trials - at_least + 1.0, 0.5)
    return out


def _points(trials: _Values, x: _Values) -> _Values:
    return binomial_pmf(x, trials, 0.5)


def _tail_from(trials: _Values, at_least: _Values) -> _Values:
    """P[Bin(trials, ½) ≥ at_least]: 1 for at_least ≤ 0, 0 above ``trials``, else :func:`_tails`."""
    out = np.zeros(len(trials))
    out[at_least <= 0] = 1.0
    mid = (at_least > 0) & (at_least <= trials)
    if np.any(mid):
        out[mid] = _tails(trials[mid], at_least[mid])
    return out


def _line_values(trials: _Values, at_least: _Values, first: NDArray[np.bool_]) -> _Values:
    """Rows (P[Bin ≥ j], P[Bin ≥ j + 1], P[Bin = j]) of Bin(trials, ½) at j = ``at_least``.

    The tails as :func:`_tail_from` gives them, the first one only where
    ``first`` holds (NaN elsewhere); all tails in one ``betainc`` call
    (elementwise: the same doubles).
    """
    tails = _tail_from(
        np.concatenate([trials[first], trials]), np.concatenate([at_least[first], at_least + 1.0])
    )
    wanted = int(np.count_nonzero(first))
    out = np.empty((len(trials), 3))
    out[:, 0] = np.nan
    out[first, 0] = tails[:wanted]
    out[:, 1] = tails[wanted:]
    out[:, 2] = _points(trials, at_least)
    return out


def _kept_line_values(
    kept: _Kept, trials: _Values, at_least: _Values, first: NDArray[np.bool_]
) -> _Values:
    """Rows of :func:`_line_values` through the ``lines`` table.

    A row kept without its first tail (NaN) gets it computed, and kept, when
    ``first`` asks for it.
    """
    table = kept.table("lines", 3)
    rows, found, entry = table.find(trials, at_least)
    partial = found & first & np.isnan(rows[:, 0])
    if np.any(partial):
        tails = _tail_from(trials[partial], at_least[partial])
        rows[partial, 0] = tails
        table.values[entry[partial], 0] = tails
    missing = ~found
    if np.any(missing):
        wanted = first[missing]
        _fill(table, lambda n, j: _line_values(n, j, wanted), trials, at_least, rows, missing)
    return rows


def symmetric_tails(trials: _Values, at_least: _Values) -> _Values:
    """P[Bin(trials, ½) ≥ at_least] for 1 ≤ at_least ≤ trials (1-D arrays of integers).

    The regularized incomplete beta I_½(at_least, trials − at_least + 1), kept
    inside :func:`kept_values`.
    """
    trials = np.ascontiguousarray(trials, dtype=np.float64)
    at_least = np.ascontiguousarray(at_least, dtype=np.float64)
    kept = _KEPT.get()
    if kept is None or len(trials) == 0 or trials.max() < _KEPT_FROM_TRIALS:
        return _tails(trials, at_least)
    return _through(kept.table("tails"), _tails, trials, at_least)


def symmetric_points(x: _Values, trials: _Values) -> _Values:
    """P[Bin(trials, ½) = x] (1-D arrays of integers), kept inside :func:`kept_values`."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    trials = np.ascontiguousarray(trials, dtype=np.float64)
    kept = _KEPT.get()
    if kept is None or len(x) == 0 or trials.max() < _KEPT_FROM_TRIALS:
        return _points(trials, x)
    return _through(kept.table("points"), _points, trials, x)


def symmetric_line_values(
    trials: _Values, at_least: _Values, first: NDArray[np.bool_] | None = None
) -> tuple[_Values, _Values, _Values]:
    """P[Bin(trials, ½) ≥ j], P[Bin(trials, ½) ≥ j + 1] and P[Bin(trials, ½) = j], j = ``at_least``.

    What one line of the two-count kernel asks at its threshold j (1-D arrays of
    integers, 0 ≤ j ≤ trials): a tail is 1 for j ≤ 0 and 0 for j > trials,
    else the value :func:`symmetric_tails` gives; the point is
    :func:`symmetric_points`'s. The three are kept together, under one key,
    inside :func:`kept_values`.

    Args:
        trials: N per entry.
        at_least: j per entry.
        first: Where the first tail is wanted (all entries when ``None``);
            elsewhere it may come out NaN.
    """
    trials = np.ascontiguousarray(trials, dtype=np.float64)
    at_least = np.ascontiguousarray(at_least, dtype=np.float64)
    wanted = np.ones(len(trials), dtype=bool) if first is None else np.asarray(first, dtype=bool)
    kept = _KEPT.get()
    if kept is None or len(trials) == 0 or trials.max() < _KEPT_FROM_TRIALS:
        rows = _line_values(trials, at_least, wanted)
    else:
        rows = _kept_line_values(kept, trials, at_least, wanted)
    return rows[:, 0], rows[:, 1], rows[:, 2]
