"""The segmented paper's §6 experiments (being split into modules: see runs)."""

from shuffledp.experiments.segmented.runs import (
    ACCOUNTINGS,
    BASELINES,
    BLANKET_GRID,
    DATA_SOURCES,
    FIELDS,
    LOW_GRID,
    PAPER_LEVELS,
    QUICK_GRID,
    QUICK_LOW_GRID,
    REDUCTION_BANDS,
    SHARE_SETTINGS,
    SegmentedExperimentConfig,
    Z,
    run_segmented_experiment,
    whole_set_lower_delta,
)
from shuffledp.experiments.segmented.runs import _rng as _rng  # tests import these
from shuffledp.experiments.segmented.runs import _verdicts as _verdicts

__all__ = [
    "ACCOUNTINGS",
    "BASELINES",
    "BLANKET_GRID",
    "DATA_SOURCES",
    "FIELDS",
    "LOW_GRID",
    "PAPER_LEVELS",
    "QUICK_GRID",
    "QUICK_LOW_GRID",
    "REDUCTION_BANDS",
    "SHARE_SETTINGS",
    "SegmentedExperimentConfig",
    "Z",
    "run_segmented_experiment",
    "whole_set_lower_delta",
]
