"""Privacy-loss distributions on a grid: the discretization stays on its side, at every ε.

Random loss distributions (finite atoms and a +∞ mass) are put on grids of several steps,
composed by FFT, and compared with the exact δ(ε) = E[(1 − e^{ε − L})₊] of the sum of their
atoms (every combination summed directly).
"""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.numerics.loss_grid import GridLoss, grid_loss

EPSILONS = [-0.5, 0.0, 0.01, 0.1, 0.3, 0.7, 1.5, 3.0]


def _exact(values: np.ndarray, masses: np.ndarray, infinite: float, eps: float) -> float:
    keep = values > eps
    return float(np.sum(masses[keep] * -np.expm1(eps - values[keep]))) + infinite


def _random_loss(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray, float]:
    values = rng.normal(0.1, 0.6, size)
    infinite = 0.01 * rng.random()
    return values, rng.dirichlet(np.ones(size)) * (1.0 - infinite), infinite


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("h", [1e-3, 1e-2, 0.1])
def test_one_distribution_is_bracketed_at_every_epsilon(seed, h):
    rng = np.random.default_rng(seed)
    values, masses, infinite = _random_loss(rng, 200)
    up = grid_loss(values, masses, infinite=infinite, h=h, rounding="up")
    down = grid_loss(values, masses, infinite=infinite, h=h, rounding="down")
    for eps in EPSILONS:
        exact = _exact(values, masses, infinite, eps)
        assert down.delta(eps) <= exact <= up.delta(eps)
    # Connect the dots keeps E[e^{-L}] (the spread is mean-preserving in y = e^{-L}).
    finite = up.pmf > 0
    kept = float(np.sum(up.pmf[finite] * np.exp(-up.values[finite])))
    assert kept == pytest.approx(float(np.sum(masses * np.exp(-values))), rel=1e-9)


def _all_combinations(values: np.ndarray, masses: np.ndarray, copies: int):
    """Every combination of atoms of ``copies`` independent copies: (values, masses)."""
    total_v, total_m = values, masses
    for _ in range(copies - 1):
        total_v = (total_v[:, None] + values[None, :]).ravel()
        total_m = (total_m[:, None] * masses[None, :]).ravel()
    return total_v, total_m


def _exact_sum_of_copies(
    values: np.ndarray, masses: np.ndarray, copies: int, epsilons: list[float]
) -> list[float]:
    """:func:`_exact` of the sum of ``copies`` copies at each ε, every combination of atoms.

    The same terms m · (1 − e^{ε − v}) over every combination with v > ε as
    :func:`_exact` on :func:`_all_combinations` (checked against it at 2 and 3
    copies), without holding the 40⁵ combinations at once: the sums of
    ``copies - 1`` copies are sorted once, and for each atom a of the last copy
    the combinations above ε are those above ε − a, a suffix.
    """
    rest_v, rest_m = _all_combinations(values, masses, copies - 1)
    order = np.argsort(rest_v, kind="stable")
    rest_v, rest_m = rest_v[order], rest_m[order]
    finite = 0.0
    out = [0.0] * len(epsilons)
    for a, mass in zip(values, masses, strict=True):
        finite += mass * float(np.sum(rest_m))
        for i, eps in enumerate(epsilons):
            start = np.searchsorted(rest_v, eps - a, side="right")
            above = rest_v[start:]
            out[i] += mass * float(np.sum(rest_m[start:] * -np.expm1(eps - (above + a))))
    return [total + (1.0 - finite) for total in out]


@pytest.mark.parametrize("copies", [2, 3])
def test_the_exact_sum_of_copies_is_the_sum_over_every_combination(copies):
    rng = np.random.default_rng(100 + copies)
    values, masses, _ = _random_loss(rng, 40)
    total_v, total_m = _all_combinations(values, masses, copies)
    total_inf = 1.0 - float(np.sum(total_m))
    direct = [_exact(total_v, total_m, total_inf, eps) for eps in EPSILONS]
    assert _exact_sum_of_copies(values, masses, copies, EPSILONS) == pytest.approx(
        direct, rel=1e-12, abs=1e-15
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("copies", [2, 3, 5])
def test_compositions_are_bracketed_by_the_exact_sum(seed, copies):
    rng = np.random.default_rng(100 + seed)
    values, masses, infinite = _random_loss(rng, 40)
    # The exact sum of `copies` independent copies, every combination of atoms (40^5 at 5).
    exact = _exact_sum_of_copies(values, masses, copies, EPSILONS)
    exact_at = dict(zip(EPSILONS, exact, strict=True))
    for h in (2e-3, 2e-2):
        up = grid_loss(values, masses, infinite=infinite, h=h, rounding="up")
        down = grid_loss(values, masses, infinite=infinite, h=h, rounding="down")
        up_n, down_n = up.self_compose(copies), down.self_compose(copies)
        for eps in EPSILONS:
            exact = exact_at[eps]
            assert down_n.delta(eps) <= exact + 1e-12 <= up_n.delta(eps) + 2e-12
            # Only second-order error at the finer grid.
            if h == 2e-3:
                assert up_n.delta(eps) - exact <= 2e-3 * max(exact, 1e-3)


@pytest.mark.parametrize("seed", range(4))
def test_sum_with_exact_atoms_is_bracketed(seed):
    rng = np.random.default_rng(200 + seed)
    a_values, a_masses, a_inf = _random_loss(rng, 60)
    b_values, b_masses, b_inf = _random_loss(rng, 50)
    pair_v = (a_values[:, None] + b_values[None, :]).ravel()
    pair_m = (a_masses[:, None] * b_masses[None, :]).ravel()
    pair_inf = 1.0 - float(np.sum(pair_m))
    up = grid_loss(b_values, b_masses, infinite=b_inf, h=1e-3, rounding="up")
    down = grid_loss(b_values, b_masses, infinite=b_inf, h=1e-3, rounding="down")
    for eps in EPSILONS:
        exact = _exact(pair_v, pair_m, pair_inf, eps)
        assert down.delta_after(a_values, a_masses, a_inf, eps) <= exact + 1e-13
        assert exact <= up.delta_after(a_values, a_masses, a_inf, eps) + 1e-13


def test_cuts_move_at_most_their_tail_and_only_upward():
    values = np.array([-50.0, -1.0, 0.0, 0.5, 40.0])
    masses = np.array([1e-25, 0.3, 0.4, 0.3 - 2e-25, 1e-25])
    up = grid_loss(values, masses, infinite=0.0, h=0.01, rounding="up", tail=1e-20)
    # The -50 atom was raised to the lowest kept point, the +40 one sent to +∞.
    assert up.values[0] > -2.0 and up.infinite == pytest.approx(1e-25)
    for eps in EPSILONS:
        assert up.delta(eps) >= _exact(values, masses, 0.0, eps)


def test_the_fft_error_is_charged_and_grows_with_compositions():
    one = grid_loss(np.array([-0.1, 0.2]), np.array([0.5, 0.5]), infinite=0.0, h=1e-3)
    assert one.error == 0.0
    many = one.self_compose(64)
    assert many.error > 0.0 and many.allowance() >= many.error
    assert many.allowance() < 1e-10


def test_bad_input_names_the_parameter():
    with pytest.raises(InvalidParameterError, match="h must be a finite number > 0"):
        grid_loss(np.array([0.0]), np.array([1.0]), infinite=0.0, h=0.0)
    with pytest.raises(InvalidParameterError, match="rounding must be"):
        grid_loss(np.array([0.0]), np.array([1.0]), infinite=0.0, h=0.1, rounding="UP")
    one = grid_loss(np.array([0.0]), np.array([1.0]), infinite=0.0, h=0.1)
    with pytest.raises(InvalidParameterError, match="count must be an integer >= 1"):
        one.self_compose(0)
    other = GridLoss(0.2, 0, np.ones(1), 0.0, "up")
    with pytest.raises(InvalidParameterError, match="share h and rounding"):
        one.compose(other)
