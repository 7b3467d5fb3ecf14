"""Near-central histograms: per-bin error, messages and timings of every protocol (JSON).

At d = 100, ε = 1, δ = 1e-6 and replacement neighbours, for n = 1e4, 1e5 and
1e6, one row per (protocol, n) for flip, krr, correlated, augmented and the
central Laplace, discrete Laplace and analytic Gaussian mechanisms. The
per-bin standard deviation is measured over repetitions on the message path
at n = 1e4 and 1e5 and on the count path (the same law) at 1e6, where one
message-path run is still timed. Prints one JSON object
``{"setting": ..., "results": [rows], "verdicts": [...]}``; the rows are
:class:`shuffledp.experiments.near_central.NearCentralRow`.

Usage: python benchmarks/near_central.py [--sizes 1e4,1e5,1e6] [--repetitions 20]
"""

from __future__ import annotations

import argparse
import json

from shuffledp._progress import progress
from shuffledp.experiments.near_central import NearCentralConfig, run_rows, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1e4,1e5,1e6")
    parser.add_argument("--repetitions", type=int, default=20)
    parser.add_argument("--count-repetitions", type=int, default=60)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    sizes = tuple(int(float(x)) for x in args.sizes.split(","))
    config = NearCentralConfig(
        sizes=sizes,
        epsilons=(NearCentralConfig.epsilon,),  # no sweep over epsilon
        sweep_n=sizes[0],
        message_path_up_to=100_000,
        repetitions=args.repetitions,
        count_repetitions=args.count_repetitions,
        seed=args.seed,
    )
    rows = run_rows(config, each=lambda jobs: progress(jobs, desc="rows", delay=1.0))
    document = {
        "setting": {
            "d": config.d,
            "epsilon": config.epsilon,
            "delta": config.delta,
            "neighbours": "replacement",
        },
        "results": [row.to_dict() for row in rows],
        "verdicts": verdicts(rows, config),
    }
    print(json.dumps(document, indent=2))


if __name__ == "__main__":
    main()
