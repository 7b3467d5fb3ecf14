"""The augmented protocol's accountant, recomputed independently.

* Brute force over the joint law: the two counts' pmfs built here from the
  printed formulas, P and Q as full 2-D arrays, Σ(P − e^ε Q)₊ summed directly.
* The whole output (every bin's count, other users included) enumerated at
  small n and d over every dataset: the certificate is the worst case.
* A different algorithm: the window sum (product form) against the block sum.
* The per-bin binary mechanism behind the paper's closed form, summed directly.
* Monte Carlo of the real sampler for the only event carrying δ at β = 1.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.augmented import (
    DESIGN_MARGIN,
    SAGeoLaw,
    SBinLaw,
    augmented_delta,
    augmented_delta_on_grid,
    calibrate_sageo_nu,
    calibrate_sbin_trials,
    dummy_law_window,
    minimum_beta,
    s1geo_beta,
    s1geo_law,
    sageo_delta,
    sageo_law,
)
from shuffledp.accounting.reproductions.augmented_paper import paper_sageo_nu
from shuffledp.randomizers.augmented import sample_dummies

# ---------------------------------------------------------------------------- reference laws


def _sageo_pmf(nu: int, q_l: float, q_r: float, support: int) -> np.ndarray:
    """f on 0..support−1 from the printed formula, normalised by its own sum."""
    k = np.arange(support, dtype=float)
    weights = np.zeros(support)
    right = k >= nu
    weights[right] = q_r ** (k[right] - nu)
    if q_l > 0:
        weights[~right] = q_l ** (nu - k[~right])
    return weights / weights.sum()


def _support(q_r: float, nu: int) -> int:
    return nu + math.ceil(80.0 / -math.log(q_r)) + 2  # right tail below e^-80


def _pair_bruteforce(f: np.ndarray, beta: float, epsilon: float) -> float:
    shifted = np.concatenate([[0.0], f[:-1]])
    p1 = (1 - beta) * f + beta * shifted
    big_p = np.outer(p1, f)  # (c_x, c_y) when the victim holds x
    big_q = np.outer(f, p1)  # ... holds y
    return max(
        float(np.sum(np.clip(big_p - math.exp(epsilon) * big_q, 0, None))),
        float(np.sum(np.clip(big_q - math.exp(epsilon) * big_p, 0, None))),
    )


def _sageo_bruteforce(law: SAGeoLaw, beta: float, epsilon: float) -> float:
    f = _sageo_pmf(law.nu, law.q_left, law.q_right, _support(law.q_right, law.nu))
    return _pair_bruteforce(f, beta, epsilon)


SETTINGS = [
    # (epsilon of the law, beta, nu, epsilon evaluated)
    (1.0, 1.0, 25, 1.0),
    (1.0, 1.0, 0, 1.0),  # nu = 0: the zero count is the mode
    (1.0, 1.0, 10, 0.7),  # evaluated below the design epsilon: interior blocks count
    (1.0, 1.0, 10, 1.6),
    (1.0, 0.7, 12, 1.0),
    (1.0, minimum_beta(1.0), 3, 1.0),  # beta at its minimum: q_l ~ 0
    (0.05, 1.0, 300, 0.05),  # epsilon small
    (0.05, 0.2, 40, 0.05),
    (10.0, 1.0, 3, 10.0),  # epsilon large
    (10.0, 0.995, 2, 10.0),
    (30.0, 1.0, 1, 30.0),
    (2.0, 0.9, 5, 3.0),
]


@pytest.mark.parametrize(("law_eps", "beta", "nu", "epsilon"), SETTINGS)
def test_block_sum_is_the_bruteforce_pair(law_eps, beta, nu, epsilon) -> None:
    law = sageo_law(law_eps, beta, nu)
    truth = _sageo_bruteforce(law, beta, epsilon)
    up = sageo_delta(epsilon, law, beta)
    down = sageo_delta(epsilon, law, beta, rounding="down")
    tail = 1e-30  # the brute force drops e^-80 of the right tail
    assert down - tail <= truth <= up + tail
    assert up - down <= 1e-12 * max(up, 1e-300) + 1e-300
    assert up == pytest.approx(truth, rel=1e-9, abs=1e-25)


@pytest.mark.parametrize(("law_eps", "beta", "nu", "epsilon"), SETTINGS)
def test_window_sum_agrees_with_the_block_sum(law_eps, beta, nu, epsilon) -> None:
    law = sageo_law(law_eps, beta, nu)
    blocks = sageo_delta(epsilon, law, beta)
    grid_up = augmented_delta_on_grid(epsilon, law, beta)
    grid_down = augmented_delta_on_grid(epsilon, law, beta, rounding="down")
    assert grid_down <= blocks * (1 + 1e-12) + 1e-300
    assert sageo_delta(epsilon, law, beta, rounding="down") <= grid_up * (1 + 1e-12) + 1e-300
    assert grid_up == pytest.approx(blocks, rel=1e-8, abs=1e-18)


def test_beta_one_delta_is_the_mass_at_zero() -> None:
    for epsilon, nu in [
        (1.0, 0),
        (1.0, 5),
        (1.0, 25),
        (1.0, 27),
        (50.0, 1),
        (700.0, 1),
        (1000.0, 2),
    ]:
        law = sageo_law(epsilon, 1.0, nu)
        q = law.q_left
        # f(0) = q^nu (1 - q)/(1 + q - q^(nu + 1)), in logs (at eps = 1000 it is 1e-435).
        log_f0 = nu * math.log(q) + math.log1p(-q) - math.log1p(q - q ** (nu + 1))
        up, down = sageo_delta(epsilon, law), sageo_delta(epsilon, law, rounding="down")
        if log_f0 > -690:
            assert up == pytest.approx(math.exp(log_f0), rel=1e-12)
            assert down <= math.exp(log_f0) <= up
        else:  # below the certificate's floor: charged, never dropped
            assert up >= 1e-300 and down == 0.0


def _full_output_delta(others: tuple[int, ...], x: int, y: int, law, beta, epsilon, d) -> float:
    """δ of the whole count vector (every bin, other users included), both directions."""
    f = _sageo_pmf(law.nu, law.q_left, law.q_right, _support(law.q_right, law.nu))

    def law_of(values: tuple[int, ...]) -> np.ndarray:
        hist = np.bincount(np.array(values, dtype=int), minlength=d)
        bins = [np.convolve(stats.binom.pmf(np.arange(h + 1), h, beta), f) for h in hist]
        size = len(f) + len(values)  # the same grid under both datasets
        bins = [np.pad(b, (0, size - len(b))) for b in bins]
        joint = bins[0]
        for b in bins[1:]:
            joint = np.multiply.outer(joint, b)
        return joint

    big_p, big_q = law_of((*others, x)), law_of((*others, y))
    return max(
        float(np.sum(np.clip(big_p - math.exp(epsilon) * big_q, 0, None))),
        float(np.sum(np.clip(big_q - math.exp(epsilon) * big_p, 0, None))),
    )


@pytest.mark.parametrize("beta", [1.0, 0.75])
def test_certificate_is_the_worst_case_over_every_small_dataset(beta) -> None:
    # n = 3 users over d = 3 values, epsilon = 2: every dataset and every move of user 3.
    epsilon, d = 2.0, 3
    law = sageo_law(epsilon, beta, 2)
    certified = sageo_delta(epsilon, law, beta)
    worst = 0.0
    for others in itertools.product(range(d), repeat=2):
        for x, y in itertools.permutations(range(d), 2):
            value = _full_output_delta(others, x, y, law, beta, epsilon, d)
            assert value <= certified + 1e-15
            worst = max(worst, value)
    assert worst == pytest.approx(certified, rel=1e-9)  # others on the third value attain it


def test_d2_with_beta_below_one_stays_below_the_pair() -> None:
    # Every other user holds x or y: their sampling adds noise, no dataset attains the pair
    # (so no lower bound is reported); one user on x barely moves the c_y = 0 event.
    epsilon, beta = 2.0, 0.75
    law = sageo_law(epsilon, beta, 2)
    certified = sageo_delta(epsilon, law, beta)
    values = [
        _full_output_delta(o, 0, 1, law, beta, epsilon, 2) for o in [(0,), (1,), (0, 0), (0, 1)]
    ]
    assert all(value < certified for value in values)
    assert values[-1] < 0.9 * certified


def test_d2_pair_is_attained_by_one_user_or_at_beta_one() -> None:
    # The protocol reports the pair rounded down as a lower bound at d = 2 when n = 1 or
    # beta = 1 (calibrate_augmented's `attained`): the whole output's delta is the pair there.
    epsilon = 2.0
    for beta, others in [
        (0.75, ()),
        (minimum_beta(epsilon) + 1e-3, ()),
        (1.0, (0,)),
        (1.0, (1, 1)),
    ]:
        law = sageo_law(epsilon, beta, 2)
        lower = sageo_delta(epsilon, law, beta, rounding="down")
        value = _full_output_delta(others, 0, 1, law, beta, epsilon, 2)
        assert lower <= value * (1 + 1e-12) + 1e-300
        assert value == pytest.approx(sageo_delta(epsilon, law, beta), rel=1e-9)


# ---------------------------------------------------------------------------- calibration


@pytest.mark.parametrize(
    ("epsilon", "delta", "beta"),
    [
        (1.0, 1e-6, 1.0),
        (1.0, 1e-6, 0.8),
        (0.1, 1e-8, 1.0),
        (5.0, 1e-9, 0.95),
        (1.0, 0.3, 1.0),
        (1.0, 1e-6, minimum_beta(1.0) + 1e-4),  # beta just above its minimum: q_l tiny
        (1e-3, 1e-6, 1.0),  # epsilon tiny: nu = 11047, every smaller one checked
    ],
)
def test_nu_is_the_smallest_that_the_public_certificate_accepts(epsilon, delta, beta) -> None:
    nu = calibrate_sageo_nu(epsilon, delta, beta)
    assert augmented_delta(epsilon, sageo_law(epsilon, beta, nu), beta) <= delta
    for smaller in range(nu):  # exhaustive: every smaller shift fails
        assert augmented_delta(epsilon, sageo_law(epsilon, beta, smaller), beta) > delta


def test_figures_at_epsilon_1_delta_1e6() -> None:
    nu = calibrate_sageo_nu(1.0, 1e-6)
    assert nu == 25
    assert sageo_delta(1.0, sageo_law(1.0, 1.0, 25)) == pytest.approx(9.1273e-7, rel=1e-4)
    assert sageo_delta(1.0, sageo_law(1.0, 1.0, 24)) == pytest.approx(1.5048e-6, rel=1e-4)
    paper = paper_sageo_nu(1.0, 1e-6)
    assert paper == 27
    assert sageo_delta(1.0, sageo_law(1.0, 1.0, 27)) == pytest.approx(3.3577e-7, rel=1e-4)


def test_delta_near_the_floor() -> None:
    nu = calibrate_sageo_nu(1.0, 1e-250)
    assert augmented_delta(1.0, sageo_law(1.0, 1.0, nu), 1.0) <= 1e-250
    assert augmented_delta(1.0, sageo_law(1.0, 1.0, nu - 1), 1.0) > 1e-250
    with pytest.raises(InvalidParameterError, match="floor"):
        calibrate_sageo_nu(1.0, 1e-305)


def test_nu_decreases_with_beta_and_grows_as_epsilon_shrinks() -> None:
    nus = [calibrate_sageo_nu(1.0, 1e-6, beta) for beta in (1.0, 0.9, 0.7, 0.5)]
    assert nus == sorted(nus, reverse=True)
    assert (
        calibrate_sageo_nu(0.1, 1e-6) > calibrate_sageo_nu(1.0, 1e-6) > calibrate_sageo_nu(4, 1e-6)
    )


def _binary_mechanism_delta(law: SAGeoLaw, beta: float, epsilon: float) -> float:
    """Per-bin δ at ε of Bin(x, β) + z, x ∈ {0, 1}, summed directly (both directions)."""
    f = _sageo_pmf(law.nu, law.q_left, law.q_right, _support(law.q_right, law.nu))
    p1 = (1 - beta) * f + beta * np.concatenate([[0.0], f[:-1]])
    e = math.exp(epsilon)
    return max(
        float(np.sum(np.clip(f - e * p1, 0, None))), float(np.sum(np.clip(p1 - e * f, 0, None)))
    )


@pytest.mark.parametrize(
    ("epsilon", "delta", "beta"), [(1.0, 1e-6, 1.0), (1.0, 1e-6, 0.8), (3.0, 1e-9, 1.0)]
)
def test_paper_closed_form_is_the_binary_mechanisms_smallest_nu(epsilon, delta, beta) -> None:
    # The reproduction: the smallest nu whose per-bin binary mechanism is (eps/2, delta/2)-DP,
    # with the law at epsilon itself (no design margin).
    nu = paper_sageo_nu(epsilon, delta, beta)
    half = epsilon / 2
    q_l = (math.exp(-half) - 1 + beta) / beta
    q_r = beta / (math.exp(half) - 1 + beta)
    assert _binary_mechanism_delta(SAGeoLaw(nu, q_l, q_r), beta, half) <= delta / 2 * (1 + 1e-9)
    assert _binary_mechanism_delta(SAGeoLaw(nu - 1, q_l, q_r), beta, half) > delta / 2
    # A reproduction, never below what the exact pair needs.
    assert nu >= calibrate_sageo_nu(epsilon, delta, beta)


# ---------------------------------------------------------------------------- S1Geo, SBin


@pytest.mark.parametrize("epsilon", [0.05, 1.0, 8.0])
def test_s1geo_is_pure_dp(epsilon) -> None:
    law, beta = s1geo_law(epsilon)
    assert beta == s1geo_beta(epsilon)
    assert beta == pytest.approx(1 - math.exp(-epsilon / 2), rel=1e-8)
    assert law.q_right == pytest.approx(1 / (1 + math.exp(epsilon / 2)), rel=1e-8)
    assert sageo_delta(epsilon, law, beta) == 0.0
    # The exact law: P(k) = (1 - q_r) q_r^k; every ratio of the pair within e^eps.
    f = _sageo_pmf(0, 0.0, law.q_right, 60)
    assert f[:5] == pytest.approx((1 - law.q_right) * law.q_right ** np.arange(5), rel=1e-12)
    p1 = (1 - beta) * f + beta * np.concatenate([[0.0], f[:-1]])
    ratios = np.log(np.outer(p1, f) / np.outer(f, p1))
    assert np.max(ratios) <= epsilon
    assert _sageo_bruteforce(law, beta, epsilon) == 0.0
    # Just below the design epsilon it is no longer (eps, 0).
    assert sageo_delta(epsilon * (1 - 1e-6), law, beta) > 0.0


def test_sbin_window_sum_against_the_bruteforce_pair() -> None:
    # Small M with beta < 1 (the shifted part reaches one point past the window:
    # it used to be charged as f(hi) and gave 0.625 for 0.375), epsilon tiny and large.
    settings = [(20, 1.0, 1.0), (60, 0.7, 0.8), (148, 1.0, 1.0), (1, 0.5, 1.0), (1, 0.5, 0.2)]
    settings += [(3, 0.5, 1.0), (2, 0.3, 0.01), (5, 0.9, 8.0), (1, 1.0, 1.0), (4, 0.05, 3.0)]
    for trials, beta, epsilon in settings:
        f = stats.binom.pmf(np.arange(trials + 2), trials, 0.5)
        truth = _pair_bruteforce(f, beta, epsilon)
        up = augmented_delta(epsilon, SBinLaw(trials), beta)
        down = augmented_delta(epsilon, SBinLaw(trials), beta, rounding="down")
        assert down <= truth * (1 + 1e-9) and truth <= up * (1 + 1e-9)
        assert up == pytest.approx(truth, rel=1e-8)


def test_sbin_trials_smallest_and_monotone() -> None:
    trials = calibrate_sbin_trials(1.0, 1e-6)
    assert trials == 148  # the notes' exact figure (the paper's bound asks for 513)
    assert augmented_delta(1.0, SBinLaw(148), 1.0) <= 1e-6 < augmented_delta(1.0, SBinLaw(147), 1.0)
    deltas = [augmented_delta(1.0, SBinLaw(m), 1.0) for m in range(1, 200, 7)]
    assert all(a >= b for a, b in itertools.pairwise(deltas))


# ---------------------------------------------------------------------------- laws, sampler


@pytest.mark.parametrize(
    ("epsilon", "beta", "nu"), [(1.0, 1.0, 25), (0.05, 0.3, 50), (6.0, 1.0, 0)]
)
def test_moments_and_window_against_the_pmf(epsilon, beta, nu) -> None:
    law = sageo_law(epsilon, beta, nu)
    support = _support(law.q_right, nu)
    f = _sageo_pmf(nu, law.q_left, law.q_right, support)
    k = np.arange(support, dtype=float)
    mean = float(np.sum(k * f))
    assert law.mean == pytest.approx(mean, rel=1e-10)
    assert law.variance == pytest.approx(float(np.sum((k - mean) ** 2 * f)), rel=1e-9)
    window = dummy_law_window(law, 1e-12)
    inside = f[window.lo : window.hi + 1]
    assert window.pmf == pytest.approx(inside, rel=1e-11)
    outside = float(f.sum() - inside.sum())
    assert outside <= window.dropped + 1e-15 <= 2.2e-12
    assert sum(law.block_masses) == pytest.approx(1.0, rel=1e-14)


def test_design_margin_moves_the_law_by_a_billionth() -> None:
    law = sageo_law(1.0, 1.0, 25)
    assert law.q_left == pytest.approx(math.exp(-0.5), rel=1e-9)
    assert law.q_left > math.exp(-0.5) and DESIGN_MARGIN < 1e-9


def test_sampler_has_the_accountants_law_and_the_delta_event() -> None:
    # At beta = 1 the pair's only positive region is c_y = 0 under P: its probability is
    # f(0) = delta. The real sampler's frequency of 0 matches within 5 binomial sds.
    law = sageo_law(1.0, 1.0, 3)
    draws = sample_dummies(law, 400_000, np.random.default_rng(11))
    f0 = sageo_delta(1.0, law)
    sd = math.sqrt(f0 * (1 - f0) / draws.size)
    assert abs(float(np.mean(draws == 0)) - f0) < 5 * sd
    # Chi-square against the whole pmf.
    support = _support(law.q_right, law.nu)
    pmf = _sageo_pmf(law.nu, law.q_left, law.q_right, support)
    observed = np.bincount(draws, minlength=support)[:support].astype(float)
    expected = pmf * draws.size
    keep = expected >= 5
    obs = np.append(observed[keep], draws.size - observed[keep].sum())
    exp = np.append(expected[keep], draws.size - expected[keep].sum())
    assert stats.chisquare(obs, exp).pvalue > 1e-4


# ---------------------------------------------------------------------------- bad input


def test_bad_parameters_name_themselves() -> None:
    with pytest.raises(
        InvalidParameterError, match=r"beta must be in \[1 - e\^\(-epsilon/2\), 1\]"
    ):
        sageo_law(1.0, 0.3, 5)
    with pytest.raises(InvalidParameterError, match="beta must be a number in"):
        sageo_delta(1.0, sageo_law(1.0, 1.0, 5), beta=1.5)
    with pytest.raises(InvalidParameterError, match="nu must be an integer"):
        sageo_law(1.0, 1.0, -1)
    with pytest.raises(InvalidParameterError, match="epsilon must be at most"):
        sageo_law(2000.0)
    with pytest.raises(InvalidParameterError, match="q_left"):
        SAGeoLaw(3, 1.0, 0.5)
    with pytest.raises(InvalidParameterError, match="trials"):
        SBinLaw(0)
    with pytest.raises(InvalidParameterError, match="rounding"):
        sageo_delta(1.0, sageo_law(1.0), rounding="sideways")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="delta"):
        calibrate_sageo_nu(1.0, 0.0)
