"""Set-valued input: long-format files and in-memory sets, sampling, padding, errors."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.sets import (
    check_levels_list,
    encode_sets,
    load_sets,
    set_rules,
    to_slots,
)

ITEMS = ["a", "b", "c", "d"]
LEVELS = (0.5, 1.0, 2.0)


@pytest.fixture(params=[True, False], ids=["pyarrow", "stdlib"])
def use_pyarrow(request):
    if request.param:
        importlib.import_module("pyarrow")
    return request.param


def write(tmp_path, text, name="s.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def load(path, *, use_pyarrow=None, **kwargs):
    options = {
        "user_column": "user",
        "item_column": "item",
        "level_column": "level",
        "levels": LEVELS,
        "domain": ITEMS,
        "items_per_user": 2,
        "padding": True,
        "seed": 0,
        "show_progress": False,
        "use_pyarrow": use_pyarrow,
    }
    options.update(kwargs)
    return load_sets(path, **options)


GOOD = "user,item,level\nu1,a,0.5\nu1,b,0.5\nu2,c,2\nu3,a,1.0\nu3,c,1\nu3,d,1\nu1,b,0.5\n"


def test_load_sets(tmp_path, use_pyarrow):
    got = load(write(tmp_path, GOOD), use_pyarrow=use_pyarrow)
    assert got.n == 3 and got.items_per_user == 2
    assert got.levels.tolist() == [0, 2, 1]  # users in order of first appearance
    assert got.level_counts.tolist() == [1, 1, 1]
    assert got.domain == ITEMS and got.padding
    rows = [sorted(row) for row in got.items.tolist()]
    assert rows[0] == [0, 1]  # u1: {a, b}, the repeated row counted once
    assert rows[1] == [2, 4]  # u2: {c} padded with the padding symbol 4
    assert len(set(rows[2])) == 2 and set(rows[2]) <= {0, 2, 3}  # u3: 2 of {a, c, d}
    assert got.users_sampled == 1 and got.users_padded == 1 and got.duplicate_rows == 1
    assert got.rows_read == 7
    assert any("uniform sample" in note for note in got.notes)
    assert any("padded" in note for note in got.notes)
    # Release notes state the rules only (the same for every dataset), never counts.
    assert got.release_notes == tuple(set_rules(2, True))


def test_load_sets_parquet(tmp_path):
    pa = importlib.import_module("pyarrow")
    pq = importlib.import_module("pyarrow.parquet")
    table = pa.table(
        {
            "user": [10, 10, 11, 12, 12],
            "item": ["a", "b", "c", "d", "a"],
            "level": [0.5, 0.5, 2.0, 1.0, 1.0],
        }
    )
    path = tmp_path / "s.parquet"
    pq.write_table(table, path)
    got = load(path)
    assert got.n == 3 and got.levels.tolist() == [0, 2, 1]


def test_sampling_is_uniform():
    # One user holding 4 items, s = 2: each item kept with probability 1/2.
    kept = np.zeros(4)
    rng = np.random.default_rng(0)
    reps = 4000
    for _ in range(reps):
        slots = to_slots(
            np.zeros(4, dtype=np.int64), np.arange(4), 1, 2, domain_size=4, padding=False, seed=rng
        )
        kept[slots.items[0]] += 1
    p = kept / reps
    assert np.all(np.abs(p - 0.5) < 4 * np.sqrt(0.25 / reps))


def test_seeded_sampling_is_reproducible(tmp_path):
    path = write(tmp_path, GOOD)
    a, b = load(path, seed=5), load(path, seed=5)
    np.testing.assert_array_equal(a.items, b.items)


def test_without_padding_a_small_set_is_an_error(tmp_path, use_pyarrow):
    with pytest.raises(DataError, match=r"1 user\(s\) .* fewer than items_per_user=2"):
        load(write(tmp_path, GOOD), padding=False, use_pyarrow=use_pyarrow)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("user,item,level\nu1,a,0.5\nu2,b,0.7\nu3,c,3\n", r"level '0\.7'.*2 row\(s\)"),
        ("user,item,level\nu1,a,0.5\nu2,b,x\n", "level 'x'"),
        ("user,item,level\nu1,a,0.5\nu1,b,1\nu2,c,1\nu2,d,2\n", r"2 user\(s\).*different levels"),
        ("user,item,level\nu1,a,0.5\nu2,z,1\nu3,y,1\n", r"value 'z'.*2 value\(s\) are outside"),
        ("user,item,level\nu1,a,0.5\nu2,,1\n", r"1 value\(s\) in column 'item'.*missing"),
        ("user,item,level\nu1,a,0.5\nu2,b,\nu3,b,NA\n", r"2 row\(s\) have no level"),
        ("user,item,level\nu1,a,0.5\n,b,1\n", r"1 row\(s\) have no user id"),
        ("user,item,level\n", "no data rows"),
    ],
)
def test_data_errors(tmp_path, use_pyarrow, text, match):
    with pytest.raises(DataError, match=match):
        load(write(tmp_path, text), use_pyarrow=use_pyarrow)


def test_option_errors(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(InvalidParameterError, match="three different columns"):
        load(path, item_column="user")
    with pytest.raises(InvalidParameterError, match="strictly increasing"):
        load(path, levels=(1.0, 0.5))
    with pytest.raises(DataError, match="column 'grade' is not in"):
        load(path, level_column="grade")
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.csv")


def test_other_label_counts_outside_items(tmp_path):
    got = load(write(tmp_path, "user,item,level\nu1,a,0.5\nu2,z,1\n"), other="other")
    assert got.domain == [*ITEMS, "other"]
    assert sorted(got.items[1].tolist()) == [4, 5]  # "other" is item 4, padding is 5
    assert any("counted in 'other'" in note for note in got.notes)


def test_encode_sets():
    slots = encode_sets([["a", "b", "c"], ["d"], ["a", "a"]], ITEMS, 2, seed=1)
    assert slots.items.shape == (3, 2)
    assert slots.users_sampled == 1 and slots.users_padded == 2 and slots.duplicate_rows == 1
    assert sorted(slots.items[1].tolist()) == [3, 4]
    with pytest.raises(DataError, match="not in the domain"):
        encode_sets([["a", "q"]], ITEMS, 2)
    with pytest.raises(DataError, match="fewer than items_per_user"):
        encode_sets([["a"]], ITEMS, 2, padding=False)
    with pytest.raises(DataError, match="empty set"):
        encode_sets([[]], ITEMS, 2, padding=False)


def test_check_levels_list():
    assert check_levels_list([0.5, 1, 2]) == (0.5, 1.0, 2.0)
    for bad in ([], [0.0, 1.0], [1.0, 1.0], [float("inf")], ["a"]):
        with pytest.raises(InvalidParameterError):
            check_levels_list(bad)
