import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.analyzers import expected_max_abs_normal, top_t, top_t_metrics


def test_top_t_ties_by_index():
    np.testing.assert_array_equal(top_t(np.array([5, 9, 9, 1]), 2), [1, 2])
    np.testing.assert_array_equal(top_t(np.array([5, 9, 5, 1]), 2), [0, 1])


def test_metrics():
    truth = np.array([100, 90, 80, 10, 5])
    m = top_t_metrics(np.array([0, 1, 2]), truth, 3)
    assert (m.precision, m.recall, m.alpha) == (1.0, 1.0, 0.0)
    m = top_t_metrics(np.array([0, 1, 3]), truth, 3)
    assert m.precision == pytest.approx(2 / 3) and m.recall == pytest.approx(2 / 3)
    # Def. II.9: hist_j > hist[t] − α for all candidates ⇔ α > 80 − 10.
    assert m.alpha == 70.0
    with pytest.raises(InvalidParameterError):
        top_t_metrics(np.array([0, 0, 1]), truth, 3)


def test_expected_max_abs_normal():
    # d = 1: E|Z| = sqrt(2/π).
    assert expected_max_abs_normal(2.0, 1) == pytest.approx(2.0 * np.sqrt(2 / np.pi), rel=1e-8)
    rng = np.random.default_rng(0)
    sample = np.abs(rng.standard_normal((20000, 50))).max(axis=1)
    se = sample.std() / np.sqrt(len(sample))
    assert abs(expected_max_abs_normal(1.0, 50) - sample.mean()) < 4 * se
