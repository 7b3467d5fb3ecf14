"""Per-user measures, vectorized over users: errors, top-k precision, grouping, distances.

:func:`top_k_precision` and ``_utility`` (mean L1 of the raw and of the
simplex-projected release, top-k precision); ``_grouping`` (group count,
purity, majority agreement and the ARI against the true clusters, ``_ari``);
:func:`mean_l1_to_groups` (Thm 3's first term, or a user's error averaged over
the within-group shuffle) and ``_min_l1_to_other_clusters`` (Thm 4's c·R_i),
both in blocks of ``_BLOCK`` elements; ``_mean_se`` (mean and standard error
over repetitions).

Imports nothing of this package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import check_int
from shuffledp.shuffler.grouped import simplex_rows

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Elements per block of the pairwise L1 computations (32 MiB of float64).
_BLOCK = 1 << 22


def top_k_precision(estimates: FloatArray, truth: FloatArray, k: int) -> FloatArray:
    """Per user: the fraction of the estimate's top k classes that are in the true top k.

    A class whose true share ties the k-th largest counts as a true top-k
    class, so ties in the truth never cost precision.

    Args:
        estimates: n × d estimates (any reals).
        truth: n × d true normalized histograms.
        k: The k, 1 ≤ k ≤ d.
    """
    d = truth.shape[1]
    k = check_int(k, "k", minimum=1, maximum=d)
    threshold = -np.partition(-truth, k - 1, axis=1)[:, k - 1]
    top = np.argpartition(-estimates, k - 1, axis=1)[:, :k]
    hits = np.take_along_axis(truth, top, axis=1) >= threshold[:, None]
    out: FloatArray = hits.mean(axis=1)
    return out


def _utility(estimates: FloatArray, truth: FloatArray, k: int) -> dict[str, float]:
    """Mean L1 (raw and simplex-projected) and top-k precision over all users."""
    return {
        "l1": float(np.abs(estimates - truth).sum(axis=1).mean()),
        "l1_simplex": float(np.abs(simplex_rows(estimates) - truth).sum(axis=1).mean()),
        "topk": float(top_k_precision(estimates, truth, k).mean()),
    }


def _ari(a: IntArray, b: IntArray) -> float:
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(a, b))


def _grouping(labels: IntArray, true_labels: IntArray | None) -> dict[str, float]:
    """Group count; purity, majority agreement and ARI against the true clusters when known.

    A group is pure when all its members share one true cluster (a singleton is
    pure). ``majority`` is the fraction of users whose true cluster is their
    group's most common one.
    """
    _, group = np.unique(labels, return_inverse=True)
    group = group.reshape(-1)
    out = {"groups": float(group.max() + 1)}
    if true_labels is None:
        return out | {"pure": math.nan, "majority": math.nan, "ari_true": math.nan}
    _, truth = np.unique(true_labels, return_inverse=True)
    truth = truth.reshape(-1)
    n_groups, n_true = int(group.max()) + 1, int(truth.max()) + 1
    table = np.bincount(group * n_true + truth, minlength=n_groups * n_true).reshape(
        n_groups, n_true
    )
    pure = (table > 0).sum(axis=1) == 1
    majority = table.argmax(axis=1)
    return out | {
        "pure": float(pure[group].mean()),
        "majority": float((majority[group] == truth).mean()),
        "ari_true": _ari(labels, true_labels),
    }


def mean_l1_to_groups(
    points: FloatArray,
    users: IntArray,
    targets: FloatArray,
    labels: IntArray,
) -> FloatArray:
    """For every listed user i: the mean of ‖points[i] − targets[j]‖₁ over j in i's group.

    With ``points = targets = H̄`` this is Thm 3's first term; with
    ``points = H̄`` and ``targets`` the released copy it is the error of user
    i averaged exactly over the within-group shuffle. Loops over groups and
    blocks of users, never over single users.

    Args:
        points: n × d rows (the users' side).
        users: The users (row indices) to evaluate.
        targets: n × d rows (the group members' side).
        labels: The group of every user.
    """
    out = np.empty(users.shape[0], dtype=np.float64)
    user_groups = labels[users]
    for group in np.unique(user_groups).tolist():
        where = np.flatnonzero(user_groups == group)
        members = targets[labels == group]
        step = max(1, _BLOCK // max(1, members.size))
        for start in range(0, where.shape[0], step):
            rows = where[start : start + step]
            diff = np.abs(points[users[rows]][:, None, :] - members[None, :, :])
            out[rows] = diff.sum(axis=2).mean(axis=1)
    return out


def _min_l1_to_other_clusters(h: FloatArray, users: IntArray, clusters: IntArray) -> FloatArray:
    """Per listed user: min over users j of other clusters of ‖H̄_i − H̄_j‖₁ (Thm 4's c·R_i)."""
    out = np.empty(users.shape[0], dtype=np.float64)
    if np.unique(clusters).shape[0] < 2:
        out.fill(math.inf)
        return out
    step = max(1, _BLOCK // max(1, h.size))
    for start in range(0, users.shape[0], step):
        rows = users[start : start + step]
        dist = np.abs(h[rows][:, None, :] - h[None, :, :]).sum(axis=2)
        dist[clusters[rows][:, None] == clusters[None, :]] = np.inf
        out[start : start + step] = dist.min(axis=1)
    return out


def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return math.nan, math.nan
    se = float(arr.std(ddof=1) / math.sqrt(arr.size)) if arr.size > 1 else math.nan
    return float(arr.mean()), se
