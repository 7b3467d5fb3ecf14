"""Ingest throughput and memory: file → one bin index per user; prints one JSON object.

Generates a CSV of ``--rows`` rows (default 1e7) with two columns, ``user``
(ids ``u0000000``.., drawn from half as many users as rows, so most users have
several rows) and ``value`` (one of 100 labels ``v00``..``v99``), plus a
gzip-compressed copy, in a temporary directory. Each case then runs
:func:`shuffledp.data.ingest.load_values` in a fresh Python process, which
reports its wall time and peak resident memory (``ru_maxrss``):

* ``plain``: the value column against the declared 100-label domain;
* ``user_first``: the same with ``user_column="user"``, ``per_user="first"``;
* ``gzip``: the plain case on the gzip-compressed file.

Usage: python benchmarks/ingest.py [--rows N] [--dir DIR] [--stdlib]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DOMAIN = [f"v{i:02d}" for i in range(100)]

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from shuffledp.data.ingest import load_values
import_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kwargs = json.loads(sys.argv[1])
start = time.perf_counter()
loaded = load_values(**kwargs)
seconds = time.perf_counter() - start
print(json.dumps({
    "rows": loaded.rows_read,
    "users": loaded.n,
    "seconds": round(seconds, 3),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "rss_after_import_mb": round(import_rss / 1024, 1),
}))
"""


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
                        pc.binary_join_element_wise("u", pc.utf8_lpad(users, 7, "0"), ""),
                        pc.binary_join_element_wise("v", pc.utf8_lpad(values, 2, "0"), ""),
                    ],
                    schema=schema,
                )
            )
    with plain.open("rb") as source, gzip.open(packed, "wb", compresslevel=1) as target:
        shutil.copyfileobj(source, target, 1 << 22)
    return plain, packed


def _run_case(kwargs: dict[str, object]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"case {kwargs} failed:\n{done.stderr}")
    result: dict[str, object] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dir", default=None, help="parent of the temporary directory")
    parser.add_argument(
        "--stdlib", action="store_true", help="also time the standard-library CSV reader (slow)"
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        start = time.perf_counter()
        plain, packed = _generate(Path(tmp), args.rows)
        generate_s = time.perf_counter() - start
        base = {"column": "value", "domain": DOMAIN, "show_progress": False}
        cases = {
            "plain": {"path": str(plain), **base},
            "user_first": {
                "path": str(plain),
                **base,
                "user_column": "user",
                "per_user": "first",
            },
            "gzip": {"path": str(packed), **base},
        }
        if args.stdlib:
            cases["plain_stdlib"] = {"path": str(plain), **base, "use_pyarrow": False}
        results = {name: _run_case(kwargs) for name, kwargs in cases.items()}
        sizes = {"csv_mb": plain.stat().st_size / 2**20, "gzip_mb": packed.stat().st_size / 2**20}

    print(
        json.dumps(
            {
                "benchmark": "ingest",
                "rows": args.rows,
                "domain_size": len(DOMAIN),
                "file_mb": {k: round(v, 1) for k, v in sizes.items()},
                "generate_seconds": round(generate_s, 1),
                "cases": results,
                "python": platform.python_version(),
                "machine": platform.machine(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
