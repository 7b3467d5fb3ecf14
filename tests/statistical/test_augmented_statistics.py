"""The augmented protocol's two paths agree with the exact law; the estimator is unbiased.

Fixed seeds; tolerances from the statistics' null laws (chi-square p-values,
z-scores of means, the sampling law of a variance ratio).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from shuffledp.messages import MessageBatch
from shuffledp.protocols.augmented import AugmentedProtocol
from shuffledp.randomizers.augmented import sample_dummies
from shuffledp.shuffler.uniform import UniformShuffler

pytestmark = pytest.mark.slow

CASES = [("sageo", 1.0), ("sageo", 0.7), ("s1geo", None), ("sbin", 0.9)]


def _dummy_pmf(protocol: AugmentedProtocol, size: int) -> np.ndarray:
    law = protocol.calibration.law
    pmf = law.pmf(np.arange(size))
    return pmf / pmf.sum()  # the tail beyond size is below 1e-12 in every case here


def _bin_law(protocol: AugmentedProtocol, h: int, size: int) -> np.ndarray:
    """Exact law of c_j = Bin(h, beta) + z on 0..size−1."""
    beta = protocol.calibration.beta
    kept = stats.binom.pmf(np.arange(h + 1), h, beta)
    return np.convolve(kept, _dummy_pmf(protocol, size))[:size]


def _chisquare_pvalue(sample: np.ndarray, pmf: np.ndarray) -> float:
    observed = np.bincount(sample, minlength=len(pmf))[: len(pmf)].astype(float)
    expected = pmf * sample.size
    keep = expected >= 5
    obs = np.append(observed[keep], sample.size - observed[keep].sum())
    exp = np.append(expected[keep], sample.size - expected[keep].sum())
    exp = np.clip(exp, 1e-12, None)
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


@pytest.mark.parametrize(("variant", "beta"), CASES)
def test_message_and_count_paths_have_the_exact_law(variant, beta) -> None:
    truth = np.array([30, 12, 5, 0])
    n, d = int(truth.sum()), len(truth)
    protocol = AugmentedProtocol.calibrated(n, d, 1.0, 1e-6, variant=variant, beta=beta)
    values = np.repeat(np.arange(d), truth)
    rng = np.random.default_rng(2024)
    reps = 3000
    shuffler = UniformShuffler()
    message = np.array(
        [
            protocol.statistic_from_messages(
                shuffler.shuffle(protocol.randomize(values, rng), seed=rng)
            )
            for _ in range(reps)
        ]
    )
    count = np.array([protocol.sample_statistic(truth, rng) for _ in range(reps)])
    size = int(max(message.max(), count.max())) + 200
    p_values = []
    for j in range(d):
        pmf = _bin_law(protocol, int(truth[j]), size)
        p_values += [_chisquare_pvalue(message[:, j], pmf), _chisquare_pvalue(count[:, j], pmf)]
        # The two paths against each other, without the model.
        p_values.append(float(stats.ks_2samp(message[:, j], count[:, j]).pvalue))
    # 12 tests at level 1e-4 each: a false alarm has probability about 1e-3.
    assert min(p_values) > 1e-4, p_values


@pytest.mark.parametrize(("variant", "beta"), [("sageo", 1.0), ("sageo", 0.6), ("sbin", 1.0)])
def test_estimator_unbiased_with_the_stated_variance(variant, beta) -> None:
    truth = np.array([400, 150, 40, 10, 0])
    n, d = int(truth.sum()), len(truth)
    protocol = AugmentedProtocol.calibrated(n, d, 1.0, 1e-6, variant=variant, beta=beta)
    cal = protocol.calibration
    rng = np.random.default_rng(77)
    reps = 20_000
    stats_ = np.array([protocol.sample_statistic(truth, rng) for _ in range(reps)])
    estimates = np.array([protocol.estimate(s).counts for s in stats_])
    sd = np.sqrt(cal.noise_variance + cal.beta * (1 - cal.beta) * truth) / cal.beta
    z = (estimates.mean(axis=0) - truth) / (sd / math.sqrt(reps))
    assert np.max(np.abs(z)) < 4.5
    # Sample variance over its expectation: sd of the ratio about sqrt(2/(reps-1)) (up to
    # the excess kurtosis, below 3 for these laws: 5 such sds).
    ratio = estimates.var(axis=0, ddof=1) / sd**2
    assert np.max(np.abs(ratio - 1)) < 5 * math.sqrt((2 + 3) / (reps - 1))
    # The reported standard errors (h clipped to [0, n] plugged in) estimate the same.
    stated = np.mean([protocol.estimate(s).stderr for s in stats_[:2000]], axis=0)
    np.testing.assert_allclose(stated, sd, rtol=0.05, atol=0.02)


@pytest.mark.parametrize(("variant", "beta"), CASES)
def test_dummy_sampler_against_the_law(variant, beta) -> None:
    protocol = AugmentedProtocol.calibrated(10, 3, 0.7, 1e-5, variant=variant, beta=beta)
    draws = sample_dummies(protocol.calibration.law, 300_000, np.random.default_rng(5))
    size = int(draws.max()) + 100
    assert _chisquare_pvalue(draws, _dummy_pmf(protocol, size)) > 1e-4
    law = protocol.calibration.law
    assert abs(draws.mean() - law.mean) < 5 * math.sqrt(law.variance / draws.size)


def test_message_path_keeps_each_message_with_probability_beta() -> None:
    protocol = AugmentedProtocol.calibrated(10_000, 2, 1.0, 1e-6, beta=0.75)
    batch = MessageBatch(
        payload=np.zeros(10_000, dtype=np.int64),
        sender=np.arange(10_000, dtype=np.int64),
        n_users=10_000,
    )
    kept = [int(np.sum(protocol.randomizer.augment(batch, seed=s).sender >= 0)) for s in range(200)]
    mean, sd = 10_000 * 0.75, math.sqrt(10_000 * 0.75 * 0.25)
    assert abs(np.mean(kept) - mean) < 5 * sd / math.sqrt(200)
