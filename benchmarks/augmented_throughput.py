"""Augmented-shuffle throughput; prints one JSON object.

Message-level: n = 1e6 users, d = 100, ε = 1, δ = 1e-6, SAGeo at β = 1 (the
exact ν), Zipf data: the clients' messages, the shuffler's sampling and
dummies, the cryptographically secure shuffle, the analyzer. Count-level:
n = 1e8 users, the per-bin counts Bin(h_j, β) + z_j drawn directly.

Usage: python benchmarks/augmented_throughput.py [--repeats R] [--beta B]
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np

from _timing import message_path_stages, timed
from shuffledp.data.synthetic import zipf_histogram, zipf_values
from shuffledp.protocols.augmented import AugmentedProtocol


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beta", type=float, default=1.0)
    args = parser.parse_args()

    n, d, eps, delta = 1_000_000, 100, 1.0, 1e-6
    protocol, calibration_s = timed(
        lambda: AugmentedProtocol.calibrated(n, d, eps, delta, beta=args.beta)
    )
    values = zipf_values(n, d, seed=1)
    stages, messages = message_path_stages(protocol, values, args.repeats)
    _, run_s = timed(lambda: protocol.run(values))

    big_n = 100_000_000
    big = AugmentedProtocol.calibrated(big_n, d, eps, delta, beta=args.beta)
    histogram = zipf_histogram(big_n, d)
    count_times = [
        timed(lambda: big.estimate(big.sample_statistic(histogram)))[1] for _ in range(args.repeats)
    ]
    best = {key: min(v) for key, v in stages.items()}
    cal = protocol.calibration
    print(
        json.dumps(
            {
                "n": n,
                "domain_size": d,
                "epsilon": eps,
                "delta": delta,
                "beta": cal.beta,
                "nu": cal.nu,
                "certified_delta": cal.delta,
                "per_bin_std": cal.per_bin_std,
                "std_ratio_to_dlap": cal.std_ratio,
                "client_messages_per_user": 1,
                "messages_after_shuffler_per_user": messages / n,
                "message_level_seconds": best["total"],
                "randomize_and_augment_seconds": best["randomize"],
                "secure_shuffle_seconds": best["shuffle"],
                "analyze_seconds": best["analyze"],
                "protocol_run_seconds": run_s,
                "calibration_seconds": calibration_s,
                "count_level_seconds_1e8": min(count_times),
                "python": platform.python_version(),
                "numpy": np.__version__,
                "machine": platform.machine(),
                "repeats": args.repeats,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
