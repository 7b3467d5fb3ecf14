"""Progress bars that appear on a terminal and stay quiet otherwise."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

__all__ = ["progress"]

T = TypeVar("T")


def progress(iterable: Iterable[T], *, total: int | None = None, desc: str = "") -> Iterator[T]:
    """Wrap ``iterable`` in a progress bar shown only when stderr is a terminal.

    Args:
        iterable: What to iterate over.
        total: Number of items, when ``iterable`` has no length.
        desc: Label shown before the bar.
    """
    # disable=None lets tqdm switch itself off when stderr is not a TTY.
    yield from tqdm(iterable, total=total, desc=desc, disable=None, leave=False)
