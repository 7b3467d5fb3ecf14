"""The per-user experiment's files: the five CSVs and ``summary.json``.

The CSVs' columns (:data:`SWEEP_FIELDS`, :data:`BASELINE_FIELDS`,
:data:`EPSILON_PRIME_FIELDS`, :data:`ATTACK_FIELDS`, :data:`THM3_FIELDS`), each
starting with the data's columns (``_data_columns``); ``_blank`` (a NaN as an
empty cell); ``_write_tables`` (the five CSVs); ``_summary``
(the configuration, the chosen ε₁, Thm 4, the baselines, ε′, the attack and
Thm 3) and ``_write_summary``, through ``_files.write_json_atomically`` (non-finite numbers become
null).

Imports :mod:`.config` and :mod:`.data` (never :mod:`.runs` or :mod:`.plots`).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from shuffledp._files import write_csv_atomically, write_json_atomically
from shuffledp.experiments.per_user.config import PerUserExperimentConfig
from shuffledp.experiments.per_user.data import PerUserData
from shuffledp.schemas import schema_id

_DATA_COLUMNS = ("data", "n", "d", "clusters", "separation", "radius", "mean_total")
#: The per-user error columns of the sweep and the baselines (runs._error_columns).
_ERROR_FIELDS = (
    "l1_mean",
    "l1_se",
    "l1_simplex_mean",
    "l1_simplex_se",
    "topk",
    "topk_precision_mean",
    "topk_precision_se",
)
SWEEP_FIELDS: tuple[str, ...] = (
    *_DATA_COLUMNS,
    "release",
    "released_copy",
    "epsilon",
    "epsilon1_fraction",
    "epsilon1",
    "epsilon2",
    "c",
    "delta",
    "neighbouring",
    "weighting",
    "n_init",
    "repetitions",
    *_ERROR_FIELDS,
    "pure_group_fraction_mean",
    "pure_group_fraction_se",
    "majority_cluster_fraction_mean",
    "majority_cluster_fraction_se",
    "ari_groups_vs_true_mean",
    "ari_groups_vs_true_se",
    "groups_mean",
    "empirical_optimum",
    "thm4_epsilon1",
    "notes",
)
BASELINE_FIELDS: tuple[str, ...] = (
    *_DATA_COLUMNS,
    "release",
    "released_copy",
    "status",
    "epsilon",
    "epsilon1",
    "c",
    "neighbouring",
    "repetitions",
    "guarantee",
    "guarantee_epsilon",
    "guarantee_delta",
    "guarantee_c",
    "guarantee_bound",
    "noise_variance_per_coordinate",
    *_ERROR_FIELDS,
    "groups_mean",
    "notes",
)
EPSILON_PRIME_FIELDS: tuple[str, ...] = (
    *_DATA_COLUMNS,
    "c",
    "grouping",
    "epsilon",
    "epsilon1",
    "epsilon2",
    "delta",
    "neighbouring",
    "user",
    "true_cluster",
    "group",
    "group_size",
    "epsilon_prime",
    "users_in_ball",
    "ball_radius",
    "local_epsilon",
    "paper_epsilon",
    "paper_method",
    "sample_size",
    "notes",
)
ATTACK_FIELDS: tuple[str, ...] = (
    *_DATA_COLUMNS,
    "release",
    "copies",
    "epsilon",
    "epsilon1",
    "c",
    "repetitions",
    "attack_input",
    "ari_vs_groups_mean",
    "ari_vs_groups_se",
    "exact_recovery_rate",
    "ari_groups_vs_true_mean",
    "interpretation",
)
THM3_FIELDS: tuple[str, ...] = (
    *_DATA_COLUMNS,
    "release",
    "epsilon",
    "epsilon1",
    "epsilon2",
    "c",
    "delta",
    "neighbouring",
    "repetitions",
    "users_per_repetition",
    "noise_term_printed",
    "noise_term_formula",
    "expected_noise_l1",
    "mean_group_spread",
    "bound_printed_mean",
    "bound_expectation_mean",
    "measured_l1_mean",
    "measured_l1_se",
    "shuffle_averaged_l1_mean",
    "fraction_measured_above_printed",
    "fraction_measured_above_expectation",
    "fraction_shuffle_averaged_above_expectation",
    "notes",
)


def _data_columns(data: PerUserData, config: PerUserExperimentConfig) -> dict[str, Any]:
    return {
        "data": data.name,
        "n": data.n,
        "d": data.d,
        "clusters": config.clusters,
        "separation": "" if data.separation is None else data.separation,
        "radius": "" if data.radius is None else data.radius,
        "mean_total": float(data.counts.sum(axis=1).mean()),
    }


def _blank(value: float) -> float | str:
    """NaN as an empty CSV cell (a quantity that does not exist for these data)."""
    return "" if isinstance(value, float) and math.isnan(value) else value


def _write_tables(
    out: Path,
    sweep_rows: list[dict[str, Any]],
    base_rows: list[dict[str, Any]],
    eps_rows: list[dict[str, Any]],
    attack_rows: list[dict[str, Any]],
    thm3: list[dict[str, Any]],
) -> list[Path]:
    """Write the five CSVs into ``out``; return their paths."""
    return [
        write_csv_atomically(out / "eps1_sweep.csv", SWEEP_FIELDS, sweep_rows),
        write_csv_atomically(out / "baselines.csv", BASELINE_FIELDS, base_rows),
        write_csv_atomically(out / "epsilon_prime.csv", EPSILON_PRIME_FIELDS, eps_rows),
        write_csv_atomically(out / "attack.csv", ATTACK_FIELDS, attack_rows),
        write_csv_atomically(out / "thm3.csv", THM3_FIELDS, thm3),
    ]


def _summary(
    config: PerUserExperimentConfig,
    data: PerUserData,
    *,
    epsilon1: float,
    best_fraction: float,
    t_means: dict[float, float],
    best_fraction_r: float,
    r_means: dict[float, float],
    thm4: dict[str, Any],
    thm4_default: dict[str, Any],
    base_rows: list[dict[str, Any]],
    base_l1: dict[str, list[float]],
    eps_summary: dict[str, Any],
    epsilon_prime_sample: int,
    ceiling_all: float,
    attack_summary: dict[str, Any],
    thm3_rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """The summary (``summary.json``) without the timings, which the caller adds last."""
    summary: dict[str, Any] = {
        "schema": schema_id("experiment-per-user-summary"),
        "config": asdict(config) | {"n": data.n, "d": data.d, "source": data.source},
        "data": _data_columns(data, config),
        "chosen_epsilon1": epsilon1,
        "chosen_epsilon1_fraction": best_fraction,
        "chosen_epsilon1_rule": "argmin over the sweep of the mean L1 of release t",
        "empirical_optimum": {
            "t": {"epsilon1": best_fraction * config.epsilon, "l1": t_means[best_fraction]},
            "r": {"epsilon1": best_fraction_r * config.epsilon, "l1": r_means[best_fraction_r]},
        },
        "thm4": thm4 | {"default_c": thm4_default},
        "baselines": {
            row["release"]: {
                "status": row["status"],
                "l1_mean": row.get("l1_mean"),
                "l1_se": row.get("l1_se"),
                "l1_simplex_mean": row.get("l1_simplex_mean"),
                "topk_precision_mean": row.get("topk_precision_mean"),
                "guarantee": row.get("guarantee"),
                "l1_per_repetition": base_l1.get(row["release"]),
            }
            for row in base_rows
        },
        "epsilon_prime": eps_summary,
        "epsilon_prime_sample": epsilon_prime_sample,
        "amplification_ceiling_all_users": {
            "n": data.n,
            "epsilon_prime": ceiling_all,
            "meaning": "epsilon1 + the best generic bound for n identical users with "
            "epsilon0 = epsilon2 (rho = 0): no grouping can do better",
        },
        "attack": attack_summary,
        "thm3": {
            row["release"]: {
                k: row[k]
                for k in (
                    "noise_term_printed",
                    "expected_noise_l1",
                    "mean_group_spread",
                    "bound_printed_mean",
                    "bound_expectation_mean",
                    "measured_l1_mean",
                    "shuffle_averaged_l1_mean",
                    "fraction_measured_above_printed",
                    "fraction_measured_above_expectation",
                    "fraction_shuffle_averaged_above_expectation",
                )
            }
            for row in thm3_rows
        },
        "notes": [
            "every release is (epsilon, 0, c)-hDP per user; epsilon' is an analysis number "
            "conditional on the grouping, never released",
            "top-k precision: ties with the k-th largest true share count as true top-k",
            "a singleton group counts as pure",
        ]
        + (
            ["no true clusters: purity, ARI vs truth and the oracle baseline are unavailable"]
            if data.true_labels is None
            else []
        ),
    }
    return summary


def _write_summary(out: Path, summary: dict[str, Any]) -> Path:
    """Write ``summary.json`` into ``out`` (strict JSON: no NaN); return its path."""
    summary_path = out / "summary.json"
    write_json_atomically(summary_path, summary)
    return summary_path
