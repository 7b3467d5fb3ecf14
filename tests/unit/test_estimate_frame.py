"""``HistogramEstimate.interval`` and ``to_frame``: a table of any estimate, with intervals."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from shuffledp._optional import MissingExtraError
from shuffledp._validation import InvalidParameterError
from shuffledp.analyzers.estimate import FRAME_COLUMNS, HistogramEstimate, normal_quantile
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.protocols.krr import KRRProtocol

pd = pytest.importorskip("pandas")

LABELS = ["Lyon", "Paris", "Rome", "Nice"]
HIST = np.array([4000, 2500, 2000, 1500])
VALUES = np.repeat(np.arange(4), HIST)


def _krr(estimator: str) -> KRRProtocol:
    return KRRProtocol.calibrated(int(HIST.sum()), LABELS, 1.0, 1e-6, estimator=estimator)


def test_frame_of_a_krr_run_matches_the_release():
    run = _krr("inversion").run(VALUES, path="count", seed=1)
    frame = run.estimate.to_frame()
    released = run.estimate.to_dict()
    assert tuple(frame.columns) == FRAME_COLUMNS
    assert frame["label"].tolist() == LABELS
    np.testing.assert_array_equal(frame["count"], released["counts"])
    np.testing.assert_array_equal(frame["frequency"], released["frequencies"])
    np.testing.assert_array_equal(frame["stderr"], released["stderr"])
    np.testing.assert_array_equal(frame["frequency_stderr"], released["frequency_stderr"])
    z = 1.959963984540054
    np.testing.assert_allclose(frame["lower"], frame["count"] - z * frame["stderr"])
    np.testing.assert_allclose(frame["upper"], frame["count"] + z * frame["stderr"])
    assert frame.attrs["level"] == 0.95 and frame.attrs["unbiased"] is True
    assert frame.attrs["estimator"] == run.estimate.estimator and frame.attrs["n"] == 10_000
    assert "95% normal-approximation interval for the true count" in frame.attrs["interval"]


def test_level_is_a_parameter():
    run = _krr("inversion").run(VALUES, path="count", seed=2)
    frame = run.estimate.to_frame(level=0.5)
    half = frame["upper"] - frame["count"]
    np.testing.assert_allclose(half, 0.6744897501960817 * frame["stderr"])
    assert frame.attrs["level"] == 0.5 and "50% normal" in frame.attrs["interval"]
    for bad in (0, 1, 1.5, -0.1, "0.9"):
        with pytest.raises(InvalidParameterError, match="level must be in the open interval"):
            run.estimate.to_frame(level=bad)
    assert normal_quantile(0.99) == pytest.approx(2.5758293035489)


def test_estimators_without_stderr_have_none():
    run = _krr("clip").run(VALUES, path="count", seed=3)
    assert run.estimate.stderr is None and run.estimate.interval() is None
    frame = run.estimate.to_frame()
    for column in ("stderr", "frequency_stderr", "lower", "upper"):
        assert frame[column].tolist() == [None] * 4
    assert frame["count"].notna().all()
    assert frame.attrs["interval"].startswith("none: this estimator has no standard errors")


def test_biased_estimator_with_stderr_says_what_its_interval_covers():
    est = HistogramEstimate(["a", "b"], np.array([3.0, 4.0]), np.array([1.0, 2.0]), 7, "x", False)
    frame = est.to_frame()
    assert "expectation, not the true count" in frame.attrs["interval"]
    assert frame["lower"].tolist() == pytest.approx([3 - 1.959964, 4 - 2 * 1.959964])


def test_intervals_cover_the_truth_at_their_level():
    """400 FLIP runs (count level): the 95% intervals cover the true counts 95% of the time."""
    protocol = FlipProtocol.calibrated(int(HIST.sum()), LABELS, 1.0, 1e-6)
    covered = []
    for seed in range(400):
        lower, upper = protocol.run(VALUES, path="count", seed=seed).estimate.interval()
        covered.append((lower <= HIST) & (HIST <= upper))
    rate = float(np.mean(covered))
    # 1600 intervals; the binomial standard error of the rate at 0.95 is 0.0054.
    assert abs(rate - 0.95) < 0.025, rate


def test_missing_pandas_names_the_extra(monkeypatch):
    est = HistogramEstimate(["a"], np.array([1.0]), None, 1, "x", False)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'shuffledp\[pandas\]'"):
        est.to_frame()
