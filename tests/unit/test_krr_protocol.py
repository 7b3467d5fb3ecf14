import math

import numpy as np
import pytest

from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.accounting.certificates.krr import krr_delta
from shuffledp.analyzers.krr_estimators import estimate_krr, invert_channel, project_to_simplex
from shuffledp.protocols.krr import KRRProtocol, calibrate_krr
from shuffledp.randomizers.krr import KRRRandomizer


def test_report_frequencies_follow_the_channel():
    r = KRRRandomizer(4, 1.0)
    a, b = r.keep_probability, r.other_probability
    assert a == pytest.approx(math.e / (math.e + 3)) and b == pytest.approx(1 / (math.e + 3))
    values = np.repeat(np.arange(4), 25_000)
    reports = r.randomize(values, seed=3).payload
    for x in range(4):
        observed = np.bincount(reports[values == x], minlength=4) / 25_000
        expected = r.channel[x]
        se = np.sqrt(expected * (1 - expected) / 25_000)
        assert np.all(np.abs(observed - expected) < 5 * se)


def test_count_level_matches_channel_expectation():
    r = KRRRandomizer(5, 2.0)
    hist = np.array([500, 300, 100, 50, 50])
    draws = np.array([r.sample_counts(hist, seed=s) for s in range(400)])
    expected = r.channel.T @ hist
    assert np.all(draws.sum(axis=1) == hist.sum())
    se = draws.std(axis=0) / math.sqrt(400)
    assert np.all(np.abs(draws.mean(axis=0) - expected) < 5 * se)


def test_inversion_matches_closed_form_and_projections_are_valid():
    r = KRRRandomizer(6, 1.5)
    counts = np.array([120, 80, 40, 30, 20, 10])
    closed = estimate_krr(counts, r.keep_probability, r.other_probability).counts
    np.testing.assert_allclose(invert_channel(counts, r.channel), closed, rtol=1e-10)
    for name in ("clip", "simplex"):
        est = estimate_krr(counts, r.keep_probability, r.other_probability, estimator=name)
        assert np.all(est.counts >= 0) and est.counts.sum() == pytest.approx(counts.sum())
        assert not est.unbiased and est.stderr is None
    raw = estimate_krr(counts, r.keep_probability, r.other_probability, estimator="raw")
    np.testing.assert_array_equal(raw.counts, counts)
    p = project_to_simplex(np.array([0.6, 0.5, -0.2]))
    np.testing.assert_allclose(p, [0.55, 0.45, 0.0])
    with pytest.raises(InvalidParameterError):
        estimate_krr(counts, 0.5, 0.1, estimator="magic")
    with pytest.raises(DataError):
        estimate_krr(np.array([0, 0]), 0.5, 0.5)


def test_calibration_is_certified_and_nearly_largest():
    cal = calibrate_krr(20_000, 10, 1.0, 1e-6)
    assert cal.delta <= 1e-6
    assert krr_delta(1.0, cal.epsilon0 * 1.001, 10, 20_000) > 1e-6
    assert cal.delta_lower <= cal.delta
    fixed = calibrate_krr(20_000, 10, 1.0, 1e-6, epsilon0=3.0)
    assert fixed.method == "fixed" and fixed.epsilon0 == 3.0
    with pytest.raises(InvalidParameterError, match="above the target"):
        calibrate_krr(1000, 10, 0.5, 1e-9, epsilon0=5.0)


def test_protocol_paths_and_report():
    values = np.random.default_rng(0).integers(0, 8, size=5000)
    protocol = KRRProtocol.calibrated(5000, 8, 1.0, 1e-6)
    for path in ("message", "count"):
        run = protocol.run(values, path=path, seed=1)
        assert run.messages == 5000 and run.estimate.unbiased
        z = (run.estimate.counts - np.bincount(values, minlength=8)) / run.estimate.stderr
        assert np.max(np.abs(z)) < 5
    report = protocol.privacy_report()
    assert report.delta <= 1e-6 and report.method == "krr-blanket"
