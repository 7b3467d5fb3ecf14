"""The correlated protocol's exact accountant: brute force, a second algorithm, Monte Carlo.

The brute force never uses the closed form: it builds each bin's law
P₀(u, v) = Σ_x w(x)·g(u − x)·g(v − x) from the pmfs (scipy), P₁(u, v) = P₀(u − 1, v),
and sums (P − e^ε Q)₊ over the whole joint law of the two bins a replacement
moves, truncated where both pmfs have left less than 1e-25. (The usual add/remove
relation is checked in test_correlated_add_remove.py.)
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates import correlated as accountant
from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    central_dlap_parameter,
    cheapest_flooding,
    correlated_delta,
    correlated_epsilon,
    dlap_std,
    generic_bin_delta,
    largest_alpha,
)


def _bin_laws(
    alpha: float, r: float, q: float, size: int, shape: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """P₀ and P₁ of one bin on {0..size−1}², from scipy's pmfs (no closed form).

    A and A′ are NB(``shape``, α): Geo(α) at shape 1, the totals of a fraction
    ``shape`` of the honest users' noise below it.
    """
    k = np.arange(size)
    if shape == 1.0:
        g = stats.geom.pmf(k + 1, 1.0 - alpha)  # P(A = k) = (1 − α)α^k
    else:
        g = stats.nbinom.pmf(k, shape, 1.0 - alpha)
    w = stats.nbinom.pmf(k, r, 1.0 - q) if r > 0 else (k == 0).astype(float)
    p0 = np.zeros((size, size))
    for x in range(size):
        if w[x] == 0.0:
            continue
        shifted = np.zeros(size)
        shifted[x:] = g[: size - x]
        p0 += w[x] * np.outer(shifted, shifted)
    p1 = np.zeros_like(p0)
    p1[1:, :] = p0[:-1, :]
    return p0, p1


def _brute_replacement(eps: float, p0: np.ndarray, p1: np.ndarray) -> float:
    """Σ over (z₁, z₂) of (P₁(z₁)P₀(z₂) − e^ε P₀(z₁)P₁(z₂))₊, in chunks of z₁."""
    a, b = p1.ravel(), p0.ravel()  # P = P₁ ⊗ P₀
    c, d = p0.ravel(), p1.ravel()  # Q = P₀ ⊗ P₁
    e = math.exp(eps)
    total = 0.0
    for start in range(0, len(a), 256):
        block = np.outer(a[start : start + 256], b) - e * np.outer(c[start : start + 256], d)
        total += float(np.sum(block[block > 0]))
    return total


def _brute_add_remove(eps: float, p0: np.ndarray, p1: np.ndarray) -> float:
    e = math.exp(eps)
    first = p0 - e * p1
    second = p1 - e * p0
    return max(float(np.sum(first[first > 0])), float(np.sum(second[second > 0])))


def _raw(eps: float, noise: CorrelatedNoise) -> float:
    """The accountant's sum before its rounding allowance (replacement)."""
    loss = accountant._bin_loss(noise, accountant.DEFAULT_TAIL)
    composed = accountant._Composed(loss.values0, loss.masses0)
    total, _ = composed.hockey(loss.values1, loss.masses1, eps)
    return total + loss.infinite0 * float(np.sum(loss.masses1))


SMALL = [
    (math.exp(-1.0), 2.0, 0.3),
    (math.exp(-0.7), 0.5, 0.5),
    (math.exp(-1.5), 3.0, 0.1),
    (math.exp(-2.0), 1.0, 0.05),
]


@pytest.mark.parametrize(("alpha", "r", "q"), SMALL)
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 2.5])
def test_replacement_delta_matches_the_whole_joint_law(alpha, r, q, eps):
    p0, p1 = _bin_laws(alpha, r, q, 56)
    brute = _brute_replacement(eps, p0, p1)
    noise = CorrelatedNoise(alpha, r, q)
    up = correlated_delta(eps, noise)
    down = correlated_delta(eps, noise, rounding="down")
    # Truncation at 56 leaves under 1e-25 of either law: far below the 1e-12 compared.
    assert down <= brute <= up
    assert abs(_raw(eps, noise) - brute) <= 1e-12 * brute
    assert up - down <= 1e-9 * brute


@pytest.mark.parametrize(("alpha", "r", "q"), SMALL)
@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 2.5])
def test_single_bin_proxy_matches_the_joint_law_of_one_bin(alpha, r, q, eps):
    # The relation shuffledp 0.2 called add-remove (the absent user's shares still sent)
    # is no longer certified; its single-bin sum seeds the add/remove calibration's search.
    p0, p1 = _bin_laws(alpha, r, q, 80)
    brute = _brute_add_remove(eps, p0, p1)
    proxy = accountant._single_bin_delta(eps, CorrelatedNoise(alpha, r, q))
    assert brute <= proxy <= brute * (1 + 1e-9) + 1e-19


def test_without_flooding_the_view_reveals_empty_bins():
    # r = 0: N⁻ = A′ and N⁺ = h + A, so u = 0 (P₁ = 0) happens with mass 1 − α.
    alpha = math.exp(-0.5)
    p0, p1 = _bin_laws(alpha, 0.0, 0.0, 120)
    noise = CorrelatedNoise(alpha, 0.0, 0.0)
    for eps in (0.3, 1.0, 3.0):
        brute = _brute_replacement(eps, p0, p1)
        assert brute <= correlated_delta(eps, noise) <= brute * (1 + 1e-9)
        assert correlated_delta(eps, noise) >= 1.0 - alpha


@pytest.mark.parametrize(
    ("a", "r", "q"),
    [(0.455, 15.9, 0.95), (0.35, 25.0, 0.8), (0.49, 11.2, 0.99), (1.2, 4.0, 0.6)],
)
@pytest.mark.parametrize("eps", [0.6, 1.0])
def test_closed_form_agrees_with_the_two_dimensional_sum_at_deployment_sizes(a, r, q, eps):
    # generic_bin_delta builds each bin's law on a band around the diagonal and never uses
    # the closed form: a second algorithm (its own truncation leaves about 1e-14).
    noise = CorrelatedNoise.from_a(a, r, q)
    up = correlated_delta(eps, noise)
    down = correlated_delta(eps, noise, rounding="down")
    other = generic_bin_delta(eps, alpha=noise.alpha, shape=1.0, flood_r=r, flood_q=q)
    assert down - 1e-12 * down <= other <= up + 5e-14


def _monte_carlo(eps: float, noise: CorrelatedNoise, size: int, seed: int) -> tuple[float, float]:
    """δ = E_P[(1 − e^{ε − L})₊] estimated from draws of the two bins (replacement)."""
    rng = np.random.default_rng(seed)
    alpha, r, q = noise.alpha, noise.flood_r, noise.flood_q

    def draw() -> tuple[np.ndarray, np.ndarray]:
        a1 = rng.geometric(1.0 - alpha, size) - 1
        a2 = rng.geometric(1.0 - alpha, size) - 1
        w = rng.negative_binomial(r, 1.0 - q, size)
        return a1 + w, a2 + w

    # Bin one under P₁ (shifted by one), bin two under P₀.
    u1, v1 = draw()
    u1 = u1 + 1
    u2, v2 = draw()
    k = np.arange(int(max(u1.max(), u2.max(), v1.max(), v2.max())) + 2)
    log_w = stats.nbinom.logpmf(k, r, 1.0 - q)
    log_s = np.logaddexp.accumulate(log_w - 2.0 * k * math.log(alpha))  # ln S(t)

    def loss0(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """ln P₀/P₁ at (u, v) from S (the module docstring's identity)."""
        out = np.full(u.shape, -noise.a)
        low = u <= v
        zero = low & (u == 0)
        mid = low & (u > 0)
        out[zero] = np.inf
        out[mid] = math.log(alpha) + log_s[u[mid]] - log_s[u[mid] - 1]
        return out

    losses = -loss0(u1, v1) + loss0(u2, v2)
    values = np.where(np.isinf(losses), 1.0, -np.expm1(np.minimum(eps - losses, 0.0)))
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(size))


@pytest.mark.parametrize(("a", "r", "q", "eps"), [(0.455, 15.9, 0.95, 0.6), (0.8, 3.0, 0.7, 0.9)])
def test_monte_carlo_estimate_agrees_within_its_standard_error(a, r, q, eps):
    noise = CorrelatedNoise.from_a(a, r, q)
    mean, se = _monte_carlo(eps, noise, 400_000, seed=11)
    up = correlated_delta(eps, noise)
    down = correlated_delta(eps, noise, rounding="down")
    # 4.5 standard errors: a false alarm has probability below 1e-5 per side.
    assert mean - 4.5 * se <= up
    assert down <= mean + 4.5 * se


# -- corners ---------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1e-6, 0.01, 0.5, 0.99, 0.999])
@pytest.mark.parametrize(("r", "q"), [(0.0, 0.0), (1e-3, 0.5), (40.0, 0.9), (2.0, 1e-4)])
def test_corners_stay_probabilities_and_bracket(alpha, r, q):
    noise = CorrelatedNoise(alpha, r, q)
    for eps in (1e-6, 0.01, 1.0, 30.0, 800.0):
        up = correlated_delta(eps, noise)
        down = correlated_delta(eps, noise, rounding="down")
        assert 0.0 <= down <= up <= 1.0
        # The +∞ atom (empty flooding, u = 0) is in δ at every ε.
        assert up >= (1.0 - alpha) * (1.0 - q) ** r * (1.0 - 1e-12)


def test_delta_falls_with_epsilon_and_with_more_flooding():
    base = CorrelatedNoise.from_a(0.455, 15.0, 0.95)
    more = CorrelatedNoise.from_a(0.455, 16.0, 0.95)
    eps = np.linspace(0.2, 1.5, 14)
    values = [correlated_delta(float(e), base) for e in eps]
    assert all(x >= y for x, y in itertools.pairwise(values))
    # (Where the flooding hardly matters the two agree to their rounding allowances.)
    assert all(
        correlated_delta(float(e), more) <= v * (1 + 1e-9) for e, v in zip(eps, values, strict=True)
    )


@pytest.mark.parametrize("target", [1e-3, 1e-6, 1e-10])
def test_epsilon_at_a_delta_is_settled_on_the_public_delta(target):
    noise = CorrelatedNoise.from_a(0.455, 15.9, 0.95)
    eps, value = correlated_epsilon(target, noise)
    assert value == correlated_delta(eps, noise) <= target
    assert correlated_delta(eps * (1 - 1e-5), noise) > target or eps < 1e-8


def test_epsilon_is_refused_below_the_infinite_atom():
    noise = CorrelatedNoise.from_a(0.5, 1.0, 0.5)  # (1 − α)·P[W = 0] ≈ 0.2
    with pytest.raises(InvalidParameterError, match="no epsilon reaches delta=1e-06"):
        correlated_epsilon(1e-6, noise)


def test_bad_parameters_are_named():
    with pytest.raises(InvalidParameterError, match="alpha must be in"):
        CorrelatedNoise(1.0, 1.0, 0.5)
    with pytest.raises(InvalidParameterError, match="flood_q must be in"):
        CorrelatedNoise(0.5, 1.0, 1.0)
    with pytest.raises(InvalidParameterError, match="neighbours must be"):
        correlated_delta(1.0, CorrelatedNoise(0.5, 1.0, 0.5), neighbours="swap")  # type: ignore[arg-type]


# -- calibration -------------------------------------------------------------------------------


def test_largest_alpha_meets_its_standard_deviation_on_the_safe_side():
    for target in (0.5, 2.8, 3.0791, 50.0):
        alpha = largest_alpha(target)
        assert math.sqrt(2 * alpha) / (1 - alpha) <= target
        bigger = math.nextafter(alpha, 1.0)
        assert math.sqrt(2 * bigger) / (1 - bigger) > target * (1 - 1e-15)


def test_cheapest_flooding_certifies_and_is_locally_minimal():
    eps, target = 1.0, 1e-6
    alpha = largest_alpha(1.10 * dlap_std(central_dlap_parameter(eps)))
    noise = cheapest_flooding(eps, target, alpha)
    assert correlated_delta(eps, noise) <= target
    # Less flooding at the same q fails (the r found is the smallest, to 1e-4)...
    fewer = CorrelatedNoise(alpha, noise.flood_r * (1 - 2e-4), noise.flood_q)
    assert correlated_delta(eps, fewer) > target
    # ...and the per-bin std is within 10% of the central discrete Laplace's.
    assert noise.per_bin_std <= 1.10 * dlap_std(0.5)


def test_fewer_honest_users_cost_epsilon_and_all_of_them_cost_nothing_extra():
    from shuffledp.accounting.certificates.correlated import epsilon_with_fewer_honest

    noise = CorrelatedNoise.from_a(0.455, 15.9, 0.95)
    full, _ = correlated_epsilon(1e-6, noise)
    at_one = epsilon_with_fewer_honest(1e-6, noise, 1.0)
    assert at_one == pytest.approx(full, rel=2e-4)
    nine, three_quarters = (epsilon_with_fewer_honest(1e-6, noise, f) for f in (0.9, 0.75))
    assert full < nine < three_quarters
    with pytest.raises(InvalidParameterError, match="fraction must be in"):
        epsilon_with_fewer_honest(1e-6, noise, 1.5)


# (α, β, r, q): A, A′ ~ NB(β, α), W ~ NB(r, q) — a fraction β of the honest users' noise.
FEWER = [
    (math.exp(-1.0), 0.5, 1.0, 0.3),
    (math.exp(-0.7), 0.25, 0.75, 0.5),
    (math.exp(-1.5), 0.9, 2.7, 0.1),
    (math.exp(-1.0), 0.05, 0.1, 0.3),  # almost no noise left
]


@pytest.mark.parametrize(("alpha", "shape", "r", "q"), FEWER)
@pytest.mark.parametrize("eps", [0.05, 1.0, 2.5])
def test_fewer_honest_delta_matches_the_whole_joint_law(alpha, shape, r, q, eps):
    # The generalized discrete Laplace has no closed form here: generic_bin_delta is the
    # only algorithm behind epsilon_with_fewer_honest, so it is checked against the joint law.
    p0, p1 = _bin_laws(alpha, r, q, 64, shape=shape)
    kwargs = dict(alpha=alpha, shape=shape, flood_r=r, flood_q=q)
    brute = _brute_replacement(eps, p0, p1)
    found = generic_bin_delta(eps, **kwargs)
    # Its truncation adds about 2·(3·1e-16 + 1e-14) (an upper bound up to floating point).
    assert brute <= found <= brute + 1e-13


@pytest.mark.parametrize(
    ("fraction", "target"), [(0.5, 0.3), (0.5, 0.69), (0.25, 0.5), (0.05, 0.9)]
)
def test_fewer_honest_epsilon_meets_its_delta_and_is_the_smallest(fraction, target):
    from shuffledp.accounting.certificates.correlated import epsilon_with_fewer_honest

    noise = CorrelatedNoise(math.exp(-1.0), 8.0, 0.6)

    def delta_at(e: float) -> float:
        return generic_bin_delta(
            e,
            alpha=noise.alpha,
            shape=fraction,
            flood_r=noise.flood_r * fraction,
            flood_q=noise.flood_q,
        )

    eps = epsilon_with_fewer_honest(target, noise, fraction)
    assert delta_at(eps) <= target
    # The bisection stops at a relative 1e-4: just below its bracket, δ exceeds the target.
    assert eps <= 2e-6 or delta_at(eps * (1 - 2e-4)) > target
    # And the joint law agrees that the pair holds.
    p0, p1 = _bin_laws(noise.alpha, noise.flood_r * fraction, noise.flood_q, 100, shape=fraction)
    assert _brute_replacement(eps, p0, p1) <= target


def test_infeasible_two_sided_parts_are_refused_at_once_with_the_floor():
    # a above eps/2 (replacement): no flooding helps; once this ran out of memory.
    from shuffledp.accounting.certificates.correlated import flooding_floor

    alpha = math.exp(-0.6)
    floor = flooding_floor(1.0, alpha)
    assert floor > 0
    # The floor is the limit of more and more flooding.
    wide = correlated_delta(1.0, CorrelatedNoise(alpha, 400.0, 0.999))
    assert floor <= wide <= floor * 1.02
    with pytest.raises(InvalidParameterError, match="even unlimited flooding"):
        cheapest_flooding(1.0, 1e-6, alpha)
    assert flooding_floor(1.0, math.exp(-0.45)) == 0.0


def _pairwise_hockey(v0: np.ndarray, m0: np.ndarray, v1: np.ndarray, m1: np.ndarray, eps: float):
    """Σ_{i,j} m1_i m0_j (1 − e^{ε − v1_i − v0_j})₊ pair by pair (no suffix sums, no shift)."""
    exponent = eps - v1[:, None] - v0[None, :]
    weight = np.outer(m1, m0)
    positive = exponent < 0
    return float(np.sum(weight[positive] * -np.expm1(exponent[positive])))


@pytest.mark.parametrize("eps", [0.0, 0.5, 3.0, 399.0, 801.0])
def test_composed_hockey_brackets_the_pairwise_sum_when_losses_spread_past_700_nats(eps):
    """e^{ε − v − shift} overflows here; each rounding must keep its own side of the sum.

    At ε = 399 the atom v = −430 overflows; taking e^700 in place of the true factor put
    the ``"down"`` sum 1.6e-10 above the exact one, far beyond rounding error.
    """
    v0 = np.array([-450.0, -2.0, 0.0, 1.0, 420.0])
    m0 = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    v1 = np.array([-430.0, -1.0, 0.5, 440.0])
    m1 = np.array([0.05, 0.45, 0.3, 0.2])
    exact = _pairwise_hockey(v0, m0, v1, m1, eps)
    composed = accountant._Composed(v0, m0)
    up, _ = composed.hockey(v1, m1, eps, rounding="up")
    down, _ = composed.hockey(v1, m1, eps, rounding="down")
    # Both sums carry float rounding (a few ulps), which correlated_delta's allowance covers.
    ulps = 8 * np.finfo(float).eps * exact
    assert down <= exact + ulps and up >= exact - ulps
    # They differ only by the atoms whose factor overflows, each at most its own mass.
    overflowing = eps - v1 - v0.min() > 700.0
    assert up - down <= float(np.sum(m1[overflowing])) + 2 * ulps


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"shape": -1.0}, "shape"),
        ({"shape": float("nan")}, "shape"),
        ({"flood_q": 1.0}, "flood_q"),
        ({"flood_r": -2.0}, "flood_r"),
        ({"alpha": 1.0}, "alpha"),
        ({"tail": 0.0}, "tail"),
    ],
)
def test_generic_bin_delta_names_a_bad_parameter(change, named):
    arguments = {"alpha": 0.5, "shape": 1.0, "flood_r": 2.0, "flood_q": 0.3, **change}
    with pytest.raises(InvalidParameterError, match=rf"^{named} must be .*got "):
        generic_bin_delta(1.0, **arguments)


@pytest.mark.parametrize("tail", [0.0, 1.0, -1e-9, float("nan")])
def test_correlated_delta_refuses_a_tail_outside_zero_one(tail):
    with pytest.raises(InvalidParameterError, match=r"^tail must be in the open interval"):
        correlated_delta(1.0, CorrelatedNoise(0.5, 2.0, 0.3), tail=tail)


def test_correlated_delta_refuses_noise_of_another_type():
    with pytest.raises(InvalidParameterError, match=r"^noise must be a CorrelatedNoise, got tuple"):
        correlated_delta(1.0, (0.5, 2.0, 0.3))  # type: ignore[arg-type]


def test_the_shared_log_factorial_table_is_gammaln_and_read_only():
    from scipy import special

    from shuffledp.accounting.certificates import correlated_noise

    small = correlated_noise._log_factorials(5)
    large = correlated_noise._log_factorials(70_000)  # grows the table
    assert np.array_equal(small, special.gammaln(np.arange(6) + 1.0))
    assert np.array_equal(large, special.gammaln(np.arange(70_001) + 1.0))
    assert not large.flags.writeable
    # A pmf built on it sums to one within its own stated error and the mass it leaves out.
    pmf = correlated_noise.negative_binomial_window(6.7, 0.9994, 1e-16)
    summing = len(pmf.pmf) * np.finfo(float).eps
    assert abs(pmf.pmf.sum() - 1.0) <= pmf.rel_error + pmf.dropped + summing


def test_generic_bin_delta_builds_its_laws_once_per_noise_and_the_values_stay_the_same():
    """The ε-free part of the two-dimensional sum is kept per noise (a search tries ~20 ε):
    every value equals the one computed from scratch, and what is kept cannot be changed."""
    setting = {"alpha": 0.7788, "shape": 0.5, "flood_r": 7.88, "flood_q": 0.96}
    epsilons = (0.05, 0.5, 1.0, 2.0, 6.0)
    fresh = []
    for eps in epsilons:
        accountant._generic_bin_pair.cache_clear()
        fresh.append(generic_bin_delta(eps, **setting))
    accountant._generic_bin_pair.cache_clear()
    kept = [generic_bin_delta(eps, **setting) for eps in epsilons]
    assert kept == fresh
    info = accountant._generic_bin_pair.cache_info()
    assert (info.misses, info.hits) == (1, len(epsilons) - 1)
    pair = accountant._generic_bin_pair(0.7788, 0.5, 7.88, 0.96, 1e-16)
    with pytest.raises(ValueError, match="read-only"):
        pair.v1[0] = 0.0
