"""Paper reproductions: each writes CSVs and PNG figures.

Each experiment's configuration and entry point is re-exported here and
imported on first use, so running one experiment (``from
shuffledp.experiments.segmented import ...``) does not load the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports

if TYPE_CHECKING:
    from shuffledp.experiments.krr_vs_gaussian import (
        DataSet,
        ExperimentConfig,
        discretized_normal,
        run_krr_vs_gaussian,
    )
    from shuffledp.experiments.near_central import NearCentralConfig, run_near_central
    from shuffledp.experiments.per_user import PerUserExperimentConfig, run_per_user_experiment
    from shuffledp.experiments.segmented import (
        SegmentedExperimentConfig,
        run_segmented_experiment,
        whole_set_lower_delta,
    )

__all__ = [
    "DataSet",
    "ExperimentConfig",
    "NearCentralConfig",
    "PerUserExperimentConfig",
    "SegmentedExperimentConfig",
    "discretized_normal",
    "run_krr_vs_gaussian",
    "run_near_central",
    "run_per_user_experiment",
    "run_segmented_experiment",
    "whole_set_lower_delta",
]

#: Where each re-exported name lives, imported on first use.
_LAZY: dict[str, str] = {
    "DataSet": "shuffledp.experiments.krr_vs_gaussian",
    "ExperimentConfig": "shuffledp.experiments.krr_vs_gaussian",
    "discretized_normal": "shuffledp.experiments.krr_vs_gaussian",
    "run_krr_vs_gaussian": "shuffledp.experiments.krr_vs_gaussian",
    "NearCentralConfig": "shuffledp.experiments.near_central",
    "run_near_central": "shuffledp.experiments.near_central",
    "PerUserExperimentConfig": "shuffledp.experiments.per_user",
    "run_per_user_experiment": "shuffledp.experiments.per_user",
    "SegmentedExperimentConfig": "shuffledp.experiments.segmented",
    "run_segmented_experiment": "shuffledp.experiments.segmented",
    "whole_set_lower_delta": "shuffledp.experiments.segmented",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
