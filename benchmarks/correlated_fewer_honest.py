"""The correlated protocol's ε when fewer honest users' noise is present; prints one JSON object.

``epsilon_with_fewer_honest`` (replacement) bisects ε on ``generic_bin_delta``, the
two-dimensional sum over one bin's view, about 20 evaluations per search. The noise is
the one ``calibrate_correlated`` chooses at d = 100, ε = 1, δ = 1e-6 (α = 0.7788,
r = 15.76, q = 0.96 per bin at all users); the searches run at δ = 1e-3, 1e-6, 1e-9
with half the noise, and at δ = 1e-6 with 90% and all of it. Reported: the CPU seconds
of each search (``time.process_time``, one process, after a warm-up on another noise)
and its ε, so two revisions can be compared value by
value. Usage: python benchmarks/correlated_fewer_honest.py
"""

from __future__ import annotations

import json
import time

from shuffledp.accounting.certificates.correlated import (
    CorrelatedNoise,
    epsilon_with_fewer_honest,
    generic_bin_delta,
)

NOISE = CorrelatedNoise(0.7788, 15.76, 0.96)
SETTINGS = ((1e-3, 0.5), (1e-6, 0.5), (1e-9, 0.5), (1e-6, 0.9), (1e-6, 1.0))


def main() -> None:
    # Warm-up (imports, first numpy calls) on another noise, so no search finds its own
    # laws already built.
    generic_bin_delta(1.0, alpha=0.5, shape=1.0, flood_r=2.0, flood_q=0.5)
    rows = []
    for delta, fraction in SETTINGS:
        start = time.process_time()
        epsilon = epsilon_with_fewer_honest(delta, NOISE, fraction)
        rows.append(
            {
                "delta": delta,
                "fraction": fraction,
                "epsilon": epsilon,
                "cpu_seconds": round(time.process_time() - start, 4),
            }
        )
    print(
        json.dumps(
            {
                "benchmark": "correlated epsilon_with_fewer_honest (replacement)",
                "noise": {"alpha": NOISE.alpha, "flood_r": NOISE.flood_r, "flood_q": NOISE.flood_q},
                "searches": rows,
                "total_cpu_seconds": round(sum(r["cpu_seconds"] for r in rows), 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
