"""Privacy accounting for shuffle protocols, grouped by the kind of argument.

Entry points (the questions users ask): :func:`delta`, :func:`amplified_epsilon`,
:func:`calibrate`, :func:`compare` (:mod:`~shuffledp.accounting.api`, over the
method registry :mod:`~shuffledp.accounting.methods`), calibration
(:mod:`~shuffledp.accounting.calibration`), the segmented protocol's parameters
(:mod:`~shuffledp.accounting.segmented_parameters`) and per-user histograms'
ε′ (:mod:`~shuffledp.accounting.per_user_epsilons`). Below them, one
subpackage per kind of argument, each importing only the ones listed after it:

* ``composition``: privacy loss distributions and the total of several releases;
* ``reproductions``: printed formulas under their sources' names, never certificates;
* ``certificates``: each mechanism's certified upper bound, lower bounds and calibration;
* ``published``: published amplification bounds (EFMRTT'19, BBGN'19, FMT'21, Wang et al.'s
  variation-ratio reduction);
* ``numerics``: the exact numerical core (binomial windows, hockey-stick sums, two-count
  pairs, mixtures, i.i.d. blankets, safe searches).

The old flat paths (``shuffledp.accounting.krr`` and so on) still import, with a
deprecation warning (:mod:`shuffledp.accounting._moved`).
"""

from shuffledp.accounting._moved import install as _install_old_paths
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

_install_old_paths()
