"""Where a domain comes from: a comma-separated list, a file, or a built-in name.

The domain (the list of bin labels) is *public* input in the shuffle model:
every client needs it to randomize, so it must not be derived from the private
data. This module gives the three ways to declare it:

* :func:`parse_domain`: ``"A,B,C"`` on a command line; spaces around each
  label are ignored, so a label that starts or ends with a space, or contains
  a comma, needs a domain file;
* :func:`read_domain_file`: one label per line, kept exactly as written;
* :func:`builtin_domain`: a named list (:data:`BUILTIN_DOMAINS`) or an integer
  range ``range:LO-HI``.

All three return the labels in bin order and raise
:class:`~shuffledp._validation.InvalidParameterError` (or
:class:`~shuffledp._validation.DataError` for a bad file) when the labels are
empty, repeated or fewer than two.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, KeysView, Mapping, Sequence
from collections.abc import Set as AbstractSet
from numbers import Integral, Real
from pathlib import Path
from types import MappingProxyType
from typing import Any

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp._wording import Parameter, Worded

__all__ = [
    "BUILTIN_DOMAINS",
    "MAX_RANGE_SIZE",
    "builtin_domain",
    "builtin_domain_names",
    "check_domain",
    "check_domain_source",
    "integer_text",
    "normalize_label",
    "normalized_index",
    "parse_domain",
    "read_domain_file",
]

#: Largest number of labels ``range:LO-HI`` may produce.
MAX_RANGE_SIZE = 10_000_000

_US_STATES = (
    "AK AL AR AZ CA CO CT DC DE FL GA HI IA ID IL IN KS KY LA MA MD ME MI MN MO MS MT NC ND NE "
    "NH NJ NM NV NY OH OK OR PA RI SC SD TN TX UT VA VT WA WI WV WY"
).split()

#: The named domains, label tuples in bin order. ``range:LO-HI`` is built on demand.
BUILTIN_DOMAINS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "weekdays": (
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Saturday",
            "Sunday",
        ),
        "months": (
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ),
        "digits": tuple(string.digits),
        "letters": tuple(string.ascii_uppercase),
        "us-states": tuple(_US_STATES),  # 50 states + DC, USPS codes, sorted
    }
)

_RANGE = re.compile(r"range:(-?\d+)-(-?\d+)")


def _repeated(labels: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    repeated: dict[str, None] = {}
    for label in labels:
        if label in seen:
            repeated[label] = None
        seen.add(label)
    return list(repeated)


def integer_text(value: object) -> str | None:
    """The decimal text of an integer label (``7`` → ``"7"``); ``None`` for anything else.

    Python and numpy integers count (anything registered as
    :class:`numbers.Integral`), booleans do not.
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        return None
    return str(int(value))


def _not_labels(labels: object, name: str) -> str | None:
    """Why ``labels`` is not an ordered collection of labels (``None`` if it may be one)."""
    kind = type(labels)
    module = kind.__module__.split(".")[0]
    if isinstance(labels, str | bytes):
        return (
            f"{name} must be a list of labels, got the string {labels!r} "
            "(use parse_domain() for comma-separated text)"
        )
    if module == "pandas" and kind.__name__ == "Series":
        return (
            f"{name} must be the labels themselves, got a pandas Series, which maps an index "
            "to values (value_counts() maps each label to its count): give .index for the "
            "labels of its index, or .unique() for its values"
        )
    if module == "pandas" and kind.__name__ == "DataFrame":
        return (
            f"{name} must be the labels themselves, got a pandas DataFrame: give the labels "
            "of one column (e.g. df['city'].unique()) or a list"
        )
    if isinstance(labels, Mapping):
        return (
            f"{name} must be the labels themselves, got a mapping ({kind.__name__}): give "
            "list(mapping) for its keys, in bin order"
        )
    if isinstance(labels, AbstractSet) and not isinstance(labels, KeysView):
        return (
            f"{name} must list the labels in bin order, got a {kind.__name__}, which has no "
            "order: give sorted(labels) or a list in the order the bins should have"
        )
    if not isinstance(labels, Iterable):
        return f"{name} must be an iterable of labels (str or int), got {labels!r}"
    return None


def _label_text(label: object, name: str, position: int) -> str:
    """A domain label as text: a string as it is, an integer as its decimal text."""
    if isinstance(label, str):
        return str.__str__(label)  # a str subclass (numpy's str_) as a plain str
    text = integer_text(label)
    if text is not None:
        return text
    if label is None or (isinstance(label, float) and label != label) or _is_pandas_na(label):
        raise InvalidParameterError(
            f"{name} holds a missing value ({label!r}) at position {position}: a domain lists "
            "every possible label, and a missing value is none (drop it, e.g. with "
            "value_counts(dropna=True) or .dropna())"
        )
    hint = ""
    if isinstance(label, Real) and not isinstance(label, bool):
        hint = (
            "; numbers other than integers are refused because 1.0 and 1 would be one label "
            "(a pandas integer column with missing values becomes float: .astype('Int64') "
            "keeps integers)"
        )
    raise InvalidParameterError(
        f"{name} labels must be strings (or integers, which stand for their decimal text), "
        f"got {label!r} ({type(label).__name__}) at position {position}{hint}"
    )


def _is_pandas_na(value: object) -> bool:
    kind = type(value)  # pandas' NA and NaT, without importing pandas
    return kind.__name__ in ("NAType", "NaTType") and kind.__module__.startswith("pandas")


def check_domain(labels: Iterable[Any], name: str = "domain") -> list[str]:
    """Return ``labels`` as a list of text labels after checking they can serve as bin labels.

    ``labels`` is any ordered collection: a list or tuple, a numpy array, a
    pandas ``Index`` (``value_counts().index``, ``Categorical.categories``), a
    pandas ``ArrowStringArray``, a pyarrow array, a generator. A pandas
    ``Series`` or ``DataFrame``, a mapping and a set are refused (which of
    their parts are the labels, or in which order, would be a guess).

    Labels are compared exactly (no trimming, no case folding). A string is
    kept as it is; an integer label (Python or numpy, not a boolean) stands for
    its decimal text (``[1, 2, 10]`` is ``["1", "2", "10"]``): that is the
    bin's label in every output, and integer values are matched to it (see
    :func:`shuffledp.data.encoding.encode_values`). Anything else is refused,
    floats included (``1.0`` and ``1`` would be one label), and so is a
    missing value (``None``, NaN, pandas' NA): no conversion can merge two labels.

    Any collection is checked the same way, but none is public because of its
    type: the ``value_counts().index`` of the private data is the data's own
    distinct values (a label held by one user reveals that user), which the
    guarantee does not cover. Take the labels from a public source.

    Args:
        labels: The labels, in bin order.
        name: What to call them in an error message.

    Raises:
        InvalidParameterError: If ``labels`` is a single string, a Series,
            DataFrame, mapping or set, or not iterable; if it holds something
            other than text or an integer (a missing value included), repeats
            a label, or has fewer than two labels.
    """
    reason = _not_labels(labels, name)
    if reason is not None:
        raise InvalidParameterError(reason)
    if type(labels).__module__.split(".")[0] == "pyarrow" and hasattr(labels, "to_pylist"):
        labels = labels.to_pylist()  # Arrow arrays iterate over Arrow scalars
    result = [_label_text(label, name, i) for i, label in enumerate(labels)]
    repeated = _repeated(result)
    if repeated:
        shown = ", ".join(repr(label) for label in repeated[:5])
        raise InvalidParameterError(f"{name} repeats the label(s) {shown}")
    if len(result) < 2:
        raise InvalidParameterError(f"{name} needs at least two labels, got {len(result)}")
    return result


def normalize_label(label: str) -> str:
    """Return ``label`` as ``normalize_labels`` compares it: stripped, then case folded.

    Surrounding whitespace (Unicode's, as :meth:`str.strip` removes it) goes,
    then :meth:`str.casefold` (``"Android "`` and ``"android"`` are both
    ``"android"``; ``"Straße"`` is ``"strasse"``). Nothing inside the label changes.
    """
    return label.strip().casefold()


def normalized_index(labels: Sequence[str], name: str = "domain") -> dict[str, int]:
    """Return each label's normalized form (:func:`normalize_label`) with its bin.

    Raises:
        InvalidParameterError: If two labels have the same normalized form
            (``"Android"`` and ``"android "``): with ``normalize_labels`` their
            bins could not be told apart.
    """
    index: dict[str, int] = {}
    for position, label in enumerate(labels):
        key = normalize_label(label)
        first = index.setdefault(key, position)
        if first != position:
            raise InvalidParameterError(
                Worded(
                    "{name} labels {a} and {b} are the same label once case is folded and "
                    "surrounding spaces removed ({option}), so a value could not tell their "
                    "bins apart: merge them in the domain, or match labels exactly (without "
                    "{option})",
                    name=name,
                    a=repr(labels[first]),
                    b=repr(label),
                    option=Parameter("normalize_labels", True),
                )
            )
    return index


def parse_domain(text: str) -> list[str]:
    """Parse a comma-separated domain (``"A, B,C"``) into its labels.

    Spaces around each label are ignored (``"A, B"`` is ``["A", "B"]``). A label
    that must keep surrounding spaces or contains a comma needs a domain file
    (:func:`read_domain_file`).

    Example:
        >>> parse_domain("Paris, Rome,Lyon")
        ['Paris', 'Rome', 'Lyon']

    Raises:
        InvalidParameterError: If a label is empty or repeated, or fewer than two are given.
    """
    labels = [part.strip() for part in text.split(",")]
    if any(label == "" for label in labels):
        raise InvalidParameterError(f"domain has an empty label: {text!r}")
    return check_domain(labels)


def read_domain_file(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """Read a domain file: one label per line, in bin order.

    Each line is a label exactly as written: only the line ending (LF or CRLF)
    is removed, so labels may contain commas and keep their spaces.
    A UTF-8 byte-order mark at the start is skipped. The file may end with a
    newline; any other empty line is an error.

    Args:
        path: The domain file.
        encoding: Its text encoding.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        InvalidParameterError: If ``encoding`` is not a known encoding.
        DataError: If the file cannot be decoded, has an empty line, repeats a
            label or has fewer than two labels.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"domain file {str(path)!r} does not exist")
    try:
        text = path.read_bytes().decode(encoding)
    except LookupError:
        raise InvalidParameterError(f"encoding {encoding!r} is not a known text encoding") from None
    except UnicodeDecodeError as exc:
        raise DataError(
            Worded(
                "domain file {path} is not valid {encoding} text ({reason} at byte {start}); "
                "give its encoding, e.g. {option}",
                path=path,
                encoding=encoding,
                reason=exc.reason,
                start=exc.start,
                option=Parameter("encoding", "latin-1"),
            )
        ) from None
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    labels = [line.removesuffix("\r") for line in lines]
    for number, label in enumerate(labels, start=1):
        if label == "":
            raise DataError(f"domain file {path} line {number} is empty")
    repeated = _repeated(labels)
    if repeated:
        raise DataError(f"domain file {path} repeats the label {repeated[0]!r}")
    if len(labels) < 2:
        raise DataError(f"domain file {path} needs at least two labels, got {len(labels)}")
    return labels


def builtin_domain_names() -> list[str]:
    """Return the names of the fixed built-in domains (``range:LO-HI`` is also accepted)."""
    return list(BUILTIN_DOMAINS)


def builtin_domain(name: str) -> list[str]:
    """Return the labels of a built-in domain.

    Args:
        name: One of :data:`BUILTIN_DOMAINS` (``weekdays``: Monday..Sunday;
            ``months``: January..December; ``digits``: 0..9; ``letters``: A..Z;
            ``us-states``: the 50 states and DC as sorted USPS codes), or
            ``range:LO-HI`` for the integers LO..HI as text (at most
            :data:`MAX_RANGE_SIZE` labels; LO and HI may be negative).

    Example:
        >>> builtin_domain("range:1-3")
        ['1', '2', '3']

    Raises:
        InvalidParameterError: If the name is unknown or the range is malformed,
            empty, a single value or too large.
    """
    if name in BUILTIN_DOMAINS:
        return list(BUILTIN_DOMAINS[name])
    if name.startswith("range:"):
        match = _RANGE.fullmatch(name)
        if match is None:
            raise InvalidParameterError(
                f"domain name {name!r} is not of the form range:LO-HI with integers LO < HI"
            )
        low, high = int(match[1]), int(match[2])
        size = high - low + 1
        if size < 2:
            raise InvalidParameterError(
                f"domain {name!r} must have LO < HI (at least two labels), got {low} and {high}"
            )
        if size > MAX_RANGE_SIZE:
            raise InvalidParameterError(
                f"domain {name!r} has {size:,} labels; at most {MAX_RANGE_SIZE:,} are allowed"
            )
        return [str(i) for i in range(low, high + 1)]
    names = ", ".join([*BUILTIN_DOMAINS, "range:LO-HI"])
    raise InvalidParameterError(f"unknown domain name {name!r}; known: {names}")


def check_domain_source(domain_source: object) -> str:
    """Return ``domain_source`` if it names a public domain's origin.

    ``"declared"`` (given by the user), ``"file"`` (a domain file),
    ``"builtin:<name>"``, ``"public:<name>"`` (a public dataset's published
    categories) or ``"synthetic"`` (generated data). A domain inferred from the
    data is recorded as ``"inferred-from-data"`` by the loaders themselves and
    never accepted from a caller: a release says whether its domain is covered
    from this one field, so an unknown value must not pass for a public one.

    Raises:
        InvalidParameterError: If it is anything else.
    """
    if isinstance(domain_source, str) and (
        domain_source in ("declared", "file", "synthetic")
        or any(
            domain_source.startswith(prefix) and len(domain_source) > len(prefix)
            for prefix in ("builtin:", "public:")
        )
    ):
        return domain_source
    raise InvalidParameterError(
        "domain_source must be 'declared', 'file', 'synthetic', 'builtin:<name>' or "
        f"'public:<name>', got {domain_source!r}"
    )
