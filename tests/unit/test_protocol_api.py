"""The Python API for real data: labels with a public domain, hand-picked parameters."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from shuffledp import DataError, FlipProtocol, InvalidParameterError, KRRProtocol
from shuffledp.accounting.certificates.flip import flip_delta
from shuffledp.accounting.certificates.krr import krr_delta

DOMAIN = ["Lyon", "Nice", "Paris", "Rome"]


@pytest.fixture
def labels():
    rng = np.random.default_rng(5)
    return [DOMAIN[i] for i in rng.choice(4, size=2000, p=[0.1, 0.5, 0.3, 0.1])]


@pytest.mark.parametrize("protocol_cls", [FlipProtocol, KRRProtocol])
def test_labels_and_indices_give_the_same_run(protocol_cls, labels):
    protocol = protocol_cls.calibrated(len(labels), DOMAIN, 1.0, 1e-6)
    indices = np.array([DOMAIN.index(v) for v in labels])
    by_index = protocol.run(indices, seed=11)
    assert list(by_index.estimate.domain) == DOMAIN
    for values in (
        labels,
        np.array(labels),
        pd.Series(labels),
        pd.Series(labels, dtype="category"),
        pa.array(labels),
        pa.chunked_array([labels[:700], labels[700:]]),
    ):
        run = protocol.run(values, seed=11)
        np.testing.assert_array_equal(run.statistic, by_index.statistic)
        assert list(run.estimate.domain) == DOMAIN


def test_labels_need_a_domain(labels):
    protocol = FlipProtocol.calibrated(len(labels), 4, 1.0, 1e-6)
    with pytest.raises(DataError, match="public domain is needed"):
        protocol.run(labels)
    # Given at run time, the domain encodes the labels.
    run = protocol.run(labels, domain=DOMAIN, seed=1)
    assert list(run.estimate.domain) == DOMAIN


def test_label_outside_the_domain_is_an_error(labels):
    protocol = KRRProtocol.calibrated(len(labels), DOMAIN, 1.0, 1e-6)
    with pytest.raises(DataError, match="Oslo"):
        protocol.run([*labels[:-1], "Oslo"])


def test_domain_labels_are_checked():
    with pytest.raises(InvalidParameterError, match="repeats"):
        FlipProtocol.calibrated(100, ["a", "b", "a"], 1.0, 1e-6)
    with pytest.raises(InvalidParameterError, match="at least two"):
        KRRProtocol.calibrated(100, ["a"], 1.0, 1e-6)
    with pytest.raises(InvalidParameterError, match="domain"):
        FlipProtocol.calibrated(100, "abc", 1.0, 1e-6)


def test_flip_from_parameters_reports_the_certified_privacy():
    n, q, k = 10_000, 2e-3, 50
    at_delta = FlipProtocol.from_parameters(q=q, fake_users=k, n=n, domain=DOMAIN, delta=1e-6)
    report = at_delta.privacy_report()
    # The reported epsilon is certified at the target and (nearly) the smallest that is.
    assert report.delta == flip_delta(report.epsilon, q, k, n) <= 1e-6
    assert flip_delta(report.epsilon * (1 - 1e-4), q, k, n) > 1e-6
    assert at_delta.calibration.method == "fixed"
    at_eps = FlipProtocol.from_parameters(q=q, fake_users=k, n=n, domain=4, epsilon=0.8)
    assert at_eps.privacy_report().delta == flip_delta(0.8, q, k, n)
    assert at_eps.privacy_report().epsilon == 0.8
    with pytest.raises(InvalidParameterError, match="exactly one of epsilon"):
        FlipProtocol.from_parameters(q=q, fake_users=k, n=n, domain=4)
    with pytest.raises(InvalidParameterError, match="exactly one of epsilon"):
        FlipProtocol.from_parameters(q=q, fake_users=k, n=n, domain=4, epsilon=1.0, delta=1e-6)
    with pytest.raises(InvalidParameterError, match="q must be"):
        FlipProtocol.from_parameters(q=0.7, fake_users=k, n=n, domain=4, delta=1e-6)


def test_krr_from_parameters_reports_the_certified_privacy(labels):
    n, e0 = len(labels), 3.0
    protocol = KRRProtocol.from_parameters(epsilon0=e0, n=n, domain=DOMAIN, delta=1e-6)
    report = protocol.privacy_report()
    assert report.epsilon < e0  # shuffling amplifies
    assert report.delta == krr_delta(report.epsilon, e0, 4, n) <= 1e-6
    assert krr_delta(report.epsilon * (1 - 1e-4), e0, 4, n) > 1e-6
    at_eps = KRRProtocol.from_parameters(epsilon0=e0, n=n, domain=DOMAIN, epsilon=1.0)
    assert at_eps.privacy_report().delta == krr_delta(1.0, e0, 4, n)
    run = protocol.run(labels, seed=2)
    assert run.estimate.n == n and list(run.estimate.domain) == DOMAIN


def test_no_amplification_is_stated():
    calibration = KRRProtocol.calibrated(1, 2, 1.0, 1e-6).calibration
    assert calibration.epsilon0 < 1.01
    assert any("no amplification" in note for note in calibration.notes)


def test_exact_flip_calibration_keeps_the_default_fake_users():
    # At n = 1 the paper's formula would need ~3e4 fake users; the exact one does not.
    calibration = FlipProtocol.calibrated(1, 2, 1.0, 1e-6).calibration
    assert calibration.fake_users == 100 and calibration.notes == ()
    paper = FlipProtocol.calibrated(1, 2, 1.0, 1e-6, calibration="paper").calibration
    assert paper.fake_users > 100
    assert any("raised from the default 100" in note for note in paper.notes)


def test_a_seeded_library_run_says_so_in_its_report_and_an_unseeded_one_does_not():
    from shuffledp import FlipProtocol
    from shuffledp._rng import SEEDED_NOT_COVERED

    protocol = FlipProtocol.calibrated(n=500, domain=["a", "b", "c"], epsilon=1.0, delta=1e-6)
    values = np.zeros(500, dtype=np.int64)
    seeded = protocol.run(values, seed=3, path="count")
    assert seeded.privacy.not_covered.count(SEEDED_NOT_COVERED) == 1
    assert not seeded.privacy.covers_release
    assert protocol.run(values, path="count").privacy.not_covered == ()


def test_integer_values_with_integer_labels_other_than_positions_are_refused():
    from shuffledp import FlipProtocol

    labels = [str(i) for i in range(1, 11)]  # 1 … 10: a 3 could be a label or a position
    protocol = FlipProtocol.calibrated(n=50, domain=labels, epsilon=1.0, delta=1e-3)
    with pytest.raises(DataError, match="ambiguous"):
        protocol.run(np.full(50, 3), path="count", seed=1)
    with pytest.raises(DataError, match="ambiguous"):
        protocol.run([3] * 50, path="count", seed=1)
    # As labels (a pandas Series) they are read as labels; positions 0 … 9 are never ambiguous.
    run = protocol.run(pd.Series([3] * 50), path="count", seed=1)
    assert run.estimate.domain[2] == "3"
    positions = FlipProtocol.calibrated(
        n=50, domain=[str(i) for i in range(10)], epsilon=1.0, delta=1e-3
    )
    positions.run(np.full(50, 3), path="count", seed=1)
