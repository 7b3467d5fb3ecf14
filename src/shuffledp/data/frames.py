"""Data frames already in memory: one column of a pandas DataFrame or a pyarrow Table.

``protocol.run(df, column="city")``, ``encode_values(df, domain, column="city")``
and ``load_values(df, "city", ...)`` take the users' values as a column of a
frame: a pandas ``DataFrame`` or a pyarrow ``Table`` / ``RecordBatch``. A frame
with one column needs no ``column``; a frame with several does, and a
``column`` given with anything but a frame is an error (it would be ignored).

Frames are recognized by their type's module and name, so nothing here imports
pandas or pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from shuffledp._validation import InvalidParameterError
from shuffledp._wording import Parameter, Worded

__all__ = ["describe_frame", "frame_columns", "frame_kind", "row_label_of", "select_column"]

#: Frame types: (module's top package, class name) -> what messages call it.
_FRAMES = {
    ("pandas", "DataFrame"): "the DataFrame",
    ("pyarrow", "Table"): "the pyarrow Table",
    ("pyarrow", "RecordBatch"): "the pyarrow RecordBatch",
}


def frame_kind(values: object) -> str | None:
    """``"pandas"`` or ``"pyarrow"`` if ``values`` is a frame (named columns), else ``None``."""
    kind = type(values)
    key = (kind.__module__.split(".")[0], kind.__name__)
    return key[0] if key in _FRAMES else None


def describe_frame(values: object) -> str:
    """What messages call a frame: ``"the DataFrame"``, ``"the pyarrow Table"``, ..."""
    kind = type(values)
    return _FRAMES.get((kind.__module__.split(".")[0], kind.__name__), "the input")


def frame_columns(frame: Any) -> list[Hashable]:
    """The column names of a frame, in order (duplicates kept)."""
    if frame_kind(frame) == "pyarrow":
        return list(frame.column_names)
    return list(frame.columns)


def _shown(names: list[Hashable]) -> str:
    shown = ", ".join(repr(name) for name in names[:10])
    return shown + (f", ... ({len(names)} in all)" if len(names) > 10 else "")


def select_column(values: Any, column: Hashable | None, *, name: str = "values") -> Any:
    """Return the column of a frame that holds each user's value, or ``values`` as they are.

    Args:
        values: A pandas DataFrame, a pyarrow Table or RecordBatch, or values
            that are not a frame (returned unchanged).
        column: The column's name; ``None`` for a frame with a single column
            (or for values that are not a frame).
        name: What the caller calls ``values`` in messages.

    Returns:
        A pandas Series, a pyarrow (Chunked)Array, or ``values``.

    Raises:
        InvalidParameterError: If ``column`` is given with values that are not
            a frame, is not one of the frame's columns (or names several), or
            is missing for a frame with several columns.
    """
    kind = frame_kind(values)
    if kind is None:
        if column is not None:
            raise InvalidParameterError(
                f"column={column!r} names a column of a pandas DataFrame or a pyarrow Table, "
                f"but {name} is a {type(values).__name__}: give the frame, or leave column out"
            )
        return values
    names = frame_columns(values)
    where = describe_frame(values)
    if column is None:
        if len(names) != 1:
            raise InvalidParameterError(
                Worded(
                    "{name} is a {kind} with {count} columns ({shown}): name the one holding "
                    "each user's value with {column}",
                    name=name,
                    kind=where.removeprefix("the "),
                    count=len(names),
                    shown=_shown(names) or "none",
                    column=Parameter("column", placeholder="NAME"),
                )
            )
        column = names[0]
    try:
        count = names.count(column)
    except (TypeError, ValueError):  # a name that cannot be compared (e.g. an array)
        count = 0
    if count == 0:
        raise InvalidParameterError(
            f"column {column!r} is not in {where} (columns: {_shown(names) or 'none'})"
        )
    if count > 1:
        raise InvalidParameterError(
            f"{where} has {count} columns named {column!r}: rename them so that the column "
            "of values is one"
        )
    if kind == "pyarrow":
        return values.column(names.index(column))
    return values[column]


def row_label_of(values: Any) -> Callable[[int], str]:
    """How messages name row ``i`` (0-based) of ``values``: its position, and its index label.

    A pandas object whose index is not 0, 1, ..., n − 1 has its index label
    named too (``"position 3, index label 'u17'"``); anything else is ``"index 3"``.
    """
    index = getattr(values, "index", None)
    if type(values).__module__.split(".")[0] != "pandas" or index is None:
        return lambda i: f"index {i}"
    if type(index).__name__ == "RangeIndex" and index.start == 0 and index.step == 1:
        return lambda i: f"index {i}"

    def label(i: int) -> str:
        value = index[i]
        value = value.item() if hasattr(value, "item") else value  # numpy scalars as Python's
        return f"position {i}, index label {value!r}"

    return label
