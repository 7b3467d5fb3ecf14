"""Statistical checks of the correlated protocol (fixed seeds, tolerances from the variance).

* The exact integer sampler against the NB(s, q) pmf (scipy's ``nbinom``), by a
  chi-square test on cells whose expected count is at least 5 (the rest pooled),
  at tiny shapes (1e-6, drawn sparsely over 2e9 cells) and shapes above 1.
* The randomizer's per-(user, bin) shares at shape 1e-6 (n = 1e6, d = 1000).
* The message path and the count path against the exact joint law of one
  bin's (N⁺ − h, N⁻) and against each other.
* Unbiasedness and the exact standard error on both paths.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from shuffledp.accounting.certificates.correlated import CorrelatedNoise
from shuffledp.protocols.correlated import CorrelatedProtocol
from shuffledp.randomizers.correlated import (
    CorrelatedRandomizer,
    negative_binomial_clusters,
    sample_negative_binomial,
)

pytestmark = pytest.mark.slow

#: A fixed-seed test fails only if its p-value is below this.
P_FLOOR = 1e-3


def _pooled_chi_square(observed: NDArray[np.float64], expected: NDArray[np.float64]) -> float:
    """P-value of a chi-square test after pooling cells (in order) until each expects ≥ 5.

    ``expected`` sums to the number of observations; the last entry of both
    arrays is the tail (everything beyond the listed cells).
    """
    groups_o: list[float] = []
    groups_e: list[float] = []
    o = e = 0.0
    for obs, exp in zip(observed, expected, strict=True):
        o += obs
        e += exp
        if e >= 5.0:
            groups_o.append(o)
            groups_e.append(e)
            o = e = 0.0
    if e > 0 or o > 0:
        groups_o[-1] += o
        groups_e[-1] += e
    obs_arr, exp_arr = np.array(groups_o), np.array(groups_e)
    assert len(obs_arr) >= 2, "too few cells for a chi-square test"
    chi2 = float(np.sum((obs_arr - exp_arr) ** 2 / exp_arr))
    return float(stats.chi2.sf(chi2, len(obs_arr) - 1))


def _nb_gof(counts_by_value: NDArray[np.int64], total: int, shape: float, q: float) -> float:
    """P-value of value counts (index k: how many draws equal k) against NB(shape, q)."""
    k = np.arange(len(counts_by_value))
    pmf = stats.nbinom.pmf(k, shape, 1.0 - q)
    observed = np.append(counts_by_value.astype(float), 0.0)
    expected = np.append(pmf * total, max(0.0, 1.0 - float(pmf.sum())) * total)
    return _pooled_chi_square(observed, expected)


@pytest.mark.parametrize(
    ("shape", "q"),
    [
        (1e-3, 0.634),
        (1e-3, 0.99),
        (0.37, 0.3),
        (1.0, 0.634),
        (3.7, 0.95),
        (15.76, 0.9507),
        (46.5, 0.99),
    ],
)
def test_dense_sampler_follows_the_negative_binomial_pmf(shape, q):
    clusters = -shape * math.log1p(-q)  # per draw; keep the total near 5e6 or below
    size = int(min(200_000, 5e6 / clusters))
    draws = sample_negative_binomial(shape, q, size, np.random.default_rng(11))
    counts = np.bincount(draws)
    assert _nb_gof(counts, size, shape, q) > P_FLOOR
    # And its mean, with a tolerance from the variance.
    mean, var = shape * q / (1 - q), shape * q / (1 - q) ** 2
    assert abs(draws.mean() - mean) < 5 * math.sqrt(var / size)


@pytest.mark.parametrize("q", [0.634, 0.95, 0.99])
def test_sparse_sampler_at_shape_one_in_a_million(q):
    cells, shape = 2 * 10**9, 1e-6
    cell, size = negative_binomial_clusters(cells, shape, q, np.random.default_rng(12))
    # Sum the clusters of each cell; the cells without a cluster are zeros.
    unique, inverse = np.unique(cell, return_inverse=True)
    per_cell = np.bincount(inverse, weights=size).astype(np.int64)
    counts = np.bincount(per_cell)
    counts[0] = cells - len(unique)
    assert len(unique) > 1500  # about cells·shape·(−ln(1 − q)) cells draw something
    assert _nb_gof(counts, cells, shape, q) > P_FLOOR


def test_randomizer_shares_per_user_and_bin_at_shape_one_in_a_million():
    # Flooding probability equal to alpha: the (j, −1) messages of one user in one bin
    # are A′ + W ~ NB(1/m, α) + NB(r/m, α) = NB((1 + r)/m, α), here NB(4e-6, 0.634).
    n, d, m = 10**6, 1000, 10**6
    noise = CorrelatedNoise(0.634, 3.0, 0.634)
    values = np.random.default_rng(13).integers(0, d, size=n)
    batch = CorrelatedRandomizer(d, noise, m).randomize(values, np.random.default_rng(14))
    minus = batch.payload % 2 == 1
    cell = batch.sender[minus] * d + batch.payload[minus] // 2
    _, per_cell = np.unique(cell, return_counts=True)
    counts = np.bincount(per_cell)
    counts[0] = n * d - len(per_cell)
    assert _nb_gof(counts, n * d, 4.0 / m, 0.634) > P_FLOOR
    # The (j, +1) messages besides each user's value follow the same law.
    plus = ~minus
    plus[:n] = False  # the first n messages are the values
    cell = batch.sender[plus] * d + batch.payload[plus] // 2
    _, per_cell = np.unique(cell, return_counts=True)
    counts = np.bincount(per_cell)
    counts[0] = n * d - len(per_cell)
    assert _nb_gof(counts, n * d, 4.0 / m, 0.634) > P_FLOOR


def test_one_honest_user_sends_the_whole_noise():
    """min_honest = 1 (a run on one user, or --min-honest 1): that user's (j, −1)
    messages in a bin are NB(1, α) + NB(r, q), the whole noise its certificate counts on.
    With q = α that is NB(1 + r, α); checked over users and bins like the corner above."""
    n, d = 20_000, 10
    noise = CorrelatedNoise(0.634, 3.0, 0.634)
    values = np.random.default_rng(15).integers(0, d, size=n)
    batch = CorrelatedRandomizer(d, noise, 1).randomize(values, np.random.default_rng(16))
    minus = batch.payload % 2 == 1
    cell = batch.sender[minus] * d + batch.payload[minus] // 2
    per_cell = np.bincount(cell, minlength=n * d)
    assert _nb_gof(np.bincount(per_cell), n * d, 4.0, 0.634) > P_FLOOR


# ------------------------------------------------------------------- the two paths

ALPHA, R, Q = 0.5, 1.5, 0.6
N_USERS, MIN_HONEST, BINS = 30, 15, 4
HIST = np.array([10, 8, 7, 5])


def _joint_pmf(size: int) -> NDArray[np.float64]:
    """P(N⁺ − h = u, N⁻ = v) on [0, size)², with A, A′ ~ NB(n/m, α), W ~ NB(n·r/m, q)."""
    s = N_USERS / MIN_HONEST
    grid = np.arange(size)
    g = stats.nbinom.pmf(grid, s, 1 - ALPHA)
    w = stats.nbinom.pmf(grid, s * R, 1 - Q)
    joint = np.zeros((size, size))
    for x in range(size):
        joint[x:, x:] += w[x] * np.outer(g[: size - x], g[: size - x])
    return joint


def _paths_samples(path: str, reps: int) -> NDArray[np.int64]:
    protocol = CorrelatedProtocol.from_parameters(
        a=-math.log(ALPHA), r=R, q=Q, n=N_USERS, domain=BINS, epsilon=2.0, min_honest=MIN_HONEST
    )
    values = np.repeat(np.arange(BINS), HIST)
    out = np.empty((reps, 2, BINS), dtype=np.int64)
    for i in range(reps):
        out[i] = protocol.run(values, path=path, seed=50_000 + i).statistic
    out[:, 0, :] -= HIST
    return out


@pytest.fixture(scope="module")
def both_paths() -> dict[str, NDArray[np.int64]]:
    return {path: _paths_samples(path, 15_000) for path in ("message", "count")}


@pytest.mark.parametrize("path", ["message", "count"])
def test_each_path_follows_the_exact_joint_law_of_one_bin(both_paths, path):
    samples = both_paths[path]
    size = 60
    u = samples[:, 0, :].ravel()
    v = samples[:, 1, :].ravel()
    assert u.min() >= 0 and v.min() >= 0  # N⁺ ≥ h: every user's value message arrives
    inside = (u < size) & (v < size)
    observed = np.bincount(u[inside] * size + v[inside], minlength=size * size).astype(float)
    pmf = _joint_pmf(size).ravel()
    total = u.size
    observed = np.append(observed, float(np.sum(~inside)))
    expected = np.append(pmf * total, max(0.0, 1.0 - float(pmf.sum())) * total)
    assert _pooled_chi_square(observed, expected) > P_FLOOR


def test_the_two_paths_agree_with_each_other(both_paths):
    # Chi-square homogeneity on the difference N⁺ − N⁻ − h and on N⁻, cells pooled.
    for stat in (lambda s: s[:, 0, :] - s[:, 1, :], lambda s: s[:, 1, :]):
        a = stat(both_paths["message"]).ravel()
        b = stat(both_paths["count"]).ravel()
        lo = min(a.min(), b.min())
        ca = np.bincount(a - lo)
        cb = np.bincount(b - lo, minlength=len(ca))
        ca = np.pad(ca, (0, len(cb) - len(ca)))
        table = np.array([ca, cb])
        keep = table.sum(axis=0) >= 10
        pooled = np.column_stack([table[:, keep], table[:, ~keep].sum(axis=1)])
        pooled = pooled[:, pooled.sum(axis=0) > 0]
        assert stats.chi2_contingency(pooled).pvalue > P_FLOOR


def _check_mean_and_variance(estimates, truth, sigma, excess_kurtosis):
    reps, d = estimates.shape
    z = (estimates.mean(axis=0) - truth) / (sigma / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4.0, z
    # Var(s²)/σ⁴ = 2/(R − 1) + κ/R for excess kurtosis κ; pooled over d independent bins.
    ratio = estimates.var(axis=0, ddof=1).mean() / sigma**2
    spread = math.sqrt((2.0 / (reps - 1) + excess_kurtosis / reps) / d)
    assert abs(ratio - 1.0) < 4.0 * spread, ratio


def _excess_kurtosis(alpha: float, shape: float) -> float:
    """Of NB(s, α) − NB(s, α): cumulants κ₂ = sα/(1 − α)², κ₄ = sα(1 + 4α + α²)/(1 − α)⁴."""
    return (1.0 + 4.0 * alpha + alpha * alpha) / (2.0 * shape * alpha)


def test_message_path_is_unbiased_with_the_exact_standard_error():
    truth = np.array([900, 500, 300, 200, 60, 30, 10, 0, 0, 0])
    n, d = int(truth.sum()), len(truth)
    protocol = CorrelatedProtocol.calibrated(n, d, 1.0, 1e-6)
    values = np.repeat(np.arange(d), truth)
    reps = 600
    est = np.array([protocol.run(values, seed=2000 + r).estimate.counts for r in range(reps)])
    c = protocol.calibration
    sigma = math.sqrt(2.0 * c.alpha) / (1.0 - c.alpha)  # m = n
    assert sigma == pytest.approx(c.per_bin_std_all_users)
    _check_mean_and_variance(est, truth, sigma, _excess_kurtosis(c.alpha, 1.0))


def test_count_path_with_fewer_honest_users_has_the_larger_standard_error():
    truth = np.array([4000, 2500, 1500, 800, 500, 300, 200, 120, 60, 20])
    n, d = int(truth.sum()), len(truth)
    protocol = CorrelatedProtocol.from_parameters(
        a=0.45, r=16.0, q=0.95, n=n, domain=d, epsilon=1.0, min_honest=0.25
    )
    assert protocol.calibration.min_honest == n // 4
    rng = np.random.default_rng(77)
    reps = 3000
    est = np.array(
        [protocol.estimate(protocol.sample_statistic(truth, rng)).counts for _ in range(reps)]
    )
    alpha = math.exp(-0.45)
    sigma = math.sqrt(2.0 * 4.0 * alpha) / (1.0 - alpha)
    assert sigma == pytest.approx(protocol.calibration.per_bin_std_all_users)
    _check_mean_and_variance(est, truth, sigma, _excess_kurtosis(alpha, 4.0))
