"""Ingest and ``run`` memory: file → release; prints one JSON object.

For each size in ``--rows`` (default 1e6, 1e7 and 2.5e7 rows) it generates a
CSV with two columns, ``user`` (ids ``u0000000``.., drawn from half as many
users as rows, so most users have several rows) and ``value`` (one of 100
labels ``v00``..``v99``), plus a gzip-compressed copy, in a temporary
directory. Each case then runs in a fresh Python process, which reports its
wall time and peak resident memory (``ru_maxrss``):

* ``plain``: :func:`shuffledp.data.ingest.load_values` on the value column
  against the declared 100-label domain (one bin index per row kept);
* ``user_first``: the same with ``user_column="user"``, ``per_user="first"``;
* ``gzip``: the plain case on the gzip-compressed file;
* ``count_histogram``: :func:`shuffledp.data.ingest.load_histogram`, which
  counts chunk by chunk (what ``run --path count`` reads without a user column);
* ``run_count``: ``shuffledp run flip --path count`` on the plain file;
* ``run_message``: ``shuffledp run flip --path message`` (real messages and the
  cryptographic shuffle); its figures also give the bytes per message.

Every case reports ``peak_rss_mb`` (``VmHWM``: ``ru_maxrss`` would carry the
parent's peak across ``exec``) and ``rss_after_import_mb`` (the interpreter
with the imports the case needs). ``growth_bytes_per_row`` gives, per case,
(peak − previous size's peak) / (rows − previous rows): 0 for memory bounded
whatever the file's length. ``message_bytes_above_count`` is (``run_message``
peak − ``run_count`` peak) / messages: what the message path adds per message.

Usage: python benchmarks/ingest.py [--rows 1e6,1e7,2.5e7] [--cases a,b] [--dir DIR] [--stdlib]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DOMAIN = [f"v{i:02d}" for i in range(100)]

LOAD_CHILD = """
import json, resource, sys, time
def peak_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
from shuffledp.data import ingest
import_rss = peak_mb()
function, kwargs = sys.argv[1], json.loads(sys.argv[2])
start = time.perf_counter()
loaded = getattr(ingest, function)(**kwargs)
seconds = time.perf_counter() - start
print(json.dumps({
    "rows": loaded.rows_read,
    "users": loaded.n,
    "seconds": round(seconds, 3),
    "peak_rss_mb": round(peak_mb(), 1),
    "rss_after_import_mb": round(import_rss, 1),
}))
"""

RUN_CHILD = """
import json, resource, sys, time
def peak_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import shuffledp.cli.run.flip, shuffledp.protocols.flip, shuffledp.data.ingest
import pyarrow.csv
from shuffledp.cli import main
import_rss = peak_mb()
argv = json.loads(sys.argv[1])
start = time.perf_counter()
code = main(argv)
seconds = time.perf_counter() - start
if code != 0:
    raise SystemExit(code)
release = json.load(open(argv[argv.index("--output") + 1]))
print(json.dumps({
    "users": release["n"],
    "messages": release["messages"],
    "seconds": round(seconds, 3),
    "peak_rss_mb": round(peak_mb(), 1),
    "rss_after_import_mb": round(import_rss, 1),
}))
"""

CASES = ("plain", "user_first", "gzip", "count_histogram", "run_count", "run_message")


def _generate(directory: Path, rows: int) -> tuple[Path, Path]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    plain, packed = directory / "ingest.csv", directory / "ingest.csv.gz"
    rng = np.random.default_rng(0)
    options = pcsv.WriteOptions(quoting_style="none")
    schema = pa.schema([("user", pa.string()), ("value", pa.string())])
    with pcsv.CSVWriter(plain, schema, write_options=options) as out:
        for start in range(0, rows, 1_000_000):
            size = min(1_000_000, rows - start)
            users = pc.cast(pa.array(rng.integers(0, max(rows // 2, 1), size)), pa.string())
            values = pc.cast(pa.array(rng.integers(0, 100, size)), pa.string())
            out.write_batch(
                pa.record_batch(
                    [
                        pc.binary_join_element_wise("u", pc.utf8_lpad(users, 8, "0"), ""),
                        pc.binary_join_element_wise("v", pc.utf8_lpad(values, 2, "0"), ""),
                    ],
                    schema=schema,
                )
            )
    with plain.open("rb") as source, gzip.open(packed, "wb", compresslevel=1) as target:
        shutil.copyfileobj(source, target, 1 << 22)
    return plain, packed


def _child(code: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"case {args} failed:\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def _peak(result: dict[str, object]) -> float:
    return float(str(result["peak_rss_mb"]))


def _growth(runs: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Bytes of peak memory per extra row, between consecutive sizes, for each case."""
    out: dict[str, list[float]] = {}
    for before, after in itertools.pairwise(runs):
        rows = after["rows"] - before["rows"]
        for case, result in after["cases"].items():
            if case in before["cases"] and rows > 0:
                extra = (_peak(result) - _peak(before["cases"][case])) * 2**20 / rows
                out.setdefault(case, []).append(round(extra, 1))
    return out


def _cases(plain: Path, packed: Path, tmp: Path, stdlib: bool) -> dict[str, tuple[str, ...]]:
    base = {"column": "value", "domain": DOMAIN, "show_progress": False}
    load = {
        "plain": {"path": str(plain), **base},
        "user_first": {"path": str(plain), **base, "user_column": "user", "per_user": "first"},
        "gzip": {"path": str(packed), **base},
    }
    if stdlib:
        load["plain_stdlib"] = {"path": str(plain), **base, "use_pyarrow": False}
    cases: dict[str, tuple[str, ...]] = {
        name: (LOAD_CHILD, "load_values", json.dumps(kw)) for name, kw in load.items()
    }
    cases["count_histogram"] = (
        LOAD_CHILD,
        "load_histogram",
        json.dumps({"path": str(plain), **base}),
    )
    for path in ("count", "message"):
        argv = ["run", "flip", "--input", str(plain), "--column", "value"]
        argv += ["--domain", ",".join(DOMAIN), "--epsilon", "1", "--delta", "1e-6"]
        argv += ["--path", path, "--output", str(tmp / f"{path}.json"), "--quiet"]
        cases[f"run_{path}"] = (RUN_CHILD, json.dumps(argv))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", default="1e6,1e7,2.5e7", help="comma-separated row counts")
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated, among {', '.join(CASES)}"
    )
    parser.add_argument("--dir", default=None, help="parent of the temporary directory")
    parser.add_argument(
        "--stdlib", action="store_true", help="also time the standard-library CSV reader (slow)"
    )
    args = parser.parse_args()
    sizes = [int(float(x)) for x in args.rows.split(",")]
    wanted = args.cases.split(",")

    runs = []
    for rows in sizes:
        with tempfile.TemporaryDirectory(dir=args.dir) as name:
            tmp = Path(name)
            start = time.perf_counter()
            plain, packed = _generate(tmp, rows)
            generate_s = time.perf_counter() - start
            cases = _cases(plain, packed, tmp, args.stdlib)
            results = {
                case: _child(*cases[case])
                for case in cases
                if case in wanted or (case == "plain_stdlib" and args.stdlib)
            }
            if "run_count" in results and "run_message" in results:
                messages = int(str(results["run_message"]["messages"]))
                extra = _peak(results["run_message"]) - _peak(results["run_count"])
                results["run_message"]["message_bytes_above_count"] = round(
                    extra * 2**20 / messages, 1
                )
            runs.append(
                {
                    "rows": rows,
                    "file_mb": {
                        "csv": round(plain.stat().st_size / 2**20, 1),
                        "gzip": round(packed.stat().st_size / 2**20, 1),
                    },
                    "generate_seconds": round(generate_s, 1),
                    "cases": results,
                }
            )

    print(
        json.dumps(
            {
                "benchmark": "ingest",
                "domain_size": len(DOMAIN),
                "runs": runs,
                "growth_bytes_per_row": _growth(runs),
                "python": platform.python_version(),
                "machine": platform.machine(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
