"""Per-user histograms (Alg. 1): seconds per stage and memory, k-means at scale, DBSCAN growth.

Prints one JSON object:

* ``kmeans``: n = 1e5 users, d = 20 classes (synthetic: 50 Dirichlet clusters,
  L1 separation 0.8, radius 0.2, Poisson totals of mean 100), ε = 8, ε₁ = 4,
  c = 0.1, k-means with G = 50 on W. Seconds of each stage: ``randomize``
  (normalize and draw both Laplace copies and R), ``cluster`` (clip,
  renormalize, scikit-learn KMeans, n_init = 1), ``shuffle`` (the grouped
  permutation from the OS CSPRNG and the gather of T); their total (target
  < 30 s); peak traced memory (tracemalloc, which sees numpy's buffers; not
  scikit-learn's own C allocations) and the process's peak RSS; the adjusted
  Rand index of the groups against the true clusters.
* ``dbscan``: n = 5e3, 1e4, 2e4 (same data model), Jensen-Shannon DBSCAN with
  radius 0.3 (bits) and min_samples 10: seconds of the radius graph
  (:func:`js_radius_graph`) and of scikit-learn's DBSCAN on it, the stored
  edges, and the growth exponent of the total time between consecutive n
  (2 means quadratic).

Usage: python benchmarks/per_user.py [--quick]   (--quick: n/10 everywhere, for a smoke test)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import resource
import time
import tracemalloc
from typing import Any

import numpy as np
from sklearn.cluster import DBSCAN
from sklearn.metrics import adjusted_rand_score

from shuffledp.data.synthetic_users import clustered_users
from shuffledp.protocols.per_user import PerUserHistograms
from shuffledp.randomizers.laplace import HistogramLaplaceRandomizer, normalize_counts
from shuffledp.shuffler.grouped import (
    ClusteringConfig,
    cluster_users,
    grouped_permutation,
    js_radius_graph,
    simplex_rows,
)

D, K = 20, 50
EPSILON, EPSILON1, C = 8.0, 4.0, 0.1


def _users(n: int, seed: int = 0) -> Any:
    return clustered_users(n, D, K, separation=0.8, radius=0.2, total=100, seed=seed)


def _kmeans(n: int) -> dict[str, Any]:
    users = _users(n)
    protocol = PerUserHistograms(EPSILON, EPSILON1, C, clusters=K)
    rng = np.random.default_rng(1)
    tracemalloc.start()
    start = time.perf_counter()
    normalized = normalize_counts(users.counts)
    w = HistogramLaplaceRandomizer(EPSILON1, C).randomize(normalized, rng)
    t = HistogramLaplaceRandomizer(EPSILON - EPSILON1, C).randomize(normalized, rng)
    r = protocol.weight * w + (1 - protocol.weight) * t
    randomized = time.perf_counter()
    assert protocol.clustering is not None
    labels = cluster_users(w, protocol.clustering, rng)
    clustered = time.perf_counter()
    perm = grouped_permutation(labels)  # OS CSPRNG keys: the deployment path
    released = t[perm]
    shuffled = time.perf_counter()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del r, released
    stages = {
        "randomize": randomized - start,
        "cluster": clustered - randomized,
        "shuffle": shuffled - clustered,
    }
    return {
        "n": n,
        "d": D,
        "clusters": K,
        "epsilon": EPSILON,
        "epsilon1": EPSILON1,
        "c": C,
        "seconds": stages,
        "total_seconds": sum(stages.values()),
        "peak_traced_mb": peak / 2**20,
        "input_mb": users.counts.nbytes / 2**20,
        "adjusted_rand_index": adjusted_rand_score(users.labels, labels),
    }


def _dbscan(n: int, radius: float = 0.3, min_samples: int = 10) -> dict[str, Any]:
    users = _users(n)
    w = HistogramLaplaceRandomizer(EPSILON1, C).randomize(users.normalized, seed=1)
    start = time.perf_counter()
    p = simplex_rows(w)
    graph = js_radius_graph(p, radius)
    built = time.perf_counter()
    raw = DBSCAN(eps=radius, min_samples=min_samples, metric="precomputed").fit_predict(graph)
    done = time.perf_counter()
    # The same through the package (noise points become singletons), for the quality figure.
    config = ClusteringConfig(method="dbscan", eps_radius=radius, min_samples=min_samples)
    labels = cluster_users(w, config, seed=0)
    return {
        "n": n,
        "radius": radius,
        "min_samples": min_samples,
        "graph_seconds": built - start,
        "dbscan_seconds": done - built,
        "total_seconds": done - start,
        "edges": int(graph.nnz // 2),
        "clusters": int(raw.max() + 1),
        "noise_points": int((raw < 0).sum()),
        "groups": int(np.unique(labels).size),
        "adjusted_rand_index": adjusted_rand_score(users.labels, labels),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n/10 everywhere (smoke test)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    kmeans = _kmeans(100_000 // scale)
    dbscan = [_dbscan(n // scale) for n in (5_000, 10_000, 20_000)]
    for prev, cur in itertools.pairwise(dbscan):
        cur["growth_exponent"] = math.log(cur["total_seconds"] / prev["total_seconds"]) / math.log(
            cur["n"] / prev["n"]
        )
    out = {
        "kmeans": kmeans,
        "dbscan": dbscan,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
