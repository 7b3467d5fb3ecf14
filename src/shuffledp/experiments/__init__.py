"""Paper reproductions: each writes a CSV and PNG figures."""

from shuffledp.experiments.krr_vs_gaussian import (
    DataSet,
    ExperimentConfig,
    discretized_normal,
    run_krr_vs_gaussian,
)
from shuffledp.experiments.segmented import (
    SegmentedExperimentConfig,
    run_segmented_experiment,
    whole_set_lower_delta,
)

__all__ = [
    "DataSet",
    "ExperimentConfig",
    "SegmentedExperimentConfig",
    "discretized_normal",
    "run_krr_vs_gaussian",
    "run_segmented_experiment",
    "whole_set_lower_delta",
]
