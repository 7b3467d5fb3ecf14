"""Rows without a user id (drop_missing_ids) and the histogram counted chunk by chunk."""

from __future__ import annotations

import importlib
from collections import Counter

import numpy as np
import pytest

from shuffledp import FlipProtocol, KRRProtocol
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data import loaders
from shuffledp.data.ingest import LoadedHistogram, load_histogram, load_values

CITIES = ["Lyon", "Paris", "Rome"]


@pytest.fixture(params=[True, False], ids=["pyarrow", "stdlib"])
def use_pyarrow(request):
    if request.param:
        importlib.import_module("pyarrow")
    return request.param


def write(tmp_path, content, name="d.csv"):
    f = tmp_path / name
    f.write_text(content)
    return f


def test_rows_without_a_user_id_are_an_error_that_names_the_option(tmp_path, use_pyarrow):
    f = write(tmp_path, "user,city\nu1,Paris\n,Rome\nNA,Rome\nu2,Lyon\nu1,Rome\n")
    kw = {"domain": CITIES, "user_column": "user", "use_pyarrow": use_pyarrow}
    with pytest.raises(DataError, match=r"2 row\(s\) have no user id.*drop_missing_ids=True"):
        load_values(f, "city", show_progress=False, per_user="first", **kw)
    got = load_values(f, "city", show_progress=False, per_user="first", drop_missing_ids=True, **kw)
    # the two rows without an id belong to nobody; u1 keeps its first row (Paris)
    assert got.indices.tolist() == [1, 0] and got.n == 2
    assert got.duplicate_rows_dropped == 1
    assert any("2 row(s) without a user id in column 'user'" in n for n in got.notes)
    assert not any("only rows with a missing value" in n for n in got.notes)
    # with every user having one row otherwise, per_user="error" passes
    g = write(tmp_path, "user,city\nu1,Paris\n,Rome\nu2,Lyon\n", "g.csv")
    got = load_values(g, "city", show_progress=False, drop_missing_ids=True, **kw)
    assert got.indices.tolist() == [1, 0]
    # ids missing and values missing together
    h = write(tmp_path, "user,city\nu1,NA\n,Rome\nu2,Lyon\nu1,Paris\n", "h.csv")
    got = load_values(
        h, "city", show_progress=False, drop_missing_ids=True, drop_missing=True, **kw
    )
    assert got.indices.tolist() == [0, 1] and got.missing_dropped == 1


def test_drop_missing_ids_needs_a_user_column_and_something_left(tmp_path):
    f = write(tmp_path, "user,city\n,Paris\nNA,Rome\n")
    with pytest.raises(InvalidParameterError, match="drop_missing_ids=True needs user_column"):
        load_values(f, "city", domain=CITIES, drop_missing_ids=True)
    with pytest.raises(DataError, match=r"no user is left.*or no user id"):
        load_values(f, "city", domain=CITIES, user_column="user", drop_missing_ids=True)


CASES = {
    "declared": ("Paris\nRome\nParis\nLyon\n", {"domain": CITIES}),
    "other": ("Paris\nOslo\nRome\nBern\n", {"domain": CITIES, "other": "Elsewhere"}),
    "other-is-a-label": ("Paris\nOslo\nRome\n", {"domain": CITIES, "other": "Rome"}),
    "inferred": ("b\n10\n2\nb\n2\n", {"infer_domain": True}),
    "missing": ("Paris\nNA\nRome\n\nParis\n", {"domain": CITIES, "drop_missing": True}),
    "na-as-label": ("NA\nParis\nNA\n", {"domain": ["NA", "Paris"]}),
}


@pytest.mark.parametrize("case", CASES)
def test_histogram_counted_in_chunks_equals_the_values(case, tmp_path, use_pyarrow, monkeypatch):
    monkeypatch.setattr(loaders, "CSV_BLOCK_BYTES", 64)
    monkeypatch.setattr(loaders, "BATCH_ROWS", 2)
    text, kw = CASES[case]
    f = write(tmp_path, "city\n" + text * 7)
    values = load_values(f, "city", show_progress=False, use_pyarrow=use_pyarrow, **kw)
    counts = load_histogram(f, "city", show_progress=False, use_pyarrow=use_pyarrow, **kw)
    assert isinstance(counts, LoadedHistogram)
    assert counts.histogram.dtype == np.int64
    assert counts.histogram.tolist() == values.histogram.tolist()
    assert counts.domain == values.domain and counts.n == values.n
    for name in ("domain_source", "rows_read", "missing_dropped", "mapped_to_other", "notes"):
        assert getattr(counts, name) == getattr(values, name), name
    # and by hand: every kept row's label counted once
    rows = [r for r in (text * 7).splitlines() if r not in ("", "NA") or case == "na-as-label"]
    expected = Counter(
        r if r in values.domain else kw.get("other", r) for r in rows
    )  # fmt: skip
    assert dict(zip(counts.domain, counts.histogram.tolist(), strict=True)) == {
        label: expected.get(label, 0) for label in counts.domain
    }


def test_histogram_with_a_user_column_and_errors(tmp_path):
    f = write(tmp_path, "user,city\nu1,Paris\nu2,Rome\nu1,Lyon\nu3,Rome\n")
    got = load_histogram(f, "city", domain=CITIES, user_column="user", per_user="first")
    assert got.histogram.tolist() == [0, 1, 2] and got.duplicate_rows_dropped == 1
    assert got.user_column == "user" and not got.one_row_per_user_assumed
    with pytest.raises(DataError, match="not in the domain"):
        load_histogram(f, "city", domain=["Paris", "Rome"])
    only_missing = write(tmp_path, "city\nNA\n\n", "m.csv")
    with pytest.raises(DataError, match="no user is left"):
        load_histogram(only_missing, "city", domain=CITIES, drop_missing=True)
    one_label = write(tmp_path, "city\nParis\nParis\n", "o.csv")
    with pytest.raises(DataError, match="no domain can be inferred"):
        load_histogram(one_label, "city", infer_domain=True)


@pytest.mark.parametrize("protocol", ["flip", "krr"])
def test_run_counts_is_the_count_path_of_run(protocol):
    rng = np.random.default_rng(5)
    values = rng.integers(0, 3, size=4000)
    cls = FlipProtocol if protocol == "flip" else KRRProtocol
    proto = cls.calibrated(4000, CITIES, 1.0, 1e-6)
    histogram = np.bincount(values, minlength=3)
    from_values = proto.run(values, path="count", seed=11)
    from_counts = proto.run_counts(histogram, seed=11)
    assert np.array_equal(from_values.statistic, from_counts.statistic)
    assert from_counts.path == "count" and from_counts.messages == from_values.messages
    assert from_counts.privacy == from_values.privacy
    assert from_counts.estimate.to_dict() == from_values.estimate.to_dict()
    with pytest.raises(
        DataError, match="calibrated for n=4000 users but the histogram counts 3999"
    ):
        proto.run_counts(histogram - np.array([1, 0, 0]))
    for bad in (histogram[:2], histogram.astype(float), np.array([-1, 2000, 2001])):
        with pytest.raises(InvalidParameterError, match="histogram must hold 3 non-negative"):
            proto.run_counts(bad)
    # Counts whose uint64 sum wraps around to n are not n users.
    wrapped = np.array([2**63, 2**63, 4000], dtype=np.uint64)
    assert int(wrapped.sum()) == 4000
    with pytest.raises(DataError, match=f"histogram counts {2**64 + 4000}"):
        proto.run_counts(wrapped)
