"""The segmented experiment's files: the CSV of rows and the summary JSON.

:data:`FIELDS` are the CSV's columns (one row per setting × mechanism ×
accounting × m). ``_summary`` assembles the summary: configuration, data,
level counts, the settings' table and the verdicts (:mod:`.verdicts`), Eq. 7's
findings, the ``dummy`` variant against the paper's, the blanket gap, the
baselines' blanket rates and the lower bounds at the best m.
``_baseline_rate`` is a baseline's ``blanket_rate`` column. ``_write_csv``
and ``_write_summary`` write the two files (non-finite numbers become strings
in the JSON).

Imports :mod:`.config`, :mod:`.data`, :mod:`.calibration` and :mod:`.verdicts`
(never :mod:`.runs` or :mod:`.plots`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp._files import write_csv_atomically, write_text_atomically
from shuffledp.accounting.certificates.segmented import level_lower_bound
from shuffledp.experiments.segmented.calibration import _Point
from shuffledp.experiments.segmented.config import OURS, SegmentedExperimentConfig, _Baseline
from shuffledp.experiments.segmented.data import _data_summary, _Source
from shuffledp.experiments.segmented.verdicts import _best, _setting_table, _verdicts
from shuffledp.schemas import schema_id

#: Columns of the CSV.
FIELDS: tuple[str, ...] = (
    "data",
    "n",
    "items_per_user",
    "domain_size",
    "shares",
    "mechanism",
    "variant",
    "accounting",
    "blanket_rate",
    "lambdas",
    "messages_per_user",
    "mse_mean",
    "mse_se",
    "repetitions",
    "expected_error",
    "certified",
    "certified_delta_ratio",
)


def _baseline_rate(mech: _Baseline) -> float:
    """The m of MM; the user-weighted mean of the levels' m for SepMM; NaN for Subexp."""
    rate = getattr(mech, "blanket_rate", None)
    if isinstance(rate, float):
        return float(rate)
    parts = getattr(mech, "parts", None)
    counts = getattr(mech, "level_counts", None)
    if parts and counts:
        total = sum(float(p.blanket_rate) * int(c) for p, c in zip(parts, counts, strict=True))
        return total / float(sum(int(c) for c in counts))
    return math.nan


def _write_csv(out: Path, data: str, rows: list[dict[str, Any]]) -> Path:
    """Write the rows to ``segmented_<data>.csv`` in ``out``; return its path."""
    csv_path = out / f"segmented_{data}.csv"

    write_csv_atomically(csv_path, FIELDS, rows)
    return csv_path


def _write_summary(out: Path, data: str, summary: dict[str, Any]) -> Path:
    """Write the summary to ``segmented_<data>_summary.json`` in ``out``; return its path."""
    json_path = out / f"segmented_{data}_summary.json"
    write_text_atomically(json_path, json.dumps(_jsonable(summary), indent=2) + "\n")
    return json_path


def _eq7_findings(
    points: list[_Point], levels: tuple[float, ...], ns: Sequence[int]
) -> dict[str, Any]:
    """Where Eq. 7's λ is not certified, what a concrete pair shows there, and Lemma 3's δ′.

    The certified δ is the exact accountant's for the view of Lemma 2, which
    hands the adversary the other users' data messages: an upper bound on the
    real protocol's δ. Above the target it leaves Eq. 7's λ *not certified*;
    only a lower bound on the real protocol's δ above the target (a concrete
    dataset pair, :func:`level_lower_bound`) would show that λ *not private*.
    Counts and spreads are over the grid; ``points`` also holds the integer m
    added for the λ figure (``on_grid`` false).
    """
    uncertified: list[dict[str, Any]] = []
    slot_ratios: dict[str, list[float]] = {"integer_m": [], "other_m": []}
    lambda_ratios: list[float] = []
    per_point = []
    for p in sorted(
        (q for q in points if q.variant == "paper"), key=lambda q: (q.n, q.items, q.blanket_rate)
    ):
        delta = 0.01 / p.n
        integer = p.blanket_rate == math.floor(p.blanket_rate)
        ratios = [c / delta for c in p.paper_certified_delta]
        lower = list(p.paper_lower_delta) or [None] * len(levels)
        lower_ratios = [None if x is None else x / delta for x in lower]
        for k, eps in enumerate(levels):
            if not p.on_grid:
                continue
            if p.paper_slot_lemma3[k] > 0 and p.paper[k] < 1.0:  # where Eq. 7 binds
                slot_ratios["integer_m" if integer else "other_m"].append(
                    p.paper_slot_exact[k] / p.paper_slot_lemma3[k]
                )
            if p.exact[k] > 0 and p.paper[k] > 0:
                lambda_ratios.append(p.paper[k] / p.exact[k])
            if ratios[k] > 1.0:
                uncertified.append(
                    {
                        "n": p.n,
                        "items_per_user": p.items,
                        "blanket_rate": p.blanket_rate,
                        "epsilon": eps,
                        "lambda_eq7": p.paper[k],
                        "lambda_exact": p.exact[k],
                        "certified_delta_over_target": ratios[k],
                        "lower_bound_delta": lower[k],
                        "lower_bound_delta_over_target": lower_ratios[k],
                    }
                )
        per_point.append(
            {
                "n": p.n,
                "items_per_user": p.items,
                "blanket_rate": p.blanket_rate,
                "on_grid": p.on_grid,
                "lambda_exact": list(p.exact),
                "lambda_eq7": list(p.paper),
                "eq7_certified_delta_over_target": ratios,
                "eq7_lower_bound_delta_over_target": lower_ratios,
                "slot_delta_exact": list(p.paper_slot_exact),
                "slot_delta_lemma3": list(p.paper_slot_lemma3),
                "seconds": round(p.seconds, 2),
            }
        )

    def spread(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        return {
            "min": min(values),
            "median": statistics.median(values),
            "max": max(values),
            "count": len(values),
        }

    total = sum(len(levels) for p in points if p.variant == "paper" and p.on_grid)
    at_integer = [u for u in uncertified if u["blanket_rate"] == math.floor(u["blanket_rate"])]
    lower_ratios_all = [
        u["lower_bound_delta_over_target"]
        for u in uncertified
        if u["lower_bound_delta_over_target"] is not None
    ]
    return {
        "operating_points": total,
        "uncertified_count": len(uncertified),
        "uncertified_at_integer_m": len(at_integer),
        "uncertified_elsewhere": len(uncertified) - len(at_integer),
        "max_certified_delta_over_target": max(
            (u["certified_delta_over_target"] for u in uncertified), default=None
        ),
        "max_certified_delta_over_target_non_integer_m": max(
            (u["certified_delta_over_target"] for u in uncertified if u not in at_integer),
            default=None,
        ),
        "shown_not_private_count": sum(1 for r in lower_ratios_all if r > 1.0),
        "max_lower_bound_delta_over_target": max(lower_ratios_all, default=None),
        "uncertified": uncertified,
        "slot_delta_exact_over_lemma3": {k: spread(v) for k, v in slot_ratios.items()},
        "lambda_eq7_over_exact": spread(lambda_ratios),
        "points": per_point,
        "ns": list(ns),
    }


def _dummy_findings(
    rows: list[dict[str, Any]], dummy_setting: tuple[int, int, str] | None
) -> dict[str, Any] | None:
    if dummy_setting is None:
        return None
    n, s, share = dummy_setting
    match = {"n": n, "items_per_user": s, "shares": share, "mechanism": OURS, "accounting": "exact"}
    paper = {r["blanket_rate"]: r for r in rows if _matches(r, **match, variant="paper")}
    dummy = {r["blanket_rate"]: r for r in rows if _matches(r, **match, variant="dummy")}
    per_m = []
    for m in sorted(set(paper) & set(dummy)):
        a, b = paper[m], dummy[m]
        per_m.append(
            {
                "blanket_rate": m,
                "lambdas_paper": a["lambdas"],
                "lambdas_dummy": b["lambdas"],
                "mse_paper": a["mse_mean"],
                "mse_dummy": b["mse_mean"],
                "mse_ratio_dummy_over_paper": b["mse_mean"] / a["mse_mean"]
                if a["mse_mean"] > 0
                else math.nan,
                "bound_ratio_dummy_over_paper": b["expected_error"] / a["expected_error"]
                if a["expected_error"] > 0
                else math.nan,
                "messages_paper": a["messages_per_user"],
                "messages_dummy": b["messages_per_user"],
            }
        )
    best_paper = _best(rows, **match, variant="paper")
    best_dummy = _best(rows, **match, variant="dummy")
    out: dict[str, Any] = {"n": n, "items_per_user": s, "shares": share, "per_m": per_m}
    if best_paper is not None and best_dummy is not None:
        out["best"] = {
            "paper": {
                "m": best_paper["blanket_rate"],
                "mse": best_paper["mse_mean"],
                "se": best_paper["mse_se"],
                "messages_per_user": best_paper["messages_per_user"],
            },
            "dummy": {
                "m": best_dummy["blanket_rate"],
                "mse": best_dummy["mse_mean"],
                "se": best_dummy["mse_se"],
                "messages_per_user": best_dummy["messages_per_user"],
            },
            "mse_ratio_dummy_over_paper": best_dummy["mse_mean"] / best_paper["mse_mean"],
        }
    return out


def _matches(row: dict[str, Any], **match: Any) -> bool:
    return all(row[k] == v for k, v in match.items())


def _lower_bounds_at_best(
    table: list[dict[str, Any]],
    source: _Source,
    levels: tuple[float, ...],
    config: SegmentedExperimentConfig,
) -> list[dict[str, Any]]:
    """level_lower_bound at the exact accounting's best m (S1), per level: the certificate's gap."""
    out = []
    seen: set[tuple[int, int]] = set()
    for entry in table:
        key = (entry["n"], entry["items_per_user"])
        ours = entry["ours"].get("exact")
        if key in seen or ours is None or entry["shares"] != config.shares[0]:
            continue
        seen.add(key)
        n, s = key
        lams = [float(x) for x in ours["lambdas"].split(";")]
        for eps, lam in zip(levels, lams, strict=True):
            if lam <= 0:
                continue
            lower = level_lower_bound(
                eps,
                lam,
                message_domain=source.message_domain,
                items=s,
                n=n,
                blanket_rate=ours["best_m"],
                padding=source.padding,
            )
            out.append(
                {
                    "n": n,
                    "items_per_user": s,
                    "blanket_rate": ours["best_m"],
                    "epsilon": eps,
                    "lambda": lam,
                    "target_delta": 0.01 / n,
                    "lower_bound_delta": lower,
                }
            )
    return out


def _summary(
    config: SegmentedExperimentConfig,
    source: _Source,
    settings: list[tuple[int, int]],
    rows: list[dict[str, Any]],
    points: list[_Point],
    gaps: list[dict[str, Any]],
    baselines: dict[tuple[int, int], dict[str, dict[str, _Baseline]]],
    dummy_setting: tuple[int, int, str] | None,
    level_counts: dict[str, dict[int, tuple[int, ...]]],
) -> dict[str, Any]:
    table = _setting_table(config, settings, rows)
    mm_rates = {
        f"n={n},s={s}": {
            name: _baseline_rate(mech)
            for name, mech in {**parts["*"], **parts[config.shares[0]]}.items()
            if name != "subexp-local"
        }
        for (n, s), parts in baselines.items()
    }
    return {
        "schema": schema_id("experiment-segmented-summary"),
        "experiment": "segmented (Wang et al. §6)",
        "config": {**asdict(config), "blanket_grid": list(config.blanket_grid)},
        "data": _data_summary(source, config),
        "metric": "sum_j (w_hat_j - w_j)^2 with w the empirical frequency of the n users' "
        "(kept) items in each repetition; mean and standard error over the repetitions",
        "level_counts": {
            share: {str(n): list(c) for n, c in per_n.items()}
            for share, per_n in level_counts.items()
        },
        "settings": table,
        "verdicts": _verdicts(config, table),
        "eq7": _eq7_findings(points, config.levels, config.ns),
        "dummy_vs_paper": _dummy_findings(rows, dummy_setting),
        "blanket_gap": sorted(gaps, key=lambda g: (g["n"], g["items_per_user"], g["epsilon"])),
        "baseline_blanket_rates": mm_rates,
        "lower_bounds_at_best_m": _lower_bounds_at_best(table, source, config.levels, config)
        if not config.quick
        else [],
    }


def _jsonable(value: Any) -> Any:
    """Replace non-finite floats by strings and numpy scalars by Python numbers."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value
