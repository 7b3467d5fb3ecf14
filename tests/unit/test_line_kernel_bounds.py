"""The line kernel of the two-count sums, against 50-digit arithmetic.

:func:`shuffledp.accounting.two_counts.line_divergence_each` evaluates a line's
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

from shuffledp.accounting.two_counts import certify, line_divergence_each


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
