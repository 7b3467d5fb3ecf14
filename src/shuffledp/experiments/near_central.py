"""Near-central histograms: every protocol's per-bin error against the central mechanisms.

The shuffle model's promise is central-model accuracy without a trusted
curator. This experiment measures how close each protocol of the package
comes, at the same (ε, δ) and replacement neighbours, on the same data:

* ``flip`` (Cheu & Zhilyaev, IEEE S&P 2022) and ``krr`` (k-RR with matrix
  inversion): one-sided noise, stuck at Gaussian-level error;
* ``correlated`` (signed messages with correlated noise, Ghazi, Kumar,
  Manurangsi & Pagh, ICML 2020, arXiv 2106.04247; Ghazi, Kumar, Manurangsi,
  Pagh & Sinha, ICML 2021, arXiv 2109.13158) and ``augmented`` (the shuffler
  adds two-sided geometric dummies, Murakami, Sei & Eriguchi, arXiv
  2504.07362): below that level;
* ``central_laplace`` (Laplace(2/ε) per bin), ``central_discrete_laplace``
  (DLap(ε/2)) and ``central_analytic_gaussian`` (Balle & Wang's analytic
  Gaussian at (ε, δ), ℓ₂ sensitivity √2): what a trusted curator reaches.

Each row measures the per-bin standard deviation of the estimate's error over
repetitions (the root mean square over bins and runs, for unbiased
estimators the per-bin standard deviation), on the message path where it is
affordable and on the count path (the same law) above; the analytic
standard deviation; its ratio to the central discrete Laplace's; the
messages per user; the certified δ; and the seconds of calibration and of one
message-path run. The data are a Zipf(1.1) histogram over d bins. One seed
feeds independent child streams: the data, each protocol's runs.

The grid and the row are :mod:`shuffledp.experiments.near_central_grid`'s
(re-exported here), which the figures
(:mod:`shuffledp.experiments.near_central_plots`, imported only when they are
asked for) share.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._files import make_output_dir, write_csv_atomically, write_json_atomically
from shuffledp._progress import progress
from shuffledp._rng import make_rng
from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.central import (
    HISTOGRAM_L2_SENSITIVITY,
    analytic_gaussian_sigma,
    discrete_laplace_histogram,
    discrete_laplace_std,
    gaussian_histogram,
    laplace_histogram,
    laplace_scale,
)
from shuffledp.data.synthetic import zipf_histogram
from shuffledp.experiments.near_central_grid import (
    CENTRAL,
    PROTOCOLS,
    NearCentralConfig,
    NearCentralRow,
)
from shuffledp.schemas import schema_id

__all__ = [
    "CENTRAL",
    "CONSISTENCY_Z",
    "PROTOCOLS",
    "NearCentralConfig",
    "NearCentralRow",
    "measure",
    "run_near_central",
    "verdicts",
    "zipf_histogram",
]

#: The targets the issue sets, checked by :func:`verdicts`.
CORRELATED_RATIO = 1.10
AUGMENTED_RATIO = 1.01
CORRELATED_MESSAGES = {100_000: 2.0, 1_000_000: 1.1}
#: A row's measured std agrees with its analytic one within this many standard errors
#: (two-sided normal tail 6.3e-5 per row: the 12 rows a full grid checks, below 1e-3).
CONSISTENCY_Z = 4.0


def _values(histogram: NDArray[np.int64]) -> NDArray[np.int64]:
    values: NDArray[np.int64] = np.repeat(np.arange(len(histogram), dtype=np.int64), histogram)
    return values


@dataclass(frozen=True)
class _Built:
    protocol: Any
    analytic_std: float
    certified_delta: float
    expected_messages: float
    seconds: float


def _build(name: str, n: int, d: int, epsilon: float, delta: float) -> _Built:
    """Calibrate one shuffle protocol, timed."""
    from shuffledp.protocols.augmented import AugmentedProtocol
    from shuffledp.protocols.correlated import CorrelatedProtocol
    from shuffledp.protocols.flip import FlipProtocol
    from shuffledp.protocols.krr import KRRProtocol

    start = time.perf_counter()
    if name == "flip":
        protocol: Any = FlipProtocol.calibrated(n=n, domain=d, epsilon=epsilon, delta=delta)
        seconds = time.perf_counter() - start
        cal = protocol.calibration
        return _Built(protocol, cal.stderr, cal.delta, cal.expected_messages_per_user, seconds)
    if name == "krr":
        protocol = KRRProtocol.calibrated(n=n, domain=d, epsilon=epsilon, delta=delta)
        seconds = time.perf_counter() - start
        cal = protocol.calibration
        return _Built(protocol, cal.stderr, cal.delta, 1.0, seconds)
    if name == "correlated":
        protocol = CorrelatedProtocol.calibrated(n=n, domain=d, epsilon=epsilon, delta=delta)
        seconds = time.perf_counter() - start
        cal = protocol.calibration
        return _Built(protocol, cal.per_bin_std, cal.delta, cal.expected_messages_per_user, seconds)
    if name == "augmented":
        protocol = AugmentedProtocol.calibrated(
            n=n, domain=d, epsilon=epsilon, delta=delta, beta=1.0, variant="sageo"
        )
        seconds = time.perf_counter() - start
        cal = protocol.calibration
        return _Built(protocol, cal.per_bin_std, cal.delta, 1.0, seconds)
    raise InvalidParameterError(f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}")


def _rms(errors: list[NDArray[np.float64]]) -> tuple[float, float]:
    """Root mean square of the errors and its standard error (delta method over runs)."""
    per_run = np.array([float(np.mean(e * e)) for e in errors])
    mean_square = float(per_run.mean())
    std = math.sqrt(mean_square)
    if len(per_run) < 2 or std == 0.0:
        return std, math.nan
    se_ms = float(per_run.std(ddof=1) / math.sqrt(len(per_run)))
    return std, se_ms / (2.0 * std)


def measure(
    name: str,
    histogram: NDArray[np.int64],
    *,
    epsilon: float,
    delta: float,
    repetitions: int,
    path: str,
    seed: np.random.SeedSequence,
    time_message_path: bool = True,
) -> NearCentralRow:
    """Measure one protocol or central mechanism on ``histogram`` (module docstring).

    Args:
        name: One of :data:`PROTOCOLS`.
        histogram: The true counts (n = their sum, d = their length).
        epsilon: ε.
        delta: δ.
        repetitions: Runs to measure the error over.
        path: ``message`` or ``count`` for the shuffle protocols.
        seed: This row's stream (its children feed the runs).
        time_message_path: Also time one message-path run when ``path`` is count.
    """
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    repetitions = check_int(repetitions, "repetitions", minimum=2)
    n, d = int(histogram.sum()), len(histogram)
    truth = histogram.astype(np.float64)
    dlap = discrete_laplace_std(epsilon)
    streams = seed.spawn(repetitions + 1)
    errors: list[NDArray[np.float64]] = []
    if name in CENTRAL:
        start = time.perf_counter()
        release: Callable[[np.random.SeedSequence], Any]
        if name == "central_laplace":
            scale = laplace_scale(epsilon)
            analytic, certified = scale * math.sqrt(2.0), 0.0

            def release(s: np.random.SeedSequence) -> Any:
                return laplace_histogram(histogram, scale, make_rng(int(s.generate_state(1)[0])))
        elif name == "central_discrete_laplace":
            analytic, certified = dlap, 0.0

            def release(s: np.random.SeedSequence) -> Any:
                return discrete_laplace_histogram(
                    histogram, epsilon, make_rng(int(s.generate_state(1)[0]))
                )
        else:
            sigma = analytic_gaussian_sigma(epsilon, delta, HISTOGRAM_L2_SENSITIVITY)
            analytic, certified = sigma, delta

            def release(s: np.random.SeedSequence) -> Any:
                return gaussian_histogram(histogram, sigma, make_rng(int(s.generate_state(1)[0])))

        seconds = time.perf_counter() - start
        for s in streams[:repetitions]:
            errors.append(np.asarray(release(s).counts, dtype=np.float64) - truth)
        std, se = _rms(errors)
        return NearCentralRow(
            name,
            n,
            epsilon,
            std,
            se,
            analytic,
            analytic / dlap,
            std / dlap,
            0.0,
            certified,
            seconds,
            None,
            "central",
            repetitions,
        )
    if path not in ("message", "count"):
        raise InvalidParameterError(f"path must be 'message' or 'count', got {path!r}")
    built = _build(name, n, d, epsilon, delta)
    values = _values(histogram)
    messages: list[int] = []
    message_seconds: float | None = None
    for s in streams[:repetitions]:
        start = time.perf_counter()
        run = built.protocol.run(values, path=path, seed=int(s.generate_state(1)[0]))
        if path == "message":
            message_seconds = time.perf_counter() - start
            messages.append(run.messages)
        errors.append(np.asarray(run.estimate.counts, dtype=np.float64) - truth)
    if path == "count" and time_message_path:
        start = time.perf_counter()
        run = built.protocol.run(values, path="message", seed=int(streams[-1].generate_state(1)[0]))
        message_seconds = time.perf_counter() - start
        messages.append(run.messages)
    std, se = _rms(errors)
    per_user = float(np.mean(messages)) / n if messages else built.expected_messages
    if name == "augmented":
        # The users' own messages: the shuffler's dummies are not sent by users.
        per_user = len(built.protocol.client.randomize(values).payload) / n
    return NearCentralRow(
        name,
        n,
        epsilon,
        std,
        se,
        built.analytic_std,
        built.analytic_std / dlap,
        std / dlap,
        per_user,
        built.certified_delta,
        built.seconds,
        message_seconds,
        path,
        repetitions,
    )


def _jobs(config: NearCentralConfig) -> list[tuple[str, int, float]]:
    jobs = [(name, n, config.epsilon) for n in config.sizes for name in config.protocols]
    jobs += [
        (name, config.sweep_n, eps)
        for eps in config.epsilons
        if not (eps == config.epsilon and config.sweep_n in config.sizes)
        for name in config.protocols
    ]
    return jobs


def run_rows(
    config: NearCentralConfig,
    *,
    each: Callable[[list[tuple[str, int, float]]], Iterable[tuple[str, int, float]]] | None = None,
) -> list[NearCentralRow]:
    """Measure every (protocol, n, ε) of the grid (independent child streams per row)."""
    jobs = _jobs(config)
    roots = np.random.SeedSequence(check_int(config.seed, "seed", minimum=0)).spawn(len(jobs))
    rows = []
    seeds = dict(zip(jobs, roots, strict=True))
    for job in jobs if each is None else each(jobs):
        name, n, eps = job
        histogram = zipf_histogram(n, config.d)
        path = "message" if n <= config.message_path_up_to else "count"
        reps = config.repetitions if path == "message" else config.count_repetitions
        if name in CENTRAL:
            reps = config.count_repetitions
        rows.append(
            measure(
                name,
                histogram,
                epsilon=eps,
                delta=config.delta,
                repetitions=reps,
                path=path,
                seed=seeds[job],
                time_message_path=eps == config.epsilon,
            )
        )
    return rows


def verdicts(rows: list[NearCentralRow], config: NearCentralConfig) -> list[dict[str, Any]]:
    """The issue's targets, each checked on the rows that carry its evidence.

    A target with no row to judge it says ``untested``. Each claim on the error
    is judged on the analytic ratio, and the measured standard deviation must
    agree with the analytic one within :data:`CONSISTENCY_Z` standard errors
    (else the run contradicts the calibration and the claim is ``missed``).
    """
    out: list[dict[str, Any]] = []

    def add(
        claim: str, evidence: list[NearCentralRow], ok: Callable[[NearCentralRow], bool]
    ) -> None:
        if not evidence:
            out.append({"claim": claim, "verdict": "untested", "evidence": []})
            return
        passed = all(ok(row) for row in evidence)
        out.append(
            {
                "claim": claim,
                "verdict": "reached" if passed else "missed",
                "evidence": [
                    {
                        "n": row.n,
                        "epsilon": row.epsilon,
                        "ratio": row.ratio_to_central_dlap,
                        "measured_ratio": row.measured_ratio_to_central_dlap,
                        "messages_per_user": row.messages_per_user,
                        "certified_delta": row.certified_delta,
                    }
                    for row in evidence
                ],
            }
        )

    def at(name: str) -> list[NearCentralRow]:
        return [r for r in rows if r.protocol == name and r.epsilon == config.epsilon]

    def consistent(row: NearCentralRow) -> bool:
        se = row.per_bin_std_se if math.isfinite(row.per_bin_std_se) else 0.0
        return abs(row.per_bin_std - row.analytic_std) <= CONSISTENCY_Z * se + 1e-9

    add(
        f"correlated: per-bin std within {CORRELATED_RATIO:g} x the central DLap(eps/2)'s, "
        "certified delta at most the target",
        at("correlated"),
        lambda r: (
            r.ratio_to_central_dlap <= CORRELATED_RATIO
            and r.certified_delta <= config.delta
            and consistent(r)
        ),
    )

    def within(limit: float) -> Callable[[NearCentralRow], bool]:
        return lambda r: r.messages_per_user <= limit

    for size, limit in CORRELATED_MESSAGES.items():
        add(
            f"correlated: at most {limit:g} messages per user at n = {size:,}",
            [r for r in at("correlated") if r.n == size],
            within(limit),
        )
    add(
        f"augmented: per-bin std within {AUGMENTED_RATIO:g} x the central DLap's, one message "
        "per user",
        at("augmented"),
        lambda r: (
            r.ratio_to_central_dlap <= AUGMENTED_RATIO
            and r.messages_per_user == 1.0
            and consistent(r)
        ),
    )
    add(
        "correlated: message path at n = 1,000,000, d = 100 under 10 s",
        [r for r in at("correlated") if r.n == 1_000_000 and r.message_path_seconds is not None],
        lambda r: (r.message_path_seconds or math.inf) < 10.0,
    )
    add(
        "flip and krr stay at Gaussian-level error (ratio above 2)",
        at("flip") + at("krr"),
        lambda r: r.ratio_to_central_dlap > 2.0 and consistent(r),
    )
    return out


def run_near_central(
    config: NearCentralConfig,
    out_dir: Path,
    *,
    plots: bool = True,
) -> dict[str, Any]:
    """Run the grid, write ``near_central.csv``, ``near_central_summary.json`` and the plots.

    Returns:
        ``{"rows": [...], "verdicts": [...], "files": [...]}``.
    """
    rows = run_rows(config, each=lambda jobs: progress(jobs, desc="near-central rows", delay=1.0))
    found = verdicts(rows, config)
    make_output_dir(out_dir)  # only now: an interrupted run leaves no empty directory
    files: list[Path] = []
    table = out_dir / "near_central.csv"
    fields = list(NearCentralRow.__dataclass_fields__)

    write_csv_atomically(table, fields, (row.to_dict() for row in rows))
    files.append(table)
    summary = out_dir / "near_central_summary.json"
    document = {
        "schema": schema_id("experiment-near-central-summary"),
        "config": asdict(config),
        "rows": [row.to_dict() for row in rows],
        "verdicts": found,
    }
    write_json_atomically(summary, document)
    files.append(summary)
    if plots:
        from shuffledp.experiments.near_central_plots import plot_near_central

        files += plot_near_central(rows, config, out_dir)
    return {"rows": rows, "verdicts": found, "files": files}
