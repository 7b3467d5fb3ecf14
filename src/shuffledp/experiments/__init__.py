"""Paper reproductions: each writes a CSV and PNG figures."""

from shuffledp.experiments.krr_vs_gaussian import (
    DataSet,
    ExperimentConfig,
    discretized_normal,
    run_krr_vs_gaussian,
)

__all__ = ["DataSet", "ExperimentConfig", "discretized_normal", "run_krr_vs_gaussian"]
