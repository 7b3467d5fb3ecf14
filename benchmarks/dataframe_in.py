"""DataFrames in: the time to encode a pandas column, as ``run`` and ``load_values`` do.

Builds a DataFrame of ``--rows`` users (default 10⁶) with a ``user`` id (half as many
users as rows) and an ``os`` column of 100 labels written carelessly (case and
surrounding spaces vary), then times, best of ``--repeat``:

* ``encode_exact``: :func:`shuffledp.data.encode_values` of the clean column
  (labels as declared) against the 100-label domain;
* ``encode_normalized``: the careless column with ``normalize_labels=True``;
* ``run_count``: ``FlipProtocol.calibrated(n=None, ...).run(df, column="os",
  normalize_labels=True, path="count")``: encoding, the calibration at the
  data's n and the count-level draw;
* ``load_values_user_first``: :func:`shuffledp.data.load_values` on the frame with
  ``user_column="user"``, ``per_user="first"``, ``normalize_labels=True``.

Prints one JSON object. Usage: python benchmarks/dataframe_in.py [--rows 1e6] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from typing import Any


def _best(repeat: int, work: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return round(min(times), 4)


def main() -> None:
    """Build the frame, time each case, print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, default=1e6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import numpy as np
    import pandas as pd

    from shuffledp import FlipProtocol
    from shuffledp.data import encode_values, load_values

    rows = int(args.rows)
    rng = np.random.default_rng(1)
    domain = [f"os{j:02d}" for j in range(100)]
    clean = np.array(domain, dtype=object)[rng.integers(0, 100, size=rows)]
    spellings = np.array([" ", ""], dtype=object)[rng.integers(0, 2, size=rows)]
    careless = np.where(rng.random(rows) < 0.5, np.char.upper(clean.astype(str)), clean)
    frame = pd.DataFrame(
        {
            "user": rng.integers(0, rows // 2, size=rows),
            "clean": clean,
            "os": spellings + careless.astype(object) + spellings,
        }
    )
    protocol = FlipProtocol.calibrated(n=None, domain=domain, epsilon=1.0, delta=1e-6)
    cases = {
        "encode_exact": lambda: encode_values(frame["clean"], domain),
        "encode_normalized": lambda: encode_values(frame["os"], domain, normalize_labels=True),
        "run_count": lambda: protocol.run(
            frame, column="os", normalize_labels=True, path="count", seed=1
        ),
        "load_values_user_first": lambda: load_values(
            frame, "os", domain=domain, user_column="user", per_user="first", normalize_labels=True
        ),
    }
    result = {
        "benchmark": "dataframe_in",
        "rows": rows,
        "domain_size": len(domain),
        "seconds_best_of": args.repeat,
        "seconds": {name: _best(args.repeat, work) for name, work in cases.items()},
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
