import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.domains import (
    BUILTIN_DOMAINS,
    MAX_RANGE_SIZE,
    builtin_domain,
    builtin_domain_names,
    check_domain,
    parse_domain,
    read_domain_file,
)


def test_parse_domain_trims_spaces_around_labels():
    assert parse_domain(" A, B ,C") == ["A", "B", "C"]
    assert parse_domain("New York,Los Angeles") == ["New York", "Los Angeles"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("A,,B", "empty label"),
        ("A, ,B", "empty label"),
        ("", "empty label"),
        ("A,B,A", r"repeats the label\(s\) 'A'"),
        ("A, A", "repeats"),
        ("A", "at least two labels, got 1"),
    ],
)
def test_parse_domain_errors(text, fragment):
    with pytest.raises(InvalidParameterError, match=fragment):
        parse_domain(text)


def test_check_domain():
    assert check_domain(("a", " a")) == ["a", " a"]  # exact: " a" is another label
    with pytest.raises(InvalidParameterError, match="list of labels, got the string"):
        check_domain("ab")
    assert check_domain(["a", 1, np.int64(-2)]) == ["a", "1", "-2"]  # integers: their text
    with pytest.raises(InvalidParameterError, match=r"must be strings \(or integers"):
        check_domain(["a", 1.5])
    with pytest.raises(InvalidParameterError, match="must be strings"):
        check_domain(["a", True])
    with pytest.raises(InvalidParameterError, match="repeats"):
        check_domain(["a", "b", "a"])
    with pytest.raises(InvalidParameterError, match="at least two"):
        check_domain([])


def test_domain_file_keeps_labels_exactly(tmp_path):
    f = tmp_path / "domain.txt"
    f.write_bytes("\ufeffParis, France\n Rome\r\nNew York, NY \n".encode())
    assert read_domain_file(f) == ["Paris, France", " Rome", "New York, NY "]
    f.write_text("a\nb")  # no final newline
    assert read_domain_file(f) == ["a", "b"]
    f.write_bytes("Café\nNaïve\n".encode("latin-1"))
    assert read_domain_file(f, encoding="latin-1") == ["Café", "Naïve"]


@pytest.mark.parametrize(
    ("content", "error", "fragment"),
    [
        (b"a\n\nb\n", DataError, "line 2 is empty"),
        (b"a\nb\n\n", DataError, "line 3 is empty"),
        (b"\na\nb\n", DataError, "line 1 is empty"),
        (b"a\nb\na\n", DataError, "repeats the label 'a'"),
        (b"a\n", DataError, "at least two labels, got 1"),
        (b"", DataError, "at least two labels, got 0"),
        (b"a\n\xff\n", DataError, "not valid utf-8 text.*encoding="),
    ],
)
def test_domain_file_errors(tmp_path, content, error, fragment):
    f = tmp_path / "domain.txt"
    f.write_bytes(content)
    with pytest.raises(error, match=fragment):
        read_domain_file(f)


def test_domain_file_missing_or_bad_encoding(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_domain_file(tmp_path / "nope.txt")
    f = tmp_path / "d.txt"
    f.write_text("a\nb\n")
    with pytest.raises(InvalidParameterError, match="not a known text encoding"):
        read_domain_file(f, encoding="no-such-codec")


def test_builtin_domains():
    assert builtin_domain("weekdays") == [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ]
    months = builtin_domain("months")
    assert len(months) == 12 and months[0] == "January" and months[-1] == "December"
    assert builtin_domain("digits") == [str(i) for i in range(10)]
    assert builtin_domain("letters") == [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    states = builtin_domain("us-states")
    assert len(states) == 51 and states == sorted(states) and "DC" in states
    assert all(len(s) == 2 and s.isupper() for s in states)
    assert {"CA", "NY", "TX", "WY", "AK", "HI"} <= set(states)
    assert builtin_domain_names() == list(BUILTIN_DOMAINS)
    # A fresh list each time: callers may append an "other" label safely.
    builtin_domain("digits").append("x")
    assert builtin_domain("digits")[-1] == "9"


def test_builtin_range():
    assert builtin_domain("range:0-99") == [str(i) for i in range(100)]
    assert builtin_domain("range:-2-1") == ["-2", "-1", "0", "1"]
    for bad, fragment in [
        ("range:5-5", "LO < HI"),
        ("range:9-2", "LO < HI"),
        ("range:a-b", "form range:LO-HI"),
        ("range:1-", "form range:LO-HI"),
        (f"range:1-{MAX_RANGE_SIZE + 1}", "at most"),
    ]:
        with pytest.raises(InvalidParameterError, match=fragment):
            builtin_domain(bad)


def test_unknown_builtin_lists_names():
    with pytest.raises(InvalidParameterError, match=r"unknown domain name 'colors'.*weekdays"):
        builtin_domain("colors")
