"""Expected error summaries for estimators with independent, near-Gaussian bins."""

from __future__ import annotations

import math

from scipy import integrate, special

from shuffledp._validation import check_int

__all__ = ["expected_max_abs_normal"]


def expected_max_abs_normal(sigma: float, d: int) -> float:
    """Return E[max_j |Z_j|] for d independent N(0, σ²) variables.

    Used as the expected ℓ∞ error of an unbiased histogram estimator whose bins
    are independent with standard error σ (FLIP's counts are binomial sums with
    variance ≥ 30 in every useful regime, so the Gaussian approximation holds).
    Computed as σ·∫₀^∞ 1 − erf(t/√2)^d dt.
    """
    d = check_int(d, "d", minimum=1)
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")

    def survival(t: float) -> float:
        return float(-math.expm1(d * math.log(max(special.erf(t / math.sqrt(2.0)), 1e-300))))

    value, _ = integrate.quad(survival, 0.0, math.inf, limit=200)
    return float(sigma * value)
