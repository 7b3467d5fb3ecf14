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
and filled with a few vectorized passes, so that a hit costs about a twentieth
of a tail evaluation at N ~ 10⁶; calls whose N all stay below 4096, where a tail
costs about what a lookup does, are computed as they come.

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
#: stays below about 50 MB whatever the search).
_MAX_ENTRIES = 1 << 19
#: Calls whose trials all stay below this are computed, not looked up: there a tail
#: costs about what a lookup does.
_KEPT_FROM_TRIALS = 4096.0


class _Table:
    """Exact (trials, point) → value pairs, linear probing over at most 4 slots, ≤ ¼ full.

    A key is one complex number, trials + i·point, so that writing it is one
    assignment (of several writers to one slot exactly one key lands whole); a
    value is written after its key, by the writers whose key landed. Nothing is
    ever removed (a table only starts over), so a key kept within the first
    :data:`_PROBES` slots from its hash is found there.
    """

    def __init__(self, width: int = 1) -> None:
        self.width = width  # values per key
        self.reset(_FIRST_BITS)

    def reset(self, bits: int) -> None:
        """Empty the table, with 2**bits slots."""
        self.bits = bits
        self.keys = np.full(1 << bits, complex(np.nan, 0.0))  # NaN marks an empty slot
        shape = (1 << bits,) if self.width == 1 else (1 << bits, self.width)
        self.values = np.zeros(shape)
        self.used = 0

    def _slots(self, trials: _Values, points: _Values) -> NDArray[np.int64]:
        # Hash of the exact bit patterns (equal doubles other than ±0 have equal bits;
        # a ±0 mismatch only costs a miss).
        mixed = (trials.view(np.uint64) * _MIX_TRIALS) ^ (points.view(np.uint64) * _MIX_POINT)
        return (mixed >> np.uint64(64 - self.bits)).astype(np.int64)

    def find(self, trials: _Values, points: _Values) -> tuple[_Values, NDArray[np.bool_]]:
        """The values kept for these pairs, and where one was kept."""
        wanted = trials + 1j * points
        found = np.zeros(len(trials), dtype=bool)
        mask = (1 << self.bits) - 1
        pending = np.arange(len(trials))
        slots = self._slots(trials, points)
        hits, hit_slots = [], []
        for _ in range(_PROBES):
            kept = self.keys[slots]
            match = kept == wanted[pending]
            hits.append(pending[match])
            hit_slots.append(slots[match])
            going = ~match & ~np.isnan(kept.real)
            if not np.any(going):
                break
            pending, slots = pending[going], (slots[going] + 1) & mask
        out = np.zeros((len(trials), *self.values.shape[1:]))
        where = np.concatenate(hits)
        found[where] = True
        out[where] = np.take(self.values, np.concatenate(hit_slots), axis=0)
        return out, found

    def add(self, trials: _Values, points: _Values, values: _Values) -> None:
        """Keep these pairs (not kept yet; repeats among them are kept once).

        A pair with no empty slot among its :data:`_PROBES` is left out.
        """
        if 4 * (self.used + len(trials)) > (1 << self.bits):
            self._grow(self.used + len(trials))
        wanted = trials + 1j * points
        mask = (1 << self.bits) - 1
        pending = np.arange(len(trials))
        slots = self._slots(trials, points)
        for _ in range(_PROBES):
            empty = np.isnan(self.keys[slots].real)
            claim = slots[empty]
            self.keys[claim] = wanted[pending[empty]]
            landed = self.keys[slots] == wanted[pending]  # its own key, or a twin's
            self.values[slots[landed]] = values[pending[landed]]
            self.used += len(claim)  # at most: slots claimed twice count twice
            going = ~landed
            if not np.any(going):
                break
            pending, slots = pending[going], (slots[going] + 1) & mask

    def _grow(self, entries: int) -> None:
        bits = self.bits
        while 4 * entries > (1 << bits):
            bits += 1
        full = ~np.isnan(self.keys.real)
        keys, values = self.keys[full], self.values[full]
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
    out, found = table.find(trials, points)
    missing = ~found
    if np.any(missing):
        fresh = np.asarray(compute(trials[missing], points[missing]), dtype=np.float64)
        out[missing] = fresh
        if table.used + len(fresh) > _MAX_ENTRIES:
            table.reset(_FIRST_BITS)
        table.add(trials[missing], points[missing], fresh)
    return out


def _tails(trials: _Values, at_least: _Values) -> _Values:
    out: _Values = special.betainc(at_least, trials - at_least + 1.0, 0.5)
    return out


def _points(trials: _Values, x: _Values) -> _Values:
    return binomial_pmf(x, trials, 0.5)


def _line_values(trials: _Values, at_least: _Values) -> _Values:
    """Rows (P[Bin ≥ j], P[Bin ≥ j + 1], P[Bin = j]) of Bin(trials, ½) at j = ``at_least``.

    A tail is 1 for a threshold ≤ 0 and 0 above ``trials``; in between it is
    :func:`_tails`'s value (both tails in one ``betainc`` call, elementwise).
    """
    size = len(trials)
    both_trials = np.concatenate([trials, trials])
    both_at = np.concatenate([at_least, at_least + 1.0])
    tails = np.zeros(2 * size)
    tails[both_at <= 0] = 1.0
    mid = (both_at > 0) & (both_at <= both_trials)
    if np.any(mid):
        tails[mid] = _tails(both_trials[mid], both_at[mid])
    out = np.empty((size, 3))
    out[:, 0] = tails[:size]
    out[:, 1] = tails[size:]
    out[:, 2] = _points(trials, at_least)
    return out


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


def symmetric_line_values(trials: _Values, at_least: _Values) -> tuple[_Values, _Values, _Values]:
    """P[Bin(trials, ½) ≥ j], P[Bin(trials, ½) ≥ j + 1] and P[Bin(trials, ½) = j], j = ``at_least``.

    What one line of the two-count kernel asks at its threshold j (1-D arrays of
    integers, 0 ≤ j ≤ trials): a tail is 1 for j + 1 ≤ 0 and 0 for j + 1 >
    trials, else the value :func:`symmetric_tails` gives; the point is
    :func:`symmetric_points`'s. The three are kept together, under one key,
    inside :func:`kept_values`.
    """
    trials = np.ascontiguousarray(trials, dtype=np.float64)
    at_least = np.ascontiguousarray(at_least, dtype=np.float64)
    kept = _KEPT.get()
    if kept is None or len(trials) == 0 or trials.max() < _KEPT_FROM_TRIALS:
        rows = _line_values(trials, at_least)
    else:
        rows = _through(kept.table("lines", 3), _line_values, trials, at_least)
    return rows[:, 0], rows[:, 1], rows[:, 2]
