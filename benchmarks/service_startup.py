"""CPU seconds a service spends before its port accepts connections; prints JSON.

For each protocol and role, starts ``python -m shuffledp serve ROLE`` on a free
loopback port (a fresh SQLite store in a temporary directory, a task created
once per protocol), connects to the port every 5 ms until a connection is
accepted (uvicorn listens only once the application has started), then reads
the process's CPU time (user + system, ``/proc/PID/stat``) and kills it. The
figure is the median of ``--repeats`` starts. One more start with
``-X importtime`` records which modules were imported by then: the JSON lists
whether scipy, pandas, the accountant's entry points (``shuffledp.accounting.api``)
and the protocol classes were among them, and the import time summed over the
top-level imports (wall clock, as ``-X importtime`` measures it).

Usage: python benchmarks/service_startup.py [--repeats 5] [--protocols krr,flip,...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.task import create_task, save_private_key, save_task

DOMAIN = ["red", "green", "blue", "cyan", "pink"]
WATCHED = ["scipy", "pandas", "shuffledp.accounting.api", "shuffledp.protocols.base", "numpy"]
TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14, 15)


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _args(role: str, work: Path, store: str) -> list[str]:
    common = ["--task", str(work / "task.json"), "--store", store]
    common += ["--forward-token-file", str(work / "forward.token")]
    if role == "analyzer":
        return [*common, "--key", str(work / "analyzer.key")]
    return [*common, "--forward", "http://127.0.0.1:9"]


def start_once(role: str, work: Path, run: int, *, importtime: bool = False) -> dict[str, Any]:
    """Start one service, wait until its port accepts, measure, kill it."""
    port = _free_port()
    store = f"sqlite:///{work / f'{role}-{run}.db'}"
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "shuffledp"]
    command += ["serve", role, *_args(role, work, store), "--listen", f"127.0.0.1:{port}"]
    log_path = work / f"{role}-{run}.log"
    with open(log_path, "wb") as log:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            while not _accepts(port):
                if process.poll() is not None:
                    raise RuntimeError(f"{role} exited: {log_path.read_text()[-2000:]}")
                if time.perf_counter() - started > 120:
                    raise RuntimeError(f"{role} did not listen within 120 s")
                time.sleep(0.005)
            wall = time.perf_counter() - started
            cpu = _cpu_seconds(process.pid)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
    out: dict[str, Any] = {"cpu_seconds": cpu, "wall_seconds": wall}
    if importtime:
        out.update(_imports(log_path.read_text(errors="replace")))
    return out


def _imports(log: str) -> dict[str, Any]:
    """Which watched modules ``-X importtime`` recorded, and the top-level imports' sum."""
    names: set[str] = set()
    top = 0
    for line in log.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if cumulative.strip().isdigit():
            if not name.startswith("  "):  # a top-level import: its cumulative time counts once
                top += int(cumulative)
            names.add(name.strip())
    return {
        "imported": {watched: watched in names for watched in WATCHED},
        "import_seconds": top / 1e6,
        "modules": len(names),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="starts per case (default 5)")
    parser.add_argument(
        "--protocols", default="krr,flip,correlated,augmented", help="comma-separated protocols"
    )
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="service_startup_") as tmp:
        for protocol in args.protocols.split(","):
            work = Path(tmp) / protocol
            work.mkdir()
            task, key = create_task(protocol, DOMAIN, 1.0, 1e-6, 100)
            save_task(task, work / "task.json")
            save_private_key(key, work / "analyzer.key")
            write_secret_file(work / "forward.token", "forward-secret")
            for role in ("shuffler", "analyzer"):
                runs = [start_once(role, work, i) for i in range(args.repeats)]
                profile = start_once(role, work, args.repeats, importtime=True)
                results.append(
                    {
                        "protocol": protocol,
                        "role": role,
                        "cpu_seconds_until_listening": statistics.median(
                            r["cpu_seconds"] for r in runs
                        ),
                        "wall_seconds_until_listening": statistics.median(
                            r["wall_seconds"] for r in runs
                        ),
                        "cpu_seconds_each": [round(r["cpu_seconds"], 3) for r in runs],
                        **{k: profile[k] for k in ("imported", "import_seconds", "modules")},
                    }
                )
    print(
        json.dumps(
            {
                "benchmark": "service_startup",
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "load_average": os.getloadavg(),
                "repeats": args.repeats,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
