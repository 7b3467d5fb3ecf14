"""Map categorical values to bin indices over a declared (public) domain.

:func:`encode_values` is the in-memory entry point; :class:`BinEncoder` does the
work one batch at a time so that files of any length are encoded as they are
read (:mod:`shuffledp.data.ingest`). Labels are matched exactly (no trimming,
no case folding) unless ``normalize_labels`` asks to ignore case and
surrounding spaces on both sides (:func:`shuffledp.data.domains.normalize_label`).

Every batch is first reduced to its distinct values (pyarrow's
``dictionary_encode`` or :func:`numpy.unique`); only those distinct values are
looked up, and the row codes follow by fancy indexing, so no Python code runs
per row.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, InvalidParameterError, check_flag
from shuffledp._wording import Parameter, Worded
from shuffledp.data.domains import (
    check_domain,
    integer_text,
    normalize_label,
    normalized_index,
    parse_domain,
)
from shuffledp.data.frames import row_label_of, select_column

__all__ = [
    "DEFAULT_NA_VALUES",
    "INFERRED",
    "MAX_INFERRED_LABELS",
    "NORMALIZE_LABELS_RULE",
    "BinEncoder",
    "EncodedColumn",
    "encode_values",
    "parse_domain",
    "sorted_domain",
]

#: Cell texts read as "missing" by default: the empty cell, ``NA`` and ``N/A``.
DEFAULT_NA_VALUES: tuple[str, ...] = ("", "NA", "N/A")

#: ``domain_source`` of a domain taken from the data (not covered by the guarantee).
INFERRED = "inferred-from-data"

#: Largest domain :class:`BinEncoder` infers from data before suspecting the wrong column.
MAX_INFERRED_LABELS = 1_000_000

#: What ``normalize_labels`` does, as a release states it (a rule, no count).
NORMALIZE_LABELS_RULE = Worded(
    "values and domain labels were matched ignoring case and surrounding spaces ({option}: "
    "both stripped, then case folded); the release shows the declared labels",
    option=Parameter("normalize_labels", True),
)

#: Row code of a missing value (null or one of the NA texts).
MISSING = -1
#: Row code of a value outside the declared domain (when no ``other`` bin is given).
OUTSIDE = -2

#: A batch of text values: a pyarrow string / large_string / dictionary array, or
#: a 1-D numpy array of ``str`` (object or unicode dtype; ``None``/NaN mean missing).
TextBatch = Any


@dataclass(frozen=True)
class EncodedColumn:
    """A column of values as bin indices.

    Attributes:
        indices: Bin index of each row.
        domain: Label of each bin, in bin order.
        domain_source: ``"declared"`` or ``"inferred-from-data"`` (then the
            domain is not covered by the privacy guarantee).
        mapped_to_other: Number of values outside the domain counted in the ``other`` bin.
        missing_dropped: Number of missing values dropped (``drop_missing``).
        notes: Human-readable statements of everything the encoding adjusted.
            Counts such as ``missing_dropped`` and the notes are statistics of
            the private data: show them to the data owner, do not release them.
    """

    indices: NDArray[np.int64]
    domain: list[str]
    domain_source: str = "declared"
    mapped_to_other: int = 0
    notes: tuple[str, ...] = ()
    missing_dropped: int = 0

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


def sorted_domain(labels: Iterable[str]) -> list[str]:
    """Return the distinct labels, sorted numerically if all are numbers, else as text.

    Numeric sorting keeps "2" before "10"; labels that denote the same number in
    different spellings ("1" and "1.0") stay distinct bins, ordered as text.
    """
    distinct = sorted(set(labels))
    numbers = [_as_number(label) for label in distinct]
    if all(v is not None for v in numbers):
        return [label for _, label in sorted(zip(numbers, distinct, strict=True))]
    return distinct


def _pyarrow() -> ModuleType | None:
    """Return pyarrow if it is installed (tests replace this to force the numpy path)."""
    try:
        return importlib.import_module("pyarrow")
    except ImportError:
        return None


def _is_null(value: object) -> bool:
    if value is None or (isinstance(value, float) and value != value):
        return True
    kind = type(value)  # pandas' NA (nullable columns without pyarrow), without importing pandas
    return kind.__name__ == "NAType" and kind.__module__.startswith("pandas")


def text_error(what: object, *, floats: bool = False) -> InvalidParameterError:
    """The error for values that are neither text nor integers (``floats``: with the Int64 hint)."""
    hint = ""
    if floats:
        hint = (
            " (a pandas column of integers with missing values becomes float: "
            "use .astype('Int64') to keep integers)"
        )
    return InvalidParameterError(
        f"values must be text labels (str) or integers, got {what}{hint}; convert them to "
        "text first (e.g. .astype(str)), or give bin indices to the protocol directly"
    )


#: An integer written as Python writes it: what an integer value is matched to.
_INTEGER_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")


def is_integer_label(label: str) -> bool:
    """Whether an integer value can match ``label``: its decimal text as Python writes it.

    ``"7"`` and ``"-2"`` can (the values ``7`` and ``-2``); ``"07"``, ``"+7"``
    and ``" 7"`` cannot.
    """
    return _INTEGER_TEXT.fullmatch(label) is not None


def is_integer_batch(batch: TextBatch) -> bool:
    """Whether a batch holds integers (numpy or Arrow integer types, Arrow dictionaries of them)."""
    if isinstance(batch, np.ndarray):
        return batch.dtype.kind in "iu"
    kind = getattr(batch, "type", None)
    if kind is None:
        return False
    pa = _pyarrow()
    if pa is None:  # pragma: no cover - Arrow batches only exist when pyarrow does
        return False
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_integer(kind))


def _factorize_numpy(batch: NDArray[Any]) -> tuple[list[str], NDArray[np.int64]]:
    if batch.dtype.kind in "iu":  # integer labels stand for their decimal text
        distinct, local = np.unique(batch, return_inverse=True)
        return [str(int(v)) for v in distinct.tolist()], local.reshape(-1).astype(np.int64)
    if batch.dtype.kind == "U":
        distinct, local = np.unique(batch, return_inverse=True)
        return distinct.tolist(), local.reshape(-1).astype(np.int64)
    if batch.dtype.kind != "O":
        raise text_error(f"an array of {batch.dtype}", floats=batch.dtype.kind == "f")
    # Python objects already exist one per row here; a dict finds the distinct ones
    # in C without sorting (which mixed None / str could not do anyway).
    items = batch.tolist()
    index = {value: i for i, value in enumerate(dict.fromkeys(items))}
    local = np.fromiter(map(index.__getitem__, items), dtype=np.int64, count=len(items))
    labels: list[str] = []
    remap = np.empty(len(index), dtype=np.int64)
    for i, value in enumerate(index):
        if _is_null(value):
            remap[i] = -1
        elif isinstance(value, str):
            remap[i] = len(labels)
            labels.append(value)
        elif integer_text(value) is not None:
            remap[i] = len(labels)
            labels.append(str(integer_text(value)))
        else:
            raise text_error(f"{value!r} ({type(value).__name__})")
    return labels, remap[local] if len(local) else local


def _arrow_indices(pa: ModuleType, indices: Any) -> NDArray[np.int64]:
    """Arrow integers as int64, nulls as -1, read from the array's buffers.

    pyarrow's ``to_numpy`` and its scalars import pandas when it is installed
    (0.3 s of CPU, most of a ``run flip`` on 10⁵ rows that needs no pandas).
    """
    import pyarrow.compute as pc

    indices = pc.cast(indices, pa.int64())
    n, offset = len(indices), indices.offset
    validity, values = indices.buffers()
    local = np.frombuffer(values, dtype=np.int64, count=n, offset=8 * offset).copy()
    if indices.null_count:  # Arrow's validity bitmap: one bit per value, least significant first
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")
        local[valid[offset : offset + n] == 0] = -1
    return local


def _factorize_arrow(pa: ModuleType, batch: Any) -> tuple[list[str], NDArray[np.int64]]:
    import pyarrow.compute as pc

    if pa.types.is_integer(batch.type):  # integer labels stand for their decimal text
        batch = pc.cast(batch, pa.string())
    if pa.types.is_dictionary(batch.type):
        encoded = batch
    elif pa.types.is_string(batch.type) or pa.types.is_large_string(batch.type):
        encoded = pc.dictionary_encode(batch)
    else:
        raise text_error(f"an Arrow array of {batch.type}", floats=pa.types.is_floating(batch.type))
    dictionary = encoded.dictionary
    if pa.types.is_integer(dictionary.type):
        dictionary = pc.cast(dictionary, pa.string())
    if not (pa.types.is_string(dictionary.type) or pa.types.is_large_string(dictionary.type)):
        raise text_error(f"an Arrow dictionary of {dictionary.type}")
    local = _arrow_indices(pa, encoded.indices)
    labels: list[str] = dictionary.to_pylist()
    if dictionary.null_count:  # a null inside a dictionary is a missing value too
        nulls = [i for i, v in enumerate(labels) if v is None]
        local[np.isin(local, nulls)] = -1
    return labels, local


def factorize(batch: TextBatch) -> tuple[list[str], NDArray[np.int64]]:
    """Return the batch's distinct labels and each row's position among them (-1: missing).

    A label may appear more than once in the list (Arrow dictionaries need not
    be unique); callers map each entry independently.

    Raises:
        InvalidParameterError: If the batch holds anything but text and missing values.
    """
    if isinstance(batch, np.ndarray):
        return _factorize_numpy(batch)
    pa = _pyarrow()
    if pa is None:  # pragma: no cover - pyarrow batches only exist when pyarrow does
        raise TypeError(f"unsupported batch type {type(batch).__name__}")
    return _factorize_arrow(pa, batch)


def describe_missing(values: Collection[str]) -> str:
    """Describe what counts as missing, given the NA texts, for messages."""
    if not values:
        return "None, NaN or null"
    return f"one of {', '.join(repr(v) for v in sorted(values))}, or null"


class BinEncoder:
    """Encode batches of labels as bin indices, counting every adjustment.

    Row codes are bin indices (``>= 0``), :data:`MISSING` or :data:`OUTSIDE`.
    After the last batch, :meth:`outside_error` and :meth:`missing_error` say
    what went wrong, and :meth:`finish` turns the codes of the kept rows into
    bin indices and the final domain (sorted, when it was inferred).

    Args:
        domain: Declared labels in bin order, or ``None`` with ``infer_domain``.
        infer_domain: Take the domain from the distinct values seen (sorted
            with :func:`sorted_domain`); the result is not public input.
        other: Bin for values outside a declared domain; appended to the
            domain if it is not one of its labels.
        na_values: Texts that mean "missing" (nulls always do). One that is a
            label of the declared domain counts as that label.
        where: What the values are, for messages (e.g. ``"column 'city' of data.csv"``;
            default ``"the input"``).
        row_label: Describes row ``i`` (0-based) in messages.
        normalize_labels: Match values to labels (and to ``na_values`` and
            ``other``) ignoring case and surrounding spaces
            (:func:`~shuffledp.data.domains.normalize_label` on both sides).
            The bins keep the declared labels; an inferred domain holds the
            normalized values.

    Raises:
        InvalidParameterError: On an inconsistent combination of options or a
            bad domain (with ``normalize_labels``, also two labels, or
            ``other`` and a label, that differ only by case or surrounding spaces).
    """

    def __init__(
        self,
        domain: Iterable[Any] | None,
        *,
        infer_domain: bool = False,
        other: str | None = None,
        na_values: Collection[str] = (),
        where: str = "the input",
        row_label: Callable[[int], str] = lambda i: f"index {i}",
        normalize_labels: bool = False,
    ) -> None:
        check_flag(normalize_labels, "normalize_labels")
        if domain is not None and infer_domain:
            raise InvalidParameterError(
                "give either a declared domain or infer_domain=True, not both"
            )
        if domain is None and not infer_domain:
            raise InvalidParameterError(
                "the domain is required public input (every client must know it): give "
                "domain=[...] with every possible label in bin order (a comma list, a domain "
                "file or a built-in name on the command line), or set infer_domain=True to "
                "take it from the data, which the privacy guarantee then does not cover"
            )
        if other is not None:
            if domain is None:
                raise InvalidParameterError(
                    "other=LABEL needs a declared domain (an inferred one has no outside values)"
                )
            if not isinstance(other, str) or other == "":
                raise InvalidParameterError(f"other must be a non-empty label, got {other!r}")
        na = set(na_values)
        if not all(isinstance(v, str) for v in na):
            raise InvalidParameterError(f"na_values must be strings, got {sorted(na, key=str)!r}")
        self.where = where
        self.row_label = row_label
        self.inferred = domain is None
        self.normalize_labels = normalize_labels
        self._key: Callable[[str], str] = normalize_label if normalize_labels else str
        self._labels: list[str] = [] if domain is None else check_domain(domain)
        if normalize_labels:
            normalized_index(self._labels)  # two labels one value could match: refused
        self._other: int | None = None
        self.other_appended = False
        if other is not None:
            if other not in self._labels:
                self._refuse_other_near_a_label(other)
                self._labels.append(other)
                self.other_appended = True
            self._other = self._labels.index(other)
        self._index = {self._key(label): i for i, label in enumerate(self._labels)}
        self._na_texts = {v for v in na if self._key(v) not in self._index}
        self._na = {self._key(v) for v in self._na_texts}
        self._na_as_label: dict[str, int] = {}
        for v in sorted(na):
            if self._key(v) in self._index and self._key(v) not in map(
                self._key, self._na_as_label
            ):
                self._na_as_label[v] = 0
        self.rows = 0
        self.missing = 0
        self.first_missing: int | None = None
        self.outside = 0
        self.outside_example: tuple[str, int] | None = None
        self.near_miss = 0
        self.near_miss_example: tuple[str, str] | None = None
        #: Each normalized label's first label (the near-miss hint's lookup), built when needed.
        self._normalized: dict[str, str] | None = None
        self.inferred_size = 0
        #: Kept rows whose value was outside the domain, counted in ``other`` (set by finish).
        self.mapped_to_other = 0

    def _refuse_other_near_a_label(self, other: str) -> None:
        """With ``normalize_labels``, ``other`` must be a label exactly or no label at all."""
        if not self.normalize_labels:
            return
        key = normalize_label(other)
        for label in self._labels:
            if normalize_label(label) == key:
                raise InvalidParameterError(
                    Worded(
                        "{other} is the domain label {label} once case is folded and "
                        "surrounding spaces removed ({option}): give that label exactly to "
                        "count outside values in its bin, or a label of its own",
                        other=Parameter("other", other),
                        label=repr(label),
                        option=Parameter("normalize_labels", True),
                    )
                )

    def _code(self, label: str) -> int:
        key = self._key(label)
        code = self._index.get(key)
        if code is not None:
            return code
        if key in self._na:
            return MISSING
        if self.inferred:
            if len(self._labels) >= MAX_INFERRED_LABELS:
                raise DataError(
                    f"{self.where} has more than {MAX_INFERRED_LABELS:,} distinct values; "
                    "is it the right column? Declare the domain instead of inferring it"
                )
            self._index[key] = code = len(self._labels)
            self._labels.append(key)
            return code
        return OUTSIDE

    @property
    def code_dtype(self) -> type[np.signedinteger[Any]]:
        """The smallest integer type that holds every row code (int8 for up to 126 labels)."""
        if self.inferred:
            return np.int32
        top = len(self._labels) + 1
        return np.int8 if top <= 127 else np.int16 if top <= 32_767 else np.int32

    def encode(self, batch: TextBatch) -> NDArray[np.signedinteger[Any]]:
        """Return the row codes of one batch (of type :attr:`code_dtype`) and update the counts.

        Raises:
            InvalidParameterError: If the batch is not text.
            DataError: If an inferred domain grows beyond :data:`MAX_INFERRED_LABELS`.
        """
        if is_integer_batch(batch):
            self._check_integer_domain(batch)
        labels, local = factorize(batch)
        n = len(local)
        offset = self.rows
        self.rows += n
        if n == 0:
            return np.empty(0, dtype=self.code_dtype)
        if not labels:
            self._count_missing(np.full(n, MISSING, dtype=np.int32), n, offset)
            return np.full(n, MISSING, dtype=self.code_dtype)
        codes = np.fromiter((self._code(label) for label in labels), np.int32, len(labels))
        present = local >= 0
        counts = np.bincount(local[present], minlength=len(labels))
        outside = codes == OUTSIDE
        if self._other is not None:  # a code of its own until finish(), to count kept rows
            codes[outside] = len(self._labels)
        rows = np.where(present, codes[local], MISSING).astype(self.code_dtype)
        missing = (n - int(counts.sum())) + int(counts[codes == MISSING].sum())
        if missing:
            self._count_missing(rows, missing, offset)
        if outside.any():
            self._count_outside(labels, local, present, outside, counts, offset)
        for label in self._na_as_label:
            key = self._key(label)
            self._na_as_label[label] += sum(
                int(c)
                for lab, c in zip(labels, counts.tolist(), strict=True)
                if self._key(lab) == key
            )
        return rows

    def _check_integer_domain(self, batch: TextBatch) -> None:
        """Integer values are matched to integer labels: a declared domain must have some."""
        if self.inferred or any(is_integer_label(label) for label in self._labels):
            return
        kind = batch.dtype if isinstance(batch, np.ndarray) else batch.type
        shown = ", ".join(repr(label) for label in self._labels[:3])
        raise InvalidParameterError(
            f"{self.where} holds integers ({kind}), which are matched to the domain's labels "
            f"written as integers ('1', '-2', ...), but the domain has none ({shown}, ...): "
            "declare the integer labels the values can take, or give text values"
        )

    def _count_missing(self, rows: NDArray[np.integer], missing: int, offset: int) -> None:
        self.missing += missing
        if self.first_missing is None:
            self.first_missing = offset + int(np.flatnonzero(rows == MISSING)[0])

    def _count_outside(
        self,
        labels: list[str],
        local: NDArray[np.int64],
        present: NDArray[np.bool_],
        outside: NDArray[np.bool_],
        counts: NDArray[np.int64],
        offset: int,
    ) -> None:
        self.outside += int(counts[outside].sum())
        if self.outside_example is None:
            row = int(np.flatnonzero(present & outside[np.maximum(local, 0)])[0])
            self.outside_example = (labels[int(local[row])], offset + row)
        if self.normalize_labels:
            return  # a value that differs from a label only by case or spaces matched it
        if self._normalized is None:
            self._normalized = {}
            for known in self._labels:
                self._normalized.setdefault(normalize_label(known), known)
        for i in np.flatnonzero(outside).tolist():
            label = labels[i]
            near = self._normalized.get(normalize_label(label))
            if near is not None:
                self.near_miss += int(counts[i])
                if self.near_miss_example is None:
                    self.near_miss_example = (label, near)

    def finish(self, codes: NDArray[np.integer]) -> tuple[NDArray[np.int64], list[str]]:
        """Return the final bin indices of the kept rows' ``codes`` and the domain.

        Args:
            codes: Codes returned by :meth:`encode` for the rows kept (bin codes
                only: no missing or outside rows).

        Returns:
            The bin indices and the labels in bin order. An inferred domain
            holds the distinct values of the kept rows, sorted with
            :func:`sorted_domain`.

        Raises:
            DataError: If an inferred domain has fewer than two labels.
        """
        out = np.array(codes, dtype=np.int64)
        if not self.inferred:
            if self._other is not None:
                mapped = out == len(self._labels)
                self.mapped_to_other = int(mapped.sum())
                out[mapped] = self._other
            return out, list(self._labels)
        used, ranks, domain = self._inferred_domain(np.bincount(out, minlength=len(self._labels)))
        order = np.full(len(self._labels), -1, dtype=np.int64)
        order[used] = ranks
        return order[out], domain

    def finish_counts(
        self, code_counts: NDArray[np.integer]
    ) -> tuple[NDArray[np.int64], list[str]]:
        """Return the histogram of the kept rows and the domain, from counts of their codes.

        The counterpart of :meth:`finish` for callers that count codes batch by
        batch (``np.bincount`` of each batch's codes ``>= 0``) instead of
        keeping one code per row: memory then depends on the domain, not on
        the number of rows.

        Args:
            code_counts: How many kept rows have each code ``0, 1, ...`` (any
                length; missing codes count 0).

        Returns:
            Users per bin, in bin order, and the labels in bin order (sorted
            with :func:`sorted_domain` when the domain was inferred).

        Raises:
            DataError: If an inferred domain has fewer than two labels.
        """
        size = len(self._labels) + (1 if self._other is not None else 0)
        counts = np.zeros(max(size, len(code_counts)), dtype=np.int64)
        counts[: len(code_counts)] = code_counts
        if not self.inferred:
            histogram = counts[: len(self._labels)].copy()
            if self._other is not None:
                self.mapped_to_other = int(counts[len(self._labels)])
                histogram[self._other] += self.mapped_to_other
            return histogram, list(self._labels)
        used, ranks, domain = self._inferred_domain(counts[: len(self._labels)])
        histogram = np.zeros(len(domain), dtype=np.int64)
        histogram[ranks] = counts[used]
        return histogram, domain

    def _inferred_domain(
        self, code_counts: NDArray[np.integer]
    ) -> tuple[NDArray[np.intp], NDArray[np.int64], list[str]]:
        """The inferred domain: the codes kept rows use, their bins and the sorted labels.

        Args:
            code_counts: Kept rows per code (one per distinct value seen).

        Returns:
            The used codes, the bin of each in the domain, and the domain (the
            used codes' labels sorted with :func:`sorted_domain`).

        Raises:
            DataError: If fewer than two codes are used.
        """
        used = np.flatnonzero(code_counts)
        labels = [self._labels[i] for i in used.tolist()]
        if len(labels) < 2:
            found = f"a single value ({labels[0]!r})" if labels else "no value"
            raise DataError(
                f"{self.where} has {found}, so no domain can be inferred; declare the domain"
            )
        domain = sorted_domain(labels)
        rank = {label: i for i, label in enumerate(domain)}
        self.inferred_size = len(domain)
        return used, np.array([rank[label] for label in labels], dtype=np.int64), domain

    @property
    def domain_source(self) -> str:
        """``"inferred-from-data"`` for an inferred domain, else ``"declared"``."""
        return INFERRED if self.inferred else "declared"

    def _near_miss_hint(self) -> str:
        """Outside values that differ from a label only by case or surrounding spaces, if any."""
        if not self.near_miss or self.near_miss_example is None:
            return ""
        value, label = self.near_miss_example
        normalized = {normalize_label(known) for known in self._labels}
        remedy: str | Worded = ""
        if len(normalized) == len(self._labels):  # no two labels normalize alike
            remedy = Worded(
                " (pass {option} to ignore case and surrounding spaces)",
                option=Parameter("normalize_labels", True),
            )
        return Worded(
            "; {count} of them differ from a domain label only by case or surrounding spaces, "
            "such as {value} vs {label}: labels are matched exactly{remedy}",
            count=f"{self.near_miss:,}",
            value=repr(value),
            label=repr(label),
            remedy=remedy,
        )

    def outside_error(self) -> DataError | None:
        """The error for values outside the declared domain.

        ``None`` if there are none or they were counted in the ``other`` bin.
        """
        if not self.outside or self._other is not None or self.outside_example is None:
            return None
        value, row = self.outside_example
        return DataError(
            Worded(
                "value {value} in {where} ({row}) is not in the domain; {count} value(s) are "
                "outside it{hint}; add the missing labels to the domain, or count such values "
                "in one bin with {other}",
                value=repr(value),
                where=self.where,
                row=self.row_label(row),
                count=f"{self.outside:,}",
                hint=self._near_miss_hint(),
                other=Parameter("other", placeholder="LABEL"),
            )
        )

    def missing_error(self, remedy: str) -> DataError | None:
        """The error for missing values (``None`` if there are none).

        Args:
            remedy: How the caller can drop them, appended to the message (a
                :class:`~shuffledp._wording.Worded` keeps its command-line spelling).
        """
        if not self.missing or self.first_missing is None:
            return None
        return DataError(
            Worded(
                "{count} value(s) in {where} are missing ({missing}), first at {row}{remedy}",
                count=f"{self.missing:,}",
                where=self.where,
                missing=describe_missing(self._na_texts),
                row=self.row_label(self.first_missing),
                remedy=remedy,
            )
        )

    def notes(self) -> list[str]:
        """Operator-facing statements of what the encoding adjusted or assumed."""
        notes = []
        if self.inferred:
            notes.append(
                f"the domain ({self.inferred_size} labels) was inferred from the data: it is "
                "not public input, so the privacy guarantee does not cover it"
            )
        if self.inferred and self.normalize_labels:
            notes.append(
                "the inferred labels are the values with surrounding spaces removed and case "
                "folded (normalize_labels)"
            )
        for label, count in self._na_as_label.items():
            bin_label = self._labels[self._index[self._key(label)]]
            what = (
                "a label of the domain"
                if bin_label == label
                else f"the domain label {bin_label!r} once normalized"
            )
            notes.append(
                f"{label!r} is {what}, so its {count:,} occurrence(s) in "
                f"{self.where} counted as that label, not as missing"
            )
        if self._other is not None:
            label = self._labels[self._other]
            if self.other_appended:
                notes.append(
                    f"label {label!r} was appended to the domain as bin {self._other} "
                    "for values outside it"
                )
            if self.outside and self.outside_example is not None:
                value, row = self.outside_example
                read = (
                    ""
                    if self.outside == self.mapped_to_other
                    else (f" ({self.outside:,} among all rows read)")
                )
                notes.append(
                    Worded(
                        "{mapped} value(s) in {where} outside the declared domain were counted "
                        "in {label}{read} (e.g. {value}, {row}){hint}",
                        mapped=f"{self.mapped_to_other:,}",
                        where=self.where,
                        label=repr(label),
                        read=read,
                        value=repr(value),
                        row=self.row_label(row),
                        hint=self._near_miss_hint(),
                    )
                )
        return notes


def _numpy_batch(items: list[Any]) -> NDArray[Any]:
    """Items as one numpy batch: an integer array if every item is an integer, else objects."""
    if items and all(integer_text(v) is not None for v in items):
        return np.array([int(v) for v in items], dtype=np.int64)
    return np.asarray(items, dtype=object)


def _as_batches(values: Any) -> Iterator[TextBatch]:
    """Yield ``values`` as text batches; see :func:`encode_values` for what is accepted."""
    pa = _pyarrow()
    module = type(values).__module__.split(".")[0]
    if module == "pyarrow":
        if hasattr(values, "chunks"):  # ChunkedArray
            yield from values.chunks
        elif hasattr(values, "type"):
            yield values
        else:
            raise text_error(type(values).__name__)
        return
    if module == "pandas":
        if pa is not None:
            try:
                yield pa.array(values, from_pandas=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise text_error(f"a pandas object pyarrow cannot read as text ({exc})") from None
            return
        yield _numpy_batch(list(values))
        return
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise InvalidParameterError(f"values must be 1-D, got an array of shape {values.shape}")
        if values.dtype.kind in "iuU" or pa is None:
            yield values
            return
    elif isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise text_error(f"a {type(values).__name__}")
    if pa is None:
        yield _numpy_batch(list(values))
        return
    items = values if isinstance(values, np.ndarray | Sequence) else list(values)
    try:
        array = pa.array(items, type=pa.string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        try:  # integers (all of them) are labels too
            array = pa.array(items, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            array = None
        if array is None or not pa.types.is_integer(array.type):
            floats = array is not None and pa.types.is_floating(array.type)
            raise text_error(
                f"a value pyarrow cannot read as text ({exc})", floats=floats
            ) from None
    yield array


def encode_values(
    values: Any,
    domain: Iterable[Any] | None = None,
    *,
    column: Hashable | None = None,
    other: str | None = None,
    infer_domain: bool = False,
    drop_missing: bool = False,
    normalize_labels: bool = False,
) -> EncodedColumn:
    """Encode labels (one per user) as bin indices over the public ``domain``.

    The domain is public input: every client must know it to randomize, so it
    is declared, not read off the data. Labels are matched exactly (``" Paris"``
    is not ``"Paris"``) unless ``normalize_labels`` is set.

    Args:
        values: One label per user: a list or tuple of ``str``, a 1-D numpy
            array of ``str`` (unicode or object dtype), a pandas ``Series``
            (object, string or categorical dtype) or a pyarrow ``Array`` /
            ``ChunkedArray`` of strings; or a pandas ``DataFrame`` or pyarrow
            ``Table`` with the values in ``column``. Integers are labels too (a
            list of ints, a numpy or Arrow integer array, a pandas integer Series,
            nullable ``Int64`` included): each is matched to the label that is
            its decimal text (``7`` to ``"7"``), so they need a domain of integer
            labels (a domain with none is an error). ``None``, NaN and nulls
            are missing values, which are an error unless ``drop_missing``.
            (Here an integer is always a label; ``ShuffleProtocol.run`` takes a
            numpy integer array as bin indices.)
        domain: Every possible label, in bin order: any ordered collection of
            labels (a list, a pandas ``Index`` such as ``value_counts().index``
            or ``Categorical.categories``, a numpy or pyarrow array, ...; see
            :func:`~shuffledp.data.domains.check_domain`).
        column: With a frame, the column holding each user's value (not needed
            when the frame has one column).
        other: Count values outside ``domain`` in this bin (appended to the
            domain if it is not one of its labels) instead of raising.
        infer_domain: Without ``domain``, use the distinct values (sorted
            with :func:`sorted_domain`). The domain then depends on the private
            data and is not covered by the privacy guarantee
            (``domain_source == "inferred-from-data"``).
        drop_missing: Drop missing values instead of raising; how many is
            :attr:`EncodedColumn.missing_dropped` (a count of the private data,
            not for release).
        normalize_labels: Match values to labels ignoring case and surrounding
            spaces (both stripped, then case folded:
            :func:`~shuffledp.data.domains.normalize_label`); the bins keep the
            declared labels, and two labels that normalize alike are an error.

    Returns:
        The bin index of each kept value, the domain, and what was adjusted.

    Raises:
        InvalidParameterError: If no domain is given without ``infer_domain``,
            the domain is malformed, ``column`` does not name one column of a
            frame, the values are neither text nor integers, or they are
            integers and the domain has no integer label.
        DataError: If ``values`` is empty, has a missing value (without
            ``drop_missing``) or nothing but missing values, a value outside
            the domain (without ``other``), or an inferred domain has a single label.

    Example:
        >>> enc = encode_values(["Paris", "Rome", "Paris"], ["Lyon", "Paris", "Rome"])
        >>> enc.indices.tolist(), enc.histogram.tolist()
        ([1, 2, 1], [0, 2, 1])
        >>> encode_values(["Paris", "Oslo"], ["Paris", "Rome"], other="Other").domain
        ['Paris', 'Rome', 'Other']
        >>> encode_values([" paris", "ROME"], ["Paris", "Rome"], normalize_labels=True).indices
        array([0, 1])
    """
    check_flag(drop_missing, "drop_missing")
    where = "the input" if column is None else f"column {column!r}"
    values = select_column(values, column)
    encoder = BinEncoder(
        domain,
        infer_domain=infer_domain,
        other=other,
        where=where,
        row_label=row_label_of(values),
        normalize_labels=normalize_labels,
    )
    chunks = [encoder.encode(batch) for batch in _as_batches(values)]
    if encoder.rows == 0:
        raise DataError("the data have no rows: at least one user is needed")
    remedy = Worded(
        "; drop them with {drop}, which reports how many",
        drop=Parameter("drop_missing", True),
    )
    for error in (
        None if drop_missing else encoder.missing_error(remedy),
        encoder.outside_error(),
    ):
        if error is not None:
            raise error
    codes = np.concatenate(chunks)
    notes = encoder.notes()
    if encoder.missing:
        codes = codes[codes >= 0]
        if not len(codes):
            raise DataError(f"no user is left in {where}: all {encoder.rows:,} values are missing")
        notes.append(
            Worded(
                "{count} missing value(s) in {where} were dropped ({drop})",
                count=f"{encoder.missing:,}",
                where=where,
                drop=Parameter("drop_missing", True),
            )
        )
    indices, labels = encoder.finish(codes)
    return EncodedColumn(
        indices=indices,
        domain=labels,
        domain_source=encoder.domain_source,
        mapped_to_other=encoder.mapped_to_other,
        notes=tuple(notes),
        missing_dropped=encoder.missing,
    )
