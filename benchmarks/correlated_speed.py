"""Correlated protocol: calibration time, figures and message-path speed; prints one JSON object.

Setting of issue 18: d = 100, ε = 1, δ = 1e-6, replacement neighbours, slack
0.10. For n = 1e4, 1e5 and 1e6: the calibration's wall time (cold and from
the cache; the first call in a process also pays scipy's import), a, r, q, E[W] per
bin, the certified δ, the per-bin std and its ratio to the central DLap(ε/2),
and the expected messages per user. Then the message path at n = 1e6 (Zipf
data, OS entropy, the cryptographically secure shuffle): randomize, shuffle,
analyze, and a whole ``protocol.run``; and the count path at n = 1e9. Finally
the papers' rule at the same target (a reproduction, with our exact δ and ε).

Usage: python benchmarks/correlated_speed.py [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import platform
from typing import Any

from _timing import message_path_stages, timed
from shuffledp.accounting.reproductions.correlated_paper import paper_correlated_noise
from shuffledp.data.synthetic import zipf_histogram, zipf_values
from shuffledp.protocols.correlated import (
    CorrelatedProtocol,
    _cheapest_noise,
    calibrate_correlated,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    d, eps, delta = 100, 1.0, 1e-6

    calibrations: list[dict[str, Any]] = []
    protocol = None
    # The first call also pays scipy's import; later calls are timed with the cache
    # emptied ("calibration_seconds") and again from the cache.
    _, first_s = timed(lambda: calibrate_correlated(10_000, d, eps, delta))
    for n in (10_000, 100_000, 1_000_000):
        _cheapest_noise.cache_clear()
        calibration, seconds = timed(lambda n=n: calibrate_correlated(n, d, eps, delta))
        _, cached_s = timed(lambda n=n: calibrate_correlated(n, d, eps, delta))
        calibrations.append(
            {
                "n": n,
                "calibration_seconds": round(seconds, 3),
                "cached_calibration_seconds": round(cached_s, 4),
                "a": calibration.a,
                "r": calibration.flood_r,
                "q": calibration.flood_q,
                "flood_mean": calibration.flood_mean,
                "delta": calibration.delta,
                "per_bin_std": calibration.per_bin_std,
                "central_std": calibration.central_std,
                "std_ratio": calibration.std_ratio,
                "messages_per_user": calibration.expected_messages_per_user,
            }
        )
        protocol = CorrelatedProtocol(calibration)
    assert protocol is not None
    n = protocol.n
    values = zipf_values(n, d, seed=1)
    stages, messages = message_path_stages(protocol, values, args.repeats)
    _, run_s = timed(lambda: protocol.run(values))

    big_n = 1_000_000_000
    big = CorrelatedProtocol(calibrate_correlated(big_n, d, eps, delta))
    histogram = zipf_histogram(big_n, d)
    _, count_only_s = timed(lambda: big.sample_statistic(histogram))

    rule, paper_s = timed(lambda: paper_correlated_noise(eps, delta))
    result = {
        "benchmark": "correlated_speed",
        "setting": {"d": d, "epsilon": eps, "delta": delta, "neighbours": "replacement"},
        "python": platform.python_version(),
        "first_calibration_seconds_with_imports": round(first_s, 3),
        "calibrations": calibrations,
        "message_path": {
            "n": n,
            "messages": messages,
            "messages_per_user": messages / n,
            "seconds_min": {key: round(min(v), 3) for key, v in stages.items()},
            "protocol_run_seconds": round(run_s, 3),
        },
        "count_path": {"n": big_n, "sample_statistic_seconds": round(count_only_s, 5)},
        "papers_rule": {
            "a": rule.noise.a,
            "r": rule.noise.flood_r,
            "q": rule.noise.flood_q,
            "flood_mean": rule.noise.flood_mean,
            "delta_at_epsilon": rule.delta_at_epsilon,
            "exact_epsilon": rule.exact_epsilon,
            "messages_per_user": {
                str(m): 1 + d * rule.noise.messages_per_bin / m
                for m in (10_000, 100_000, 1_000_000)
            },
            "seconds": round(paper_s, 3),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
