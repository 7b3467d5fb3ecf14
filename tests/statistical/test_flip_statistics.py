"""Statistical checks of FLIP against its theory (fixed seeds, tolerances from the variance)."""

import numpy as np
import pytest
from scipy import stats

from shuffledp.accounting.reproductions.flip_paper import paper_error_bound
from shuffledp.analyzers import flip_count_stderr
from shuffledp.protocols import FlipProtocol, calibrate_flip
from shuffledp.randomizers import FlipRandomizer

pytestmark = pytest.mark.slow


def _values(hist):
    return np.repeat(np.arange(len(hist)), hist)


def _check_mean_and_variance(estimates, truth, sigma):
    reps, d = estimates.shape
    # Mean: each bin's average is N(h_j, σ²/R); 4σ per bin over d bins.
    z = (estimates.mean(axis=0) - truth) / (sigma / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4.0, z
    # Variance: pooled over bins, the ratio to σ² has sd ≈ sqrt(2/(d(R−1))).
    ratio = estimates.var(axis=0, ddof=1).mean() / sigma**2
    assert abs(ratio - 1.0) < 4.0 * np.sqrt(2.0 / (d * (reps - 1))), ratio


def test_count_level_unbiased_with_theoretical_variance():
    truth = np.array([4000, 2500, 1500, 800, 500, 300, 200, 120, 60, 20])
    n, d = int(truth.sum()), len(truth)
    cal = calibrate_flip(n, d, 1.0, 1e-6, fake_users=20)
    protocol = FlipProtocol(cal)
    rng = np.random.default_rng(12345)
    reps = 2000
    est = np.array(
        [protocol.estimate(protocol.sample_statistic(truth, rng)).counts for _ in range(reps)]
    )
    _check_mean_and_variance(est, truth, flip_count_stderr(n, cal.q, cal.fake_users))


def test_message_level_unbiased_with_theoretical_variance():
    truth = np.array([900, 500, 300, 200, 60, 30, 10, 0])
    n, d = int(truth.sum()), len(truth)
    protocol = FlipProtocol.calibrated(n, d, 1.0, 1e-5, fake_users=10)
    values = _values(truth)
    reps = 400
    est = np.array([protocol.run(values, seed=1000 + r).estimate.counts for r in range(reps)])
    _check_mean_and_variance(est, truth, protocol.calibration.stderr)


def _exact_count_pmf(h, total, q):
    ones = stats.binom.pmf(np.arange(h + 1), h, 1 - q)
    zeros = stats.binom.pmf(np.arange(total - h + 1), total - h, q)
    return np.convolve(ones, zeros)


def _gof_pvalue(samples, pmf):
    observed = np.bincount(samples, minlength=len(pmf)).astype(float)
    expected = pmf * len(samples)
    # Pool cells in order until each pooled cell expects at least 5.
    obs_cells, exp_cells, o_acc, e_acc = [], [], 0.0, 0.0
    for o, e in zip(observed, expected, strict=False):
        o_acc, e_acc = o_acc + o, e_acc + e
        if e_acc >= 5:
            obs_cells.append(o_acc)
            exp_cells.append(e_acc)
            o_acc = e_acc = 0.0
    obs_cells[-1] += o_acc
    exp_cells[-1] += e_acc
    exp_arr = np.array(exp_cells) * (len(samples) / np.sum(exp_cells))
    return stats.chisquare(obs_cells, exp_arr).pvalue


def test_message_and_count_paths_agree_in_distribution():
    truth = np.array([20, 7, 3])
    n, d, k, q = 30, 3, 2, 0.2
    randomizer = FlipRandomizer(d, q, k)
    analyzer_bins = d
    protocol_values = _values(truth)
    reps = 3000
    rng = np.random.default_rng(777)
    message_counts = np.array(
        [
            np.bincount(randomizer.randomize(protocol_values, rng).payload, minlength=analyzer_bins)
            for _ in range(reps)
        ]
    )
    count_counts = np.array([randomizer.sample_counts(truth, rng) for _ in range(reps)])
    total = n * (k + 1)
    for j in range(d):
        pmf = _exact_count_pmf(int(truth[j]), total, q)
        assert _gof_pvalue(message_counts[:, j], pmf) > 1e-3
        assert _gof_pvalue(count_counts[:, j], pmf) > 1e-3
    # Joint behaviour: bins are independent, so C_0 + C_1 has the convolved law.
    pmf01 = np.convolve(_exact_count_pmf(20, total, q), _exact_count_pmf(7, total, q))
    assert _gof_pvalue(message_counts[:, 0] + message_counts[:, 1], pmf01) > 1e-3
    # And the two paths against each other (two-sample test on every bin).
    for j in range(d):
        assert stats.ks_2samp(message_counts[:, j], count_counts[:, j]).pvalue > 1e-3


def test_paper_error_bound_holds_in_ninety_percent_of_runs():
    truth = np.array([3000, 2000, 1500, 1000, 800, 600, 500, 300, 200, 100])
    n, d = int(truth.sum()), len(truth)
    cal = calibrate_flip(n, d, 1.0, 1e-6, fake_users=50, method="paper")
    protocol = FlipProtocol(cal)
    bound = paper_error_bound(cal.q, cal.fake_users, n)  # Thm III.3(b), β = 1/10
    rng = np.random.default_rng(99)
    reps = 500
    errors = np.array(
        [
            np.abs(protocol.estimate(protocol.sample_statistic(truth, rng)).counts - truth)
            for _ in range(reps)
        ]
    )
    within = np.mean(errors < bound)
    assert within >= 0.9
    # The bound sits at about 4.9 standard errors, so nearly every bin is within it.
    assert within > 0.999
