"""FLIP throughput and memory; prints one JSON object.

Message-level: d = 100, ε = 1, δ = 1e-6, exact calibration, Zipf data, real
randomizer, cryptographically secure shuffle, analyzer, at each ``--sizes`` n
(default 1e6, 3e6, 1e7, 3e7). For each n, ``message_level_by_n`` gives the
median CPU seconds (``time.process_time``) of each stage over ``--repeats``
runs, users per CPU second and the share of the time spent in the shuffle:
the figures to compare across changes (CPU time moves less than wall time
with the machine's load). The top-level fields are the historical ones at
n = 1e6 (best wall time of the runs), kept for the README's table.
Count-level: n = 1e8 users, the per-bin counts drawn from their exact law.

Usage: python benchmarks/flip_throughput.py [--repeats R] [--sizes N [N ...]]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from _timing import message_path_stages, timed
from shuffledp._progress import progress
from shuffledp.data.synthetic import zipf_histogram, zipf_values
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.shuffler.uniform import UniformShuffler

T = TypeVar("T")

D, EPSILON, DELTA = 100, 1.0, 1e-6
SIZES = (1_000_000, 3_000_000, 10_000_000, 30_000_000)


def cpu_timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Call ``fn`` and return its result and the CPU seconds of this process it took."""
    start = time.process_time()
    out = fn()
    return out, time.process_time() - start


def cpu_stages(n: int, repeats: int) -> dict[str, float | int]:
    """Median CPU seconds of FLIP's message path at ``n`` users, stage by stage."""
    protocol = FlipProtocol.calibrated(n, D, EPSILON, DELTA)
    values = zipf_values(n, D, seed=1)
    stages: dict[str, list[float]] = {"randomize": [], "shuffle": [], "analyze": []}

    def once() -> tuple[int, float, float, float]:
        """One run: the message count and each stage's CPU seconds (its arrays freed after)."""
        batch, t_r = cpu_timed(lambda: protocol.randomize(values))
        shuffled, t_s = cpu_timed(lambda: UniformShuffler().shuffle(batch))
        _, t_a = cpu_timed(lambda: protocol.estimate(protocol.statistic_from_messages(shuffled)))
        return len(batch), t_r, t_s, t_a

    messages = 0
    for _ in progress(range(repeats), desc=f"message path, n = {n:.0e}"):
        gc.collect()
        messages, *times = once()
        for key, value in zip(stages, times, strict=True):
            stages[key].append(value)
    totals = [sum(run) for run in zip(*stages.values(), strict=True)]
    median = {key: statistics.median(v) for key, v in stages.items()}
    total = statistics.median(totals)
    return {
        "n": n,
        "messages": messages,
        "randomize_cpu_seconds": round(median["randomize"], 4),
        "shuffle_cpu_seconds": round(median["shuffle"], 4),
        "analyze_cpu_seconds": round(median["analyze"], 4),
        "total_cpu_seconds": round(total, 4),
        "total_cpu_seconds_runs": [round(t, 4) for t in totals],
        "users_per_cpu_second": round(n / total),
        "shuffle_share": round(median["shuffle"] / total, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="users per message-level run"
    )
    args = parser.parse_args()

    n = 1_000_000
    protocol, calibration_s = timed(lambda: FlipProtocol.calibrated(n, D, EPSILON, DELTA))
    values = zipf_values(n, D, seed=1)

    stages, messages = message_path_stages(protocol, values, args.repeats)

    tracemalloc.start()
    protocol.run(values)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    by_n = [cpu_stages(size, args.repeats) for size in args.sizes]

    big_n = 100_000_000
    big, big_calibration_s = timed(lambda: FlipProtocol.calibrated(big_n, D, EPSILON, DELTA))
    histogram = zipf_histogram(big_n, D)
    count_times = []
    for _ in progress(range(args.repeats), desc="count-level runs"):
        _, t = timed(lambda: big.estimate(big.sample_statistic(histogram)))
        count_times.append(t)

    best = {key: min(v) for key, v in stages.items()}
    result = {
        "n": n,
        "domain_size": D,
        "epsilon": EPSILON,
        "delta": DELTA,
        "q": protocol.calibration.q,
        "fake_users": protocol.calibration.fake_users,
        "messages_per_user": messages / n,
        "message_level_users_per_s": n / best["total"],
        "message_level_seconds": best["total"],
        "randomize_seconds": best["randomize"],
        "secure_shuffle_seconds": best["shuffle"],
        "analyze_seconds": best["analyze"],
        "message_level_by_n": by_n,
        "peak_memory_mb": peak / 2**20,
        "process_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "calibration_seconds_1e6": calibration_s,
        "calibration_seconds_1e8": big_calibration_s,
        "count_level_seconds_1e8": min(count_times),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "repeats": args.repeats,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
