"""Running the segmented experiment: calibrations, baselines, simulations, files.

:func:`run_segmented_experiment` calibrates λ_k for every (n, s, m)
(:mod:`.calibration`, in worker processes), calibrates the baselines, runs
every repetition of every setting on the count path (``_simulate``: one data
set, one level assignment and fresh mechanism randomness per repetition, each
stream keyed by ``_rng``), turns the tallies into the CSV rows (``_rows``) and
writes them, the summary (:mod:`.tables`) and the figures (:mod:`.plots`).

Imports :mod:`.config`, :mod:`.data`, :mod:`.calibration` and :mod:`.tables`,
and :mod:`.plots` inside the function (only when figures are asked for); only
the package's ``__init__`` imports it.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._files import make_output_dir
from shuffledp._progress import progress
from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.segmented import error_bound
from shuffledp.analyzers.segmented import pooled_estimate
from shuffledp.baselines import (
    calibrate_mm,
    calibrate_sepmm,
    calibrate_subexp_local,
    calibrate_subexp_shuffle,
    calibrate_weighted_sepmm,
)
from shuffledp.experiments.segmented.calibration import (
    _CalJob,
    _chunks,
    _GapJob,
    _missing_integers,
    _Point,
    _run_jobs,
)
from shuffledp.experiments.segmented.config import (
    BASELINES,
    OURS,
    SHARE_SETTINGS,
    SegmentedExperimentConfig,
    _Baseline,
)
from shuffledp.experiments.segmented.data import _load_source, _Source
from shuffledp.experiments.segmented.tables import (
    _baseline_rate,
    _summary,
    _write_csv,
    _write_summary,
)
from shuffledp.protocols.segmented import largest_remainder
from shuffledp.randomizers.poisson import PoissonSetRandomizer, pair_histogram

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


class _Tally:
    """Squared errors and message counts per row key."""

    def __init__(self) -> None:
        self.errors: dict[tuple[Any, ...], list[float]] = {}
        self.messages: dict[tuple[Any, ...], list[float]] = {}

    def add(self, key: tuple[Any, ...], error: float, messages_per_user: float) -> None:
        self.errors.setdefault(key, []).append(error)
        self.messages.setdefault(key, []).append(messages_per_user)

    def stats(self, key: tuple[Any, ...]) -> tuple[float, float, int, float]:
        """(mean, standard error, repetitions, mean messages per user)."""
        values = np.asarray(self.errors.get(key, []), dtype=np.float64)
        if values.size == 0:
            return math.nan, math.nan, 0, math.nan
        mean = float(values.mean())
        se = float(values.std(ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan
        return mean, se, int(values.size), float(np.mean(self.messages[key]))


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(key)))


@dataclass
class _Ours:
    """One configuration of our protocol: its randomizer and λ_k."""

    accounting: str
    variant: str
    blanket_rate: float
    lambdas: tuple[float, ...]
    randomizer: PoissonSetRandomizer | None  # None: no λ > 0 certified, no estimate
    certified: bool
    delta_ratio: float | None  # certified δ / target, for Eq. 7's λ (None: certified by search)


def _ours_error(
    ours: _Ours,
    pairs: IntArray,
    level_counts: FloatArray,
    w: FloatArray,
    n: int,
    s: int,
    source: _Source,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """(Σ_j (ŵ_j − w_j)², messages per user) of one run on the count path."""
    if ours.randomizer is None or float(level_counts @ np.asarray(ours.lambdas)) <= 0:
        return math.inf, math.nan
    counts = ours.randomizer.sample_counts(pairs, rng)
    estimate = pooled_estimate(
        counts,
        n=n,
        blanket_rate=ours.blanket_rate,
        domain_size=source.domain_size,
        message_domain=source.message_domain,
        level_counts=level_counts,
        report_probabilities=ours.lambdas,
        items_per_user=s,
        variant=ours.variant,
    )
    error = float(np.sum((estimate.frequencies - w) ** 2))
    return error, float(counts.sum()) / n


def _simulate(
    config: SegmentedExperimentConfig,
    source: _Source,
    setting: tuple[int, int],
    ours: list[_Ours],
    dummy: dict[str, list[_Ours]],
    common: dict[str, _Baseline],
    per_share: dict[str, dict[str, _Baseline]],
    level_counts: dict[str, tuple[int, ...]],
    tally: _Tally,
) -> None:
    """All repetitions of one (n, s): every share setting, mechanism and m."""
    n, s = setting
    i_n, i_s = config.ns.index(n), config.items_per_user.index(s)
    k = len(config.levels)
    for rep in progress(range(config.repetitions), desc=f"n={n:,} s={s}", delay=0.5):
        items, w = source.draw(n, s, _rng(config.seed, 0, i_n, i_s, rep))
        for j, (name, mech) in enumerate(common.items()):
            est = mech.run(items, seed=_rng(config.seed, 1, i_n, i_s, rep, j), path="count")
            tally.add((n, s, "*", name), est.squared_error(w), est.messages / n)
        for i_share, share in enumerate(config.shares):
            counts = level_counts[share]
            levels = _rng(config.seed, 2, i_n, i_s, i_share, rep).permutation(
                np.repeat(np.arange(k, dtype=np.int64), counts)
            )
            pairs = pair_histogram(items, levels, k, source.message_domain)
            nk = np.asarray(counts, dtype=np.float64)
            rng = _rng(config.seed, 3, i_n, i_s, i_share, rep)
            for conf in (*ours, *dummy.get(share, [])):
                error, messages = _ours_error(conf, pairs, nk, w, n, s, source, rng)
                key = (n, s, share, OURS, conf.variant, conf.accounting, conf.blanket_rate)
                tally.add(key, error, messages)
            for j, (name, mech) in enumerate(per_share[share].items()):
                est = mech.run(
                    items,
                    user_levels=levels,
                    seed=_rng(config.seed, 4, i_n, i_s, i_share, rep, j),
                    path="count",
                )
                tally.add(
                    (n, s, share, name),
                    est.squared_error(w),
                    est.messages / n,
                )


def run_segmented_experiment(
    config: SegmentedExperimentConfig, output_dir: str | Path, *, plots: bool = True
) -> dict[str, Any]:
    """Run §6 (the package docstring); write the CSV, the summary JSON and the figures.

    Returns:
        ``{"files": [...], "summary": {...}}`` (the summary is also written as JSON).

    Raises:
        InvalidParameterError: On a bad configuration.
    """
    config.check()
    started = time.perf_counter()
    out = Path(output_dir)
    if out.exists() and not out.is_dir():
        raise InvalidParameterError(f"output directory {str(out)!r} is not a directory")
    source = _load_source(config)
    workers = config.workers if config.workers is not None else min(2, os.cpu_count() or 1)
    settings = [(n, s) for n in config.ns for s in config.items_per_user]
    d_msg = source.message_domain
    levels = config.levels

    # Step 1: λ_k(m) per (n, s), both accountings (and the dummy variant for one setting).
    chunk = max(1, math.ceil(len(config.blanket_grid) / max(1, 2 * workers)))
    cal_jobs: list[_CalJob] = []
    pad = source.padding
    # The integers inside the grid's range that it lacks: λ jumps there (γ = 1), and the
    # λ figure shows them beside the grid (no simulation runs at them).
    extra = _missing_integers(config.blanket_grid)
    for n, s in settings:
        for part in _chunks(config.blanket_grid, chunk):
            cal_jobs.append((n, s, d_msg, part, levels, 0.01 / n, "paper", pad, True))
        if extra:
            cal_jobs.append((n, s, d_msg, extra, levels, 0.01 / n, "paper", pad, False))
    dummy_setting = config.dummy_setting
    if dummy_setting is not None and (dummy_setting[0], dummy_setting[1]) in settings:
        n, s, _ = dummy_setting
        for part in _chunks(config.blanket_grid, chunk):
            cal_jobs.append((n, s, d_msg, part, levels, 0.01 / n, "dummy", pad, True))
    else:
        dummy_setting = None
    gap_jobs: list[_GapJob] = (
        [(n, s, d_msg, source.padding, eps, 0.01 / n) for n, s in settings for eps in levels]
        if config.blanket_gap
        else []
    )
    points, gaps = _run_jobs(cal_jobs, gap_jobs, workers)
    table = {(p.n, p.items, p.variant, p.blanket_rate): p for p in points}
    calibration_seconds = time.perf_counter() - started

    # Step 2: baselines (their own calibrations) and the simulations.
    tally = _Tally()
    level_counts = {
        share: {n: largest_remainder(SHARE_SETTINGS[share], n) for n in config.ns}
        for share in config.shares
    }
    baselines: dict[tuple[int, int], dict[str, dict[str, _Baseline]]] = {}
    ours_by_setting: dict[tuple[int, int], list[_Ours]] = {}
    dummy_by_setting: dict[tuple[int, int], dict[str, list[_Ours]]] = {}
    d = source.domain_size
    for n, s in progress(settings, desc="settings"):
        delta = 0.01 / n
        common: dict[str, _Baseline] = {
            "subexp-local": calibrate_subexp_local(n, d, s, padding=source.padding),
            "subexp-shuffle": calibrate_subexp_shuffle(
                n, d, s, delta=delta, padding=source.padding
            ),
            "mm-shuffle": calibrate_mm(n, d, s, delta=delta, padding=source.padding),
        }
        per_share: dict[str, dict[str, _Baseline]] = {
            share: {
                "sepmm": calibrate_sepmm(
                    level_counts[share][n], d, s, levels=levels, delta=delta, padding=source.padding
                ),
                "weighted-sepmm": calibrate_weighted_sepmm(
                    level_counts[share][n], d, s, levels=levels, delta=delta, padding=source.padding
                ),
            }
            for share in config.shares
        }
        baselines[(n, s)] = {"*": common, **per_share}
        ours = _our_configurations(table, n, s, config, d_msg, "paper")
        ours_by_setting[(n, s)] = ours
        dummy: dict[str, list[_Ours]] = {}
        if dummy_setting is not None and (n, s) == dummy_setting[:2]:
            dummy[dummy_setting[2]] = _our_configurations(table, n, s, config, d_msg, "dummy")
        dummy_by_setting[(n, s)] = dummy
        _simulate(
            config,
            source,
            (n, s),
            ours,
            dummy,
            common,
            per_share,
            {share: level_counts[share][n] for share in config.shares},
            tally,
        )

    rows = _rows(
        config, source, settings, ours_by_setting, dummy_by_setting, baselines, tally, level_counts
    )
    make_output_dir(out)  # only now: an interrupted run leaves no empty directory
    csv_path = _write_csv(out, config.data, rows)
    summary = _summary(
        config, source, settings, rows, points, gaps, baselines, dummy_setting, level_counts
    )
    summary["runtime_seconds"] = {
        "calibration": round(calibration_seconds, 1),
        "total": round(time.perf_counter() - started, 1),
        "workers": workers,
    }
    json_path = _write_summary(out, config.data, summary)
    written = [csv_path, json_path]
    if plots:
        from shuffledp.experiments.segmented.plots import plot_segmented

        written += plot_segmented(rows, summary, out, config.data)
    return {"files": [str(p) for p in written], "summary": summary}


def _our_configurations(
    table: dict[tuple[int, int, str, float], _Point],
    n: int,
    s: int,
    config: SegmentedExperimentConfig,
    d_msg: int,
    variant: str,
) -> list[_Ours]:
    """One :class:`_Ours` per (accounting, m) of this (n, s)."""
    delta = 0.01 / n
    out = []
    for m in config.blanket_grid:
        point = table[(n, s, variant, m)]
        choices: list[tuple[str, tuple[float, ...], bool, float | None]] = [
            ("exact", point.exact, True, None)
        ]
        if variant == "paper":
            ratio = max(c / delta for c in point.paper_certified_delta)
            choices.append(("paper", point.paper, ratio <= 1.0, ratio))
        for accounting, lams, certified, ratio_value in choices:
            randomizer = PoissonSetRandomizer(lams, d_msg, s, m, variant) if max(lams) > 0 else None
            out.append(_Ours(accounting, variant, m, lams, randomizer, certified, ratio_value))
    return out


def _rows(
    config: SegmentedExperimentConfig,
    source: _Source,
    settings: list[tuple[int, int]],
    ours_by_setting: dict[tuple[int, int], list[_Ours]],
    dummy_by_setting: dict[tuple[int, int], dict[str, list[_Ours]]],
    baselines: dict[tuple[int, int], dict[str, dict[str, _Baseline]]],
    tally: _Tally,
    level_counts: dict[str, dict[int, tuple[int, ...]]],
) -> list[dict[str, Any]]:
    """The CSV rows: our protocol per (accounting, m), then the baselines, per setting."""
    rows: list[dict[str, Any]] = []
    for n, s in settings:
        for share in config.shares:
            base = {
                "data": config.data,
                "n": n,
                "items_per_user": s,
                "domain_size": source.domain_size,
                "shares": share,
            }
            counts = level_counts[share][n]
            confs = [*ours_by_setting[(n, s)], *dummy_by_setting[(n, s)].get(share, [])]
            for conf in confs:
                key = (n, s, share, OURS, conf.variant, conf.accounting, conf.blanket_rate)
                mean, se, reps, messages = tally.stats(key)
                bound = (
                    error_bound(
                        conf.blanket_rate,
                        conf.lambdas,
                        counts,
                        items=s,
                        variant="paper" if conf.variant == "paper" else "dummy",
                    )
                    if max(conf.lambdas) > 0
                    else math.inf
                )
                rows.append(
                    {
                        **base,
                        "mechanism": OURS,
                        "variant": conf.variant,
                        "accounting": conf.accounting,
                        "blanket_rate": conf.blanket_rate,
                        "lambdas": ";".join(f"{x:.6g}" for x in conf.lambdas),
                        "messages_per_user": messages,
                        "mse_mean": mean,
                        "mse_se": se,
                        "repetitions": reps,
                        "expected_error": bound,
                        "certified": conf.certified,
                        "certified_delta_ratio": ""
                        if conf.delta_ratio is None
                        else conf.delta_ratio,
                    }
                )
            mechs = {**baselines[(n, s)]["*"], **baselines[(n, s)][share]}
            for name in BASELINES:
                mech = mechs[name]
                base_key = (n, s, "*" if name in baselines[(n, s)]["*"] else share, name)
                mean, se, reps, messages = tally.stats(base_key)
                reports = mech.privacy_reports()
                ratio = max(
                    (r.guarantee.delta / (0.01 / n) for r in reports if r.guarantee.delta > 0),
                    default=0.0,
                )
                rows.append(
                    {
                        **base,
                        "mechanism": name,
                        "variant": "",
                        "accounting": "own",
                        "blanket_rate": _baseline_rate(mech),
                        "lambdas": "",
                        "messages_per_user": messages,
                        "mse_mean": mean,
                        "mse_se": se,
                        "repetitions": reps,
                        "expected_error": mech.expected_error(),
                        "certified": True,
                        "certified_delta_ratio": ratio,
                    }
                )
    return rows
