"""The users' values of a one-value-per-user protocol: the public domain, bin indices, labels.

What :meth:`shuffledp.protocols.base.SingleValueProtocol.run` prepares before
a run: the domain given as its size or its labels (:func:`resolve_domain`),
the values as bin indices, labels (a list, a numpy array, a pandas Series, a
pyarrow array) or a column of a pandas DataFrame or a pyarrow Table
(:func:`prepare_values`), the labels a run encodes with (:func:`run_labels`)
and the users per bin of the count path (:func:`checked_histogram`).
:mod:`shuffledp.protocols.base` re-exports the public names.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import DataError, InvalidParameterError, check_flag, check_int
from shuffledp._wording import Parameter, Worded
from shuffledp.data.checks import check_values
from shuffledp.data.frames import select_column

__all__ = [
    "DROP_MISSING_NOT_COVERED",
    "DROP_MISSING_RULE",
    "DomainSpec",
    "PreparedValues",
    "ValuesAre",
    "check_indices",
    "checked_histogram",
    "prepare_values",
    "resolve_domain",
    "run_labels",
]

IntArray = NDArray[np.int64]
#: What ``run``'s values are: bin indices, labels, or ``None`` to tell by their type.
ValuesAre = Literal["indices", "labels"]

#: A domain given as its size d (values are bin indices 0..d−1) or as its labels, in bin order:
#: a list or any ordered collection of labels (a pandas Index, a numpy or pyarrow array, ...;
#: see :func:`shuffledp.data.domains.check_domain`); integer labels stand for their decimal text.
DomainSpec = int | Iterable[Any]


def resolve_domain(domain: DomainSpec, name: str = "domain") -> tuple[int, tuple[str, ...] | None]:
    """Return (d, labels) for a domain given as a size or as labels.

    The domain is public: every client needs it to randomize, so it must come
    from the analyst's declaration, never from the private data. Labels are
    any ordered collection (a list, a pandas ``Index`` such as
    ``Categorical.categories`` or the ``value_counts().index`` of public
    data, a numpy or pyarrow array, a generator);
    integer labels stand for their decimal text (``[1, 2, 10]`` is
    ``("1", "2", "10")``), and anything else that is not text is refused
    (:func:`shuffledp.data.domains.check_domain`).

    Raises:
        InvalidParameterError: If the size is not an integer ≥ 2 or the labels
            are not distinct strings or integers (at least two).
    """
    if isinstance(domain, bool):
        raise InvalidParameterError(
            f"{name} must be the number of bins or the bin labels, got {domain!r}"
        )
    if isinstance(domain, (int, np.integer)):
        return check_int(domain, name, minimum=2), None
    from shuffledp.data.domains import check_domain

    labels = tuple(check_domain(domain, name))
    return len(labels), labels


@dataclass(frozen=True)
class PreparedValues:
    """The users' bin indices, with what preparing them applied and adjusted.

    Attributes:
        indices: One bin index per user (missing values dropped, if asked).
        release_notes: The rules applied (``drop_missing``, ``normalize_labels``),
            without any count: what a release may state.
        not_covered: What a release shows that the guarantee does not cover
            because of those rules.
        operator_notes: What encoding adjusted, with counts: statistics of the
            private data, for the data owner only.
        missing_dropped: Missing values dropped (``drop_missing=True``); a
            count of the private data, not for release.
    """

    indices: IntArray
    release_notes: tuple[str, ...] = ()
    not_covered: tuple[str, ...] = ()
    operator_notes: tuple[str, ...] = ()
    missing_dropped: int = 0


#: ``drop_missing=True``'s statements: a rule for ``notes`` and what the guarantee leaves out.
#: Both are stated whenever the option is given, so that a release does not say whether any
#: value was missing.
DROP_MISSING_RULE = Worded(
    "values that were missing were dropped ({drop}); their number is not released",
    drop=Parameter("drop_missing", True),
)
DROP_MISSING_NOT_COVERED = Worded(
    "which users have no value: missing values were dropped before the run ({drop}), so n "
    "counts only users with a value",
    drop=Parameter("drop_missing", True),
)


def prepare_values(
    values: Any,
    *,
    labels: Sequence[str] | None,
    domain_size: int,
    column: Hashable | None = None,
    drop_missing: bool = False,
    normalize_labels: bool = False,
    values_are: ValuesAre | None = None,
) -> PreparedValues:
    """Return the users' values as bin indices: what ``SingleValueProtocol.run`` runs on.

    Args:
        values: Bin indices or labels, one per user, or a pandas DataFrame /
            pyarrow Table holding them in ``column`` (see
            :meth:`~shuffledp.protocols.base.SingleValueProtocol.run`).
        labels: The domain's labels in bin order (``None``: a size-only domain,
            so labels cannot be encoded).
        domain_size: d.
        column: A frame's column of values (``None``: its only column).
        drop_missing: Drop missing values instead of refusing them.
        normalize_labels: Match labels ignoring case and surrounding spaces.
        values_are: ``"indices"``, ``"labels"``, or ``None`` to tell by type
            (a numpy integer array or a list of ints is indices).

    Raises:
        InvalidParameterError: On a bad option, or ``normalize_labels`` with bin indices.
        DataError: As :meth:`~shuffledp.protocols.base.SingleValueProtocol.run`.
    """
    check_flag(drop_missing, "drop_missing")
    check_flag(normalize_labels, "normalize_labels")
    if values_are not in (None, "indices", "labels"):
        raise InvalidParameterError(
            f"values_are must be 'indices', 'labels' or None (tell by type), got {values_are!r}"
        )
    selected = select_column(values, column)
    rules: list[str] = []
    not_covered: list[str] = []
    if drop_missing:
        rules.append(DROP_MISSING_RULE)
        not_covered.append(DROP_MISSING_NOT_COVERED)
    if values_are == "indices" or (values_are is None and _looks_like_indices(selected)):
        if normalize_labels:
            raise InvalidParameterError(
                "normalize_labels=True matches labels, but the values are bin indices "
                "(a numpy integer array or a list of ints, or values_are='indices'): give "
                "the labels, or leave normalize_labels out"
            )
        if values_are is None:
            _refuse_ambiguous_integers(labels)
        indices = check_indices(np.asarray(selected), domain_size)
        return PreparedValues(indices, tuple(rules), tuple(not_covered))
    if labels is None:
        raise DataError(
            "values are labels, so the public domain is needed to encode them: pass "
            "domain=[...] (all labels, in bin order) or build the protocol with the labels"
        )
    from shuffledp.data.encoding import NORMALIZE_LABELS_RULE, encode_values

    encoded = encode_values(
        values,
        labels,
        column=column,
        drop_missing=drop_missing,
        normalize_labels=normalize_labels,
    )
    if normalize_labels:
        rules.append(NORMALIZE_LABELS_RULE)
    return PreparedValues(
        encoded.indices,
        release_notes=tuple(rules),
        not_covered=tuple(not_covered),
        operator_notes=encoded.notes,
        missing_dropped=encoded.missing_dropped,
    )


def _looks_like_indices(values: Any) -> bool:
    """Whether ``values`` are bin indices by their type: a numpy integer array or a list of ints."""
    if isinstance(values, np.ndarray):
        return bool(np.issubdtype(values.dtype, np.integer))
    return (
        isinstance(values, list)
        and bool(values)
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values[:1000])
    )


def _refuse_ambiguous_integers(labels: Sequence[str] | None) -> None:
    """Refuse integers when the domain's labels are integers other than 0, 1, …, d − 1.

    An integer array means bin indices; with labels like 1 … 10 the same
    numbers could be meant as labels, and reading them as positions would
    shift every value by one bin without a word.
    """
    from shuffledp.data.encoding import is_integer_label

    if labels is None or list(labels) == [str(i) for i in range(len(labels))]:
        return
    if not all(is_integer_label(label) for label in labels):
        return  # integers as labels could not match them all: they can only be indices
    raise DataError(
        Worded(
            "values are integers and the domain's labels are integers too ({first}, {second}, "
            "...), which is ambiguous: an integer array holds bin indices (0 for the first "
            "label). Say which with {labels_} (each integer is matched to the label that is its "
            "decimal text) or {indices}, or pass the values as labels (a pandas Series, a "
            "pyarrow array or text)",
            first=repr(labels[0]),
            second=repr(labels[1]),
            labels_=Parameter("values_are", "labels"),
            indices=Parameter("values_are", "indices"),
        )
    )


def check_indices(values: NDArray[Any], domain_size: int) -> IntArray:
    """Bin indices, with what an integer array means in the error when one is out of range."""
    try:
        return check_values(values, domain_size)
    except DataError as exc:
        raise DataError(
            f"{exc}; a numpy integer array (or a list of ints) holds bin indices, positions "
            f"0 to {domain_size - 1} of the domain, not labels: to give integer labels, "
            "pass values_are='labels', or pass them as a pandas Series or a pyarrow array "
            "(or as text)"
        ) from None


def run_labels(
    labels: tuple[str, ...] | None, domain_size: int, domain: Iterable[Any] | None
) -> list[str] | None:
    """The labels a run encodes with: ``domain`` if given (it must agree), else ``labels``.

    Raises:
        DataError: If ``domain`` has another size than ``domain_size`` or
            differs from ``labels``.
        InvalidParameterError: If ``domain`` is not a valid domain.
    """
    if domain is None:
        return None if labels is None else list(labels)
    size, given = resolve_domain(domain)
    if size != domain_size:
        raise DataError(f"domain has {size} labels, expected {domain_size}")
    if labels is not None and given != labels:
        raise DataError("domain differs from the labels the protocol was built with")
    return None if given is None else list(given)


def checked_histogram(histogram: Any, domain_size: int) -> tuple[IntArray, int]:
    """Return the users per bin as int64 and their total, after checking their shape and sign.

    Raises:
        InvalidParameterError: Unless ``histogram`` is ``domain_size`` non-negative integers.
    """
    counts = np.asarray(histogram)
    if (
        counts.ndim != 1
        or counts.shape[0] != domain_size
        or not np.issubdtype(counts.dtype, np.integer)
        or (counts.size and int(counts.min()) < 0)
    ):
        raise InvalidParameterError(
            f"histogram must hold {domain_size} non-negative integer counts (one per "
            f"bin), got {counts.dtype} of shape {counts.shape}"
        )
    total = sum(counts.tolist())  # Python integers: a numpy sum wraps around silently
    return counts.astype(np.int64), total
