"""Release documents: the JSON every run, simulation, demo and service publishes.

One place builds them, below ``cli/`` and ``service/`` (both import it; it
imports neither): :mod:`.document` (the fields every histogram release shares
and the :class:`~shuffledp.release.document.ReleaseContext` of where the data
and domain came from and what the guarantee assumes), :mod:`.runs` (the
FLIP, k-RR, correlated and augmented documents), :mod:`.segmented` (a
segmented run's levels and estimate) and :mod:`.per_user` (the report beside
a per-user run's table).
"""

from __future__ import annotations

from shuffledp.release.document import ReleaseContext, run_to_dict
from shuffledp.release.runs import (
    augmented_run_to_dict,
    correlated_run_to_dict,
    flip_run_to_dict,
    krr_run_to_dict,
)

__all__ = [
    "ReleaseContext",
    "augmented_run_to_dict",
    "correlated_run_to_dict",
    "flip_run_to_dict",
    "krr_run_to_dict",
    "run_to_dict",
]
