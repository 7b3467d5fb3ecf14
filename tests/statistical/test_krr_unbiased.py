"""Matrix inversion is unbiased with the stated standard errors (fixed seeds)."""

import numpy as np
import pytest

from shuffledp.protocols.krr import KRRProtocol

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("path", ["count", "message"])
def test_inversion_unbiased_with_stated_variance(path):
    truth = np.array([3000, 1500, 800, 400, 200, 80, 20, 0])
    n, k = int(truth.sum()), len(truth)
    protocol = KRRProtocol.calibrated(n, k, 1.0, 1e-6, epsilon0=2.0)
    values = np.repeat(np.arange(k), truth)
    reps = 1500 if path == "count" else 300
    rng = np.random.default_rng(4242)
    runs = [protocol.run(values, path=path, seed=rng) for _ in range(reps)]
    est = np.array([r.estimate.counts for r in runs])
    a, b = protocol.randomizer.keep_probability, protocol.randomizer.other_probability
    sd = np.sqrt(truth * a * (1 - a) + (n - truth) * b * (1 - b)) / (a - b)
    z = (est.mean(axis=0) - truth) / (sd / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4.0
    ratio = (est.var(axis=0, ddof=1) / sd**2).mean()
    assert abs(ratio - 1) < 4 * np.sqrt(2 / (k * (reps - 1)))
    # The reported standard errors estimate the same quantity.
    stated = np.array([r.estimate.stderr for r in runs]).mean(axis=0)
    np.testing.assert_allclose(stated, sd, rtol=0.05)
