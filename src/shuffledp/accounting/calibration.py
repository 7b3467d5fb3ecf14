"""Calibration: the least noisy parameter that a privacy bound certifies.

Group: the questions users ask (with :mod:`~shuffledp.accounting.api` and
:mod:`~shuffledp.accounting.methods`); may import every other group.

Every search bisects a monotone certificate and returns the end of the final
bracket on which the certificate was evaluated and passed, so rounding is
always on the safe side, and ends by settling on the public δ (the value
:func:`shuffledp.accounting.delta` reports), so the pair it returns satisfies
the package's own δ(ε) ≤ target exactly. The search itself is part of the
numerical core (:mod:`shuffledp.accounting.numerics.search`); each mechanism's
calibration lives beside its certificate:

* FLIP's flip probability: :func:`calibrate_flip_q` and its floor
  :func:`flip_delta_floor` (:mod:`shuffledp.accounting.certificates.flip`);
* k-RR's and the generic ε₀, the Poisson randomizer's λ or blanket messages:
  :func:`shuffledp.accounting.calibrate`;
* the segmented protocol's per-level λ:
  :func:`shuffledp.accounting.certificates.segmented.calibrate_level`, and the
  whole plan :func:`shuffledp.accounting.segmented_parameters.optimize_parameters`;
* the augmented shuffle's ν and M:
  :func:`shuffledp.accounting.certificates.augmented.calibrate_sageo_nu`,
  :func:`~shuffledp.accounting.certificates.augmented.calibrate_sbin_trials`;
* the correlated protocol's flooding:
  :func:`shuffledp.accounting.certificates.correlated.cheapest_flooding`.

This module re-exports the searches and FLIP's calibration under the names
they have always had here.
"""

from __future__ import annotations

from shuffledp.accounting.certificates.flip import calibrate_flip_q, flip_delta_floor
from shuffledp.accounting.numerics.search import (
    largest_passing,
    settle_epsilon,
    settle_largest,
    settle_smallest,
    smallest_passing,
)

__all__ = [
    "calibrate_flip_q",
    "flip_delta_floor",
    "largest_passing",
    "settle_epsilon",
    "settle_largest",
    "settle_smallest",
    "smallest_passing",
]
