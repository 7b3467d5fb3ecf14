"""Privacy accounting for shuffle protocols: published bounds, exact computations, calibration.

Entry points: :func:`delta`, :func:`amplified_epsilon`, :func:`calibrate`,
:func:`compare` (all in :mod:`shuffledp.accounting.api`). Mechanism-specific
accountants live in :mod:`~shuffledp.accounting.krr`,
:mod:`~shuffledp.accounting.flip` and :mod:`~shuffledp.accounting.poisson`;
published bounds in :mod:`~shuffledp.accounting.generic_bounds`,
:mod:`~shuffledp.accounting.variation_ratio` and
:mod:`~shuffledp.accounting.biswas`; the generic path through privacy loss
distributions in :mod:`~shuffledp.accounting.pld`.
"""

from shuffledp.accounting.api import (
    AccountingResult,
    CalibrationResult,
    amplified_epsilon,
    calibrate,
    compare,
    delta,
)
from shuffledp.accounting.methods import METHODS, Mechanism, Method, methods_for

__all__ = [
    "METHODS",
    "AccountingResult",
    "CalibrationResult",
    "Mechanism",
    "Method",
    "amplified_epsilon",
    "calibrate",
    "compare",
    "delta",
    "methods_for",
]
