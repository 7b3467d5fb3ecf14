"""Progress bars that appear on a terminal and stay quiet otherwise."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from tqdm.auto import tqdm

__all__ = ["progress", "progress_bar", "working"]

T = TypeVar("T")


def progress(
    iterable: Iterable[T], *, total: int | None = None, desc: str = "", delay: float = 0.0
) -> Iterator[T]:
    """Wrap ``iterable`` in a progress bar shown only when stderr is a terminal.

    Args:
        iterable: What to iterate over.
        total: Number of items, when ``iterable`` has no length.
        desc: Label shown before the bar.
        delay: Seconds before the bar appears (none for quick loops).
    """
    # disable=None lets tqdm switch itself off when stderr is not a TTY.
    yield from tqdm(iterable, total=total, desc=desc, disable=None, leave=False, delay=delay)


def progress_bar(
    *,
    total: int | None,
    desc: str = "",
    unit: str = "it",
    enabled: bool = True,
    delay: float = 0.0,
    counts: bool = True,
) -> Any:
    """Return a manual progress bar (advance it with ``.update(k)``; close it or use ``with``).

    Shown only when ``enabled`` and stderr is a terminal.

    Args:
        total: The amount at completion (``None`` if unknown).
        desc: Label shown before the bar.
        unit: ``"B"`` for bytes (shown with binary prefixes), else a count unit such as ``"rows"``.
        enabled: ``False`` never shows the bar.
        delay: Seconds before the bar appears (none for quick work).
        counts: Show the amount done and the rate; ``False`` shows the percentage
            and the times only (when the amount is in internal steps, e.g. the
            shuffle's passes over its keys).
    """
    in_bytes = unit == "B"
    options: dict[str, Any] = {}
    if not counts:
        options["bar_format"] = "{desc}: {percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]"
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=in_bytes,
        unit_divisor=1024 if in_bytes else 1000,
        disable=None if enabled else True,
        leave=False,
        delay=delay,
        **options,
    )


def _other_bars(own: Any) -> int:
    """How many progress bars other than ``own`` are open (tqdm registers every enabled one)."""
    instances = getattr(tqdm, "_instances", ())
    return len(instances) - (1 if own is not None else 0)


#: Environment variable that sets how long a block runs before its status line shows
#: (seconds; tests set 0 so that short runs show it too).
STATUS_DELAY_VARIABLE = "SHUFFLEDP_STATUS_AFTER"


def _status_delay(default: float) -> float:
    """``after`` for :func:`working`: the variable's value when it is a number >= 0."""
    text = os.environ.get(STATUS_DELAY_VARIABLE)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= 0.0 else default


@contextlib.contextmanager
def working(desc: str, *, after: float = 1.0) -> Iterator[None]:
    """Show an elapsed-time indicator on a terminal while the block runs longer than ``after`` s.

    For computations without a known number of steps (an exact sum, a
    calibration, grouping rows by user): a line such as ``calibrating
    epsilon0: 3.2s`` that refreshes until the block ends, then disappears.
    Nothing is shown off a terminal or for blocks that finish within ``after``
    seconds (``SHUFFLEDP_STATUS_AFTER`` overrides it). While a progress bar of the
    block's own steps is open (reading a file, shuffling) the line steps aside and
    comes back after it, so that a long block always shows something and never two
    lines at once.
    """
    if not sys.stderr.isatty():
        yield
        return
    after = _status_delay(after)
    done = threading.Event()
    started = time.time()  # tqdm's clock

    def show() -> None:
        if done.wait(after):
            return
        bar = None
        try:
            while not done.is_set():
                if _other_bars(bar) > 0:
                    if bar is not None:  # a bar of the block's own steps is showing
                        bar.close()
                        bar = None
                elif bar is None:
                    bar = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", leave=False)
                    bar.start_t = started  # the time shown is the block's, from its start
                else:
                    bar.refresh()
                done.wait(0.25)
        finally:
            if bar is not None:
                bar.close()

    thread = threading.Thread(target=show, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
