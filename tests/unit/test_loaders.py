import gzip
import importlib

import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data import loaders
from shuffledp.data.loaders import ColumnReader, read_column


@pytest.fixture(params=[True, False], ids=["pyarrow", "stdlib"])
def use_pyarrow(request):
    if request.param:
        importlib.import_module("pyarrow")
    return request.param


def read(path, column, use_pyarrow, **kw):
    return read_column(path, column, use_pyarrow=use_pyarrow, show_progress=False, **kw)


def write(tmp_path, content, name="d.csv"):
    f = tmp_path / name
    f.write_bytes(content.encode() if isinstance(content, str) else content)
    return f


def test_labels_kept_exactly(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2, Paris\n3,Paris \n4,paris\n")
    assert read(f, "city", use_pyarrow) == ["Paris", " Paris", "Paris ", "paris"]
    assert read(f, "id", use_pyarrow) == ["1", "2", "3", "4"]


def test_utf8_bom_and_crlf(tmp_path, use_pyarrow):
    f = write(tmp_path, b"\xef\xbb\xbfcity,id\r\nParis,1\r\nRome,2\r\n")
    assert read(f, "city", use_pyarrow) == ["Paris", "Rome"]
    assert read(f, "id", use_pyarrow) == ["1", "2"]


@pytest.mark.parametrize("delimiter", [";", "\t", "|"])
def test_delimiter_sniffed_from_header(tmp_path, use_pyarrow, delimiter):
    rows = ["id", "city"], ["1", "Paris, France"], ["2", "Rome"]
    f = write(tmp_path, "".join(delimiter.join(r) + "\n" for r in rows))
    assert read(f, "city", use_pyarrow) == ["Paris, France", "Rome"]
    reader = ColumnReader(f, ["city"], use_pyarrow=use_pyarrow, show_progress=False)
    assert reader.layout.delimiter == delimiter and reader.layout.sniffed
    assert any(f"delimiter {delimiter!r} detected" in note for note in reader.notes)
    assert read(f, "city", use_pyarrow, delimiter=delimiter) == ["Paris, France", "Rome"]


def test_sniffing_ignores_quoted_header_parts(tmp_path, use_pyarrow):
    f = write(tmp_path, 'id;"city, name"\n1;Paris\n')
    assert read(f, "city, name", use_pyarrow) == ["Paris"]


def test_ambiguous_delimiter_needs_the_option(tmp_path, use_pyarrow):
    f = write(tmp_path, "id;name,city\n1;Paris,x\n")
    with pytest.raises(
        DataError, match=r"several possible delimiters \(',' ';'\).*delimiter=\.\.\.$"
    ):
        read(f, "id", use_pyarrow)
    assert read(f, "name,city", use_pyarrow, delimiter=";") == ["Paris,x"]
    assert read(f, "city", use_pyarrow, delimiter=",") == ["x"]


def test_single_column_without_delimiter(tmp_path, use_pyarrow):
    f = write(tmp_path, 'city\nParis\n"Rome, Italy"\n')
    reader = ColumnReader(f, ["city"], use_pyarrow=use_pyarrow, show_progress=False)
    assert reader.layout.header == ["city"] and reader.notes == []
    assert read(f, "city", use_pyarrow) == ["Paris", "Rome, Italy"]


def test_quoted_fields(tmp_path, use_pyarrow):
    f = write(tmp_path, 'id,city\n1,"Paris, France"\n2,"two\nlines"\n3,"say ""hi"""\n4,""\n')
    values = read(f, "city", use_pyarrow, na_values=())
    assert values == ["Paris, France", "two\nlines", 'say "hi"', ""]


def test_gzip_by_extension_and_by_magic_bytes(tmp_path, use_pyarrow):
    content = gzip.compress(b"id,city\n1,Paris\n2,Rome\n")
    by_name = write(tmp_path, content, "d.csv.gz")
    assert read(by_name, "city", use_pyarrow) == ["Paris", "Rome"]
    assert ColumnReader(by_name, ["city"], show_progress=False).notes == []
    disguised = write(tmp_path, content, "d.csv")
    assert read(disguised, "city", use_pyarrow) == ["Paris", "Rome"]
    reader = ColumnReader(disguised, ["city"], use_pyarrow=use_pyarrow, show_progress=False)
    assert reader.format.compression == "gzip"
    assert any("gzip magic bytes" in note for note in reader.notes)


def test_gzip_extension_on_plain_text(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n", "d.csv.gz")
    with pytest.raises(DataError, match="not a readable gzip file"):
        read(f, "city", use_pyarrow)


def test_truncated_gzip(tmp_path, use_pyarrow):
    content = gzip.compress(b"id,city\n" + b"".join(b"%d,Paris\n" % i for i in range(5000)))
    f = write(tmp_path, content[: len(content) // 2], "d.csv.gz")
    with pytest.raises(DataError, match=r"gzip|not valid CSV"):
        read(f, "city", use_pyarrow)


def test_latin1_with_and_without_the_option(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Café\n2,Zürich\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"d\.csv is not valid utf-8 text.*encoding=.*latin-1"):
        read(f, "city", use_pyarrow)
    assert read(f, "city", use_pyarrow, encoding="latin-1") == ["Café", "Zürich"]


def test_invalid_utf8_after_the_header_block(tmp_path, use_pyarrow, monkeypatch):
    monkeypatch.setattr(loaders, "BATCH_ROWS", 2)
    f = write(tmp_path, b"city\n" + b"Paris\n" * 5 + b"Caf\xe9\n")
    with pytest.raises(DataError, match="not valid utf-8 text"):
        read(f, "city", use_pyarrow)


def test_blank_lines(tmp_path, use_pyarrow):
    # Several columns: a blank line is no record.
    f = write(tmp_path, "id,city\n1,Paris\n\n2,Rome\n\n")
    assert read(f, "city", use_pyarrow) == ["Paris", "Rome"]
    # One column: a blank line is an empty cell, i.e. a missing value.
    f = write(tmp_path, "city\nParis\n\nRome\n")
    assert read(f, "city", use_pyarrow, na_values=()) == ["Paris", "", "Rome"]
    with pytest.raises(DataError, match=r"1 value\(s\) in column 'city'.*missing.*data row 2"):
        read(f, "city", use_pyarrow)


def test_wrong_number_of_fields(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2,Rome,extra\n")
    with pytest.raises(DataError, match=r"d\.csv is not valid CSV"):
        read(f, "city", use_pyarrow)


def test_missing_values_in_read_column(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2,NA\n3,\n4,N/A\n5,na\n")
    with pytest.raises(DataError, match=r"3 value\(s\).*missing.*first 'NA' at data row 2"):
        read(f, "city", use_pyarrow)
    assert read(f, "city", use_pyarrow, na_values=()) == ["Paris", "NA", "", "N/A", "na"]


def test_column_and_file_errors(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n")
    with pytest.raises(DataError, match=r"column 'town' is not in .*\(columns: 'id', 'city'\)"):
        read(f, "town", use_pyarrow)
    f = write(tmp_path, "city,city\n1,2\n")
    with pytest.raises(DataError, match="2 columns named 'city'"):
        read(f, "city", use_pyarrow)
    f = write(tmp_path, "")
    with pytest.raises(DataError, match="is empty"):
        read(f, "city", use_pyarrow)
    f = write(tmp_path, "\n1\n")
    with pytest.raises(DataError, match="empty header"):
        read(f, "city", use_pyarrow)
    f = write(tmp_path, "id,city\n")
    with pytest.raises(DataError, match="no data rows"):
        read(f, "city", use_pyarrow)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read(tmp_path / "missing.csv", "city", use_pyarrow)


def test_bad_options(tmp_path):
    f = write(tmp_path, "id,city\n1,Paris\n")
    for bad in ("", ";;", '"', "\n"):
        with pytest.raises(InvalidParameterError, match="delimiter must be"):
            read_column(f, "city", delimiter=bad)
    with pytest.raises(InvalidParameterError, match="not a known text encoding"):
        read_column(f, "city", encoding="klingon")
    with pytest.raises(InvalidParameterError, match="use_pyarrow"):
        ColumnReader(f, ["city"], use_pyarrow="yes")


def test_many_batches_give_the_same_values(tmp_path, use_pyarrow, monkeypatch):
    monkeypatch.setattr(loaders, "CSV_BLOCK_BYTES", 256)
    monkeypatch.setattr(loaders, "BATCH_ROWS", 7)
    cities = [f"city {i % 13}" for i in range(500)]
    f = write(tmp_path, "id,city\n" + "".join(f'{i},"{c}"\n' for i, c in enumerate(cities)))
    reader = ColumnReader(f, ["city", "id"], use_pyarrow=use_pyarrow, show_progress=False)
    batches = list(reader)
    assert len(batches) > 5
    assert all(len(a) == len(b) for a, b in batches)
    assert read(f, "city", use_pyarrow) == cities


def test_progress_bar_follows_show_progress(tmp_path, monkeypatch, use_pyarrow):
    calls = []
    real = loaders.progress_bar

    def spy(**kw):
        calls.append(kw)
        return real(**kw)

    monkeypatch.setattr(loaders, "progress_bar", spy)
    f = write(tmp_path, "id,city\n1,Paris\n")
    read_column(f, "city", use_pyarrow=use_pyarrow, show_progress=False)
    read_column(f, "city", use_pyarrow=use_pyarrow)
    assert [c["enabled"] for c in calls] == [False, True]
    assert calls[0]["unit"] == "B" and calls[0]["total"] == f.stat().st_size


def test_parquet_types_nulls_and_batches(tmp_path, monkeypatch):
    pa = importlib.import_module("pyarrow")
    pq = importlib.import_module("pyarrow.parquet")
    monkeypatch.setattr(loaders, "BATCH_ROWS", 2)
    table = pa.table(
        {
            "city": [" Paris", "Rome", None, "Lyon", "NA"],
            "n": [1, 2, 3, None, 5],
            "x": [1.5, 2.0, -0.25, 3.0, 4.0],
            "flag": [True, False, True, True, False],
            "cat": pa.array(["a", "b", "a", "b", "a"]).dictionary_encode(),
        }
    )
    f = tmp_path / "d.data"  # recognized by its magic bytes, not its name
    pq.write_table(table, f)
    reader = ColumnReader(f, ["city", "n", "x", "flag", "cat"], show_progress=False)
    assert reader.format.kind == "parquet" and reader.rows_total == 5
    batches = list(reader)
    assert [len(b[0]) for b in batches] == [2, 2, 1]
    columns = [[v for b in batches for v in b[i].to_pylist()] for i in range(5)]
    assert columns[0] == [" Paris", "Rome", None, "Lyon", "NA"]
    assert columns[1] == ["1", "2", "3", None, "5"]
    assert columns[2] == ["1.5", "2", "-0.25", "3", "4"]
    assert columns[3] == ["true", "false", "true", "true", "false"]
    assert columns[4] == ["a", "b", "a", "b", "a"]
    with pytest.raises(DataError, match=r"1 value\(s\).*\(None, NaN or null\).*None at data row 4"):
        read_column(f, "n", na_values=(), show_progress=False)
    with pytest.raises(DataError, match=r"2 value\(s\).*missing.*first None at data row 3"):
        read_column(f, "city", show_progress=False)


def test_parquet_errors(tmp_path):
    pa = importlib.import_module("pyarrow")
    pq = importlib.import_module("pyarrow.parquet")
    f = tmp_path / "d.parquet"
    pq.write_table(pa.table({"city": ["x", "y"], "nested": [[1], [2, 3]]}), f)
    with pytest.raises(DataError, match="column 'zz' is not in"):
        read_column(f, "zz")
    with pytest.raises(DataError, match=r"list<element: int64>.* not single values"):
        read_column(f, "nested")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(DataError, match="not a readable Parquet"):
        read_column(bad, "city")
