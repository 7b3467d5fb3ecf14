"""Map categorical values to bin indices over a declared or inferred domain."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, InvalidParameterError

__all__ = ["EncodedColumn", "encode_values", "parse_domain", "sorted_domain"]


@dataclass(frozen=True)
class EncodedColumn:
    """A column of values as bin indices.

    Attributes:
        indices: Bin index of each row.
        domain: Label of each bin, in bin order.
    """

    indices: NDArray[np.int64]
    domain: list[str]

    @property
    def histogram(self) -> NDArray[np.int64]:
        """Number of rows per bin."""
        return np.bincount(self.indices, minlength=len(self.domain)).astype(np.int64)


def _as_number(label: str) -> float | None:
    try:
        value = float(label)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def sorted_domain(labels: Sequence[str]) -> list[str]:
    """Return the distinct labels, sorted numerically if all are numbers, else as text.

    Numeric sorting keeps "2" before "10"; labels that denote the same number in
    different spellings ("1" and "1.0") stay distinct bins, ordered as text.
    """
    distinct = sorted(set(labels))
    numbers = [_as_number(label) for label in distinct]
    if all(v is not None for v in numbers):
        return [label for _, label in sorted(zip(numbers, distinct, strict=True))]
    return distinct


def parse_domain(text: str) -> list[str]:
    """Parse a comma-separated domain (``"A,B,C"``) into its labels.

    Raises:
        InvalidParameterError: If a label is empty or repeated, or fewer than two are given.
    """
    labels = [part.strip() for part in text.split(",")]
    if any(label == "" for label in labels):
        raise InvalidParameterError(f"domain has an empty label: {text!r}")
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise InvalidParameterError(f"domain repeats the label(s) {', '.join(duplicates)}")
    if len(labels) < 2:
        raise InvalidParameterError(f"domain needs at least two values, got {len(labels)}")
    return labels


def encode_values(values: Sequence[str], domain: Sequence[str] | None = None) -> EncodedColumn:
    """Encode ``values`` as indices into ``domain`` (or into their sorted distinct values).

    Args:
        values: One label per user.
        domain: Allowed labels in bin order; inferred with :func:`sorted_domain` if ``None``.

    Raises:
        DataError: If ``values`` is empty, a value is not in ``domain``, or the
            inferred domain has a single value.
    """
    if len(values) == 0:
        raise DataError("the data have no rows: at least one user is needed")
    labels = list(domain) if domain is not None else sorted_domain(values)
    if len(labels) < 2:
        raise DataError(
            f"the domain has a single value ({labels[0]!r}); give the full domain with --domain"
        )
    # Map each distinct value once, then broadcast: no per-row Python work.
    distinct, inverse = np.unique(np.asarray(values, dtype=str), return_inverse=True)
    lookup = {label: i for i, label in enumerate(labels)}
    codes = np.array([lookup.get(v, -1) for v in distinct.tolist()], dtype=np.int64)
    indices = codes[inverse.ravel()]
    missing = np.flatnonzero(indices < 0)
    if missing.size:
        row = int(missing[0])
        raise DataError(
            f"value {values[row]!r} (row {row + 1}) is not in the domain; "
            f"{missing.size} row(s) are outside it"
        )
    return EncodedColumn(indices=indices, domain=labels)
