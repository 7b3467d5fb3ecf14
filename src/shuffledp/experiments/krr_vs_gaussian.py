"""Shuffled k-RR against central mechanisms (k-RR paper, Sec. 5, Table 4, Figs 1–3).

Source: S. Biswas, K. Jung and C. Palamidessi, "Tight differential privacy guarantees
for the shuffle model with k-randomized response", FPS 2023, arXiv 2205.08858.

Users run k-RR at the paper's ε₀ (4 by default). For each data set, k, n and
target ε ≤ ε₀, the central analytic Gaussian mechanism (ℓ₂ sensitivity √2) is
calibrated to (ε, δ) with δ taken two ways:

* ``paper``: δ from the k-RR paper's printed formula (Def. 11). Individual
  utility at x₀ uses δ(x₀) for that x₀; community utility uses the largest
  δ(x) over the values (the paper's eq. 15).
* ``exact``: the certified worst-case δ of shuffled k-RR at (ε, ε₀, k, n)
  (:func:`shuffledp.accounting.certificates.krr.krr_delta`, resolved down to 1e-100):
  what the shuffle model really guarantees, and so the δ a fair central
  baseline may spend.

At ε = ε₀ (the paper's Table 4 point, ε = ε₀ = 4) both give δ = 0: k-RR is
ε₀-LDP, so the shuffled histogram is (ε₀, 0)-DP without any amplification, and
no Gaussian mechanism is (ε, 0)-DP. The central Laplace mechanism (pure ε-DP,
ℓ₁ sensitivity 2) is therefore reported too; it is the same under both δ
sources.

Mechanisms: ``gaussian``, ``laplace`` (noisy counts), ``shuffle`` (the raw
shuffled histogram) and ``shuffle+INV`` (matrix inversion). The shuffled
histogram is drawn on the count-level path (same law as the message-level
one). Metrics: individual-specific utility |n·π̂_{x₀} − n·π_{x₀}| and community
utility, the total variation distance ½·Σ|π̂ − π| (the paper's App. B).

The synthetic data are n draws from N(0, 2) (variance 2), cut into k equal
bins over ±3 standard deviations, with values beyond in the end bins.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._files import make_output_dir, write_csv_atomically
from shuffledp._progress import progress
from shuffledp._rng import SeedLike, child_seeds, make_rng
from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.accounting.certificates.krr import krr_delta
from shuffledp.accounting.reproductions.biswas import biswas2023_delta
from shuffledp.analyzers.krr_estimators import estimate_krr
from shuffledp.central import HISTOGRAM_L2_SENSITIVITY, analytic_gaussian_sigma, laplace_scale
from shuffledp.randomizers.krr import KRRRandomizer

__all__ = [
    "DataSet",
    "ExperimentConfig",
    "discretized_normal",
    "experiment_streams",
    "run_krr_vs_gaussian",
]

MECHANISMS = ("gaussian", "laplace", "shuffle", "shuffle+INV")
#: The exact accountant resolves δ down to this (its window tail).
EXACT_TAIL = 1e-100
DELTA_SOURCES = ("paper", "exact")
FIELDS = (
    "data",
    "delta_source",
    "k",
    "n",
    "epsilon",
    "epsilon0",
    "x0",
    "delta",
    "gaussian_sigma",
    "mechanism",
    "repetition",
    "metric",
    "value",
)


@dataclass(frozen=True)
class DataSet:
    """A categorical data set: its name, histogram and value labels."""

    name: str
    histogram: NDArray[np.int64]
    domain: list[str]

    @property
    def n(self) -> int:
        """Number of users."""
        return int(self.histogram.sum())

    @property
    def k(self) -> int:
        """Number of values."""
        return len(self.histogram)


def experiment_streams(seed: int) -> tuple[np.random.Generator, ...]:
    """The experiment's three independent streams from its one seed.

    ``SeedSequence(seed).spawn(3)``: the mechanisms' draws, the synthetic data
    sets (spawned again, one child each) and the samples of real data (the
    command line spawns one child per sample size). No two consumers share a
    stream.
    """
    streams = child_seeds(check_int(seed, "seed", minimum=0), 3)
    return tuple(stream for stream in streams if stream is not None)


def discretized_normal(n: int, k: int, seed: SeedLike = None) -> DataSet:
    """Return n draws from N(0, 2) in k equal bins over ±3 standard deviations."""
    n = check_int(n, "n", minimum=2)
    k = check_int(k, "k", minimum=2)
    sd = math.sqrt(2.0)
    draws = make_rng(seed).normal(0.0, sd, size=n)
    edges = np.linspace(-3 * sd, 3 * sd, k + 1)
    bins = np.clip(np.searchsorted(edges, draws, side="right") - 1, 0, k - 1)
    hist = np.bincount(bins, minlength=k).astype(np.int64)
    return DataSet(f"normal(k={k},n={n})", hist, [f"b{j}" for j in range(k)])


@dataclass(frozen=True)
class ExperimentConfig:
    """What to run.

    Attributes:
        ks: Domain sizes for the synthetic data.
        ns: Numbers of users for the synthetic data.
        epsilon0: The users' local ε₀ (4 in the paper's Table 4 and Fig. 3).
        epsilons: Target ε values, at most ε₀ (ε = ε₀ is the paper's Table 4).
        repetitions: Runs per setting.
        x0s: Values whose individual-specific utility is reported (taken mod k).
        seed: Seed for data and mechanisms.
    """

    ks: tuple[int, ...] = (5, 10, 15)
    ns: tuple[int, ...] = (1_000, 100_000)
    epsilon0: float = 4.0
    epsilons: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 3.0, 4.0)
    repetitions: int = 10
    x0s: tuple[int, ...] = (1, 3, 5, 7)
    seed: int = 2023
    extra_data: tuple[DataSet, ...] = field(default_factory=tuple)

    @classmethod
    def quick(cls, seed: int = 2023) -> ExperimentConfig:
        """A reduced grid that runs in seconds."""
        return cls(ks=(5, 10), ns=(1_000,), epsilons=(0.5, 2.0, 4.0), repetitions=10, seed=seed)


def _paper_delta(eps: float, eps0: float, k: int, n: int, hist: NDArray[np.int64], x: int) -> float:
    """δ of the printed formula when the victim holds x (n_x0 = other holders of x)."""
    others = int(hist[x]) - 1
    if others < 0:
        return 0.0
    return biswas2023_delta(eps, eps0, k, n, others)


def _gaussian_sigma(eps: float, delta: float) -> float:
    if not delta > 0:
        return math.inf  # no Gaussian mechanism is (ε, 0)-DP
    return analytic_gaussian_sigma(eps, delta, HISTOGRAM_L2_SENSITIVITY)


def _rows_for(
    data: DataSet, eps: float, config: ExperimentConfig, rng: np.random.Generator
) -> Iterator[dict[str, Any]]:
    k, n, hist = data.k, data.n, data.histogram
    eps0 = config.epsilon0
    pi = hist / n
    randomizer = KRRRandomizer(k, eps0)
    x0s = sorted({x % k for x in config.x0s})
    # One set of shuffle runs per setting, shared by both δ sources (ε₀ = ε either way).
    shuffled = [randomizer.sample_counts(hist, rng) for _ in range(config.repetitions)]
    raw = [c / n for c in shuffled]
    inverted = [
        estimate_krr(c, randomizer.keep_probability, randomizer.other_probability).counts / n
        for c in shuffled
    ]
    noise = [rng.standard_normal(k) for _ in range(config.repetitions)]
    laplace = [rng.laplace(0.0, laplace_scale(eps), size=k) for _ in range(config.repetitions)]
    paper_each = {x: _paper_delta(eps, eps0, k, n, hist, x) for x in range(k)}
    deltas = {
        "paper": (max(paper_each.values()), paper_each),
        "exact": (krr_delta(eps, eps0, k, n, tail=EXACT_TAIL), None),
    }
    base = {"data": data.name, "k": k, "n": n, "epsilon": eps, "epsilon0": eps0}
    for source, (community_delta, per_x) in deltas.items():
        sigma = _gaussian_sigma(eps, community_delta)
        for rep in range(config.repetitions):
            estimates = {
                "gaussian": (hist + sigma * noise[rep]) / n if math.isfinite(sigma) else None,
                "laplace": (hist + laplace[rep]) / n,
                "shuffle": raw[rep],
                "shuffle+INV": inverted[rep],
            }
            for mech, est in estimates.items():
                value = math.nan if est is None else 0.5 * float(np.abs(est - pi).sum())
                yield {
                    **base,
                    "delta_source": source,
                    "x0": "",
                    "delta": community_delta,
                    "gaussian_sigma": sigma,
                    "mechanism": mech,
                    "repetition": rep,
                    "metric": "tv",
                    "value": value,
                }
        for x in x0s:
            delta_x = per_x[x] if per_x is not None else community_delta
            sigma_x = _gaussian_sigma(eps, delta_x)
            for rep in range(config.repetitions):
                errors = {
                    "gaussian": abs(sigma_x * noise[rep][x])
                    if math.isfinite(sigma_x)
                    else math.nan,
                    "laplace": abs(laplace[rep][x]),
                    "shuffle": abs(n * raw[rep][x] - hist[x]),
                    "shuffle+INV": abs(n * inverted[rep][x] - hist[x]),
                }
                for mech, err in errors.items():
                    yield {
                        **base,
                        "delta_source": source,
                        "x0": x,
                        "delta": delta_x,
                        "gaussian_sigma": sigma_x,
                        "mechanism": mech,
                        "repetition": rep,
                        "metric": "individual",
                        "value": float(err),
                    }


def run_krr_vs_gaussian(
    config: ExperimentConfig, output_dir: str | Path, *, plots: bool = True
) -> dict[str, Any]:
    """Run the comparison; write ``krr_vs_gaussian.csv`` and PNG figures into ``output_dir``.

    Returns:
        Paths written and a summary (median TV per data set, ε, δ source and mechanism).
    """
    if config.repetitions < 1:
        raise InvalidParameterError(f"repetitions must be >= 1, got {config.repetitions}")
    if any(e > config.epsilon0 for e in config.epsilons):
        raise InvalidParameterError(
            f"every epsilon must be at most epsilon0={config.epsilon0:g}: "
            "beyond it the shuffled k-RR is (epsilon0, 0)-DP already"
        )
    out = Path(output_dir)
    rng, synthetic, _ = experiment_streams(config.seed)
    shapes = [(n, k) for k in config.ks for n in config.ns]
    datasets = [
        discretized_normal(n, k, seed=child)
        for (n, k), child in zip(shapes, synthetic.spawn(len(shapes)), strict=True)
    ]
    datasets += list(config.extra_data)
    jobs = [(d, e) for d in datasets for e in config.epsilons]
    rows: list[dict[str, Any]] = []
    for data, eps in progress(jobs, desc="krr vs gaussian"):
        rows.extend(_rows_for(data, eps, config, rng))
    make_output_dir(out)  # only now: an interrupted run leaves no empty directory
    csv_path = out / "krr_vs_gaussian.csv"

    write_csv_atomically(csv_path, FIELDS, rows)
    summary = summarize(rows)
    written = [csv_path]
    if plots:
        from shuffledp.experiments.krr_plots import plot_krr_vs_gaussian

        written += plot_krr_vs_gaussian(rows, out)
    return {"files": [str(p) for p in written], "summary": summary}


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median TV distance and δ per (data, ε, δ source, mechanism)."""
    groups: dict[tuple[Any, ...], list[float]] = {}
    deltas: dict[tuple[Any, ...], tuple[float, float]] = {}
    for r in rows:
        if r["metric"] != "tv":
            continue
        key = (r["data"], r["epsilon"], r["delta_source"], r["mechanism"])
        groups.setdefault(key, []).append(r["value"])
        deltas[key] = (r["delta"], r["gaussian_sigma"])
    return [
        {
            "data": key[0],
            "epsilon": key[1],
            "delta_source": key[2],
            "mechanism": key[3],
            "delta": deltas[key][0],
            "gaussian_sigma": deltas[key][1],
            "median_tv": float(np.nanmedian(values)) if not np.all(np.isnan(values)) else math.nan,
        }
        for key, values in groups.items()
    ]
