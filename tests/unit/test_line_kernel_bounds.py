"""The line kernel of the two-count sums, against 50-digit arithmetic.

:func:`shuffledp.accounting.numerics.two_counts.line_divergence_each` evaluates a line's
divergence as (α − e^ε γ)·b − (α + γ)(e^ε − 1)·T₂ and charges the weights'
relative error ρ on those δ-sized terms rather than on the line's mass. Here
the model weights are handed to the kernel with a ρ, the true weights are put
at the corners of the ±ρ box, and the exact divergence of each true line
(every point summed in mpmath) must lie between the certified lower and upper
values, at small ε where the line's mass is orders of magnitude above δ.
"""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.numerics.two_counts import (
    TwoCountPair,
    certify,
    line_divergence_each,
    two_count_delta,
)


def _exact_line(alpha: mpmath.mpf, gamma: mpmath.mpf, s: int, eps: float) -> mpmath.mpf:
    """Σ_x (α b(x−1) + γ b(x) − e^ε(γ b(x−1) + α b(x)))₊ with b the Bin(s − 1, ½) pmf."""
    e = mpmath.exp(mpmath.mpf(eps))
    m = s - 1
    b = [mpmath.mpf(2) ** (-m)]
    for k in range(m):
        b.append(b[-1] * (m - k) / (k + 1))
    zero = mpmath.mpf(0)
    total = zero
    for x in range(s + 1):
        before = b[x - 1] if 1 <= x <= m + 1 else zero
        here = b[x] if x <= m else zero
        gap = alpha * before + gamma * here - e * (gamma * before + alpha * here)
        if gap > 0:
            total += gap
    return total


def _certified(alpha: float, gamma: float, s: int, eps: float, rho: float) -> tuple[float, float]:
    values, masses, charges = line_divergence_each(
        np.array([alpha]), np.array([gamma]), np.array([float(s)]), eps, relative_error=rho
    )
    kwargs = {
        "charge": float(charges[0]),
        "terms": 1,
        "dropped": 0.0,
        "epsilon": eps,
    }
    up = certify(float(values[0]), float(masses[0]), rounding="up", **kwargs)
    down = certify(float(values[0]), float(masses[0]), rounding="down", **kwargs)
    return down, up


@pytest.mark.parametrize("s", [1, 2, 3, 10, 57, 300, 1500])
@pytest.mark.parametrize("rho", [0.0, 1e-9, 1e-5])
def test_line_kernel_brackets_the_exact_line_when_weights_are_off_by_rho(s, rho):
    mpmath.mp.dps = 50
    rng = np.random.default_rng(1000 * s + int(rho * 1e9))
    for eps in (1e-4, 3e-3, 0.05, 0.7, 4.0):
        lam = 0.5 + 0.5 * float(rng.random()) ** 3
        mass = 10.0 ** float(rng.uniform(-6, 0))
        alpha, gamma = mass * lam, mass * (1.0 - lam)
        down, up = _certified(alpha, gamma, s, eps, rho)
        for e1, e2 in itertools.product((-rho, 0.0, rho), repeat=2):
            true_a = mpmath.mpf(alpha) * (1 + mpmath.mpf(e1))
            true_g = mpmath.mpf(gamma) * (1 + mpmath.mpf(e2))
            exact = _exact_line(true_a, true_g, s, eps)
            assert mpmath.mpf(down) <= exact <= mpmath.mpf(up), (eps, e1, e2, down, up, exact)


def test_charge_is_delta_sized_where_the_mass_is_not():
    # s = 1e6, ε = 1e-4: P's mass on the region is 1e5 times δ. Charging the tails'
    # relative error (1e-9) on that mass, as the kernel once did, cost 1e-4 of δ; the
    # charge on the δ-sized terms costs under 1e-7 of it.
    values, masses, charges = line_divergence_each(
        np.array([0.3]), np.array([0.29]), np.array([1e6]), 1e-4, relative_error=1e-11
    )
    assert masses[0] > 1e4 * values[0]
    assert 8.0 * 1e-9 * masses[0] > 1e-4 * values[0]
    assert charges[0] < 1e-7 * values[0]


# -- corners an independent audit found (each was on the wrong side before) -------------------


def _exact_upper_tail(trials: int, at_least: int) -> mpmath.mpf:
    """P[Bin(trials, ½) ≥ at_least] for at_least > trials/2: the pmf at at_least times a
    ratio series summed in 160-bit fixed point (no incomplete beta function involved)."""
    one = 1 << 160
    term, total = one, one
    a, c = trials - at_least, at_least + 1
    while a > 0 and term >= one >> 110:
        term = term * a // c
        total += term
        a, c = a - 1, c + 1
    mpmath.mp.dps = 45
    point = mpmath.exp(
        mpmath.loggamma(trials + 1)
        - mpmath.loggamma(at_least + 1)
        - mpmath.loggamma(trials - at_least + 1)
        - trials * mpmath.log(2)
    )
    return point * mpmath.mpf(total) / mpmath.mpf(one)


def _exact_single_line(trials: int, eps: float) -> mpmath.mpf:
    """δ of (A + 1, N − A) against (A, N − A + 1), A ~ Bin(N, ½): one line, every point."""
    mpmath.mp.dps = 50
    s = trials + 1
    e = mpmath.exp(mpmath.mpf(eps))
    first = int(mpmath.floor(s * e / (1 + e))) + 1
    tail = _exact_upper_tail(trials, first)
    mpmath.mp.dps = 50
    point = mpmath.exp(
        mpmath.loggamma(trials + 1)
        - mpmath.loggamma(first)
        - mpmath.loggamma(trials - first + 2)
        - trials * mpmath.log(2)
    )
    return tail + point - e * tail


@pytest.mark.parametrize(
    ("trials", "eps"),
    [(1_000_000_000_437, 3.6215013988095904e-05), (1_000_000_000_620, 7.212029198647346e-05)],
)
def test_tails_of_a_trillion_trials_carry_their_larger_error(trials, eps):
    # scipy's betainc errs by up to 5e-9 at 1e12 trials (2e-8 at 1e13): 1e-9 was not enough.
    from shuffledp.accounting import delta

    row = delta(
        eps,
        n=2,
        mechanism="poisson",
        report_probability=1.0,
        domain_size=2,
        blanket_messages=trials,
    )
    assert row.certified and mpmath.mpf(row.delta) >= _exact_single_line(trials, eps)
    pair = TwoCountPair(trials, 1.0, 1.0, 0.0, w0=0.0)
    assert mpmath.mpf(two_count_delta(pair, eps, rounding="down")) <= _exact_single_line(
        trials, eps
    )


def test_epsilon_above_700_charges_the_error_of_e_to_the_epsilon():
    # e^ε·x is then e^{ε + ln x}: hundreds of units off, not two.
    mpmath.mp.dps = 50
    x, eps = 8.953444291211471e-306, 702.399
    up = two_count_delta(TwoCountPair(0, 0.5, 1.0 - x, x, w0=0.0), eps)
    exact = mpmath.mpf(1.0 - x) - mpmath.exp(mpmath.mpf(eps)) * mpmath.mpf(x)
    assert mpmath.mpf(up) >= exact


def test_subnormal_weights_are_refused_with_a_message():
    with pytest.raises(InvalidParameterError, match="w2=1e-320 is below the smallest normal"):
        TwoCountPair(1, 0.3, 1.0, 1e-320, w0=0.0)


def test_a_lower_bound_below_the_target_everywhere_gives_no_epsilon():
    from shuffledp.accounting import amplified_epsilon

    row = amplified_epsilon(
        0.038834592575729174,
        n=2,
        mechanism="krr",
        method="krr-homogeneous",
        epsilon0=0.026187510622402804,
        domain_size=19,
    )
    assert row.epsilon is None and row.delta is None and "says nothing" in row.note


def test_a_subnormal_delta_is_still_bounded_from_above():
    # δ ~ 1e-316: each operation may be off by half a subnormal unit, relative errors
    # notwithstanding (the audit found upper values a few units short).
    mpmath.mp.dps = 80
    rng = np.random.default_rng(1)
    for _ in range(60):
        trials = int(rng.integers(1000, 1080))
        w1 = float(10 ** rng.uniform(-16, -6))
        pair = TwoCountPair(trials, 1.0, w1, 0.0, w0=1.0 - w1)
        s = trials + 1
        top = int(rng.integers(2, 5))
        eps = float(rng.uniform(np.log((s - top) / top), np.log((s - top + 1) / (top - 1))))
        e = mpmath.exp(mpmath.mpf(eps))
        pmf = [mpmath.binomial(trials, k) / mpmath.mpf(2) ** trials for k in range(trials + 1)]
        exact = mpmath.mpf(w1) * sum(
            max(mpmath.mpf(0), (pmf[x - 1] if x >= 1 else 0) - e * (pmf[x] if x <= trials else 0))
            for x in range(s - top - 2, s + 1)
        )
        assert mpmath.mpf(two_count_delta(pair, eps)) >= exact
        assert mpmath.mpf(two_count_delta(pair, eps, rounding="down")) <= exact
