"""The correlated protocol under the usual add/remove relation: brute force at d = 2 and 3.

Under add/remove an absent user sends nothing: the dataset without the user holds m − 1
honest users' noise shares in every bin, the dataset with the user m users' shares and its
value. The brute force here never uses the accountant's code: it builds each bin's law
P(u, v) = Σ_x w(x)·g(u − x)·g(v − x) from scipy's negative binomial pmfs on the whole square
{0 … U − 1}², shifts N⁺ by one in the value's bin, and sums the hockey-stick divergence of the
product of the bins exactly (one bin's losses sorted against the other's atoms), in both
directions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    correlated_delta,
    correlated_epsilon,
    epsilon_with_fewer_honest,
    flooding_floor,
    generic_bin_delta,
)
from shuffledp.accounting.certificates.correlated_add_remove import add_remove_loss
from shuffledp.protocols.correlated import calibrate_correlated, correlated_parameters


def _law(shape: float, alpha: float, r: float, q: float, size: int) -> np.ndarray:
    """law(A + W, A′ + W), A, A′ ~ NB(shape, α), W ~ NB(shape·r, q), on {0..size−1}²."""
    k = np.arange(size)
    g = stats.nbinom.pmf(k, shape, 1.0 - alpha) if shape > 0 else (k == 0).astype(float)
    w = stats.nbinom.pmf(k, shape * r, 1.0 - q) if shape * r > 0 else (k == 0).astype(float)
    law = np.zeros((size, size))
    for x in range(size):
        if w[x] < 1e-300:
            continue
        law[x:, x:] += w[x] * np.outer(g[: size - x], g[: size - x])
    return law


def _band_law(shape: float, alpha: float, r: float, q: float, size: int, band: int) -> np.ndarray:
    """The same law on the cells |u − v| ≤ ``band`` (column b + band holds v = u + b).

    P(u, u + b) = Σ_x w(x)·g(u − x)·g(u + b − x) is w convolved with g(k)·g(k + b): one
    direct convolution per b. Cells off the band carry less than Σ_{k > band} g(k) of
    either law, charged by the caller.
    """
    k = np.arange(size + band + 2)
    g = stats.nbinom.pmf(k, shape, 1.0 - alpha)
    w = stats.nbinom.pmf(np.arange(size), shape * r, 1.0 - q)
    law = np.zeros((size, 2 * band + 1))
    for column, b in enumerate(range(-band, band + 1)):
        first = max(0, -b)
        h = np.zeros(band + 1)
        h[first:] = g[first : band + 1] * g[first + b : band + 1 + b]
        law[:, column] = np.convolve(w, h)[:size]
    return law


def _atoms(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    live = p > 0
    finite = live & (q > 0)
    return np.log(p[finite]) - np.log(q[finite]), p[finite], float(np.sum(p[live & (q == 0)]))


def _hockey_of_sum(first: tuple, second: tuple, eps: float) -> float:
    """E[(1 − e^{ε − L₁ − L₂})₊] for independent atom sets (values, masses, +∞ mass)."""
    v1, m1, i1 = first
    v2, m2, i2 = second
    order = np.argsort(v2)
    v2, m2 = v2[order], m2[order]
    suffix = np.concatenate([np.cumsum(m2[::-1])[::-1], [0.0]])
    scaled = np.concatenate([np.cumsum((m2 * np.exp(v2[0] - v2))[::-1])[::-1], [0.0]])
    index = np.searchsorted(v2, eps - v1, side="right")
    inner = suffix[index] - np.exp(eps - v1 - v2[0]) * scaled[index]
    total = float(np.sum(m1 * np.clip(inner, 0.0, None)))
    return total + i1 * (float(np.sum(m2)) + i2) + i2 * float(np.sum(m1))


def _sum_atoms(first: tuple, second: tuple) -> tuple:
    """The atoms of L₁ + L₂ (every pair): for the exact d = 3 sum at small sizes."""
    v1, m1, i1 = first
    v2, m2, i2 = second
    values = (v1[:, None] + v2[None, :]).ravel()
    masses = (m1[:, None] * m2[None, :]).ravel()
    infinite = i1 * (float(np.sum(m2)) + i2) + i2 * float(np.sum(m1))
    return values, masses, infinite


def _brute(
    eps: float, noise: CorrelatedNoise, m: int, d: int, size: int, band: int | None = None
) -> float:
    """Exact δ(ε) of the usual add/remove pair at d = 2 or 3 (module docstring).

    With ``band``, each bin's law is summed on the cells |u − v| ≤ band only
    (:func:`_band_law`), where the value bin's shift moves (u, b) to (u + 1, b − 1).
    """
    alpha, r, q = noise.alpha, noise.flood_r, noise.flood_q
    if band is None:
        without = _law((m - 1) / m, alpha, r, q, size)
        with_user = _law(1.0, alpha, r, q, size)
        value = np.zeros_like(with_user)
        value[1:, :] = with_user[:-1, :]
    else:
        without = _band_law((m - 1) / m, alpha, r, q, size, band)
        with_user = _band_law(1.0, alpha, r, q, size, band)
        value = np.zeros_like(with_user)
        value[1:, :-1] = with_user[:-1, 1:]
    worst = 0.0
    for num_o, den_o, num_x, den_x in (
        (without, with_user, without, value),  # add: P = without the user
        (with_user, without, value, without),  # remove: P = with the user
    ):
        untouched = _atoms(num_o, den_o)
        rest = untouched if d == 2 else _sum_atoms(untouched, untouched)
        worst = max(worst, _hockey_of_sum(_atoms(num_x, den_x), rest, eps))
    return worst


SMALL = [
    (math.exp(-1.0), 2.0, 0.3),
    (math.exp(-0.7), 0.5, 0.5),
    (math.exp(-1.5), 3.0, 0.1),
]


@pytest.mark.parametrize(("alpha", "r", "q"), SMALL)
@pytest.mark.parametrize("m", [2, 3, 10, 100])
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.5])
def test_two_bins_match_the_whole_joint_law(alpha, r, q, m, eps):
    # At size 60 both laws leave under 1e-22 outside the square.
    noise = CorrelatedNoise(alpha, r, q)
    brute = _brute(eps, noise, m, 2, 60)
    up = correlated_delta(eps, noise, neighbours="add-remove", domain_size=2, min_honest=m)
    down = correlated_delta(
        eps, noise, neighbours="add-remove", domain_size=2, min_honest=m, rounding="down"
    )
    assert down <= brute <= up
    # The discretization is second order: the bound stays close (and shows its gap).
    assert up <= brute * (1.0 + 1e-3) + 1e-12


@pytest.mark.parametrize("m", [2, 5, 50])
@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_three_bins_match_the_exact_sum(m, eps):
    noise = CorrelatedNoise(math.exp(-1.2), 1.0, 0.3)
    brute = _brute(eps, noise, m, 3, 36)
    up = correlated_delta(eps, noise, neighbours="add-remove", domain_size=3, min_honest=m)
    down = correlated_delta(
        eps, noise, neighbours="add-remove", domain_size=3, min_honest=m, rounding="down"
    )
    assert down <= brute <= up
    assert up <= brute * (1.0 + 1e-3) + 1e-12


def test_the_relation_shuffledp_0_2_certified_hid_the_users_own_noise():
    # Calibrated for (1, 1e-6) at d = 2 under the 0.2 relation (the absent user still sent
    # its shares), the noise a = 0.916, NB(16.8, 0.954) leaks through the user's own shares:
    # the usual relation's exact δ(1) is far above 1e-6 at small m, and above it even at
    # m = 1000. The certificate must say so.
    noise = CorrelatedNoise(0.4004474634578524, 16.809057791483063, 0.9537604417100265)
    for m, at_least in [(2, 0.8), (10, 0.1), (1000, 2e-6)]:
        up = correlated_delta(1.0, noise, neighbours="add-remove", domain_size=2, min_honest=m)
        assert up >= at_least


@pytest.mark.parametrize("m", [1000, 5000])
def test_calibration_under_add_remove_meets_delta_by_the_brute_force(m):
    cal = calibrate_correlated(m, 2, 1.0, 1e-6, neighbours="add-remove")
    assert cal.min_honest == m and cal.delta <= 1e-6
    up = correlated_delta(1.0, cal.noise, neighbours="add-remove", domain_size=2, min_honest=m)
    assert up == cal.delta
    # W's window: past its mean by 12 standard deviations plus a margin; the band: where
    # Geo(α) leaves less than 1e-24. Both laws lose less than 1e-20 off these cells.
    flood_std = math.sqrt(cal.noise.flood_mean / (1.0 - cal.noise.flood_q))
    window = int(cal.noise.flood_mean + 40 * flood_std + 200)
    band = int(math.log(1e-24) / math.log(cal.noise.alpha)) + 2
    assert stats.nbinom.sf(window - band - 1, cal.noise.flood_r, 1 - cal.noise.flood_q) < 1e-22
    assert _brute(1.0, cal.noise, m, 2, window, band) <= cal.delta
    assert cal.privacy_report().neighbouring.startswith("add-remove: one user present or absent")


@pytest.mark.parametrize("m", [2, 10, 200])
def test_calibration_refuses_what_no_flooding_reaches_at_small_m(m):
    # At d = 2 and slack 0.1, m <= 200 honest users cannot hide one user's own shares
    # at (1, 1e-6): refused at once, naming min_honest.
    with pytest.raises(InvalidParameterError, match="raise min_honest"):
        calibrate_correlated(m, 2, 1.0, 1e-6, neighbours="add-remove")


def test_add_remove_needs_the_domain_size_and_min_honest():
    noise = CorrelatedNoise(0.5, 2.0, 0.5)
    with pytest.raises(InvalidParameterError, match="domain_size must be an integer >= 2"):
        correlated_delta(1.0, noise, neighbours="add-remove", min_honest=10)
    with pytest.raises(InvalidParameterError, match="min_honest must be an integer >= 2"):
        correlated_delta(1.0, noise, neighbours="add-remove", domain_size=10, min_honest=1)
    with pytest.raises(InvalidParameterError, match="domain_size must be an integer >= 2"):
        correlated_epsilon(1e-6, noise, neighbours="add-remove", min_honest=10)
    with pytest.raises(InvalidParameterError, match="add/remove"):
        generic_bin_delta(
            1.0, alpha=0.5, shape=1.0, flood_r=2.0, flood_q=0.5, neighbours="add-remove"
        )
    with pytest.raises(InvalidParameterError, match="add/remove"):
        flooding_floor(1.0, 0.5, neighbours="add-remove")
    with pytest.raises(InvalidParameterError, match="min_honest must be an integer >= 2"):
        correlated_parameters(
            a=0.5, r=10.0, q=0.9, n=1, domain_size=4, epsilon=1.0, neighbours="add-remove"
        )


def test_epsilon_at_delta_meets_it_and_a_hair_below_does_not():
    noise = CorrelatedNoise(math.exp(-0.5), 20.0, 0.9)
    kwargs = dict(neighbours="add-remove", domain_size=20, min_honest=200)
    eps, at = correlated_epsilon(1e-6, noise, **kwargs)
    assert at == correlated_delta(eps, noise, **kwargs) <= 1e-6
    assert correlated_delta(eps * (1 - 1e-5), noise, **kwargs) > 1e-6


def test_more_bins_and_fewer_honest_users_cost_more():
    noise = CorrelatedNoise(math.exp(-0.5), 20.0, 0.9)

    def at(d: int, m: int) -> float:
        return correlated_delta(0.8, noise, neighbours="add-remove", domain_size=d, min_honest=m)

    assert at(2, 1000) <= at(20, 1000) <= at(200, 1000)
    assert at(20, 10_000) <= at(20, 1000) <= at(20, 100)


def test_fewer_honest_users_than_counted_on_raise_epsilon():
    noise = CorrelatedNoise(math.exp(-0.5), 20.0, 0.9)
    kwargs = dict(neighbours="add-remove", domain_size=10, min_honest=500)
    full = correlated_epsilon(1e-6, noise, **kwargs)[0]
    half = epsilon_with_fewer_honest(1e-6, noise, 0.5, **kwargs)
    assert epsilon_with_fewer_honest(1e-6, noise, 1.0, **kwargs) >= full * (1 - 1e-3)
    assert half > full


def test_the_allowance_is_small_at_deployment_sizes():
    # d = 100 bins composed by FFT: the rounding charged stays far below useful targets.
    noise = CorrelatedNoise(0.6342253320600151, 15.762857425829115, 0.9507356856424147)
    loss = add_remove_loss(noise, 100, 1000)
    assert loss.add.untouched.allowance() < 1e-9
    assert loss.delta(1.0) < 1e-9


@pytest.mark.parametrize(
    "noise",
    [CorrelatedNoise(0.999, 20.0, 0.9), CorrelatedNoise(0.5, 5e3, 0.95)],
    ids=["alpha-near-1", "flooding-mean-1e5"],
)
def test_noise_too_spread_for_memory_is_refused_not_run_out_of_memory(noise):
    # The band law would hold tens of millions of cells (GBs): refused at once, naming why.
    from shuffledp.accounting.certificates.correlated_add_remove import CertificateTooLargeError

    with pytest.raises(CertificateTooLargeError, match="cells per bin, above the"):
        correlated_delta(1.0, noise, neighbours="add-remove", domain_size=2, min_honest=100)


def test_the_lower_bound_grid_stays_small_at_many_bins():
    # The floor rounding's finer grid is at most 16 times finer than the upper bound's.
    noise = CorrelatedNoise(0.6342253320600151, 15.762857425829115, 0.9507356856424147)
    up = add_remove_loss(noise, 100_000, 10**6)
    down = add_remove_loss(noise, 100_000, 10**6, rounding="down")
    assert down.h >= up.h / 16 * (1 - 1e-12)
    assert down.delta(1.0) <= up.delta(1.0)
