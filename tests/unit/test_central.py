import math

import numpy as np
import pytest
from scipy.stats import norm

from shuffledp._validation import InvalidParameterError
from shuffledp.central import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_delta,
    gaussian_histogram,
    laplace_histogram,
    laplace_scale,
)


def _profile(eps, sigma, sens):
    a = sens / (2 * sigma) - eps * sigma / sens
    b = -sens / (2 * sigma) - eps * sigma / sens
    return norm.cdf(a) - math.exp(eps) * norm.cdf(b)


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 1e-5), (1.0, 1e-6), (4.0, 1e-6), (2.0, 1e-30)])
def test_analytic_sigma_is_tight(eps, delta):
    sigma = analytic_gaussian_sigma(eps, delta)
    assert gaussian_delta(eps, sigma) <= delta
    assert gaussian_delta(eps, sigma * (1 - 1e-6)) > delta
    if delta > 1e-12:
        assert _profile(eps, sigma, math.sqrt(2)) == pytest.approx(
            gaussian_delta(eps, sigma), rel=1e-6
        )


def test_analytic_beats_classical_where_both_apply():
    assert analytic_gaussian_sigma(0.5, 1e-5) < classical_gaussian_sigma(0.5, 1e-5)
    with pytest.raises(InvalidParameterError, match="epsilon < 1"):
        classical_gaussian_sigma(2.0, 1e-5)


def test_gaussian_delta_by_monte_carlo():
    # δ(ε) = E_P[(1 − e^{ε − L})_+], L = (Δ/σ²)(X − Δ/2)·… for a 1-D shift by Δ.
    rng = np.random.default_rng(7)
    sigma, sens, eps = 2.0, math.sqrt(2), 0.3
    x = rng.normal(0, sigma, 1_000_000)
    loss = (sens * x + sens**2 / 2) / sigma**2
    values = np.clip(1 - np.exp(eps - loss), 0, None)
    se = values.std() / 1000
    assert abs(values.mean() - gaussian_delta(eps, sigma, sens)) < 5 * se


def test_noisy_histograms():
    hist = np.array([10, 20, 30])
    g = gaussian_histogram(hist, 2.0, seed=1)
    assert g.mechanism == "gaussian" and g.stderr == 2.0 and g.counts.shape == (3,)
    lap = laplace_histogram(hist, laplace_scale(1.0), seed=1)
    assert lap.stderr == pytest.approx(2 * math.sqrt(2))
    with pytest.raises(InvalidParameterError):
        gaussian_histogram(np.array([1]), 1.0)
    with pytest.raises(InvalidParameterError):
        laplace_histogram(hist, -1.0)
