"""The grouped shuffler of the per-user histograms paper (Alg. 1 lines 9–16, Alg. 2 lines 2–9).

Source: "Per-user histograms in the shuffle model" (the version implemented names
neither its authors nor a venue or arXiv id).

The shuffler clusters the users on their first noisy copies W (line 9), then
applies an independent uniformly random permutation within every group
(lines 10–16) to the copy it releases. Only the ordered sequence
Ĥ = ⟨Ĥ_1, …, Ĥ_n⟩ leaves it: position i holds the value of the user
``permutation[i]`` of i's own group (the worked example of §3.1: Ĥ_2 = R̄_7).
Group labels stay inside (:class:`GroupedShuffle` keeps them for analysis).

Clustering input (:func:`simplex_rows`): W is clipped to ≥ 0 and each row
renormalized to sum to 1 (an all-zero row becomes the uniform distribution),
so every user is a point P_i of the probability simplex.

* ``kmeans``: scikit-learn's ``KMeans`` with G clusters on P (``embedding=
  "simplex"``) or on √P (``"hellinger"``: Euclidean distance there is √2 times
  the Hellinger distance), ``random_state`` drawn from the run's generator.
* ``dbscan``: DBSCAN (Ester et al. 1996) with the Jensen–Shannon distance
  (§3.1, "Choice of clustering algorithm"), in bits, so distances lie in
  [0, 1]: JS(p, q) = sqrt(H(m) − (H(p) + H(q))/2), m = (p + q)/2 (scipy's
  ``jensenshannon(p, q, base=2)``). :func:`js_radius_graph` builds the sparse
  graph of all pairs within the radius and scikit-learn runs DBSCAN on it with
  ``metric="precomputed"`` (a callable metric would run Python once per pair).
  DBSCAN's noise points become singleton groups.

Maximum diameter (§4, "Per-user amplification"), ``max_diameter=D``: in every
group of two or more users, the centroid is the mean of its members' P (a
distribution); a member whose JS distance to the centroid exceeds D/2 becomes
a singleton group. The centroid is computed once, before any member leaves.
Since JS distance is a metric, any two members that stay are within D of each
other: every remaining group has JS diameter ≤ D on the clustering input P.
(The paper's r(Q) is an L1 diameter of the true histograms, which the
shuffler cannot see; this rule bounds the noisy one.)

Permutation (:func:`grouped_permutation`): every user gets a random 64-bit key
(from the OS CSPRNG, or from a seeded generator when a seed is given, for
tests); ``lexsort`` by (group, key) lists each group's users in random order,
and the i-th position of the group (users by index, line 11) receives the
i-th user of that random order. Conditional on distinct keys within every
group the permutation of each group is uniform and independent of the
others; keys that collide inside a group are all drawn again. No Python loop
runs over users or groups.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.special import xlogy

from shuffledp._optional import require
from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import DataError, InvalidParameterError, check_int

__all__ = [
    "CLUSTERINGS",
    "EMBEDDINGS",
    "ClusteringConfig",
    "GroupedShuffle",
    "GroupedShuffler",
    "apply_max_diameter",
    "cluster_users",
    "group_size_summary",
    "grouped_permutation",
    "js_distance_pairs",
    "js_radius_graph",
    "secure_keys",
    "simplex_rows",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

Clustering = Literal["kmeans", "dbscan"]
Embedding = Literal["simplex", "hellinger"]

#: Clustering algorithms of line 9.
CLUSTERINGS: tuple[str, ...] = get_args(Clustering)
#: Spaces k-means runs in.
EMBEDDINGS: tuple[str, ...] = get_args(Embedding)

_CHUNK = 1 << 22
#: float64 entries per block of the pairwise computations (64 MiB).
_BLOCK_ENTRIES = 1 << 23
_LN2 = math.log(2.0)


# -- randomness ------------------------------------------------------------------------------


def secure_keys(size: int) -> NDArray[np.uint64]:
    """Return ``size`` independent uniform 64-bit keys from the OS CSPRNG (``secrets``)."""
    size = check_int(size, "size")
    keys = np.empty(size, dtype=np.uint64)
    for start in range(0, size, _CHUNK):
        stop = min(size, start + _CHUNK)
        keys[start:stop] = np.frombuffer(secrets.token_bytes(8 * (stop - start)), np.uint64)
    return keys


def _keys(size: int, rng: np.random.Generator | None) -> NDArray[np.uint64]:
    if rng is None:
        return secure_keys(size)
    return rng.integers(0, np.iinfo(np.uint64).max, size=size, dtype=np.uint64, endpoint=True)


def _check_labels(labels: object) -> IntArray:
    arr = np.asarray(labels)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise InvalidParameterError(
            f"group labels must be a one-dimensional integer array, got {arr.dtype} {arr.shape}"
        )
    return arr.astype(np.int64, copy=False)


def grouped_permutation(labels: object, seed: SeedLike = None) -> IntArray:
    """Return a uniformly random permutation within each group (Alg. 1 lines 10–16).

    Args:
        labels: Group label of every user (any integers).
        seed: ``None`` for keys from the OS CSPRNG (deployments); an int or a
            generator for a reproducible permutation (tests, experiments).

    Returns:
        ``perm`` with ``labels[perm[i]] == labels[i]``: position i receives the
        value of user ``perm[i]``; the release is ``values[perm]``.
    """
    groups = _check_labels(labels)
    n = groups.shape[0]
    rng = None if seed is None else make_rng(seed)
    # Positions of each group in index order (line 11): a stable sort by group.
    positions = np.argsort(groups, kind="stable")
    sorted_groups = groups[positions]
    same_group = sorted_groups[1:] == sorted_groups[:-1] if n > 1 else np.zeros(0, dtype=bool)
    while True:
        keys = _keys(n, rng)
        order = np.lexsort((keys, groups))  # by group, then by key
        ordered = keys[order]
        # Both sorts put the groups in the same blocks, so order[k] is in positions[k]'s group.
        if n < 2 or not np.any(same_group & (ordered[1:] == ordered[:-1])):
            break
    perm = np.empty(n, dtype=np.int64)
    perm[positions] = order
    return perm


# -- clustering input and distances ----------------------------------------------------------


def simplex_rows(noisy: NDArray[np.floating]) -> FloatArray:
    """Clip noisy histograms to ≥ 0 and renormalize each row (all-zero rows → uniform)."""
    arr = np.asarray(noisy, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise DataError(f"noisy histograms must be n x d, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise DataError("noisy histograms must be finite")
    out = np.maximum(arr, 0.0)
    totals = out.sum(axis=1, keepdims=True)
    zero = totals[:, 0] <= 0
    out[zero] = 1.0
    totals[zero] = arr.shape[1]
    out /= totals
    return out


def _entropy_bits(p: FloatArray) -> FloatArray:
    """Shannon entropy (bits) of every row; 0·log 0 = 0."""
    return -np.asarray(xlogy(p, p).sum(axis=-1), dtype=np.float64) / _LN2


def js_distance_pairs(
    p: FloatArray, rows: IntArray, cols: IntArray, entropy: FloatArray | None = None
) -> FloatArray:
    """Return the Jensen–Shannon distance (bits) of the pairs (p[rows[k]], p[cols[k]]).

    JS² = H((p + q)/2) − (H(p) + H(q))/2, clipped at 0 against rounding.

    Args:
        p: n × d rows on the simplex.
        rows: First member of every pair.
        cols: Second member of every pair.
        entropy: H of every row of ``p`` when already known.
    """
    h = _entropy_bits(p) if entropy is None else entropy
    out = np.empty(rows.shape[0], dtype=np.float64)
    step = max(1, _BLOCK_ENTRIES // max(1, p.shape[1]))
    for start in range(0, rows.shape[0], step):
        r = rows[start : start + step]
        c = cols[start : start + step]
        m = 0.5 * (p[r] + p[c])
        js = _entropy_bits(m) - 0.5 * (h[r] + h[c])
        out[start : start + step] = np.sqrt(np.maximum(js, 0.0))
    return out


def js_radius_graph(p: FloatArray, radius: float) -> sparse.csr_matrix:
    """Return the symmetric sparse graph of all pairs within JS distance ``radius``.

    Stored entries are the JS distances (bits) of every pair i ≠ j with
    JS(P_i, P_j) ≤ radius (exact zeros included); the diagonal is not stored.

    Pruning: JS² (bits) ≥ h² = 1 − Σ_j √(p_j q_j), the squared Hellinger
    distance. Both are f-divergences and their generators satisfy
    f_JS(t) ≥ ln 2 · f_H(t) for all t > 0 (the ratio decreases from 1 at t = 1
    to ln 2 as t → 0 or ∞), so JS_nats ≥ ln 2 · h², i.e. JS_bits ≥ h². Hence a
    pair can be within ``radius`` only if its Bhattacharyya coefficient
    √P_i · √P_j ≥ 1 − radius², computed for a block of rows at a time with one
    matrix product; the exact distance is then computed for those candidates only.

    Cost: O(n²d) time for the products (BLAS) plus O(k·d) for the k candidate
    pairs; memory O(block) = 64 MiB for the products plus O(k) for the graph.
    Only the upper triangle is computed and then mirrored.

    Args:
        p: n × d rows on the simplex (:func:`simplex_rows`).
        radius: The JS distance (bits) within which two users are neighbours, > 0.
    """
    if not (isinstance(radius, int | float) and 0 < float(radius)):
        raise InvalidParameterError(f"radius must be a number > 0, got {radius!r}")
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    root = np.sqrt(p)
    entropy = _entropy_bits(p)
    threshold = 1.0 - float(radius) ** 2 - 1e-9  # slack against rounding in the product
    rows_per_block = max(1, _BLOCK_ENTRIES // max(1, n))
    all_rows: list[IntArray] = []
    all_cols: list[IntArray] = []
    all_dist: list[FloatArray] = []
    for start in range(0, n, rows_per_block):
        stop = min(n, start + rows_per_block)
        bc = root[start:stop] @ root[start:].T  # columns start..n-1
        r, c = np.nonzero(bc >= threshold)
        del bc
        r = r.astype(np.int64) + start
        c = c.astype(np.int64) + start
        upper = c > r
        r, c = r[upper], c[upper]
        if r.size == 0:
            continue
        dist = js_distance_pairs(p, r, c, entropy)
        keep = dist <= radius
        all_rows.append(r[keep])
        all_cols.append(c[keep])
        all_dist.append(dist[keep])
    if all_rows:
        r = np.concatenate(all_rows)
        c = np.concatenate(all_cols)
        dist = np.concatenate(all_dist)
    else:
        r = c = np.zeros(0, dtype=np.int64)
        dist = np.zeros(0, dtype=np.float64)
    graph = sparse.csr_matrix(
        (np.concatenate([dist, dist]), (np.concatenate([r, c]), np.concatenate([c, r]))),
        shape=(n, n),
    )
    return graph


# -- clustering -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusteringConfig:
    """How the shuffler forms groups from the first copies W (Alg. 1 line 9).

    Attributes:
        method: ``"kmeans"`` or ``"dbscan"``.
        clusters: G, the number of k-means clusters (≥ 1; at most n at run time).
        eps_radius: DBSCAN's neighbourhood radius, a JS distance in bits, in (0, 1].
        min_samples: DBSCAN's core-point threshold (the point itself included), ≥ 1.
        max_diameter: §4's maximum group diameter D (JS distance, bits), > 0, or ``None``.
        embedding: k-means space: ``"simplex"`` (P) or ``"hellinger"`` (√P).
        n_init: k-means restarts (k-means++ initialisations), ≥ 1.
    """

    method: Clustering = "kmeans"
    clusters: int | None = None
    eps_radius: float | None = None
    min_samples: int = 5
    max_diameter: float | None = None
    embedding: Embedding = "simplex"
    n_init: int = 1

    def __post_init__(self) -> None:
        if self.method not in CLUSTERINGS:
            raise InvalidParameterError(
                f"clustering must be one of {', '.join(CLUSTERINGS)}, got {self.method!r}"
            )
        if self.method == "kmeans":
            if self.clusters is None:
                raise InvalidParameterError("clustering='kmeans' needs clusters (G >= 1)")
            check_int(self.clusters, "clusters", minimum=1)
            if self.eps_radius is not None:
                raise InvalidParameterError(
                    "eps_radius is DBSCAN's radius; with clustering='kmeans' give clusters"
                )
        else:
            if self.eps_radius is None:
                raise InvalidParameterError(
                    "clustering='dbscan' needs eps_radius (a JS distance in (0, 1])"
                )
            if self.clusters is not None:
                raise InvalidParameterError(
                    "clusters is the number of k-means clusters; with clustering='dbscan' give "
                    "eps_radius"
                )
            _check_real(self.eps_radius, "eps_radius", high=1.0)
        check_int(self.min_samples, "min_samples", minimum=1)
        check_int(self.n_init, "n_init", minimum=1)
        if self.max_diameter is not None:
            _check_real(self.max_diameter, "max_diameter")
        if self.embedding not in EMBEDDINGS:
            raise InvalidParameterError(
                f"embedding must be one of {', '.join(EMBEDDINGS)}, got {self.embedding!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The parameters that apply to ``method``, JSON-serialisable."""
        out: dict[str, Any] = {"clustering": self.method}
        if self.method == "kmeans":
            out.update(clusters=self.clusters, embedding=self.embedding, n_init=self.n_init)
        else:
            out.update(eps_radius=self.eps_radius, min_samples=self.min_samples)
        out["max_diameter"] = self.max_diameter
        out["distance"] = "jensen-shannon (bits)" if self.method == "dbscan" else "euclidean"
        return out


def _check_real(value: object, name: str, high: float | None = None) -> float:
    ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        raise InvalidParameterError(f"{name} must be a finite number > 0, got {value!r}")
    if high is not None and float(value) > high:  # type: ignore[arg-type]
        raise InvalidParameterError(f"{name} must be in (0, {high:g}], got {value!r}")
    return float(value)  # type: ignore[arg-type]


def _singletons_for(labels: IntArray, mask: NDArray[np.bool_]) -> IntArray:
    """Give every user in ``mask`` a new label of its own (after the existing ones)."""
    out = labels.copy()
    count = int(mask.sum())
    if count:
        top = int(labels.max()) + 1 if labels.size else 0
        out[mask] = top + np.arange(count, dtype=np.int64)
    return out


def _relabel(labels: IntArray) -> IntArray:
    """Renumber labels 0, 1, … in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)]


def apply_max_diameter(p: FloatArray, labels: IntArray, max_diameter: float) -> IntArray:
    """Split off every member farther than D/2 (JS, bits) from its group's centroid (§4).

    The centroid of a group of two or more is the mean of its members' rows of
    ``p``; a member with JS(P_i, centroid) > D/2 becomes a singleton. Every
    remaining group has JS diameter ≤ D (triangle inequality). Singletons are
    left as they are.

    Args:
        p: n × d rows on the simplex (the clustering input).
        labels: Group of every user.
        max_diameter: D > 0.

    Returns:
        The new labels, renumbered 0, 1, … in order of first appearance.
    """
    diameter = _check_real(max_diameter, "max_diameter")
    groups = _check_labels(labels)
    _, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    d = p.shape[1]
    sums = np.zeros((sizes.shape[0], d), dtype=np.float64)
    np.add.at(sums, inverse, p)
    centroids = sums / sizes[:, None]
    both = np.vstack([p, centroids])
    n = p.shape[0]
    dist = js_distance_pairs(both, np.arange(n, dtype=np.int64), n + inverse)
    far = (dist > diameter / 2.0) & (sizes[inverse] > 1)
    return _relabel(_singletons_for(groups, far))


def cluster_users(
    noisy: NDArray[np.floating], config: ClusteringConfig, seed: SeedLike = None
) -> IntArray:
    """Return the group of every user from the noisy copies W (Alg. 1 line 9).

    Args:
        noisy: n × d first copies W (any real values; see :func:`simplex_rows`).
        config: The clustering algorithm and its parameters.
        seed: Randomness of k-means' initialisation (``None``: OS entropy).

    Returns:
        Labels 0, 1, … (first appearance order); DBSCAN's noise points and the
        users split off by ``max_diameter`` each have a label of their own.
    """
    p = simplex_rows(noisy)
    n = p.shape[0]
    rng = make_rng(seed)
    if config.method == "kmeans":
        assert config.clusters is not None
        clusters = check_int(config.clusters, "clusters", minimum=1, maximum=n)
        cluster = require("sklearn.cluster", extra="cluster")
        points = np.sqrt(p) if config.embedding == "hellinger" else p
        model = cluster.KMeans(
            n_clusters=clusters,
            n_init=config.n_init,
            random_state=int(rng.integers(0, 2**31 - 1)),
        )
        labels = np.asarray(model.fit_predict(points), dtype=np.int64)
    else:
        assert config.eps_radius is not None
        cluster = require("sklearn.cluster", extra="cluster")
        graph = js_radius_graph(p, config.eps_radius)
        model = cluster.DBSCAN(
            eps=float(config.eps_radius), min_samples=config.min_samples, metric="precomputed"
        )
        raw = np.asarray(model.fit_predict(graph), dtype=np.int64)
        labels = _singletons_for(raw, raw < 0)
    labels = _relabel(labels)
    if config.max_diameter is not None:
        labels = apply_max_diameter(p, labels, config.max_diameter)
    return labels


def group_size_summary(labels: object) -> dict[str, int]:
    """Count groups by size bucket (1, 2–9, 10–99, 100–999, ≥ 1000), for the operator.

    Group sizes are statistics of the users' data: they belong in an analysis
    or on stderr, not in a release.
    """
    groups = _check_labels(labels)
    sizes = np.unique(groups, return_counts=True)[1] if groups.size else np.zeros(0, np.int64)
    edges = ((1, 1), (2, 9), (10, 99), (100, 999))
    out = {
        (f"{lo}" if lo == hi else f"{lo}-{hi}"): int(np.sum((sizes >= lo) & (sizes <= hi)))
        for lo, hi in edges
    }
    out[">=1000"] = int(np.sum(sizes >= 1000))
    return out


# -- the shuffler -----------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class GroupedShuffle:
    """One grouped shuffle: the released sequence and, for analysis only, how it was made.

    Attributes:
        released: The ordered sequence Ĥ (n × …): row i is the value given to position i.
        labels: Group of every user (never released).
        permutation: ``released[i] = values[permutation[i]]`` (never released).
    """

    released: NDArray[Any]
    labels: IntArray = field(repr=False)
    permutation: IntArray = field(repr=False)

    @property
    def n_groups(self) -> int:
        """Number of groups (singletons included)."""
        return int(np.unique(self.labels).shape[0])


class GroupedShuffler:
    """Cluster on one copy, shuffle another within the groups (Alg. 1 lines 9–17).

    Args:
        config: How to form the groups.
    """

    def __init__(self, config: ClusteringConfig) -> None:
        self.config = config

    def group(self, noisy: NDArray[np.floating], seed: SeedLike = None) -> IntArray:
        """Return the group of every user (:func:`cluster_users`)."""
        return cluster_users(noisy, self.config, seed)

    def shuffle(
        self, values: NDArray[Any], labels: Sequence[int] | IntArray, seed: SeedLike = None
    ) -> GroupedShuffle:
        """Permute ``values`` (one row per user) uniformly within each group.

        Args:
            values: The copy to release, one row per user.
            labels: Group of every user.
            seed: ``None`` for a CSPRNG permutation; an int or a generator for a
                reproducible one.
        """
        arr = np.asarray(values)
        groups = _check_labels(labels)
        if arr.shape[0] != groups.shape[0]:
            raise InvalidParameterError(
                f"values have {arr.shape[0]} rows but labels name {groups.shape[0]} users"
            )
        perm = grouped_permutation(groups, seed)
        return GroupedShuffle(released=arr[perm], labels=groups, permutation=perm)

    def run(
        self,
        clustering_copy: NDArray[np.floating],
        release_copy: NDArray[Any],
        *,
        cluster_seed: SeedLike = None,
        shuffle_seed: SeedLike = None,
    ) -> GroupedShuffle:
        """Group on ``clustering_copy`` and shuffle ``release_copy`` within the groups."""
        labels = self.group(clustering_copy, cluster_seed)
        return self.shuffle(release_copy, labels, shuffle_seed)
