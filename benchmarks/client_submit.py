"""``shuffledp client submit``: one process per value against ``--values-file``; prints JSON.

Starts the analyzer and the shuffler as real processes on loopback (SQLite
stores in a temporary directory, a k-RR task, ``--min-batch-users`` users per
batch), then submits ``--users`` values three ways, each timed end to end
(wall clock, the processes' start-up included):

* ``one_process_per_value``: ``shuffledp client submit --value V``, once per
  value, one after the other (what a shell loop over a file did before
  ``--values-file``);
* ``values_file_one_per_request``: one ``--values-file`` process, ``--per-request 1``;
* ``values_file_batched``: one ``--values-file`` process, ``--per-request``
  ``--users`` (every submission in one request).

Each submission is a fresh user in every case; the shuffler's count of accepted
submissions is checked after each case.

Usage: python benchmarks/client_submit.py [--users N] [--min-batch-users M]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from shuffledp.service.processes import ServiceProcess
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.task import create_task, save_private_key, save_task

DOMAIN = ["red", "green", "blue", "cyan", "pink"]


def _shuffledp() -> list[str]:
    exe = Path(sys.executable).with_name("shuffledp")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "shuffledp"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=40, help="values per case (default 40)")
    parser.add_argument(
        "--min-batch-users", type=int, default=1000, help="batch threshold (default 1000)"
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="client_submit_"))
    task, key = create_task("krr", DOMAIN, 1.0, 1e-6, args.min_batch_users)
    save_task(task, workdir / "task.json")
    save_private_key(key, workdir / "analyzer.key")
    write_secret_file(workdir / "forward.token", "forward-secret")
    common = ["--task", str(workdir / "task.json")]
    common += ["--forward-token-file", str(workdir / "forward.token")]
    analyzer = ServiceProcess(
        "analyzer",
        [*common, "--key", str(workdir / "analyzer.key"),
         "--store", f"sqlite:///{workdir / 'analyzer.db'}"],
        workdir,
    )  # fmt: skip
    analyzer.start()
    shuffler = ServiceProcess(
        "shuffler",
        [*common, "--store", f"sqlite:///{workdir / 'shuffler.db'}", "--forward", analyzer.url],
        workdir,
    )
    shuffler.start()
    submit = [*_shuffledp(), "client", "submit", "--task", str(workdir / "task.json")]
    submit += ["--shuffler", shuffler.url]
    values = [DOMAIN[i % len(DOMAIN)] for i in range(args.users)]
    values_file = workdir / "values.txt"
    values_file.write_text("".join(f"{v}\n" for v in values))
    cases = {
        "one_process_per_value": [[*submit, "--value", v] for v in values],
        "values_file_one_per_request": [
            [*submit, "--values-file", str(values_file), "--per-request", "1"]
        ],
        "values_file_batched": [
            [*submit, "--values-file", str(values_file), "--per-request", str(args.users)]
        ],
    }
    seconds: dict[str, float] = {}
    accepted = 0
    try:
        for name, commands in cases.items():
            start = time.perf_counter()
            for command in commands:
                subprocess.run(
                    command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                )
            seconds[name] = round(time.perf_counter() - start, 3)
            metrics = httpx.get(f"{shuffler.url}/v1/metrics", timeout=10).json()
            assert metrics["submissions_accepted"] == accepted + args.users, metrics
            accepted += args.users
    finally:
        shuffler.stop()
        analyzer.stop()
    print(
        json.dumps(
            {
                "benchmark": "client_submit",
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "users": args.users,
                "seconds": seconds,
                "submissions_per_second": {
                    name: round(args.users / s, 1) for name, s in seconds.items()
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
