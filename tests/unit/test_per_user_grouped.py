"""The grouped shuffler: uniform within groups, Jensen-Shannon DBSCAN, k-means, max diameter."""

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import jensenshannon

import shuffledp.shuffler.grouped as grouped
from shuffledp._validation import InvalidParameterError
from shuffledp.shuffler.grouped import (
    ClusteringConfig,
    GroupedShuffler,
    apply_max_diameter,
    cluster_users,
    group_size_summary,
    grouped_permutation,
    js_distance_pairs,
    js_radius_graph,
    simplex_rows,
)

pytest.importorskip("sklearn")


def _clustered(n, d, k, spread, seed):
    rng = np.random.default_rng(seed)
    centres = rng.dirichlet(np.full(d, 0.3), size=k)
    labels = rng.integers(k, size=n)
    points = np.array([rng.dirichlet(200 * spread * centres[j] + 1e-3) for j in labels])
    return points, labels


def test_permutation_keeps_everyone_in_their_group():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 50, size=5000)
    labels[::97] = 1000 + np.arange(labels[::97].size)  # singletons
    for seed in (None, 3):
        perm = grouped_permutation(labels, seed)
        np.testing.assert_array_equal(np.sort(perm), np.arange(5000))
        np.testing.assert_array_equal(labels[perm], labels)
        singles = np.flatnonzero(np.bincount(labels)[labels] == 1)
        np.testing.assert_array_equal(perm[singles], singles)


def _joint_counts(draw, reps):
    # Groups: {0, 2, 4} (6 orders), {1, 5} (2 orders), {3} a singleton.
    labels = np.array([0, 1, 0, 2, 0, 1])
    outcomes = {
        (a, b): i
        for i, (a, b) in enumerate(
            itertools.product(itertools.permutations([0, 2, 4]), itertools.permutations([1, 5]))
        )
    }
    counts = np.zeros(len(outcomes))
    for _ in range(reps):
        perm = draw(labels)
        assert perm[3] == 3
        counts[outcomes[(tuple(perm[[0, 2, 4]]), tuple(perm[[1, 5]]))]] += 1
    return counts


def test_seeded_permutation_is_uniform_within_groups():
    rng = np.random.default_rng(2024)
    counts = _joint_counts(lambda labels: grouped_permutation(labels, rng), 12_000)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_csprng_permutation_is_uniform_given_uniform_keys(monkeypatch):
    # Replace the OS source by a seeded byte stream: checks the construction deterministically.
    rng = np.random.default_rng(99)
    monkeypatch.setattr(grouped.secrets, "token_bytes", lambda k: rng.bytes(k))
    counts = _joint_counts(lambda labels: grouped_permutation(labels, None), 12_000)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_key_collision_inside_a_group_is_redrawn(monkeypatch):
    calls = []

    def fake_bytes(k):
        calls.append(k)
        if len(calls) == 1:
            return bytes(k)  # every key equal
        return np.arange(k // 8, 0, -1, dtype=np.uint64).tobytes()

    monkeypatch.setattr(grouped.secrets, "token_bytes", fake_bytes)
    np.testing.assert_array_equal(grouped_permutation(np.array([0, 0, 0]), None), [2, 1, 0])
    assert len(calls) == 2


def test_equal_keys_in_different_groups_are_fine(monkeypatch):
    monkeypatch.setattr(grouped.secrets, "token_bytes", lambda k: bytes(k))
    np.testing.assert_array_equal(grouped_permutation(np.array([0, 1, 2]), None), [0, 1, 2])


def test_shuffler_releases_values_only():
    values = np.arange(12.0).reshape(6, 2)
    labels = np.array([0, 0, 1, 1, 1, 2])
    out = GroupedShuffler(ClusteringConfig(clusters=2)).shuffle(values, labels, seed=1)
    np.testing.assert_array_equal(out.released, values[out.permutation])
    assert out.n_groups == 3
    assert "labels" not in repr(out) and "permutation" not in repr(out)


def test_simplex_rows_clips_and_renormalizes():
    p = simplex_rows(np.array([[0.5, -0.2, 0.5], [-1.0, -2.0, -0.1]]))
    np.testing.assert_allclose(p, [[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])


def test_js_distance_matches_scipy():
    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.full(7, 0.4), size=60)
    p[:5, :3] = 0.0
    p /= p.sum(axis=1, keepdims=True)
    rows, cols = np.triu_indices(60, 1)
    ours = js_distance_pairs(p, rows.astype(np.int64), cols.astype(np.int64))
    direct = np.array([jensenshannon(p[i], p[j], base=2) for i, j in zip(rows, cols, strict=True)])
    np.testing.assert_allclose(ours, direct, atol=1e-7)
    assert ours.max() <= 1.0


def test_hellinger_bound_used_for_pruning_holds():
    # JS distance (bits) >= Hellinger distance sqrt(1 - BC), the bound js_radius_graph prunes with.
    rng = np.random.default_rng(8)
    for alpha in (0.05, 0.5, 5.0):
        p = rng.dirichlet(np.full(10, alpha), size=400)
        rows, cols = np.triu_indices(400, 1)
        js = js_distance_pairs(p, rows.astype(np.int64), cols.astype(np.int64))
        bc = (np.sqrt(p[rows]) * np.sqrt(p[cols])).sum(axis=1)
        assert np.all(js**2 >= 1 - bc - 1e-9)


def test_radius_graph_equals_brute_force(monkeypatch):
    monkeypatch.setattr(grouped, "_BLOCK_ENTRIES", 2048)  # many blocks
    points, _ = _clustered(150, 6, 4, 1.0, seed=2)
    points[:3] = points[3]  # exact duplicates: distance 0 must be kept
    radius = 0.2
    graph = js_radius_graph(points, radius).toarray()
    rows, cols = np.triu_indices(150, 1)
    direct = np.array(
        [jensenshannon(points[i], points[j], base=2) for i, j in zip(rows, cols, strict=True)]
    )
    expected = np.zeros((150, 150), dtype=bool)
    within = direct <= radius
    expected[rows[within], cols[within]] = True
    expected |= expected.T
    stored = js_radius_graph(points, radius)
    present = np.zeros((150, 150), dtype=bool)
    coo = stored.tocoo()
    present[coo.row, coo.col] = True
    borderline = np.zeros((150, 150), dtype=bool)
    near = np.abs(direct - radius) < 1e-9
    borderline[rows[near], cols[near]] = True
    borderline |= borderline.T
    assert np.array_equal(present & ~borderline, expected & ~borderline)
    assert present[0, 1] and graph[0, 1] == 0.0
    assert not present.diagonal().any()


def test_dbscan_matches_sklearn_on_the_dense_matrix():
    from sklearn.cluster import DBSCAN

    points, _ = _clustered(200, 5, 3, 1.0, seed=6)
    noisy = points + np.random.default_rng(1).laplace(0, 0.02, points.shape)
    config = ClusteringConfig(method="dbscan", eps_radius=0.1, min_samples=10)
    ours = cluster_users(noisy, config, seed=0)
    p = simplex_rows(noisy)
    rows, cols = np.triu_indices(200, 1)
    dense = np.zeros((200, 200))
    dense[rows, cols] = [jensenshannon(p[i], p[j], base=2) for i, j in zip(rows, cols, strict=True)]
    dense += dense.T
    raw = DBSCAN(eps=0.1, min_samples=10, metric="precomputed").fit_predict(dense)
    # Same partition, with every noise point alone.
    raw = np.where(raw < 0, 1000 + np.arange(200), raw)
    assert np.array_equal(ours[:, None] == ours[None, :], raw[:, None] == raw[None, :])
    assert len(np.unique(ours)) > 3  # some noise points became singletons


def test_kmeans_is_reproducible_and_finds_separated_clusters():
    points, truth = _clustered(600, 8, 4, 2.0, seed=3)
    config = ClusteringConfig(clusters=4)
    a = cluster_users(points, config, seed=5)
    b = cluster_users(points, config, seed=5)
    np.testing.assert_array_equal(a, b)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(truth, a) > 0.9
    hell = cluster_users(points, ClusteringConfig(clusters=4, embedding="hellinger"), seed=5)
    assert adjusted_rand_score(truth, hell) > 0.9


def test_max_diameter_splits_users_far_from_the_centroid():
    p = np.array(
        [
            [0.5, 0.5, 0.0],
            [0.45, 0.55, 0.0],
            [0.55, 0.45, 0.0],
            [0.0, 0.1, 0.9],  # far from the first group's centroid
            [1.0, 0.0, 0.0],  # a singleton stays as it is
        ]
    )
    labels = np.array([0, 0, 0, 0, 1])
    centroid = p[:4].mean(axis=0)
    dist = np.array([jensenshannon(p[i], centroid, base=2) for i in range(4)])
    d_max = 2 * (dist[:3].max() + dist[3]) / 2  # between the near members and the far one
    out = apply_max_diameter(p, labels, d_max)
    assert len(set(out[:3])) == 1 and out[3] not in out[:3] and out[4] not in out[:4]
    # Every remaining group has JS diameter <= D.
    for g in np.unique(out):
        members = np.flatnonzero(out == g)
        for i, j in itertools.combinations(members, 2):
            assert jensenshannon(p[i], p[j], base=2) <= d_max
    # A large D changes nothing; a tiny one leaves only singletons (and exact duplicates).
    np.testing.assert_array_equal(apply_max_diameter(p, labels, 2.0), [0, 0, 0, 0, 1])
    assert len(np.unique(apply_max_diameter(p, labels, 1e-6))) == 5


def test_max_diameter_through_cluster_users():
    points, _ = _clustered(300, 6, 3, 0.5, seed=9)
    base = cluster_users(points, ClusteringConfig(clusters=3), seed=1)
    tight = cluster_users(points, ClusteringConfig(clusters=3, max_diameter=0.3), seed=1)
    assert len(np.unique(tight)) > len(np.unique(base))
    p = simplex_rows(points)
    for g in np.unique(tight):
        members = np.flatnonzero(tight == g)
        if members.size > 1:
            i, j = np.triu_indices(members.size, 1)
            dist = js_distance_pairs(p, members[i], members[j])
            assert dist.max() <= 0.3 + 1e-12


def test_group_size_summary_buckets():
    labels = np.r_[np.zeros(1000, int), np.ones(10, int), 2, 3, np.full(5, 4)]
    assert group_size_summary(labels) == {
        "1": 2,
        "2-9": 1,
        "10-99": 1,
        "100-999": 0,
        ">=1000": 1,
    }


def test_config_validation():
    with pytest.raises(InvalidParameterError, match="needs clusters"):
        ClusteringConfig()
    with pytest.raises(InvalidParameterError, match="needs eps_radius"):
        ClusteringConfig(method="dbscan")
    with pytest.raises(InvalidParameterError, match=r"eps_radius must be in \(0, 1\]"):
        ClusteringConfig(method="dbscan", eps_radius=1.5)
    with pytest.raises(InvalidParameterError, match="clustering must be one of"):
        ClusteringConfig(method="spectral", clusters=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="max_diameter"):
        ClusteringConfig(clusters=2, max_diameter=0)
    with pytest.raises(InvalidParameterError, match="clusters must be an integer between 1 and 3"):
        cluster_users(np.eye(3), ClusteringConfig(clusters=4))
