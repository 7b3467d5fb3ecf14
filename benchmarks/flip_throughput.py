"""FLIP throughput and memory; prints one JSON object.

Message-level: n = 1e6 users, d = 100, ε = 1, δ = 1e-6, exact calibration,
Zipf data, real randomizer, cryptographically secure shuffle, analyzer.
Count-level: n = 1e8 users, the per-bin counts drawn from their exact law.

Usage: python benchmarks/flip_throughput.py [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tracemalloc

import numpy as np

from _timing import message_path_stages, timed
from shuffledp._progress import progress
from shuffledp.data.synthetic import zipf_histogram, zipf_values
from shuffledp.protocols.flip import FlipProtocol


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    n, d, eps, delta = 1_000_000, 100, 1.0, 1e-6
    protocol, calibration_s = timed(lambda: FlipProtocol.calibrated(n, d, eps, delta))
    values = zipf_values(n, d, seed=1)

    stages, messages = message_path_stages(protocol, values, args.repeats)

    tracemalloc.start()
    protocol.run(values)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    big_n = 100_000_000
    big, big_calibration_s = timed(lambda: FlipProtocol.calibrated(big_n, d, eps, delta))
    histogram = zipf_histogram(big_n, d)
    count_times = []
    for _ in progress(range(args.repeats), desc="count-level runs"):
        _, t = timed(lambda: big.estimate(big.sample_statistic(histogram)))
        count_times.append(t)

    best = {key: min(v) for key, v in stages.items()}
    result = {
        "n": n,
        "domain_size": d,
        "epsilon": eps,
        "delta": delta,
        "q": protocol.calibration.q,
        "fake_users": protocol.calibration.fake_users,
        "messages_per_user": messages / n,
        "message_level_users_per_s": n / best["total"],
        "message_level_seconds": best["total"],
        "randomize_seconds": best["randomize"],
        "secure_shuffle_seconds": best["shuffle"],
        "analyze_seconds": best["analyze"],
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
