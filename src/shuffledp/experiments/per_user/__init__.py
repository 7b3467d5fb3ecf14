"""Per-user histograms with cluster-then-shuffle, measured (being split into modules: see runs)."""

from shuffledp.experiments.per_user.runs import (
    ATTACK_FIELDS,
    BASELINE_FIELDS,
    DATA_SETS,
    EPSILON_PRIME_FIELDS,
    SWEEP_FIELDS,
    THM3_FIELDS,
    PerUserData,
    PerUserExperimentConfig,
    load_data,
    mean_l1_to_groups,
    run_per_user_experiment,
    thm4_epsilon1,
    top_k_precision,
)
from shuffledp.experiments.per_user.runs import _rng as _rng  # tests import these
from shuffledp.experiments.per_user.runs import _t_and_r as _t_and_r

__all__ = [
    "ATTACK_FIELDS",
    "BASELINE_FIELDS",
    "DATA_SETS",
    "EPSILON_PRIME_FIELDS",
    "SWEEP_FIELDS",
    "THM3_FIELDS",
    "PerUserData",
    "PerUserExperimentConfig",
    "load_data",
    "mean_l1_to_groups",
    "run_per_user_experiment",
    "thm4_epsilon1",
    "top_k_precision",
]
