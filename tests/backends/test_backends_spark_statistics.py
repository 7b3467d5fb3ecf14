"""The Spark message-level simulation against the count-level path, in distribution.

Fixed seeds; tolerances come from the variance of the estimates (4 standard
deviations), as in ``tests/statistical``. All replicates run in one Spark job.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from shuffledp.backends import SimulationPlan
from shuffledp.backends.spark import SparkBackend
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.protocols.krr import KRRProtocol

pytestmark = pytest.mark.slow

TRUTH = np.array([110, 50, 25, 15])
REPLICATES = 300


def _protocol(name):
    n, d = int(TRUTH.sum()), len(TRUTH)
    if name == "flip":
        return FlipProtocol.from_parameters(q=0.02, fake_users=5, n=n, domain=d, epsilon=2.0)
    return KRRProtocol.from_parameters(epsilon0=1.5, n=n, domain=d, epsilon=1.0)


@pytest.mark.parametrize("name", ["flip", "krr"])
def test_spark_estimates_match_the_count_level_path(spark, name):
    protocol = _protocol(name)
    plan = SimulationPlan.create(
        protocol.randomizer, TRUTH, partitions=2, replicates=REPLICATES, seed=2024
    )
    statistics = SparkBackend(spark).simulate(plan).batch_counts()
    rng = np.random.default_rng(99)
    reference = np.array(
        [protocol.sample_statistic(TRUTH, rng) for _ in range(REPLICATES)], dtype=np.int64
    )
    spark_est = np.array([protocol.estimate(s).counts for s in statistics])
    count_est = np.array([protocol.estimate(s).counts for s in reference])
    d, reps = len(TRUTH), REPLICATES
    sigma = count_est.std(axis=0, ddof=1)
    # Means: the two sample means differ by N(0, 2σ²/R) per bin.
    z = (spark_est.mean(axis=0) - count_est.mean(axis=0)) / (sigma * np.sqrt(2.0 / reps))
    assert np.max(np.abs(z)) < 4.0, z
    # Both unbiased: 4σ/√R around the truth.
    z_truth = (spark_est.mean(axis=0) - TRUTH) / (sigma / np.sqrt(reps))
    assert np.max(np.abs(z_truth)) < 4.0, z_truth
    # Variances: each sample variance has relative sd ≈ sqrt(2/(R−1)); pooled over d bins.
    ratio = (spark_est.var(axis=0, ddof=1) / sigma**2).mean()
    assert abs(ratio - 1.0) < 4.0 * np.sqrt(4.0 / (d * (reps - 1))), ratio
    # The first bin's statistic: same distribution (two-sample KS, conservative when discrete).
    assert stats.ks_2samp(statistics[:, 0], reference[:, 0]).pvalue > 1e-3
