"""Start-up time of the command line; prints one JSON object.

Runs each command ``--repeat`` times (default 7) in a fresh process and
reports the best and the median wall time, in seconds:

* ``python -c pass``: the interpreter alone (the floor);
* ``shuffledp --version``, ``shuffledp --help``, ``shuffledp run flip --help``,
  ``shuffledp account delta --help``: the parser only, nothing computed;
* ``import shuffledp``: the package (its public names are re-exported lazily);
* ``from shuffledp import FlipProtocol``: a name that pulls in the accountant.

It also reports how many modules ``import shuffledp.cli`` plus building the
whole parser loads and which heavy ones among them (there should be none;
``tests/system/test_cli_startup.py`` asserts it). Best-of-N is the figure to
compare: the median moves with the machine's load.

Usage: python benchmarks/cli_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: Modules the parser must not load (the test's list, plus numpy and tqdm for the figure).
HEAVY = (
    "numpy",
    "scipy",
    "scipy.optimize",
    "pandas",
    "pyarrow",
    "pyspark",
    "matplotlib",
    "tqdm",
    "dp_accounting",
    "httpx",
    "starlette",
    "shuffledp.accounting",
    "shuffledp.protocols",
)

PARSER_MODULES = """
import json, sys
from shuffledp.cli import build_parser
build_parser()
print(json.dumps({"modules": len(sys.modules), "heavy": [m for m in HEAVY if m in sys.modules]}))
"""


def _shuffledp() -> list[str]:
    """The ``shuffledp`` executable next to this interpreter, else ``python -m shuffledp``."""
    exe = Path(sys.executable).with_name("shuffledp")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "shuffledp"]


def _time(argv: list[str], repeat: int) -> dict[str, float]:
    """Best and median wall time of ``argv`` over ``repeat`` runs (output discarded)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return {"best": round(min(times), 4), "median": round(statistics.median(times), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per command (default 7)")
    args = parser.parse_args()
    cli = _shuffledp()
    python = [sys.executable]
    cases = {
        "python -c pass": [*python, "-c", "pass"],
        "shuffledp --version": [*cli, "--version"],
        "shuffledp --help": [*cli, "--help"],
        "shuffledp run flip --help": [*cli, "run", "flip", "--help"],
        "shuffledp account delta --help": [*cli, "account", "delta", "--help"],
        "import shuffledp": [*python, "-c", "import shuffledp"],
        "from shuffledp import FlipProtocol": [*python, "-c", "from shuffledp import FlipProtocol"],
    }
    seconds = {name: _time(argv, args.repeat) for name, argv in cases.items()}
    probe = f"HEAVY = {HEAVY!r}\n{PARSER_MODULES}"
    loaded = json.loads(
        subprocess.run([*python, "-c", probe], capture_output=True, text=True, check=True).stdout
    )
    print(
        json.dumps(
            {
                "benchmark": "cli_startup",
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "repeat": args.repeat,
                "seconds": seconds,
                "parser_modules_loaded": loaded["modules"],
                "parser_heavy_modules": loaded["heavy"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
