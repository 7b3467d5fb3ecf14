"""Seconds to refuse a bad number, by kind of mistake: out of range or not a number.

Issue 24: ``--epsilon 0`` took 1.8-2.2 s to fail (the command imported scipy
and the accountant before checking it) against 0.15 s for ``--epsilon abc``.
Both are now refused by the parser. Runs each command line in a fresh process,
alternating the cases, and prints one JSON object per case (median, min, max of
the wall-clock seconds, and the one error line) and their ratio.

    python benchmarks/cli_cheap_errors.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXE = str(Path(sys.executable).with_name("shuffledp"))
RUN = ["run", "correlated", "--input", "data.csv", "--column", "city", "--domain", "a,b"]
CASES = {
    "run --epsilon 0": [*RUN, "--epsilon", "0", "--delta", "1e-6"],
    "run --epsilon abc": [*RUN, "--epsilon", "abc", "--delta", "1e-6"],
    "run --delta -1e-6": [*RUN, "--epsilon", "1", "--delta", "-1e-6"],
    "account --n 0": ["account", "krr", "--n", "0", "--domain-size", "10", "--epsilon", "1",
                      "--delta", "1e-6"],
    "account --n abc": ["account", "krr", "--n", "abc", "--domain-size", "10", "--epsilon", "1",
                        "--delta", "1e-6"],
    "--version": ["--version"],
}  # fmt: skip


def seconds(argv: list[str]) -> tuple[float, int, str]:
    """Wall-clock seconds of ``shuffledp ARGV`` in a fresh process, its code and stderr."""
    started = time.perf_counter()
    done = subprocess.run([EXE, *argv], capture_output=True, text=True, check=False)
    return time.perf_counter() - started, done.returncode, done.stderr.strip()


def main() -> None:
    """Time every case ``--repeats`` times, alternating; print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    lines: dict[str, str] = {}
    for _ in range(args.repeats):
        for name, argv in CASES.items():  # alternating: the machine's load hits every case
            spent, code, err = seconds(argv)
            times[name].append(spent)
            lines[name] = f"exit {code}: {err}"
    for name, spent in times.items():
        print(
            json.dumps(
                {
                    "case": name,
                    "median_s": round(statistics.median(spent), 3),
                    "min_s": round(min(spent), 3),
                    "max_s": round(max(spent), 3),
                    "result": lines[name],
                }
            )
        )
    ratio = statistics.median(times["run --epsilon 0"]) / statistics.median(
        times["run --epsilon abc"]
    )
    print(json.dumps({"epsilon_0_over_epsilon_abc": round(ratio, 2)}))


if __name__ == "__main__":
    main()
