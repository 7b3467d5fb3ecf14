import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data import (
    encode_values,
    parse_domain,
    read_column,
    sorted_domain,
    zipf_histogram,
    zipf_values,
)


def test_sorted_domain_numeric_and_text():
    assert sorted_domain(["10", "2", "1"]) == ["1", "2", "10"]
    assert sorted_domain(["b", "a", "10"]) == ["10", "a", "b"]


def test_parse_domain():
    assert parse_domain("A, B,C") == ["A", "B", "C"]
    for bad in ("A,,B", "A,A", "A"):
        with pytest.raises(InvalidParameterError):
            parse_domain(bad)


def test_encode_values():
    enc = encode_values(["b", "a", "b"])
    assert enc.domain == ["a", "b"]
    np.testing.assert_array_equal(enc.indices, [1, 0, 1])
    enc = encode_values(["b", "a"], ["a", "b", "c"])
    np.testing.assert_array_equal(enc.histogram, [1, 1, 0])
    with pytest.raises(DataError, match=r"value 'z' \(row 2\) is not in the domain"):
        encode_values(["a", "z"], ["a", "b"])
    with pytest.raises(DataError, match="no rows"):
        encode_values([])
    with pytest.raises(DataError, match="single value"):
        encode_values(["a", "a"])


def test_read_csv(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("id,city\n1,Paris\n2, Rome \n\n")
    assert read_column(f, "city") == ["Paris", "Rome"]
    with pytest.raises(DataError, match="column 'town' is not in"):
        read_column(f, "town")
    f.write_text("")
    with pytest.raises(DataError, match="is empty"):
        read_column(f, "city")
    f.write_text("id,city\n")
    with pytest.raises(DataError, match="no data rows"):
        read_column(f, "city")
    f.write_text("id,city\n1,\n")
    with pytest.raises(DataError, match="empty value"):
        read_column(f, "city")
    f.write_text("id,city\n1,a\n\n2,b\n")
    with pytest.raises(DataError, match="line 3 is blank"):
        read_column(f, "city")
    f.write_text("id,city\n1,a,extra\n")
    with pytest.raises(DataError, match="has 3 fields"):
        read_column(f, "city")
    f.write_bytes(b"id,city\n1,\xff\n")
    with pytest.raises(DataError, match="not UTF-8"):
        read_column(f, "city")
    with pytest.raises(FileNotFoundError):
        read_column(tmp_path / "missing.csv", "city")


def test_read_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    f = tmp_path / "d.parquet"
    pq.write_table(pa.table({"city": ["x", "y", "x"], "n": [1, 2, 3]}), f)
    assert read_column(f, "city") == ["x", "y", "x"]
    assert read_column(f, "n") == ["1", "2", "3"]
    with pytest.raises(DataError, match="column 'zz'"):
        read_column(f, "zz")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(DataError, match="not a readable Parquet"):
        read_column(bad, "city")


def test_zipf():
    h = zipf_histogram(1000, 10)
    assert h.sum() == 1000 and np.all(np.diff(h) <= 0)
    v = zipf_values(1000, 10, seed=1)
    np.testing.assert_array_equal(np.bincount(v, minlength=10), h)
