"""Central-model baselines: a trusted curator adds noise to the true histogram.

* :func:`analytic_gaussian_sigma`: the analytic Gaussian mechanism (Balle &
  Wang, ICML 2018, Thm 8): the smallest σ for which N(0, σ²I) noise on a query
  of ℓ₂ sensitivity Δ is (ε, δ)-DP, from the exact privacy profile
  δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) (:func:`gaussian_delta`).
* :func:`classical_gaussian_sigma`: σ = Δ·sqrt(2 ln(1.25/δ))/ε (Dwork & Roth,
  Thm A.1), valid only for ε < 1.
* :func:`laplace_scale`: b = Δ₁/ε for pure ε-DP.
* :func:`discrete_laplace_parameter`: the discrete Laplace (two-sided
  geometric) mechanism DLap(a) with a = ε/Δ₁, P(k) ∝ e^{−a|k|} on the integers
  (Ghosh, Roughgarden & Sundararajan, "Universally utility-maximizing privacy
  mechanisms", STOC 2009, arXiv 0811.2841): pure ε-DP for integer counts, with
  variance 2e^{−a}/(1 − e^{−a})² (:func:`discrete_laplace_std`).

For a histogram under replace-one neighbours one user moves between two bins:
ℓ₂ sensitivity √2, ℓ₁ sensitivity 2 (:data:`HISTOGRAM_L2_SENSITIVITY`,
:data:`HISTOGRAM_L1_SENSITIVITY`). :func:`gaussian_histogram` and
:func:`laplace_histogram` release noisy counts; their errors are unbiased with
known standard errors.

The profile is evaluated in log space (``scipy.special.log_ndtr``), so δ down
to 1e-300 calibrates without cancellation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr

from shuffledp._rng import SeedLike, make_rng
from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
)

__all__ = [
    "HISTOGRAM_L1_SENSITIVITY",
    "HISTOGRAM_L2_SENSITIVITY",
    "CentralRelease",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "discrete_laplace_histogram",
    "discrete_laplace_parameter",
    "discrete_laplace_std",
    "gaussian_delta",
    "gaussian_histogram",
    "laplace_histogram",
    "laplace_scale",
]

HISTOGRAM_L2_SENSITIVITY = math.sqrt(2.0)
HISTOGRAM_L1_SENSITIVITY = 2.0


def _check_sensitivity(value: float) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"sensitivity must be a finite number > 0, got {value!r}")
    return float(value)


def _log_delta(epsilon: float, sigma: float, sensitivity: float) -> float:
    """Ln δ(ε) of the Gaussian mechanism (−inf when δ is 0 to double precision)."""
    a = sensitivity / (2.0 * sigma) - epsilon * sigma / sensitivity
    b = -sensitivity / (2.0 * sigma) - epsilon * sigma / sensitivity
    la, lb = float(log_ndtr(a)), float(log_ndtr(b))
    gap = epsilon + lb - la
    if gap >= 0.0:
        return -math.inf
    return la + math.log1p(-math.exp(gap))


def gaussian_delta(
    epsilon: float, sigma: float, sensitivity: float = HISTOGRAM_L2_SENSITIVITY
) -> float:
    """Return the exact δ(ε) of adding N(0, σ²) per coordinate to a query of ℓ₂ sensitivity Δ.

    Balle & Wang (ICML 2018), Thm 8.
    """
    epsilon = check_epsilon(epsilon)
    if not sigma > 0:
        raise InvalidParameterError(f"sigma must be > 0, got {sigma!r}")
    return math.exp(_log_delta(epsilon, float(sigma), _check_sensitivity(sensitivity)))


def analytic_gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float = HISTOGRAM_L2_SENSITIVITY
) -> float:
    """Return the smallest σ (to relative 1e-10, rounded up) with δ(ε; σ) ≤ δ.

    Bisection on ln σ of the exact profile, which decreases in σ (Balle & Wang's
    analytic Gaussian mechanism). The returned σ is one at which the profile was
    evaluated and met the target.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    sensitivity = _check_sensitivity(sensitivity)
    target = math.log(delta)

    def passes(sigma: float) -> bool:
        return _log_delta(epsilon, sigma, sensitivity) <= target

    lo, hi = sensitivity * 1e-6, sensitivity
    while not passes(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e12 * sensitivity:  # pragma: no cover - only for absurd targets
            raise InvalidParameterError(f"no sigma reaches delta={delta:g} at epsilon={epsilon:g}")
    while passes(lo):
        hi, lo = lo, lo / 2.0
    while hi / lo > 1.0 + 1e-10:
        mid = math.sqrt(lo * hi)
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def classical_gaussian_sigma(
    epsilon: float, delta: float, sensitivity: float = HISTOGRAM_L2_SENSITIVITY
) -> float:
    """Return σ = Δ·sqrt(2 ln(1.25/δ))/ε (Dwork & Roth, Thm A.1).

    Raises:
        InvalidParameterError: If ε ≥ 1, where the theorem does not apply.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if epsilon >= 1.0:
        raise InvalidParameterError(
            f"the classical Gaussian mechanism needs epsilon < 1, got {epsilon:g}; "
            "use analytic_gaussian_sigma"
        )
    return _check_sensitivity(sensitivity) * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def laplace_scale(epsilon: float, sensitivity: float = HISTOGRAM_L1_SENSITIVITY) -> float:
    """Return the Laplace scale b = Δ₁/ε for pure ε-DP."""
    return _check_sensitivity(sensitivity) / check_epsilon(epsilon)


@dataclass(frozen=True)
class CentralRelease:
    """Noisy counts from a central mechanism.

    Attributes:
        counts: Released counts (unbiased for the true ones).
        stderr: Standard deviation of the noise on each count.
        mechanism: ``"gaussian"``, ``"laplace"`` or ``"discrete-laplace"``.
    """

    counts: NDArray[np.float64]
    stderr: float
    mechanism: str


def _check_histogram(histogram: NDArray[np.integer]) -> NDArray[np.float64]:
    hist = np.asarray(histogram)
    if hist.ndim != 1 or hist.size < 2 or np.any(hist < 0):
        raise InvalidParameterError("histogram must be a 1-D array of >= 2 non-negative counts")
    return hist.astype(np.float64)


def gaussian_histogram(
    histogram: NDArray[np.integer], sigma: float, seed: SeedLike = None
) -> CentralRelease:
    """Add N(0, σ²) to every count."""
    hist = _check_histogram(histogram)
    if not sigma > 0:
        raise InvalidParameterError(f"sigma must be > 0, got {sigma!r}")
    noise = make_rng(seed).normal(0.0, sigma, size=hist.shape)
    return CentralRelease(counts=hist + noise, stderr=float(sigma), mechanism="gaussian")


def laplace_histogram(
    histogram: NDArray[np.integer], scale: float, seed: SeedLike = None
) -> CentralRelease:
    """Add Laplace(0, b) to every count."""
    hist = _check_histogram(histogram)
    if not scale > 0:
        raise InvalidParameterError(f"scale must be > 0, got {scale!r}")
    noise = make_rng(seed).laplace(0.0, scale, size=hist.shape)
    return CentralRelease(
        counts=hist + noise, stderr=float(scale * math.sqrt(2.0)), mechanism="laplace"
    )


def discrete_laplace_parameter(
    epsilon: float, sensitivity: float = HISTOGRAM_L1_SENSITIVITY
) -> float:
    """Return a = ε/Δ₁, the parameter of the ε-DP discrete Laplace mechanism DLap(a).

    DLap(a) has P(k) = (1 − e^{−a})/(1 + e^{−a})·e^{−a|k|} for every integer k
    (Ghosh, Roughgarden & Sundararajan, STOC 2009, arXiv 0811.2841). Two
    integer-valued inputs at ℓ₁ distance at most Δ₁ give output laws whose
    ratio is at most e^{a·Δ₁} = e^ε at every point, so adding independent
    DLap(ε/Δ₁) noise to every count is (ε, 0)-DP. For a histogram under
    replace-one neighbours Δ₁ = 2, so a = ε/2.
    """
    return check_epsilon(epsilon) / _check_sensitivity(sensitivity)


def discrete_laplace_std(epsilon: float, sensitivity: float = HISTOGRAM_L1_SENSITIVITY) -> float:
    """Return the standard deviation of DLap(ε/Δ₁): √(2e^{−a})/(1 − e^{−a}).

    DLap(a) is the difference of two independent geometric variables
    G ~ P(k) = (1 − e^{−a})e^{−ak}, k ≥ 0, each of variance e^{−a}/(1 − e^{−a})²,
    so its variance is 2e^{−a}/(1 − e^{−a})². Computed with ``expm1`` (no
    cancellation at small a). At ε = 1 (a = 1/2): 2.7993.
    """
    a = discrete_laplace_parameter(epsilon, sensitivity)
    return math.sqrt(2.0 * math.exp(-a)) / -math.expm1(-a)


def discrete_laplace_histogram(
    histogram: NDArray[np.integer],
    epsilon: float,
    seed: SeedLike = None,
    sensitivity: float = HISTOGRAM_L1_SENSITIVITY,
) -> CentralRelease:
    """Add independent DLap(ε/Δ₁) noise to every count (pure ε-DP, integer counts).

    Each noise value is G₁ − G₂ with G₁, G₂ i.i.d. geometric on {0, 1, …} with
    ratio e^{−a} (numpy's ``geometric`` counts trials, hence the − 1).
    """
    hist = _check_histogram(histogram)
    a = discrete_laplace_parameter(epsilon, sensitivity)
    rng = make_rng(seed)
    success = -math.expm1(-a)
    noise = rng.geometric(success, size=hist.shape) - rng.geometric(success, size=hist.shape)
    return CentralRelease(
        counts=hist + noise,
        stderr=discrete_laplace_std(epsilon, sensitivity),
        mechanism="discrete-laplace",
    )
