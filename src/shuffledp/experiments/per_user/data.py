"""The per-user experiment's data: synthetic clustered users or MovieLens, and reference clusters.

:class:`PerUserData` holds the users' counts with what is known of their
structure (the generator's clusters, separation and spread for synthetic
data); :func:`load_data` draws or loads them (``config.data``);
``_reference_clusters`` gives the clusters Thm 4's data-level R_i is measured
against (the truth, or k-means on the true histograms for real data: analysis only).

Imports only :mod:`.config` of this package.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shuffledp.data.per_user import CountMatrix
from shuffledp.experiments.per_user.config import PerUserExperimentConfig, _rng

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, repr=False)
class PerUserData(CountMatrix):
    """Users' counts and what is known about their structure.

    Attributes:
        name: ``"synthetic"`` or ``"movielens"``.
        counts: n × d counts.
        true_labels: The generator's clusters (``None`` for real data).
        separation: The generator's minimum centre L1 distance (``None`` for real data).
        radius: The generator's spread r (``None`` for real data).
        classes: Class labels.
        source: Where the data come from.
    """

    name: str
    counts: IntArray
    true_labels: IntArray | None
    separation: float | None
    radius: float | None
    classes: tuple[str, ...]
    source: str

    @property
    def normalized(self) -> FloatArray:
        """H̄ = H / s_H of every user."""
        out: FloatArray = self.counts / self.counts.sum(axis=1, keepdims=True)
        return out


def load_data(config: PerUserExperimentConfig) -> PerUserData:
    """Draw the synthetic users or load MovieLens (config.data).

    Raises:
        MissingExtraError: For MovieLens without the ``datasets`` extra.
    """
    if config.data == "synthetic":
        from shuffledp.data.synthetic_users import clustered_users

        users = clustered_users(
            config.n,
            config.d,
            config.clusters,
            separation=config.separation,
            radius=config.radius,
            total=config.total,
            centre_concentration=config.centre_concentration,
            seed=_rng(config.seed, 1),
        )
        return PerUserData(
            name="synthetic",
            counts=users.counts,
            true_labels=users.labels,
            separation=users.separation,
            radius=users.radius,
            classes=tuple(f"class{j}" for j in range(config.d)),
            source=(
                f"clustered_users(n={config.n}, d={config.d}, K={config.clusters}, "
                f"separation={config.separation:g}, radius={config.radius:g}, "
                f"total=1+Poisson({config.total - 1}))"
            ),
        )
    from shuffledp.data.movielens import load_movielens_genres

    loaded = load_movielens_genres()
    return PerUserData(
        name="movielens",
        counts=np.asarray(loaded.counts, dtype=np.int64),
        true_labels=None,
        separation=None,
        radius=None,
        classes=tuple(loaded.classes),
        source=loaded.source,
    )


def _reference_clusters(data: PerUserData, config: PerUserExperimentConfig) -> IntArray:
    """Clusters for Thm 4's data-level R_i: the truth, or k-means on the true H̄ (analysis only)."""
    if data.true_labels is not None:
        return data.true_labels
    from sklearn.cluster import KMeans

    model = KMeans(n_clusters=config.clusters, n_init=10, random_state=config.seed)
    return np.asarray(model.fit_predict(data.normalized), dtype=np.int64)
