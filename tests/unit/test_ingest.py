import dataclasses
import gzip
import importlib

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data import loaders, users
from shuffledp.data.ingest import LoadedValues, load_values

CITIES = ["Lyon", "Paris", "Rome"]


@pytest.fixture(params=[True, False], ids=["pyarrow", "stdlib"])
def use_pyarrow(request):
    if request.param:
        importlib.import_module("pyarrow")
    return request.param


def write(tmp_path, content, name="d.csv"):
    f = tmp_path / name
    f.write_bytes(content.encode() if isinstance(content, str) else content)
    return f


def load(path, column="city", *, use_pyarrow=None, **kw) -> LoadedValues:
    return load_values(path, column, use_pyarrow=use_pyarrow, show_progress=False, **kw)


def test_declared_domain(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2,Rome\n3,Paris\n")
    got = load(f, domain=CITIES, use_pyarrow=use_pyarrow)
    assert got.indices.dtype == np.int64
    assert got.indices.tolist() == [1, 2, 1]
    assert got.domain == CITIES and got.domain_source == "declared"
    assert got.histogram.tolist() == [0, 2, 1] and got.n == 3
    assert got.rows_read == 3 and got.missing_dropped == 0 and got.mapped_to_other == 0
    assert got.user_column is None and got.one_row_per_user_assumed
    assert got.duplicate_rows_dropped == 0 and got.notes == ()


def test_domain_source_is_recorded(tmp_path):
    f = write(tmp_path, "day\nMonday\nSunday\n")
    days = ["Monday", "Sunday"]
    assert load(f, "day", domain=days, domain_source="file").domain_source == "file"
    got = load(f, "day", domain=days, domain_source="builtin:weekdays")
    assert got.domain_source == "builtin:weekdays"
    for bad in ("inferred-from-data", "builtin:", "mine"):
        with pytest.raises(InvalidParameterError, match="domain_source must be"):
            load(f, "day", domain=days, domain_source=bad)


def test_domain_is_required(tmp_path):
    f = write(tmp_path, "city\nParis\n")
    with pytest.raises(InvalidParameterError, match=r"required public input.*infer_domain=True"):
        load(f)
    with pytest.raises(InvalidParameterError, match="not both"):
        load(f, domain=CITIES, infer_domain=True)
    with pytest.raises(InvalidParameterError, match="other=LABEL needs a declared domain"):
        load(f, infer_domain=True, other="Other")
    with pytest.raises(InvalidParameterError, match="list of labels, got the string"):
        load(f, domain="Paris,Rome")


def test_inferred_domain(tmp_path, use_pyarrow):
    f = write(tmp_path, "n\n10\n2\n10\n1\n")
    got = load(f, "n", infer_domain=True, use_pyarrow=use_pyarrow)
    assert got.domain == ["1", "2", "10"] and got.indices.tolist() == [2, 1, 2, 0]
    assert got.domain_source == "inferred-from-data"
    assert any("inferred from the data" in note and "does not cover" in note for note in got.notes)
    f = write(tmp_path, "n\n7\n7\n")
    with pytest.raises(DataError, match=r"a single value \('7'\).*declare the domain"):
        load(f, "n", infer_domain=True, use_pyarrow=use_pyarrow)


def test_inferred_domain_holds_only_kept_rows(tmp_path, use_pyarrow):
    # 'Oslo' is only in a row beyond the first of user 1: it is dropped, so not a label.
    f = write(tmp_path, "user,city\n1,Paris\n1,Oslo\n2,Rome\n")
    got = load(f, infer_domain=True, user_column="user", per_user="first", use_pyarrow=use_pyarrow)
    assert got.domain == ["Paris", "Rome"] and got.indices.tolist() == [0, 1]


def test_outside_domain_is_an_error(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2,Oslo\n3,Nice\n4,Oslo\n")
    with pytest.raises(DataError) as info:
        load(f, domain=CITIES, use_pyarrow=use_pyarrow)
    message = str(info.value)
    assert "value 'Oslo' in column 'city' of" in message
    assert "(data row 2) is not in the domain; 3 value(s) are outside it" in message
    assert "other=LABEL" in message and "Nice" not in message  # one example only
    assert "\n" not in message


def test_whitespace_and_case_near_misses_are_hinted(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2, Paris\n3,Rome \n4,Oslo\n5,PARIS\n")
    with pytest.raises(
        DataError,
        match=r"3 of them differ from a domain label only by case or surrounding spaces, such "
        r"as ' Paris' vs 'Paris': labels are matched exactly \(pass normalize_labels=True",
    ):
        load(f, domain=CITIES, use_pyarrow=use_pyarrow)


def test_labels_with_spaces_are_distinct_bins(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2, Paris\n3, Paris\n4,Paris \n")
    got = load(f, domain=["Paris", " Paris", "Paris "], use_pyarrow=use_pyarrow)
    assert got.histogram.tolist() == [1, 2, 1]


def test_other_bin(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2,Oslo\n3,Nice\n4,Rome\n5, Rome\n")
    got = load(f, domain=CITIES, other="Other", use_pyarrow=use_pyarrow)
    assert got.domain == [*CITIES, "Other"]
    assert got.indices.tolist() == [1, 3, 3, 2, 3]
    assert got.mapped_to_other == 3
    assert any("'Other' was appended to the domain as bin 3" in n for n in got.notes)
    assert any(
        "3 value(s)" in n and "counted in 'Other'" in n and "'Oslo'" in n and "spaces" in n
        for n in got.notes
    )
    # An 'other' label already in the domain is used as it is.
    got = load(f, domain=[*CITIES, "Nice"], other="Nice", use_pyarrow=use_pyarrow)
    assert got.domain == [*CITIES, "Nice"] and got.mapped_to_other == 2
    assert got.indices.tolist() == [1, 3, 3, 2, 3]
    assert not any("appended" in n for n in got.notes)
    with pytest.raises(InvalidParameterError, match="other must be a non-empty label"):
        load(f, domain=CITIES, other="")


def test_missing_values(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,Paris\n2,NA\n3,\n4,N/A\n5,Rome\n6,na\n")
    with pytest.raises(DataError) as info:
        load(f, domain=[*CITIES, "na"], use_pyarrow=use_pyarrow)
    message = str(info.value)
    assert "3 value(s) in column 'city'" in message and "first at data row 2" in message
    assert "drop_missing=True" in message
    got = load(f, domain=[*CITIES, "na"], drop_missing=True, use_pyarrow=use_pyarrow)
    assert got.indices.tolist() == [1, 2, 3] and got.missing_dropped == 3 and got.rows_read == 6
    assert any("3 row(s) with a missing value" in n for n in got.notes)
    # Custom NA texts; without any, the empty cell is a value (outside the domain here).
    got = load(f, domain=[*CITIES, "na", "NA", "N/A"], na_values=[""], drop_missing=True)
    assert got.indices.tolist() == [1, 4, 5, 2, 3] and got.missing_dropped == 1
    with pytest.raises(DataError, match="value '' in column 'city'"):
        load(f, domain=[*CITIES, "na", "NA", "N/A"], na_values=(), use_pyarrow=use_pyarrow)
    with pytest.raises(InvalidParameterError, match="na_values must be a collection"):
        load(f, domain=CITIES, na_values="NA")


def test_na_text_that_is_a_label_counts_as_the_label(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,answer\n1,yes\n2,NA\n3,no\n4,NA\n5,\n")
    got = load(f, "answer", domain=["yes", "no", "NA"], drop_missing=True, use_pyarrow=use_pyarrow)
    assert got.indices.tolist() == [0, 2, 1, 2] and got.missing_dropped == 1
    assert any(
        "'NA' is a label of the domain, so its 2 occurrence(s)" in n and "not as missing" in n
        for n in got.notes
    )


def test_all_missing_or_no_rows(tmp_path, use_pyarrow):
    f = write(tmp_path, "id,city\n1,NA\n2,\n")
    with pytest.raises(DataError, match=r"no user is left.*all 2 rows have a missing value"):
        load(f, domain=CITIES, drop_missing=True, use_pyarrow=use_pyarrow)
    with pytest.raises(DataError, match=r"no user is left"):
        load(f, domain=CITIES, drop_missing=True, user_column="id", use_pyarrow=use_pyarrow)
    f = write(tmp_path, "id,city\n")
    with pytest.raises(DataError, match="no data rows"):
        load(f, domain=CITIES, use_pyarrow=use_pyarrow)


USERS = "user,city\nu1,Paris\nu2,Rome\nu1,Lyon\nu3,Rome\nu2,Paris\nu1,Rome\n"


def test_user_column_error_policy(tmp_path, use_pyarrow):
    f = write(tmp_path, USERS)
    with pytest.raises(DataError) as info:
        load(f, domain=CITIES, user_column="user", use_pyarrow=use_pyarrow)
    message = str(info.value)
    assert "2 users in column 'user'" in message and "more than one row (3 rows beyond" in message
    assert "per_user='first'" in message and "per_user='sample'" in message
    f = write(tmp_path, "user,city\nb,Paris\na,Rome\n")
    got = load(f, domain=CITIES, user_column="user", use_pyarrow=use_pyarrow)
    assert got.indices.tolist() == [1, 2] and got.user_column == "user"
    assert not got.one_row_per_user_assumed and got.duplicate_rows_dropped == 0


def test_user_column_first(tmp_path, use_pyarrow):
    f = write(tmp_path, USERS)
    got = load(f, domain=CITIES, user_column="user", per_user="first", use_pyarrow=use_pyarrow)
    assert got.indices.tolist() == [1, 2, 2]  # u1 Paris, u2 Rome, u3 Rome
    assert got.n == 3 and got.rows_read == 6 and got.duplicate_rows_dropped == 3
    assert any("2 user(s) had several rows" in n and "3 other row(s)" in n for n in got.notes)


def test_user_column_sample(tmp_path, use_pyarrow):
    f = write(tmp_path, USERS)
    kw = dict(domain=CITIES, user_column="user", per_user="sample", use_pyarrow=use_pyarrow)
    runs = [load(f, seed=s, **kw).indices.tolist() for s in range(200)]
    assert all(r[2] == 2 for r in runs)  # u3 has one row
    assert {r[0] for r in runs} == {0, 1, 2} and {r[1] for r in runs} == {1, 2}
    assert load(f, seed=7, **kw).indices.tolist() == load(f, seed=7, **kw).indices.tolist()


def test_user_column_sample_is_uniform(tmp_path):
    # 3000 users with rows Lyon, Paris, Rome (shuffled order): each kept 1/3 of the time.
    rng = np.random.default_rng(5)
    lines = [f"u{u},{CITIES[c]}\n" for u in range(3000) for c in range(3)]
    lines = [lines[i] for i in rng.permutation(len(lines))]
    f = write(tmp_path, "user,city\n" + "".join(lines))
    got = load(f, domain=CITIES, user_column="user", per_user="sample", seed=11)
    assert got.n == 3000 and got.duplicate_rows_dropped == 6000
    # Binomial(3000, 1/3): sd ~ 26; allow 5 sd.
    assert np.all(np.abs(got.histogram - 1000) < 130), got.histogram


def test_paths_agree_on_user_sampling(tmp_path):
    importlib.import_module("pyarrow")
    body = USERS.split("\n", 1)[1]
    f = write(tmp_path, "user,city\n" + body * 3)
    kw = dict(domain=CITIES, user_column="user", per_user="sample")
    for seed in range(20):
        a = load(f, use_pyarrow=True, seed=seed, **kw)
        b = load(f, use_pyarrow=False, seed=seed, **kw)
        assert a.indices.tolist() == b.indices.tolist() and a.notes == b.notes


def test_user_policies_with_missing_values(tmp_path, use_pyarrow):
    f = write(tmp_path, "user,city\nu1,NA\nu2,Rome\nu1,Lyon\nu3,\n")
    got = load(
        f,
        domain=CITIES,
        user_column="user",
        per_user="first",
        drop_missing=True,
        use_pyarrow=use_pyarrow,
    )
    # u2 (Rome) comes first: u1's first row with a value (Lyon) is later; u3 has none.
    assert got.indices.tolist() == [2, 0]
    assert got.missing_dropped == 2 and got.duplicate_rows_dropped == 0
    assert any("1 user(s) had only rows with a missing value" in n for n in got.notes)


def test_user_column_errors(tmp_path, use_pyarrow):
    f = write(tmp_path, "user,city\nu1,Paris\n,Rome\nNA,Rome\n")
    with pytest.raises(DataError, match=r"2 row\(s\) have no user id in column 'user'.*data row 2"):
        load(f, domain=CITIES, user_column="user", use_pyarrow=use_pyarrow)
    with pytest.raises(InvalidParameterError, match="same column"):
        load(f, domain=CITIES, user_column="city")
    with pytest.raises(InvalidParameterError, match="needs a user_column"):
        load(f, domain=CITIES, per_user="first")
    with pytest.raises(InvalidParameterError, match="per_user must be one of error, first"):
        load(f, domain=CITIES, user_column="user", per_user="last")
    with pytest.raises(DataError, match="column 'person' is not in"):
        load(f, domain=CITIES, user_column="person")


def test_user_grouping_matches_python(tmp_path, use_pyarrow, monkeypatch):
    # Ids of many lengths (beyond 8 bytes, non-ASCII), some prefixes of others; many batches.
    monkeypatch.setattr(loaders, "CSV_BLOCK_BYTES", 512)
    monkeypatch.setattr(loaders, "BATCH_ROWS", 50)
    rng = np.random.default_rng(2)
    alphabet = [*"ab é", "€"]
    pool = ["x" + "".join(rng.choice(alphabet, size=rng.integers(0, 19))) for _ in range(300)]
    ids = [pool[i] for i in rng.integers(0, len(pool), size=2000)]
    cities = [CITIES[i] for i in rng.integers(0, 3, size=2000)]
    f = write(
        tmp_path, "user,city\n" + "".join(f'"{u}",{c}\n' for u, c in zip(ids, cities, strict=True))
    )
    first: dict[str, str] = {}
    for u, c in zip(ids, cities, strict=True):
        first.setdefault(u, c)
    got = load(f, domain=CITIES, user_column="user", per_user="first", use_pyarrow=use_pyarrow)
    assert [CITIES[i] for i in got.indices] == list(first.values())
    assert got.duplicate_rows_dropped == 2000 - len(first)


def test_hash_collisions_are_caught(tmp_path, use_pyarrow, monkeypatch):
    f = write(tmp_path, USERS)
    real = users.UserIds._hashes
    seeds = []

    def colliding(self, seed):
        seeds.append(seed)
        hashes = real(self, seed)
        return np.zeros_like(hashes) if seed == 0 else hashes

    monkeypatch.setattr(users.UserIds, "_hashes", colliding)
    got = load(f, domain=CITIES, user_column="user", per_user="first", use_pyarrow=use_pyarrow)
    assert seeds == [0, 1] and got.indices.tolist() == [1, 2, 2]


def test_reader_paths_agree_on_a_messy_file(tmp_path, monkeypatch):
    importlib.import_module("pyarrow")
    monkeypatch.setattr(loaders, "CSV_BLOCK_BYTES", 300)
    monkeypatch.setattr(loaders, "BATCH_ROWS", 9)
    rng = np.random.default_rng(4)
    labels = ["Paris", " Paris", "Rome, Italy", 'say "hi"', "two\nlines", "NA", "", "Oslo"]
    rows = [(f"u{rng.integers(0, 40)}", labels[rng.integers(0, len(labels))]) for _ in range(400)]

    def quote(v):
        return '"' + v.replace('"', '""') + '"'

    text = "\ufeffuser;city\r\n" + "".join(f"{u};{quote(c)}\r\n" for u, c in rows)
    for name, content in [("m.csv", text.encode()), ("m.bin", gzip.compress(text.encode()))]:
        f = write(tmp_path, content, name)
        kw = dict(
            domain=labels[:5],
            other="Other",
            drop_missing=True,
            user_column="user",
            per_user="sample",
            seed=9,
        )
        a = load(f, use_pyarrow=True, **kw)
        b = load(f, use_pyarrow=False, **kw)
        for field in dataclasses.fields(LoadedValues):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if isinstance(x, np.ndarray):
                assert np.array_equal(x, y)
            else:
                assert x == y, field.name
        assert a.missing_dropped == sum(1 for _, c in rows if c in ("NA", ""))
        assert 0 < a.mapped_to_other <= sum(1 for _, c in rows if c == "Oslo")
        assert any("delimiter ';'" in n for n in a.notes)


def test_parquet_in_batches(tmp_path, monkeypatch):
    pa = importlib.import_module("pyarrow")
    pq = importlib.import_module("pyarrow.parquet")
    monkeypatch.setattr(loaders, "BATCH_ROWS", 3)
    f = tmp_path / "d.parquet"
    table = pa.table(
        {
            "user": [5, 7, 5, 8, 9, 7, 10],
            "city": ["Paris", "Rome", "Lyon", None, "NA", "Lyon", " Rome"],
        }
    )
    pq.write_table(table, f, row_group_size=4)
    got = load(
        f,
        domain=CITIES,
        other="Other",
        user_column="user",
        per_user="first",
        drop_missing=True,
    )
    assert got.indices.tolist() == [1, 2, 3]  # users 5, 7, 10; 8 and 9 have no value
    assert got.rows_read == 7 and got.missing_dropped == 2 and got.duplicate_rows_dropped == 2
    assert got.mapped_to_other == 1


def test_in_memory_and_file_agree(tmp_path):
    from shuffledp.data import encode_values

    f = write(tmp_path, "city\nParis\nOslo\nRome\n")
    a = load(f, domain=CITIES, other="Other")
    b = encode_values(["Paris", "Oslo", "Rome"], CITIES, other="Other")
    assert a.indices.tolist() == b.indices.tolist() and a.domain == b.domain
