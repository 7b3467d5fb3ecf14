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


def test_message_and_count_paths_agree_in_distribution():
    from scipy import stats

    from shuffledp.randomizers.krr import KRRRandomizer

    truth = np.array([40, 25, 10, 5])
    n = int(truth.sum())
    randomizer = KRRRandomizer(4, 1.2)
    a, b = randomizer.keep_probability, randomizer.other_probability
    values = np.repeat(np.arange(4), truth)
    rng = np.random.default_rng(99)
    reps = 4000
    message = np.array(
        [np.bincount(randomizer.randomize(values, rng).payload, minlength=4) for _ in range(reps)]
    )
    count = np.array([randomizer.sample_counts(truth, rng) for _ in range(reps)])
    for j in range(4):
        # Exact marginal law of bin j: Bin(h_j, a) + Bin(n − h_j, b).
        pmf = np.convolve(
            stats.binom.pmf(np.arange(truth[j] + 1), truth[j], a),
            stats.binom.pmf(np.arange(n - truth[j] + 1), n - truth[j], b),
        )
        for sample in (message[:, j], count[:, j]):
            observed = np.bincount(sample, minlength=len(pmf)).astype(float)
            expected = pmf * reps
            keep = expected >= 5
            obs = np.append(observed[keep], observed[~keep].sum())
            exp = np.append(expected[keep], expected[~keep].sum())
            exp *= obs.sum() / exp.sum()
            assert stats.chisquare(obs, exp).pvalue > 1e-3
        assert stats.ks_2samp(message[:, j], count[:, j]).pvalue > 1e-3
