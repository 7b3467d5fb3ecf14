"""Per-user histograms with cluster-then-shuffle, measured (being split into modules: see runs)."""

from shuffledp.experiments.per_user.config import (
    DATA_SETS,
    PerUserExperimentConfig,
)
from shuffledp.experiments.per_user.config import _rng as _rng  # imported by tests
from shuffledp.experiments.per_user.data import (
    PerUserData,
    load_data,
)
from shuffledp.experiments.per_user.metrics import (
    mean_l1_to_groups,
    top_k_precision,
)
from shuffledp.experiments.per_user.runs import _t_and_r as _t_and_r  # imported by tests
from shuffledp.experiments.per_user.runs import (
    run_per_user_experiment,
)
from shuffledp.experiments.per_user.tables import (
    ATTACK_FIELDS,
    BASELINE_FIELDS,
    EPSILON_PRIME_FIELDS,
    SWEEP_FIELDS,
    THM3_FIELDS,
)
from shuffledp.experiments.per_user.theorems import (
    thm4_epsilon1,
)

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
