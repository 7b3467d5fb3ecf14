"""The segmented protocol in distribution: the paths agree; the pooled estimator's mean."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from shuffledp.analyzers.segmented import pooled_expectation
from shuffledp.protocols.segmented import SegmentedProtocol
from shuffledp.randomizers.poisson import PoissonSetRandomizer, pair_histogram

pytestmark = pytest.mark.slow


def small_dataset(seed=0):
    """150 users at each of two levels, s = 2 distinct items of d′ = 5; level 0 favours item 0."""
    rng = np.random.default_rng(seed)
    levels = np.repeat([0, 1], 150)
    first = np.where(levels == 0, 0, rng.integers(1, 5, 300))
    second = (first + rng.integers(1, 5, 300)) % 5
    return np.stack([first, second], axis=1), levels


def exact_marginal(a_x, lams, tries, p):
    """Law of C_x = Σ_k Bin(a_kx, λ_k) + Bin(tries, p) (paper variant), by convolution."""
    pmf = stats.binom.pmf(np.arange(tries + 1), tries, p)
    for count, lam in zip(a_x, lams, strict=True):
        pmf = np.convolve(pmf, stats.binom.pmf(np.arange(count + 1), count, lam))
    return pmf


def chi_square_gof(sample, pmf):
    """p-value of Pearson's test of ``sample`` against ``pmf`` (cells pooled to expected >= 5)."""
    observed = np.bincount(sample, minlength=len(pmf))[: len(pmf)]
    expected = pmf * len(sample)
    cells_o, cells_e, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed, expected, strict=True):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            cells_o.append(acc_o)
            cells_e.append(acc_e)
            acc_o = acc_e = 0.0
    cells_o[-1] += acc_o
    cells_e[-1] += acc_e
    cells_e = np.array(cells_e) * (sum(cells_o) / sum(cells_e))
    return stats.chisquare(cells_o, cells_e).pvalue


@pytest.mark.parametrize("variant", ["paper", "dummy"])
def test_message_and_count_paths_agree_in_distribution(variant):
    items, levels = small_dataset()
    lams = (0.3, 0.8)
    r = PoissonSetRandomizer(lams, 5, 2, 1.5, variant)
    a = pair_histogram(items, levels, 2, 5)
    rng = np.random.default_rng(2024)
    reps = 3000
    message = np.array(
        [np.bincount(r.randomize(items, levels, rng).payload, minlength=5) for _ in range(reps)]
    )
    count = np.array([r.sample_counts(a, rng) for _ in range(reps)])
    for x in range(5):
        # Two-sample test on each item's count, and on the total.
        lo = min(message[:, x].min(), count[:, x].min())
        size = max(message[:, x].max(), count[:, x].max()) - lo + 1
        table = np.array(
            [
                np.bincount(message[:, x] - lo, minlength=size),
                np.bincount(count[:, x] - lo, minlength=size),
            ]
        )
        table = table[:, table.sum(axis=0) >= 10]
        assert stats.chi2_contingency(table).pvalue > 1e-4, (variant, x)
        if variant == "paper":
            pmf = exact_marginal(a[:, x], lams, 300 * 2, 0.75 / 5)
            assert chi_square_gof(message[:, x], pmf) > 1e-4
            assert chi_square_gof(count[:, x], pmf) > 1e-4
    assert stats.ks_2samp(message.sum(axis=1), count.sum(axis=1)).pvalue > 1e-4
    # Means and covariances agree within their sampling error.
    se = np.sqrt((message.var(axis=0) + count.var(axis=0)) / reps)
    assert np.all(np.abs(message.mean(axis=0) - count.mean(axis=0)) < 4.5 * se)
    corr_m = np.corrcoef(message.T)[np.triu_indices(5, 1)]
    corr_c = np.corrcoef(count.T)[np.triu_indices(5, 1)]
    assert np.all(np.abs(corr_m - corr_c) < 4.5 * np.sqrt(2 / reps))


@pytest.fixture(scope="module")
def calibrated():
    """A real calibration where the three levels' λ differ (about 0.47, 0.87, 1)."""
    return SegmentedProtocol.calibrated(
        (0.5, 1.0, 2.0),
        level_counts=(1000, 1000, 1000),
        delta=1e-6,
        domain=8,
        items_per_user=2,
        blanket_rate=0.3,
        workers=1,
    )


def three_level_data(dependent, seed=0):
    rng = np.random.default_rng(seed)
    levels = np.repeat([0, 1, 2], 1000)
    if dependent:
        # Level-0.5 users hold {0, 1}; the others hold two distinct items of 2..7.
        first = np.where(levels == 0, 0, 2 + rng.integers(0, 6, 3000))
        second = np.where(levels == 0, 1, 2 + (first - 2 + rng.integers(1, 6, 3000)) % 6)
    else:
        first = rng.integers(0, 8, 3000)
        second = (first + rng.integers(1, 8, 3000)) % 8
    return np.stack([first, second], axis=1), levels


@pytest.mark.parametrize("path", ["message", "count"])
def test_pooled_estimator_unbiased_when_items_do_not_depend_on_levels(calibrated, path):
    lams = calibrated.parameters.report_probabilities
    assert lams[0] < 0.5 < lams[1] < lams[2]  # the levels really differ
    items, levels = three_level_data(dependent=False)
    # Same item law at every level: copy level 0's sets to the others.
    items[1000:2000] = items[:1000]
    items[2000:] = items[:1000]
    truth = np.bincount(items.ravel(), minlength=8) / 3000
    reps = 400 if path == "message" else 3000
    rng = np.random.default_rng(7)
    runs = [calibrated.run(items, levels, path=path, seed=rng) for _ in range(reps)]
    freq = np.array([r.frequencies for r in runs])
    sd = freq.std(axis=0, ddof=1)
    z = (freq.mean(axis=0) - truth) / (sd / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4.5
    stated = np.array([r.estimate.frequency_stderr for r in runs]).mean(axis=0)
    np.testing.assert_allclose(stated, sd, rtol=0.1 if path == "count" else 0.2)


def test_pooled_estimator_bias_when_items_depend_on_levels(calibrated):
    """E[Ŵ_j] = Σ_k n_k λ_k w_jk / Σ_k n_k λ_k, not w_j: measured against the formula."""
    items, levels = three_level_data(dependent=True)
    lams = calibrated.parameters.report_probabilities
    a = pair_histogram(items, levels, 3, 8)
    predicted = pooled_expectation(a, lams, 8, 2)
    truth = a.sum(axis=0) / 3000
    # The formula, by hand for item 0 (held by the 1000 level-0.5 users only).
    by_hand = 1000 * lams[0] / (1000 * sum(lams))
    assert predicted[0] == pytest.approx(by_hand)
    assert truth[0] == pytest.approx(1 / 3)
    reps = 3000
    rng = np.random.default_rng(8)
    freq = np.array(
        [calibrated.run(items, levels, path="count", seed=rng).frequencies for _ in range(reps)]
    )
    sd = freq.std(axis=0, ddof=1)
    z = (freq.mean(axis=0) - predicted) / (sd / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4.5
    # The bias predicted is what is measured, and it is large: item 0, held by a
    # third of the users, is estimated at λ_1/Σλ ≈ 0.2.
    bias = freq.mean(axis=0) - truth
    np.testing.assert_allclose(bias, predicted - truth, atol=4.5 * sd.max() / np.sqrt(reps))
    assert bias[0] < -0.1 and bias[1] < -0.1
    # The other items are over-estimated, by between 3λ_2/Σλ and 3λ_3/Σλ.
    ratio = predicted[2:] / truth[2:]
    assert np.all(ratio >= 3 * lams[1] / sum(lams) - 1e-12)
    assert np.all(ratio <= 3 * lams[2] / sum(lams) + 1e-12)
