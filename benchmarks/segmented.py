"""Segmented protocol (Wang et al., arXiv 2407.19639): calibration time and run throughput.

Prints one JSON object:

* ``calibration``: seconds of :func:`optimize_parameters` (K = 3 levels
  0.5, 1, 2 with the S1 shares 25/50/25 %, d = 128, s = 4, δ = 0.01/n, the
  default 20-point grid of blanket rates, with the paper's λ for reports) at
  n = 50,000 and n = 1e6, with the m and λ it chose;
* ``count_run``: one count-level run at n = 1e7 (target < 5 s);
* ``message_run``: one message-level run (real messages, CSPRNG shuffle) at
  n = 1e6, s = 4 (target < 10 s), with its peak traced memory (tracemalloc,
  which sees numpy's buffers) and the process's peak resident set size.

The runs use parameters calibrated at a fixed m = 0.5 (the run's cost does not
depend on how m was chosen); every user holds 4 distinct items of 128.

Usage: python benchmarks/segmented.py [--quick]   (--quick: n/10 everywhere, for a smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import tracemalloc
from typing import Any

import numpy as np

from shuffledp.accounting.segmented_parameters import DEFAULT_BLANKET_GRID, optimize_parameters
from shuffledp.protocols.segmented import SegmentedProtocol, largest_remainder

LEVELS = (0.5, 1.0, 2.0)
SHARES = (0.25, 0.5, 0.25)
D, S = 128, 4


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    first = rng.integers(0, D, size=n)
    items = ((first[:, None] + 7 * np.arange(S)[None, :]) % D).astype(np.int16)
    levels = np.repeat(np.arange(3, dtype=np.int8), largest_remainder(SHARES, n))
    return items, levels


def _calibration(n: int) -> dict[str, Any]:
    counts = largest_remainder(SHARES, n)
    start = time.perf_counter()
    params = optimize_parameters(LEVELS, counts, 0.01 / n, domain_size=D, items_per_user=S)
    seconds = time.perf_counter() - start
    return {
        "n": n,
        "seconds": seconds,
        "grid_points": len(DEFAULT_BLANKET_GRID),
        "workers": os.cpu_count(),
        "blanket_rate": params.blanket_rate,
        "lambda": list(params.report_probabilities),
        "error_bound": params.error_bound,
    }


def _protocol(n: int) -> SegmentedProtocol:
    counts = largest_remainder(SHARES, n)
    params = optimize_parameters(
        LEVELS, counts, 0.01 / n, domain_size=D, items_per_user=S, blanket_rate=0.5, workers=1
    )
    return SegmentedProtocol(params)


def _run(n: int, path: str) -> dict[str, Any]:
    protocol = _protocol(n)
    items, levels = _data(n)
    tracemalloc.start()
    start = time.perf_counter()
    run = protocol.run(items, levels, path=path)  # type: ignore[arg-type]
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "n": n,
        "items_per_user": S,
        "seconds": seconds,
        "messages": run.messages,
        "messages_per_user": run.messages_per_user,
        "peak_traced_mb": peak / 2**20,
        "input_mb": (items.nbytes + levels.nbytes) / 2**20,
        "lambda": list(protocol.parameters.report_probabilities),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n/10 everywhere (smoke test)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    out = {
        "calibration": [_calibration(50_000 // scale), _calibration(1_000_000 // scale)],
        "count_run": _run(10_000_000 // scale, "count"),
        "message_run": _run(1_000_000 // scale, "message"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
