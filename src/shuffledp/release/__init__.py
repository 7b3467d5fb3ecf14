"""Release documents: the JSON every run, simulation, demo and service publishes.

One place builds them, below ``cli/`` and ``service/`` (both import it; it
imports neither): :mod:`.document` (the fields every histogram release shares
and the :class:`~shuffledp.release.document.ReleaseContext` of where the data
and domain came from and what the guarantee assumes) and :mod:`.runs` (the
FLIP, k-RR, correlated and augmented documents).
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
