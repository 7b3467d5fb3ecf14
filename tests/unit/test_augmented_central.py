"""The central discrete Laplace mechanism that the augmented protocol is compared with."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.central import (
    discrete_laplace_histogram,
    discrete_laplace_parameter,
    discrete_laplace_std,
)


def _pmf(a: float, support: int) -> tuple[np.ndarray, np.ndarray]:
    k = np.arange(-support, support + 1)
    weights = np.exp(-a * np.abs(k))
    return k, weights / weights.sum()


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 8.0])
def test_std_is_that_of_the_pmf_summed_directly(epsilon: float) -> None:
    a = epsilon / 2
    k, pmf = _pmf(a, int(80 / a) + 10)  # the tail beyond is below e^-80
    variance = float(np.sum(pmf * k.astype(float) ** 2))
    assert discrete_laplace_std(epsilon) == pytest.approx(math.sqrt(variance), rel=1e-12)


def test_figure_at_epsilon_1_and_the_pure_dp_ratio() -> None:
    assert discrete_laplace_std(1.0) == pytest.approx(2.79918, abs=1e-5)
    a = discrete_laplace_parameter(1.0)
    _, pmf = _pmf(a, 200)
    # A count moved by at most 2 (one user changes bins): ratio of the laws at most e^eps.
    for shift in (1, 2):
        ratio = pmf[shift:] / pmf[:-shift]
        assert np.max(np.abs(np.log(ratio))) <= 1.0 * shift / 2 + 1e-12


def test_samples_have_the_stated_std() -> None:
    n = 200_000
    release = discrete_laplace_histogram(np.zeros(n, dtype=np.int64), 1.0, seed=7)
    std = release.stderr
    a = 0.5
    # Sample variance: its std is sqrt((mu4 - sigma^4)/n); 5 of those.
    k, pmf = _pmf(a, 400)
    mu4 = float(np.sum(pmf * k.astype(float) ** 4))
    tolerance = 5 * math.sqrt((mu4 - std**4) / n)
    assert abs(float(np.var(release.counts)) - std**2) < tolerance
    assert abs(float(np.mean(release.counts))) < 5 * std / math.sqrt(n)
    assert np.all(release.counts == np.round(release.counts))
    assert release.mechanism == "discrete-laplace"


def test_bad_parameters_are_named() -> None:
    with pytest.raises(InvalidParameterError, match="epsilon"):
        discrete_laplace_std(0.0)
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        discrete_laplace_std(1.0, sensitivity=-1)
