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

__all__ = ["kept_values", "symmetric_points", "symmetric_tails"]

_Values = NDArray[np.float64]

#: Multipliers of the hash (odd 64-bit constants: golden ratio, and one of MurmurHash3's).
_MIX_TRIALS = np.uint64(0x9E3779B97F4A7C15)
_MIX_POINT = np.uint64(0xC2B2AE3D27D4EB4F)
_FIRST_BITS = 14
#: Entries kept at most; a table that would grow past them starts over (each table
#: stays below about 50 MB whatever the search).
_MAX_ENTRIES = 1 << 20
#: Calls whose trials all stay below this are computed, not looked up: there a tail
#: costs about what a lookup does.
_KEPT_FROM_TRIALS = 4096.0


class _Table:
    """Exact (trials, point) → value pairs, linear probing, at most half full.

    A key is one complex number, trials + i·point, so that writing it is one
    assignment (of several writers to one slot exactly one key lands whole); a
    value is written after its key, by the writers whose key landed.
    """

    def __init__(self) -> None:
        self.reset(_FIRST_BITS)

    def reset(self, bits: int) -> None:
        """Empty the table, with 2**bits slots."""
        self.bits = bits
        self.keys = np.full(1 << bits, complex(np.nan, 0.0))  # NaN marks an empty slot
        self.values = np.zeros(1 << bits)
        self.used = 0

    def _slots(self, trials: _Values, points: _Values) -> NDArray[np.int64]:
        # Hash of the exact bit patterns (equal doubles other than ±0 have equal bits;
        # a ±0 mismatch only costs a miss).
        mixed = (trials.view(np.uint64) * _MIX_TRIALS) ^ (points.view(np.uint64) * _MIX_POINT)
        return (mixed >> np.uint64(64 - self.bits)).astype(np.int64)

    def find(self, trials: _Values, points: _Values) -> tuple[_Values, NDArray[np.bool_]]:
        """The values kept for these pairs, and where one was kept."""
        wanted = trials + 1j * points
        out = np.zeros(len(trials))
        found = np.zeros(len(trials), dtype=bool)
        mask = (1 << self.bits) - 1
        pending = np.arange(len(trials))
        slots = self._slots(trials, points)
        while len(pending):
            kept = self.keys[slots]
            match = kept == wanted[pending]
            out[pending[match]] = self.values[slots[match]]
            found[pending[match]] = True
            going = ~match & ~np.isnan(kept.real)
            pending, slots = pending[going], (slots[going] + 1) & mask
        return out, found

    def add(self, trials: _Values, points: _Values, values: _Values) -> None:
        """Keep these pairs (not kept yet; repeats among them are kept once)."""
        if 2 * (self.used + len(trials)) > (1 << self.bits):
            self._grow(self.used + len(trials))
        wanted = trials + 1j * points
        mask = (1 << self.bits) - 1
        pending = np.arange(len(trials))
        slots = self._slots(trials, points)
        while len(pending):
            empty = np.isnan(self.keys[slots].real)
            claim = slots[empty]
            self.keys[claim] = wanted[pending[empty]]
            landed = self.keys[slots] == wanted[pending]  # its own key, or a twin's
            self.values[slots[landed]] = values[pending[landed]]
            self.used += len(claim)  # at most: slots claimed twice count twice
            going = ~landed
            pending, slots = pending[going], (slots[going] + 1) & mask

    def _grow(self, entries: int) -> None:
        bits = self.bits
        while 2 * entries > (1 << bits):
            bits += 1
        full = ~np.isnan(self.keys.real)
        keys, values = self.keys[full], self.values[full]
        self.reset(bits)
        self.add(np.ascontiguousarray(keys.real), np.ascontiguousarray(keys.imag), values)


class _Kept:
    """The tables of one :func:`kept_values` block."""

    def __init__(self) -> None:
        self.tails = _Table()
        self.points = _Table()


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
    return _through(kept.tails, _tails, trials, at_least)


def symmetric_points(x: _Values, trials: _Values) -> _Values:
    """P[Bin(trials, ½) = x] (1-D arrays of integers), kept inside :func:`kept_values`."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    trials = np.ascontiguousarray(trials, dtype=np.float64)
    kept = _KEPT.get()
    if kept is None or len(x) == 0 or trials.max() < _KEPT_FROM_TRIALS:
        return _points(trials, x)
    return _through(kept.points, _points, trials, x)
