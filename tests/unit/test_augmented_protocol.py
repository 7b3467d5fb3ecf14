"""AugmentedProtocol: calibration, both paths, the privacy report and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shuffledp import ShuffleDPError
from shuffledp._validation import DataError, InvalidParameterError
from shuffledp.accounting.certificates.augmented import augmented_delta, sageo_law
from shuffledp.central import discrete_laplace_std
from shuffledp.protocols.augmented import (
    AUGMENTED_PRIVACY_METHOD,
    AugmentedProtocol,
    calibrate_augmented,
)
from shuffledp.randomizers.augmented import DUMMY_SENDER


@pytest.mark.parametrize("n", [10_000, 100_000, 1_000_000])
def test_issue_target_ratio_to_central_dlap_with_one_message_per_user(n: int) -> None:
    protocol = AugmentedProtocol.calibrated(
        n=n, domain=100, epsilon=1.0, delta=1e-6, beta=1.0, variant="sageo"
    )
    cal = protocol.calibration
    assert cal.nu == 25
    assert cal.delta <= 1e-6
    # Per-bin std against central DLap(eps/2), analytically.
    assert cal.per_bin_std == pytest.approx(math.sqrt(cal.law.variance))
    assert cal.dlap_std == discrete_laplace_std(1.0)
    assert cal.std_ratio <= 1.01
    # Exactly one message per user leaves the clients.
    values = np.arange(n, dtype=np.int64) % 100
    assert len(protocol.client.randomize(values)) == n
    assert cal.to_dict()["messages_per_user"] == 1


def test_reported_delta_is_the_public_certificate_and_below_the_target() -> None:
    for variant, beta in [("sageo", 1.0), ("sageo", 0.8), ("s1geo", None), ("sbin", 1.0)]:
        cal = calibrate_augmented(1000, 10, 1.0, 1e-6, variant=variant, beta=beta)  # type: ignore[arg-type]
        assert cal.delta == augmented_delta(1.0, cal.law, cal.beta)
        assert cal.delta <= 1e-6
        report = cal.privacy_report()
        assert report.delta == cal.delta and report.method == AUGMENTED_PRIVACY_METHOD
        assert report.lower_bound_delta is not None and report.lower_bound_delta <= cal.delta


def test_paper_and_fixed_calibrations_are_certified_exactly() -> None:
    paper = calibrate_augmented(1000, 10, 1.0, 1e-6, calibration="paper")
    assert paper.nu == 27 and paper.method == "paper"
    assert paper.delta == augmented_delta(1.0, sageo_law(1.0, 1.0, 27))
    exact = calibrate_augmented(1000, 10, 1.0, 1e-6)
    assert exact.paper_nu == 27 and exact.paper_nu_delta == paper.delta
    fixed = calibrate_augmented(1000, 10, 1.0, 1e-6, nu=30)
    assert fixed.method == "fixed" and fixed.delta < paper.delta
    with pytest.raises(InvalidParameterError, match=r"certified delta of 1\.5e-06"):
        calibrate_augmented(1000, 10, 1.0, 1e-6, nu=24)
    sbin = calibrate_augmented(1000, 10, 1.0, 1e-6, variant="sbin", trials=200)
    assert sbin.method == "fixed" and sbin.trials == 200


def test_s1geo_and_sbin_figures() -> None:
    s1 = calibrate_augmented(10_000, 100, 1.0, 1e-6, variant="s1geo")
    assert s1.delta == 0.0 and s1.beta == pytest.approx(1 - math.exp(-0.5))
    # Sampling dominates: (1 - beta)/beta * h on top of the geometric noise.
    h = 100
    assert s1.per_bin_std == pytest.approx(
        math.sqrt(s1.noise_variance + s1.beta * (1 - s1.beta) * h) / s1.beta
    )
    assert s1.std_ratio > 4
    sbin = calibrate_augmented(10_000, 100, 1.0, 1e-6, variant="sbin")
    assert sbin.trials == 148 and sbin.per_bin_std == pytest.approx(math.sqrt(148) / 2)


def test_lower_bound_is_withheld_where_no_dataset_attains_the_pair() -> None:
    assert calibrate_augmented(5, 2, 1.0, 1e-3, beta=0.9).delta_lower is None
    assert calibrate_augmented(1, 2, 1.0, 1e-3, beta=0.9).delta_lower is not None
    assert calibrate_augmented(5, 2, 1.0, 1e-3, beta=1.0).delta_lower is not None


@pytest.mark.parametrize("path", ["message", "count"])
def test_run_reports_the_trust_model_and_nothing_data_dependent(path: str) -> None:
    protocol = AugmentedProtocol.calibrated(500, ["a", "b", "c"], 1.0, 1e-6)
    rng = np.random.default_rng(3)
    first = protocol.run(list(rng.choice(["a", "b", "c"], size=500)), path=path)
    second = protocol.run(["a"] * 500, path=path)
    assert first.privacy.to_dict() == second.privacy.to_dict()
    privacy = first.privacy
    assert any("does not collude with the analyzer" in a for a in privacy.assumptions)
    assert any("encryption alone" in a for a in privacy.assumptions)
    assert privacy.not_covered == ()
    assert first.messages == int(first.statistic.sum())
    assert first.estimate.unbiased and first.estimate.estimator == "augmented-debias"
    assert np.all(first.estimate.stderr == pytest.approx(protocol.calibration.per_bin_std))


def test_seeded_run_says_so_and_repeats() -> None:
    protocol = AugmentedProtocol.calibrated(300, 4, 1.0, 1e-6, beta=0.8)
    values = np.arange(300) % 4
    a, b = protocol.run(values, seed=5), protocol.run(values, seed=5)
    assert np.array_equal(a.statistic, b.statistic)
    assert a.privacy.not_covered  # the seeded shuffle is not cryptographic


def test_message_path_structure() -> None:
    protocol = AugmentedProtocol.calibrated(1000, 5, 1.0, 1e-6)
    values = np.arange(1000) % 5
    batch = protocol.randomize(values, seed=1)
    real = batch.sender != DUMMY_SENDER
    assert int(real.sum()) == 1000  # beta = 1: every message kept
    assert np.array_equal(np.sort(batch.sender[real]), np.arange(1000))
    dummies = np.bincount(batch.payload[~real], minlength=5)
    assert np.all(dummies >= 0) and batch.n_users == 1000
    # With beta < 1 some real messages are dropped, never more than sent.
    sampled = AugmentedProtocol.calibrated(1000, 5, 1.0, 1e-6, beta=0.7).randomize(values, seed=1)
    kept = int((sampled.sender != DUMMY_SENDER).sum())
    assert 600 < kept < 800


def test_one_more_message_shares_every_draw() -> None:
    # The poisoning measurement relies on it: appending a message changes one coin only.
    protocol = AugmentedProtocol.calibrated(200, 4, 1.0, 1e-6, beta=0.6)
    values = np.arange(200) % 4
    base = protocol.client.randomize(values)
    longer = protocol.client.randomize(np.append(values, 3))
    a = protocol.randomizer.augment(base, seed=9)
    b = protocol.randomizer.augment(longer, seed=9)
    counts_a = np.bincount(a.payload, minlength=4)
    counts_b = np.bincount(b.payload, minlength=4)
    diff = counts_b - counts_a
    assert np.all(diff[:3] == 0) and diff[3] in (0, 1)


def test_bad_input_is_named() -> None:
    with pytest.raises(InvalidParameterError, match="variant must be one of"):
        calibrate_augmented(10, 3, 1.0, 1e-6, variant="gauss")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="fixes beta"):
        calibrate_augmented(10, 3, 1.0, 1e-6, variant="s1geo", beta=0.5)
    with pytest.raises(InvalidParameterError, match="variant 'sbin' takes none"):
        calibrate_augmented(10, 3, 1.0, 1e-6, variant="sbin", nu=3)
    with pytest.raises(InvalidParameterError, match="trials is SBin's M"):
        calibrate_augmented(10, 3, 1.0, 1e-6, trials=3)
    with pytest.raises(InvalidParameterError, match="calibration 'paper'"):
        calibrate_augmented(10, 3, 1.0, 1e-6, variant="sbin", calibration="paper")
    with pytest.raises(InvalidParameterError, match=r"beta must be in \[1 - e"):
        calibrate_augmented(10, 3, 1.0, 1e-6, beta=0.2)
    with pytest.raises(InvalidParameterError, match="domain_size"):
        calibrate_augmented(10, 1, 1.0, 1e-6)
    protocol = AugmentedProtocol.calibrated(10, 3, 1.0, 1e-6)
    with pytest.raises(DataError, match="calibrated for n=10"):
        protocol.run(np.zeros(9, dtype=np.int64))
    with pytest.raises(ShuffleDPError):
        protocol.run(np.full(10, 3, dtype=np.int64))
    with pytest.raises(DataError, match="histogram"):
        protocol.sample_statistic(np.array([1, 2]))
