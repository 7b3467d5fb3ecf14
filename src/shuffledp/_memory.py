"""How much memory a run holds, how much the machine has, and what a message-path run needs.

The message path holds every user's bin index and every message (payload and
sender, then the shuffle's keys and its output) at once: a real shuffle needs
all messages in memory, so the path cannot stream. Its peak grows with the
rows and the messages; :func:`message_path_peak` estimates it before the work,
so that ``shuffledp run`` can refuse what will not fit instead of growing until
the machine swaps (issue 24: a 410M-row file grew to 8.5 GB in 80 s, 18 GB
needed).

The figures are measured: ``benchmarks/cli_memory.py`` prints them, and
``tests/system/test_cli_memory.py`` runs every value protocol on a small and a
medium input, measures its peak resident memory and checks that the same run is
refused at a limit equal to that peak. Peak resident memory of ``shuffledp run
PROTOCOL --path message`` (2-core Linux VM, numpy 2.4, pyarrow 26, 100 labels),
beyond what the process holds once its imports are done:

* the reader's fixed part: about 50 MB (pyarrow's CSV reader and its thread
  pool, whatever the file's length);
* per row read: 20 to 26 bytes (the bin index, the chunks being encoded); with
  ``--user-column`` 64 to 100 bytes more, and about 30-50 MB for grouping
  (every id and its hash until each user is found);
* per message: 34 to 49 bytes (the payload and its sender as int64, the
  shuffle's keys and its output), with about 2 MB of blocks; measured as the
  message path's own high-water mark (``/proc/self/clear_refs``) at 2e3 to 4e6
  users and up to 300 messages a user.

The estimate rounds each up (:data:`READER_BYTES`, :data:`ROW_BYTES`,
:data:`USER_ID_BYTES` and :data:`USER_ID_FIXED_BYTES`, :data:`MESSAGE_BYTES`
and :data:`MESSAGE_FIXED_BYTES`); it came out 1.04 to 1.59 times the measured
peaks from 2.5e5 to 1e7 rows. It is an estimate, not a bound: another
allocator, or another pyarrow, may hold more.

No numpy here: the command line uses this module before it imports anything heavy.
"""

from __future__ import annotations

import gzip
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MESSAGE_BYTES",
    "MESSAGE_FIXED_BYTES",
    "READER_BYTES",
    "ROW_BYTES",
    "USER_ID_BYTES",
    "USER_ID_FIXED_BYTES",
    "MemoryLimit",
    "available_memory",
    "count_text_rows",
    "format_bytes",
    "memory_limit",
    "message_path_peak",
    "resident_memory",
    "rows_upper_bound",
]

#: The reader's fixed part (pyarrow's CSV reader and thread pool: about 50 MB measured).
READER_BYTES = 64 * 2**20
#: Per row read on the message path (the bin index and the chunks being encoded: <= 26 measured).
ROW_BYTES = 32
#: Per row read with ``--user-column`` on either path (every id and its hash: 64-100 measured).
USER_ID_BYTES = 96
#: Grouping by user's fixed part (its hash tables and kernels: about 30-50 MB measured).
USER_ID_FIXED_BYTES = 48 * 2**20
#: Per message (payload and sender, the shuffle's keys and output: 34-49 measured).
MESSAGE_BYTES = 56
#: The message path's fixed part (the randomizers' and the shuffle's blocks: about 2 MB measured).
MESSAGE_FIXED_BYTES = 8 * 2**20

#: A compressed stream expands at most this much (deflate's limit is about 1032:1).
GZIP_MAX_RATIO = 1032


def format_bytes(amount: float) -> str:
    """``1.5 GiB``, ``512 MiB``, ``1010 MiB``, ``12 B``: binary units, 3 or 4 digits, rounded up.

    Rounded up, so that a need is never shown below what was estimated.
    """
    for unit, power in (("TiB", 4), ("GiB", 3), ("MiB", 2), ("KiB", 1)):
        if amount >= 1024**power:
            value = amount / 1024**power
            decimals = 0 if value >= 100 else 1 if value >= 10 else 2
            shown = math.ceil(value * 10**decimals) / 10**decimals
            return f"{shown:.{decimals}f} {unit}"
    return f"{math.ceil(amount)} B"


def resident_memory() -> int | None:
    """This process's resident memory now, in bytes (``None`` if the system does not say).

    ``/proc/self/statm`` on Linux; elsewhere the peak so far (``getrusage``), which is
    at least the current amount.
    """
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # bytes on macOS


def available_memory() -> tuple[int, str] | None:
    """Memory the machine can give without swapping, in bytes, and where the figure comes from.

    ``MemAvailable`` of ``/proc/meminfo`` (Linux: free memory plus the caches it
    can drop); elsewhere the free physical pages (``sysconf``), which leaves the
    caches out and so says less. ``None`` when neither is known.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
    except (OSError, ValueError, IndexError):
        pass
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
    if pages > 0 and size > 0:
        return pages * size, "the free physical pages"
    return None


@dataclass(frozen=True)
class MemoryLimit:
    """The most resident memory a run may reach, and how it was set.

    Attributes:
        limit: Bytes.
        given: Whether ``--memory-limit`` set it (else the machine's available memory).
        held: This process's resident memory when the limit was set.
        source: Where the default came from (``MemAvailable in /proc/meminfo``).
    """

    limit: int
    given: bool
    held: int
    source: str

    def describe(self, flag: str = "--memory-limit") -> str:
        """``--memory-limit 8 GiB`` or ``--memory-limit (default: ...)``."""
        if self.given:
            return f"{flag} {format_bytes(self.limit)}"
        return (
            f"{format_bytes(self.limit)}, the default of {flag} (this process's "
            f"{format_bytes(self.held)} and the {format_bytes(self.limit - self.held)} "
            f"available: {self.source})"
        )


def memory_limit(given: int | None) -> MemoryLimit | None:
    """The run's limit: ``given`` (``--memory-limit``), else what is held plus what is available.

    ``None`` when nothing was given and the system says nothing of its memory
    (no check is made then).
    """
    held = resident_memory() or 0
    if given is not None:
        return MemoryLimit(given, True, held, "--memory-limit")
    available = available_memory()
    if available is None:
        return None
    amount, source = available
    return MemoryLimit(held + amount, False, held, source)


def message_path_peak(
    *, held: int, rows: int, messages: float, user_column: bool, reading: bool = True
) -> int:
    """Estimated peak resident memory of a run that reads ``rows`` rows and shuffles ``messages``.

    Args:
        held: The process's resident memory now (its imports, what it holds).
        rows: Rows read (an upper estimate is fine: more memory, never less).
        messages: Messages the users send (an expectation; the estimate adds
            six standard deviations of a Poisson count).
        user_column: Whether ``--user-column`` keeps every row's id while grouping.
        reading: Whether the rows are still to be read (the reader's fixed part
            and the per-row cost count then; after loading they are in ``held``).
    """
    total = float(held)
    if reading:
        total += READER_BYTES + rows * ROW_BYTES
        if user_column:
            total += USER_ID_FIXED_BYTES + rows * USER_ID_BYTES
    if messages > 0:
        total += MESSAGE_FIXED_BYTES + (messages + 6.0 * math.sqrt(messages)) * MESSAGE_BYTES
    return math.ceil(total)


def rows_upper_bound(path: Path, compression: str | None) -> int:
    """An upper bound on the data rows of a CSV file from its size alone (no reading).

    A data row takes at least two bytes (a character and its line end); a gzip
    stream expands at most :data:`GZIP_MAX_RATIO` times.
    """
    size = path.stat().st_size
    if compression == "gzip":
        size *= GZIP_MAX_RATIO
    return size // 2 + 1


def count_text_rows(
    path: Path, compression: str | None, *, each: Callable[[int], None] | None = None
) -> int:
    """Data rows of a CSV file, at most: its line ends, less the header, plus an unended line.

    A quoted value that spans lines makes this count more rows than the file
    has, never fewer. Reads the file once in 1 MiB blocks (decompressing gzip);
    ``each`` is called with the compressed bytes read after each block (for a
    progress bar).
    """
    lines = 0
    last = b"\n"
    with path.open("rb") as raw:
        stream = gzip.open(raw, "rb") if compression == "gzip" else raw
        while block := stream.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
            if each is not None:
                each(raw.tell())
    if last != b"\n":
        lines += 1
    return max(lines - 1, 0)
