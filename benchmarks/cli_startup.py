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

``run_flip`` is a whole command: ``shuffledp run flip`` on a CSV of ``--rows``
rows (default 100,000; 100 labels, Zipf): its wall and CPU seconds (best and
median), the share of one run's wall time spent importing (``python -X
importtime``: the top-level imports' cumulative times over that run's wall
time) and which heavy modules the run loaded
(``tests/system/test_run_imports.py`` checks that FLIP loads none of
``scipy.optimize`` and ``scipy.signal``).

Usage: python benchmarks/cli_startup.py [--repeat N] [--rows R]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
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


#: Modules whose presence after ``run flip`` the benchmark reports.
RUN_HEAVY = (
    "scipy",
    "scipy.optimize",
    "scipy.signal",
    "scipy.stats",
    "scipy.integrate",
    "scipy.special",
    "scipy.sparse",
    "pandas",
    "pyarrow",
    "matplotlib",
    "shuffledp.accounting.api",
    "shuffledp.protocols.augmented",
    "shuffledp.protocols.correlated",
    "shuffledp.protocols.krr",
)

RUN_MODULES = """
import json, sys
from shuffledp.cli import main
code = main(ARGV)
print(json.dumps({"code": code, "modules": len(sys.modules),
                  "heavy": [m for m in RUN_HEAVY if m in sys.modules]}))
"""


def write_flip_input(directory: Path, rows: int) -> list[str]:
    """Write ``rows`` city labels (100 labels, Zipf) and their domain; return run flip's argv."""
    labels = [f"city_{i:03d}" for i in range(100)]
    rng = random.Random(1)
    picked = rng.choices(labels, weights=[1 / (i + 1) ** 1.1 for i in range(100)], k=rows)
    (directory / "rows.csv").write_text("city\n" + "\n".join(picked) + "\n")
    (directory / "domain.txt").write_text("\n".join(labels) + "\n")
    return [
        "run", "flip", "--input", str(directory / "rows.csv"), "--column", "city",
        "--domain-file", str(directory / "domain.txt"), "--epsilon", "1", "--delta", "1e-6",
        "--output", str(directory / "out.json"), "--quiet",
    ]  # fmt: skip


def _time_with_cpu(argv: list[str], repeat: int) -> dict[str, float]:
    """Best and median wall and CPU (user + system) seconds of ``argv`` over ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return {
        "wall_best": round(min(walls), 4),
        "wall_median": round(statistics.median(walls), 4),
        "cpu_best": round(min(cpus), 4),
        "cpu_median": round(statistics.median(cpus), 4),
    }


def import_share(argv: list[str], repeat: int) -> dict[str, float]:
    """Median share of a run's wall time spent in imports (``-X importtime``), over ``repeat``."""
    shares, seconds = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "shuffledp", *argv],
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - start
        top_level = 0
        for line in done.stderr.splitlines():
            fields = line.removeprefix("import time:").split("|")
            if len(fields) == 3 and fields[1].strip().isdigit() and fields[2][1:2] != " ":
                top_level += int(fields[1])  # a module imported at depth 0: its cumulative time
        shares.append(top_level / 1e6 / wall)
        seconds.append(top_level / 1e6)
    return {
        "import_seconds_median": round(statistics.median(seconds), 4),
        "import_share_median": round(statistics.median(shares), 3),
    }


def run_flip(rows: int, repeat: int) -> dict[str, object]:
    """``shuffledp run flip`` on a CSV of ``rows`` rows: times, import share, heavy modules."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = write_flip_input(Path(tmp), rows)
        times = _time_with_cpu([*_shuffledp(), *argv], repeat)
        share = import_share(argv, repeat)
        probe = f"RUN_HEAVY = {RUN_HEAVY!r}\nARGV = {argv!r}\n{RUN_MODULES}"
        loaded = json.loads(
            subprocess.run(
                [sys.executable, "-c", probe], capture_output=True, text=True, check=True
            ).stdout.splitlines()[-1]
        )
    return {"rows": rows, **times, **share, "modules_loaded": loaded["modules"],
            "heavy_modules_loaded": loaded["heavy"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per command (default 7)")
    parser.add_argument(
        "--rows", type=int, default=100_000, help="rows of run flip's CSV (default 100,000)"
    )
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
                "run_flip": run_flip(args.rows, args.repeat),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
