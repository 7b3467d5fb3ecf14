"""The segmented protocol: randomizer, count-level draws, estimator, level step, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shuffledp import DataError, InvalidParameterError
from shuffledp.accounting.segmented_parameters import LevelGuarantee, SegmentedParameters
from shuffledp.analyzers.segmented import (
    expected_noise,
    pooled_estimate,
    pooled_expectation,
    pooled_variance,
)
from shuffledp.protocols.krr import KRRProtocol
from shuffledp.protocols.segmented import (
    SEGMENTED_PRIVACY_METHODS,
    SegmentedProtocol,
    aggregate_levels,
    largest_remainder,
    run_segmented,
)
from shuffledp.randomizers.poisson import PoissonSetRandomizer, pair_histogram


def hand_parameters(
    lams, counts, *, d=8, s=2, m=1.5, variant="paper", padding=False
) -> SegmentedParameters:
    """Parameters with chosen λ (for estimator tests only: the deltas are placeholders)."""
    n = sum(counts)
    levels = tuple(
        LevelGuarantee(
            epsilon=float(k + 1),
            users=c,
            share=c / n,
            report_probability=lam,
            delta=1e-9,
            lower_bound_delta=0.0,
            item_epsilon=(k + 1) / s,
            item_delta=1e-10,
            paper_report_probability=math.nan,
            paper_delta=math.nan,
        )
        for k, (lam, c) in enumerate(zip(lams, counts, strict=True))
    )
    return SegmentedParameters(
        n=n,
        domain_size=d,
        message_domain=d + (1 if padding else 0),
        items_per_user=s,
        delta=1e-9,
        variant=variant,
        blanket_rate=m,
        levels=levels,
        error_bound=0.0,
        messages_per_user=0.0,
    )


def dataset(counts, d=8, s=2, *, seed=0, dependent=False):
    """Sets of s distinct items per user; with ``dependent`` level k favours items 2k, 2k + 1."""
    rng = np.random.default_rng(seed)
    levels = np.repeat(np.arange(len(counts)), counts)
    n = levels.size
    if dependent:
        first = (2 * levels + rng.integers(0, 2, n)) % d
    else:
        first = rng.integers(0, d, n)
    rest = (first[:, None] + 1 + rng.permutation(d - 1)[: s - 1][None, :]) % d
    items = np.concatenate([first[:, None], rest], axis=1)
    return items.astype(np.int64), levels


# -- randomizer ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["paper", "dummy"])
def test_randomizer_messages_and_rates(variant):
    counts = (3000, 3000)
    items, levels = dataset(counts, d=8, s=3, seed=1)
    lams = (0.3, 0.8)
    r = PoissonSetRandomizer(lams, 8, 3, 1.5, variant)
    batch = r.randomize(items, levels, seed=2)
    n = items.shape[0]
    assert batch.n_users == n and batch.payload.shape == batch.sender.shape
    assert batch.payload.min() >= 0 and batch.payload.max() < 8
    assert batch.sender.min() >= 0 and batch.sender.max() < n
    per_user = np.bincount(batch.sender, minlength=n)
    # At most s data messages and ⌈m⌉ = 2 blanket messages per user.
    assert per_user.max() <= 3 + 2
    expected = r.expected_messages_per_user(counts)
    var = n * (2 * 0.75 * 0.25 + 3 * np.mean([lam * (1 - lam) for lam in lams]))
    assert abs(len(batch) - n * expected) < 5 * math.sqrt(var)
    if variant == "dummy":
        assert per_user.min() >= 3  # every user sends exactly s data messages
        assert expected == pytest.approx(1.5 + 3)
    else:
        assert expected == pytest.approx(1.5 + 3 * np.mean(lams))


def test_randomizer_reports_the_items_when_lambda_is_one():
    items = np.array([[0, 1], [2, 3], [4, 5]])
    r = PoissonSetRandomizer((1.0,), 6, 2, 0.1, "paper")
    batch = r.randomize(items, np.zeros(3, dtype=np.int64), seed=0)
    data = np.bincount(batch.payload, minlength=6)
    assert np.all(data >= 1)  # each item's own message
    one = r.randomize_one([2, 5], 0, seed=1)
    assert list(one) == sorted(one) and {2, 5} <= set(one.tolist())


def test_blanket_tries_and_probability():
    r = PoissonSetRandomizer((0.5,), 4, 1, 2.5, "paper")
    assert r.blanket_tries == 3 and r.blanket_probability == pytest.approx(2.5 / 3)


def test_pair_histogram_counts_slots_by_level_and_item():
    items = np.array([[0, 1], [1, 2], [0, 2]])
    levels = np.array([0, 1, 1])
    a = pair_histogram(items, levels, 2, 3, chunk_size=2)
    np.testing.assert_array_equal(a, [[1, 1, 0], [1, 1, 2]])


@pytest.mark.parametrize("variant", ["paper", "dummy"])
def test_sample_counts_mean_matches_the_law(variant):
    counts = (400, 600)
    items, levels = dataset(counts, d=6, s=2, seed=3, dependent=True)
    lams = np.array([0.2, 0.9])
    r = PoissonSetRandomizer(lams, 6, 2, 0.7, variant)
    a = pair_histogram(items, levels, 2, 6)
    rng = np.random.default_rng(4)
    reps = 2000
    draws = np.array([r.sample_counts(a, rng) for _ in range(reps)])
    noise = expected_noise(
        1000,
        0.7,
        6,
        level_counts=counts,
        report_probabilities=lams,
        items_per_user=2,
        variant=variant,
    )
    mean = lams @ a + noise
    sd = np.sqrt(mean)  # a sum of Bernoullis has variance below its mean
    z = (draws.mean(axis=0) - mean) / (sd / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4.5
    if variant == "dummy":
        assert draws.sum(axis=1).min() >= 1000 * 2


def test_randomizer_rejects_bad_parameters_and_data():
    with pytest.raises(InvalidParameterError, match="report_probabilities"):
        PoissonSetRandomizer((1.2,), 4, 1, 1.0)
    with pytest.raises(InvalidParameterError, match="blanket_rate"):
        PoissonSetRandomizer((0.5,), 4, 1, 0.0)
    with pytest.raises(InvalidParameterError, match="variant"):
        PoissonSetRandomizer((0.5,), 4, 1, 1.0, "other")
    r = PoissonSetRandomizer((0.5, 0.6), 4, 2, 1.0)
    with pytest.raises(DataError, match="outside"):
        r.randomize(np.array([[0, 4]]), np.array([0]))
    with pytest.raises(DataError, match="item slots"):
        r.randomize(np.array([[0, 1, 2]]), np.array([0]))
    with pytest.raises(DataError, match="level index"):
        r.randomize(np.array([[0, 1]]), np.array([2]))
    with pytest.raises(DataError, match="multiple of items_per_user"):
        r.sample_counts(np.array([[1, 0, 0, 0], [0, 0, 0, 0]]))


# -- estimator ----------------------------------------------------------------------------


def _estimates(protocol, items, levels, reps, seed, **kwargs):
    rng = np.random.default_rng(seed)
    runs = [protocol.run(items, levels, path="count", seed=rng, **kwargs) for _ in range(reps)]
    freq = np.array([r.frequencies for r in runs])
    se = np.array([r.estimate.frequency_stderr for r in runs])
    return freq, se


@pytest.mark.parametrize("variant", ["paper", "dummy"])
def test_pooled_estimator_unbiased_when_items_do_not_depend_on_levels(variant):
    counts = (500, 500)
    items, levels = dataset(counts, d=8, s=2, seed=5)
    # The same item law at both levels: give level 1 a copy of level 0's sets.
    items[500:] = items[:500]
    truth = np.bincount(items.ravel(), minlength=8) / 1000
    protocol = SegmentedProtocol(hand_parameters((0.3, 0.9), counts, variant=variant))
    freq, se = _estimates(protocol, items, levels, 1500, seed=6)
    sd = freq.std(axis=0, ddof=1)
    z = (freq.mean(axis=0) - truth) / (sd / np.sqrt(len(freq)))
    assert np.max(np.abs(z)) < 4.5
    # The stated standard errors match the spread (the plug-in is exact here).
    np.testing.assert_allclose(se.mean(axis=0), sd, rtol=0.1)


def test_pooled_estimator_is_biased_as_predicted_when_items_depend_on_levels():
    counts = (600, 400)
    items, levels = dataset(counts, d=8, s=2, seed=7, dependent=True)
    lams = (0.2, 1.0)
    protocol = SegmentedProtocol(hand_parameters(lams, counts))
    a = pair_histogram(items, levels, 2, 8)
    predicted = pooled_expectation(a, lams, 8, 2)
    truth = a.sum(axis=0) / 1000
    freq, _ = _estimates(protocol, items, levels, 1500, seed=8)
    sd = freq.std(axis=0, ddof=1)
    z = (freq.mean(axis=0) - predicted) / (sd / np.sqrt(len(freq)))
    assert np.max(np.abs(z)) < 4.5
    # The bias is real: the level-0 items (0, 1) are under-estimated by a lot.
    bias = predicted - truth
    assert bias[0] < -0.1 and bias[1] < -0.1
    assert np.all(np.abs(freq.mean(axis=0)[:2] - truth[:2]) > 10 * sd[:2] / np.sqrt(len(freq)))


def test_estimate_is_marked_unbiased_only_when_lambdas_agree():
    counts = (50, 50)
    items, levels = dataset(counts, seed=9)
    same = SegmentedProtocol(hand_parameters((0.5, 0.5), counts)).run(
        items, levels, path="count", seed=1
    )
    differ = SegmentedProtocol(hand_parameters((0.5, 0.6), counts)).run(
        items, levels, path="count", seed=1
    )
    assert same.estimate.unbiased and not differ.estimate.unbiased
    assert any("no estimator linear" in note for note in differ.notes)
    assert same.estimate.n == 100
    np.testing.assert_allclose(same.estimate.counts, 100 * same.frequencies)


def test_pooled_estimate_arithmetic():
    counts = np.array([10, 20, 30, 40, 50])
    est = pooled_estimate(
        counts,
        n=100,
        blanket_rate=1.0,
        domain_size=4,
        message_domain=5,
        level_counts=[60, 40],
        report_probabilities=[0.5, 1.0],
        items_per_user=2,
    )
    noise = 100 * 1.0 / 5
    expected = (counts[:4] - noise) / (60 * 0.5 + 40 * 1.0)
    np.testing.assert_allclose(est.frequencies, expected)
    assert len(est.domain) == 4  # the padding symbol is not estimated
    var = pooled_variance(
        counts,
        n=100,
        blanket_rate=1.0,
        message_domain=5,
        level_counts=[60, 40],
        report_probabilities=[0.5, 1.0],
        items_per_user=2,
    )
    blanket = 100 * (1 / 5) * (1 - 1 / 5)
    # c̄ = Σ n_k λ_k (1 − λ_k) / Σ n_k λ_k = (30 · 0.5 + 40 · 0) / 70.
    data = (15 / 70) * np.clip(counts - noise, 0, None)
    np.testing.assert_allclose(var, (blanket + data) / 70**2)
    worst = pooled_variance(
        counts,
        n=100,
        blanket_rate=1.0,
        message_domain=5,
        level_counts=[60, 40],
        report_probabilities=[0.5, 1.0],
        items_per_user=2,
        worst_case=True,
    )
    data = 0.5 * np.clip(counts - noise, 0, None)  # worst case: 1 − λ_min
    np.testing.assert_allclose(worst, (blanket + data) / 70**2)
    with pytest.raises(InvalidParameterError, match="no level"):
        pooled_estimate(
            counts,
            n=100,
            blanket_rate=1.0,
            domain_size=4,
            message_domain=5,
            level_counts=[0, 0],
            report_probabilities=[0.5, 1.0],
            items_per_user=2,
        )


# -- level step ---------------------------------------------------------------------------


def test_exact_level_counts():
    lc = aggregate_levels(np.array([0, 1, 1, 2]), 3)
    assert lc.mode == "exact" and lc.report is None and lc.covariance is None
    assert lc.calibration_counts == (1, 2, 1)
    with pytest.raises(InvalidParameterError, match="'dp' level counts only"):
        aggregate_levels(np.array([0, 1]), 2, epsilon=1.0)


def test_dp_level_counts():
    levels = np.repeat(np.arange(3), [2000, 5000, 3000])
    lc = aggregate_levels(levels, 3, mode="dp", epsilon=1.0, delta=1e-6, seed=3)
    assert lc.mode == "dp" and lc.report is not None
    assert lc.report.epsilon == 1.0 and lc.report.delta <= 1e-6
    assert lc.report.method == "krr-blanket"
    assert sum(lc.calibration_counts) == 10_000 and np.all(lc.used >= 0)
    se = np.sqrt(np.diag(lc.covariance))
    assert np.all(np.abs(lc.estimates - [2000, 5000, 3000]) < 5 * se)
    d = lc.to_dict()
    assert d["privacy"]["epsilon"] == 1.0 and len(d["stderr"]) == 3
    with pytest.raises(InvalidParameterError, match="epsilon and delta"):
        aggregate_levels(levels, 3, mode="dp", epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="at least two levels"):
        aggregate_levels(np.zeros(10, dtype=np.int64), 1, mode="dp", epsilon=1.0, delta=1e-6)
    krr = KRRProtocol.calibrated(10_000, 3, 2.0, 1e-6)
    with pytest.raises(InvalidParameterError, match="krr was calibrated"):
        aggregate_levels(levels, 3, mode="dp", epsilon=1.0, delta=1e-6, krr=krr)
    with pytest.raises(InvalidParameterError, match="'exact' or 'dp'"):
        aggregate_levels(levels, 3, mode="noisy")  # type: ignore[arg-type]


def test_run_with_dp_level_counts_is_close_to_unbiased():
    counts = (3000, 3000)
    items, levels = dataset(counts, d=8, s=2, seed=11)
    items[3000:] = items[:3000]
    truth = np.bincount(items.ravel(), minlength=8) / 6000
    protocol = SegmentedProtocol(hand_parameters((0.4, 0.8), counts))
    krr = KRRProtocol.calibrated(6000, 2, 0.5, 1e-6)
    rng = np.random.default_rng(12)
    freqs, ses = [], []
    for _ in range(300):
        lc = aggregate_levels(
            levels, 2, mode="dp", epsilon=0.5, delta=1e-6, path="count", seed=rng, krr=krr
        )
        run = protocol.run(items, levels, path="count", seed=rng, level_estimate=lc)
        freqs.append(run.frequencies)
        ses.append(run.estimate.frequency_stderr)
    freq = np.array(freqs)
    sd = freq.std(axis=0, ddof=1)
    z = (freq.mean(axis=0) - truth) / (sd / np.sqrt(len(freq)))
    assert np.max(np.abs(z)) < 4.5
    np.testing.assert_allclose(np.array(ses).mean(axis=0), sd, rtol=0.15)
    assert not run.estimate.unbiased
    assert all("level histogram" not in item for item in run.not_covered)


# -- calibrated protocol, reports, errors ------------------------------------------------


@pytest.fixture(scope="module")
def calibrated():
    return SegmentedProtocol.calibrated(
        (0.5, 1.0, 2.0),
        level_counts=(300, 500, 200),
        delta=1e-5,
        domain=["a", "b", "c", "d", "e", "f"],
        items_per_user=2,
        blanket_rate=1.0,
        padding=True,
        workers=1,
    )


def test_privacy_reports_one_per_level(calibrated):
    reports = calibrated.privacy_reports()
    assert [r.epsilon for r in reports] == [0.5, 1.0, 2.0]
    for report, level in zip(reports, calibrated.parameters.levels, strict=True):
        assert report.method == SEGMENTED_PRIVACY_METHODS["paper"]
        assert report.delta == level.delta <= 1e-5
        assert report.bound.value == "upper" and report.n == 1000
        assert set(report.parameters) >= {"lambda", "blanket_rate", "items_per_user", "variant"}
        assert report.lower_bound_delta is not None and report.lower_bound_delta <= report.delta
    assert calibrated.padding and calibrated.message_domain == 7


@pytest.mark.parametrize("path", ["message", "count"])
def test_calibrated_run(calibrated, path):
    items, levels = dataset((300, 500, 200), d=6, s=2, seed=13)
    items[:10, 1] = 6  # padded slots
    run = calibrated.run(items, levels, path=path, seed=14)
    assert run.protocol == "segmented" and run.path == path
    assert list(run.estimate.domain) == ["a", "b", "c", "d", "e", "f"]
    assert len(run.privacy) == 3 and run.statistic.shape == (7,)
    assert run.messages == int(run.statistic.sum())
    assert run.messages_per_user == run.messages / 1000
    assert any("level histogram" in item for item in run.not_covered)
    assert all(r.not_covered == run.not_covered for r in run.privacy)
    # Level values work as well as level indices.
    values = np.array([0.5, 1.0, 2.0])[levels]
    again = calibrated.run(items, values, path=path, seed=14)
    np.testing.assert_array_equal(again.statistic, run.statistic)


def test_run_rejects_bad_input(calibrated):
    items, levels = dataset((300, 500, 200), d=6, s=2, seed=15)
    with pytest.raises(DataError, match="calibrated for n=1000"):
        calibrated.run(items[:-1], levels[:-1])
    with pytest.raises(DataError, match="outside"):
        bad = items.copy()
        bad[0, 0] = 7
        calibrated.run(bad, levels)
    with pytest.raises(DataError, match="same item in two slots"):
        bad = items.copy()
        bad[3] = [2, 2]
        calibrated.run(bad, levels)
    with pytest.raises(DataError, match="not one of the levels"):
        calibrated.run(items, np.full(1000, 0.7))
    with pytest.raises(DataError, match="level index"):
        calibrated.run(items, np.full(1000, 3))
    with pytest.raises(InvalidParameterError, match="path"):
        calibrated.run(items, levels, path="fast")  # type: ignore[arg-type]
    lc = aggregate_levels(np.zeros(1000, dtype=np.int64), 3)
    with pytest.raises(DataError, match="exact level counts differ"):
        calibrated.run(items, levels, level_estimate=lc)


def test_padding_symbol_may_repeat(calibrated):
    items, levels = dataset((300, 500, 200), d=6, s=2, seed=16)
    items[5] = [6, 6]
    calibrated.run(items, levels, path="count", seed=0)


def test_calibrated_rejects_bad_parameters():
    with pytest.raises(InvalidParameterError, match="variant"):
        SegmentedProtocol.calibrated(
            (1.0,), level_counts=(10,), delta=1e-3, domain=4, items_per_user=1, variant="x"
        )
    with pytest.raises(InvalidParameterError, match="labels has 3"):
        SegmentedProtocol(hand_parameters((0.5,), (10,), d=4), labels=["a", "b", "c"])


def test_run_segmented_end_to_end():
    items, levels = dataset((200, 300), d=6, s=2, seed=17)
    protocol, run = run_segmented(
        items,
        levels,
        levels=(1.0, 2.0),
        delta=1e-5,
        domain=6,
        blanket_rate=2.0,
        level_counts="dp",
        level_epsilon=1.0,
        level_delta=1e-5,
        path="count",
        seed=3,
        workers=1,
    )
    assert run.level_counts.mode == "dp" and run.level_counts.report is not None
    assert protocol.parameters.n == 500
    assert sum(level.users for level in protocol.parameters.levels) == 500
    assert any("calibrated for the public total n" in note for note in run.notes)


def test_largest_remainder():
    assert largest_remainder([0.25, 0.5, 0.25], 5) == (1, 3, 1)
    assert sum(largest_remainder([1 / 3] * 3, 100)) == 100
    assert largest_remainder([0, 0], 3) == (2, 1)
    with pytest.raises(InvalidParameterError):
        largest_remainder([-1, 2], 3)
