import importlib

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data import (
    EncodedColumn,
    encode_values,
    encoding,
    parse_domain,
    read_column,
    sorted_domain,
    zipf_histogram,
    zipf_values,
)


@pytest.fixture(params=[True, False], ids=["pyarrow", "numpy"])
def arrow(request, monkeypatch):
    """Encode with pyarrow when installed, or force the numpy path."""
    if request.param:
        importlib.import_module("pyarrow")
    else:
        monkeypatch.setattr(encoding, "_pyarrow", lambda: None)
    return request.param


def test_sorted_domain_numeric_and_text():
    assert sorted_domain(["10", "2", "1"]) == ["1", "2", "10"]
    assert sorted_domain(["b", "a", "10"]) == ["10", "a", "b"]


def test_parse_domain():
    assert parse_domain("A, B,C") == ["A", "B", "C"]
    for bad in ("A,,B", "A,A", "A"):
        with pytest.raises(InvalidParameterError):
            parse_domain(bad)


def test_encode_values(arrow):
    enc = encode_values(["b", "a", "b"], infer_domain=True)
    assert enc.domain == ["a", "b"] and enc.domain_source == "inferred-from-data"
    np.testing.assert_array_equal(enc.indices, [1, 0, 1])
    enc = encode_values(["b", "a"], ["a", "b", "c"])
    np.testing.assert_array_equal(enc.histogram, [1, 1, 0])
    assert enc.domain_source == "declared" and enc.notes == () and enc.mapped_to_other == 0
    with pytest.raises(DataError, match=r"value 'z' in the input \(index 1\) is not in the domain"):
        encode_values(["a", "z"], ["a", "b"])
    with pytest.raises(DataError, match="no rows"):
        encode_values([], ["a", "b"])
    with pytest.raises(DataError, match="single value"):
        encode_values(["a", "a"], infer_domain=True)


def test_encode_values_needs_a_domain():
    with pytest.raises(InvalidParameterError, match="domain is required public input"):
        encode_values(["a", "b"])


def test_encode_values_is_exact(arrow):
    enc = encode_values(["Paris", " Paris", "paris"], ["Paris", " Paris", "paris"])
    assert enc.indices.tolist() == [0, 1, 2]
    with pytest.raises(
        DataError, match="differ from a domain label only by case or surrounding spaces"
    ):
        encode_values(["Paris", "Paris "], ["Paris", "Rome"])


def test_encode_values_other(arrow):
    enc = encode_values(["Paris", "Oslo", "Nice", "Rome"], ["Paris", "Rome"], other="Other")
    assert enc.domain == ["Paris", "Rome", "Other"] and enc.indices.tolist() == [0, 2, 2, 1]
    assert enc.mapped_to_other == 2 and len(enc.notes) == 2


def test_encode_values_missing(arrow):
    for values in (["a", None, "b"], np.array(["a", float("nan"), "b"], dtype=object)):
        with pytest.raises(DataError, match=r"1 value\(s\) in the input are missing.*index 1"):
            encode_values(values, ["a", "b"])
    # Texts like "NA" are ordinary values in memory.
    assert encode_values(["NA", "a"], ["a", "NA"]).indices.tolist() == [1, 0]


def test_encode_values_input_types(arrow):
    expected = [1, 0, 1]
    domain = ["a", "b"]
    assert encode_values(("b", "a", "b"), domain).indices.tolist() == expected
    assert encode_values(np.array(["b", "a", "b"]), domain).indices.tolist() == expected
    assert encode_values(np.array(["b", "a", "b"], dtype=object), domain).indices.tolist() == [
        1,
        0,
        1,
    ]
    assert encode_values(iter(["b", "a", "b"]), domain).indices.tolist() == expected
    for bad in ([1, 2], np.array([1, 2]), "ab", 5, np.array([["a"]])):
        with pytest.raises(InvalidParameterError, match=r"text labels|1-D|holds integers"):
            encode_values(bad, domain)


def test_encode_values_pandas(arrow):
    pd = importlib.import_module("pandas")
    domain = ["a", "b", "c"]
    for dtype in (object, "string", "category"):
        series = pd.Series(["b", "a", "b"], dtype=dtype)
        assert encode_values(series, domain).indices.tolist() == [1, 0, 1]
    with pytest.raises(DataError, match="missing"):
        encode_values(pd.Series(["a", None, np.nan], dtype=object), domain)
    with pytest.raises(InvalidParameterError, match="holds integers"):
        encode_values(pd.Series([1, 2]), domain)


def test_encode_values_pyarrow():
    pa = importlib.import_module("pyarrow")
    domain = ["a", "b"]
    assert encode_values(pa.array(["b", "a"]), domain).indices.tolist() == [1, 0]
    chunked = pa.chunked_array([["b", "a"], ["a"]], type=pa.large_string())
    assert encode_values(chunked, domain).indices.tolist() == [1, 0, 0]
    dictionary = pa.array(["b", "a", "b"]).dictionary_encode()
    assert encode_values(dictionary, domain).indices.tolist() == [1, 0, 1]
    with pytest.raises(DataError, match="missing"):
        encode_values(pa.array(["a", None]), domain)
    with pytest.raises(InvalidParameterError, match="holds integers"):
        encode_values(pa.array([1, 2]), domain)
    with pytest.raises(InvalidParameterError, match="text labels"):
        encode_values(pa.array([1.5, 2.0]), domain)


def test_encoded_column_defaults():
    col = EncodedColumn(indices=np.array([0, 1, 1]), domain=["x", "y"])
    assert col.domain_source == "declared" and col.notes == ()
    assert col.histogram.tolist() == [1, 2]


def test_read_csv(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("id,city\n1,Paris\n2, Rome \n\n")
    assert read_column(f, "city") == ["Paris", " Rome "]  # kept exactly as in the file
    with pytest.raises(DataError, match="column 'town' is not in"):
        read_column(f, "town")
    f.write_text("")
    with pytest.raises(DataError, match="is empty"):
        read_column(f, "city")
    f.write_text("id,city\n")
    with pytest.raises(DataError, match="no data rows"):
        read_column(f, "city")
    f.write_text("id,city\n1,\n")
    with pytest.raises(DataError, match="missing"):
        read_column(f, "city")
    f.write_text("id,city\n1,a,extra\n")
    with pytest.raises(DataError, match="not valid CSV"):
        read_column(f, "city")
    f.write_bytes(b"id,city\n1,\xff\n")
    with pytest.raises(DataError, match="not valid utf-8"):
        read_column(f, "city")
    with pytest.raises(FileNotFoundError):
        read_column(tmp_path / "missing.csv", "city")


def test_read_parquet(tmp_path):
    pa = importlib.import_module("pyarrow")
    pq = importlib.import_module("pyarrow.parquet")
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
