"""Peak memory of ``shuffledp run PROTOCOL --path message`` against the estimate it refuses by.

For each value protocol and input size: the peak resident memory of a run in
a fresh process (``wait4``'s ``ru_maxrss``), then the same run with
``--memory-limit`` set to that peak, which must be refused (the estimate is at
least the peak) with the estimate in its message; then ``--path count`` at
the same limit, which must run. Prints one JSON object per run and a summary.

    python benchmarks/cli_memory.py [--rows 250000,4000000] [--protocols krr,flip,...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

EXE = str(Path(sys.executable).with_name("shuffledp"))
DOMAIN = [f"v{i}" for i in range(100)]
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def write_values(path: Path, rows: int, *, users: bool = False, seed: int = 0) -> Path:
    """A CSV of ``rows`` Zipf-distributed labels over :data:`DOMAIN`.

    With ``users``, an id column too: half as many users as rows.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    values = rng.zipf(1.3, rows) % len(DOMAIN)
    ids = rng.integers(0, max(rows // 2, 1), rows)
    with path.open("w") as handle:
        handle.write("user,value\n" if users else "value\n")
        for start in range(0, rows, 1_000_000):
            end = start + 1_000_000
            if users:
                rows_text = (
                    f"u{u},v{v}\n" for u, v in zip(ids[start:end], values[start:end], strict=True)
                )
            else:
                rows_text = (f"v{v}\n" for v in values[start:end])
            handle.write("".join(rows_text))
    return path


def command(protocol: str, data: Path, *extra: str) -> list[str]:
    """``shuffledp run PROTOCOL`` on ``data`` with a public domain and a seed."""
    return [
        EXE, "run", protocol, "--input", str(data), "--column", "value",
        "--domain", ",".join(DOMAIN), "--epsilon", "1", "--delta", "1e-6",
        "--seed", "1", "--quiet", *extra,
    ]  # fmt: skip


def write_in_a_child(path: Path, rows: int, *, users: bool) -> Path:
    """:func:`write_values` in another process, so that this one stays small.

    Linux starts a child's peak resident memory (``ru_maxrss``) at its parent's
    resident memory when it forked: a parent holding the data it wrote would
    make every run it measures look at least that large.
    """
    subprocess.run(
        [sys.executable, __file__, "--write", str(path), str(rows), str(int(users))], check=True
    )
    return path


def peak_run(argv: list[str]) -> tuple[int, str, str, int]:
    """Run ``argv``; return its exit code, stdout, stderr and peak resident memory in bytes.

    The peak is ``wait4``'s ``ru_maxrss``: at least this (small) process's resident
    memory when it forked, which is why nothing large is held here.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdout=out, stderr=err)
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            if process.returncode is None and process.poll() is None:
                process.kill()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (
            process.returncode,
            out.read().decode(),
            err.read().decode(),
            int(usage.ru_maxrss) * (1 if sys.platform == "darwin" else 1024),
        )


def estimate_from(message: str) -> float | None:
    """The ``needs about 1.23 GiB`` of a refusal, in bytes (three significant digits)."""
    found = re.search(r"needs about ([0-9.]+) (B|KiB|MiB|GiB|TiB)", message)
    return None if found is None else float(found.group(1)) * UNITS[found.group(2)]


def measure(protocol: str, data: Path, rows: int, *extra: str) -> dict[str, object]:
    """One protocol at one size: its peak, the refusal at that peak, the count path at it."""
    code, out, err, peak = peak_run(command(protocol, data, *extra))
    if code != 0:
        raise SystemExit(f"{protocol} at {rows} rows failed: {err}")
    messages = json.loads(out)["messages"]
    limit = str(peak)
    refused, _, refusal, _ = peak_run(command(protocol, data, *extra, "--memory-limit", limit))
    counted, _, count_err, count_peak = peak_run(
        command(protocol, data, *extra, "--memory-limit", limit, "--path", "count")
    )
    estimate = estimate_from(refusal)
    return {
        "protocol": protocol,
        "rows": rows,
        "user_column": bool(extra),
        "messages": messages,
        "peak_bytes": peak,
        "refused_at_peak": refused == 2,
        "stage": "before reading" if "reading" in refusal else "before the messages",
        "estimate_bytes": estimate,
        "estimate_over_peak": None if estimate is None else round(estimate / peak, 3),
        "count_path_at_that_limit": "ran" if counted == 0 else count_err.strip(),
        "count_path_peak_bytes": count_peak,
    }


def main() -> None:
    """Measure every protocol at every size; print JSON lines, then a summary line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="250000,4000000")
    parser.add_argument("--protocols", default="krr,flip,correlated,augmented")
    parser.add_argument(
        "--user-column-rows",
        default="1000000",
        help="sizes also run with --user-column (half as many users as rows; '' for none)",
    )
    parser.add_argument("--write", nargs=3, metavar=("PATH", "ROWS", "USERS"), help="internal")
    args = parser.parse_args()
    if args.write is not None:
        write_values(Path(args.write[0]), int(args.write[1]), users=args.write[2] == "1")
        return
    results = []
    sizes = [(int(float(r)), False) for r in args.rows.split(",") if r]
    sizes += [(int(float(r)), True) for r in args.user_column_rows.split(",") if r]
    with tempfile.TemporaryDirectory() as workdir:
        for rows, users in sizes:
            data = write_in_a_child(Path(workdir) / f"values-{rows}-{users}.csv", rows, users=users)
            extra = ("--user-column", "user", "--per-user", "first") if users else ()
            for protocol in args.protocols.split(","):
                result = measure(protocol, data, rows, *extra)
                results.append(result)
                print(json.dumps(result), flush=True)
    print(
        json.dumps(
            {
                "all_refused_at_their_peak": all(r["refused_at_peak"] for r in results),
                "estimate_over_peak": {
                    f"{r['protocol']}@{r['rows']}{'+ids' if r['user_column'] else ''}": r[
                        "estimate_over_peak"
                    ]
                    for r in results
                },
            }
        )
    )


if __name__ == "__main__":
    main()
