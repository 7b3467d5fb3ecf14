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

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports
from shuffledp.accounting._moved import install as _install_old_paths

if TYPE_CHECKING:
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

#: Where each re-exported name lives, imported on first use (PEP 562): importing one
#: module of the accountant (FLIP's certificate, say) does not load the questions layer
#: and every certificate under it (scipy.optimize, scipy.signal).
_LAZY: dict[str, str] = {
    "AccountingResult": "shuffledp.accounting.api",
    "CalibrationResult": "shuffledp.accounting.api",
    "amplified_epsilon": "shuffledp.accounting.api",
    "calibrate": "shuffledp.accounting.api",
    "compare": "shuffledp.accounting.api",
    "delta": "shuffledp.accounting.api",
    "METHODS": "shuffledp.accounting.methods",
    "Mechanism": "shuffledp.accounting.methods",
    "Method": "shuffledp.accounting.methods",
    "methods_for": "shuffledp.accounting.methods",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


_install_old_paths()
