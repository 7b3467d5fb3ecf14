"""``--memory-limit``: refuse, before the work, a run whose memory would not fit.

Twice: before reading the input (its rows: Parquet's metadata, or a CSV's size
and, when that does not settle it, one pass counting its line ends; one message
per user on the message path, the fewest any protocol sends), and before the
message path, once the protocol is calibrated (its expected messages per user,
the shuffler's dummies). See :mod:`shuffledp._memory` for the estimate and its
measurements. The default limit is what the process holds plus what the
machine has available; on a system that says neither, no check is made unless
``--memory-limit`` is given.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp._memory import (
    MemoryLimit,
    count_text_rows,
    format_bytes,
    memory_limit,
    message_path_peak,
    resident_memory,
    rows_upper_bound,
)
from shuffledp._validation import InvalidParameterError
from shuffledp.cli._common import byte_size

if TYPE_CHECKING:
    from shuffledp.protocols.base import ShuffleProtocol

__all__ = [
    "add_memory_argument",
    "check_before_messages",
    "check_before_reading",
    "expected_messages",
]


def add_memory_argument(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    """Declare ``--memory-limit``."""
    group.add_argument(
        "--memory-limit",
        type=byte_size,
        default=None,
        metavar="SIZE",
        help="most memory the run may use, e.g. 512M, 2G, 1.5GiB, 800MB or bytes (one letter "
        "or KiB...: powers of 1024; kB, MB...: of 1000); a run estimated to need more is "
        "refused before the work (default: what the machine has available)",
    )


def _rows(path: Path) -> tuple[int, bool] | None:
    """The file's data rows (exact for Parquet, an upper bound for CSV) and whether counted.

    ``None`` when the file cannot be looked at (the loader then says why).
    """
    from shuffledp.data.fileformat import detect_format

    try:
        found = detect_format(path)
    except (OSError, ValueError):
        return None
    if found.kind == "parquet":
        try:
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(path).metadata.num_rows), True
        except Exception:  # no pyarrow, or not Parquet: the loader says so
            return None
    return rows_upper_bound(path, found.compression), False


def _counted_rows(path: Path) -> int:
    """Count a CSV file's rows (one pass over its bytes), with a progress bar on a terminal."""
    from shuffledp._progress import progress_bar
    from shuffledp.data.fileformat import detect_format

    compression = detect_format(path).compression
    size = path.stat().st_size
    with progress_bar(total=size, desc="counting rows", unit="B", delay=1.0) as bar:
        done = [0]

        def advance(read: int) -> None:
            bar.update(read - done[0])
            done[0] = read

        return count_text_rows(path, compression, each=advance)


def _refusal(need: int, what: str, limit: MemoryLimit, *, message_path: bool) -> str:
    advice = (
        "use --path count, which draws the same counts with memory that does not grow with "
        "the rows, or a larger --memory-limit"
        if message_path
        else "give a larger --memory-limit"
    )
    return f"{what} needs about {format_bytes(need)}, above {limit.describe()}; {advice}"


def check_before_reading(args: argparse.Namespace) -> MemoryLimit | None:
    """Refuse a run whose input alone (and one message a row) will not fit; return the limit.

    On the count path without ``--user-column`` the memory does not grow with
    the rows and nothing is checked beyond the limit itself.

    Raises:
        InvalidParameterError: Naming the rows, the estimate, ``--memory-limit``
            and (on the message path) ``--path count``.
    """
    limit = memory_limit(args.memory_limit)
    message_path = getattr(args, "path", "message") == "message"
    user_column = args.user_column is not None
    if limit is None or not (message_path or user_column):
        return limit
    path = Path(args.input)
    found = _rows(path)
    if found is None:
        return limit
    rows, exact = found

    def need(rows: int) -> int:
        # One message per user, the fewest any protocol sends; with --user-column the
        # users (and so the messages) are known only after grouping: checked later.
        messages = rows if message_path and not user_column else 0
        return message_path_peak(
            held=limit.held, rows=rows, messages=messages, user_column=user_column
        )

    if not exact and need(rows) > limit.limit:
        rows, exact = _counted_rows(path), True  # the size alone did not settle it
    if need(rows) > limit.limit:
        ids = f" with --user-column {args.user_column!r}" if user_column else ""
        path_name = "the message path" if message_path else "the count path"
        what = f"reading {rows:,} rows{ids} on {path_name}"
        if message_path and not user_column:
            what += " (one message a row, the fewest any protocol sends)"
        raise InvalidParameterError(
            _refusal(need(rows), what, limit, message_path=message_path and not user_column)
        )
    return limit


def expected_messages(protocol: ShuffleProtocol, n: int) -> float:
    """Messages a run of ``protocol`` on ``n`` users shuffles, on average.

    The calibration's expected messages per user (FLIP, correlated; one
    otherwise) times n, plus the shuffler's expected dummies (augmented).
    """
    calibration: Any = getattr(protocol, "calibration", None)
    per_user = float(getattr(calibration, "expected_messages_per_user", 1.0))
    dummies = float(getattr(calibration, "expected_dummies", 0.0))
    return n * per_user + dummies


def check_before_messages(limit: MemoryLimit | None, protocol: ShuffleProtocol, n: int) -> None:
    """Refuse the message path if the calibrated protocol's messages will not fit.

    Raises:
        InvalidParameterError: Naming the messages, the estimate, ``--memory-limit``
            and ``--path count``.
    """
    if limit is None:
        return
    messages = expected_messages(protocol, n)
    held = resident_memory() or limit.held
    need = message_path_peak(held=held, rows=n, messages=messages, user_column=False, reading=False)
    if need > limit.limit:
        what = (
            f"the message path of {n:,} users (about {messages:,.0f} messages, "
            f"{messages / max(n, 1):.3g} per user)"
        )
        raise InvalidParameterError(_refusal(need, what, limit, message_path=True))
