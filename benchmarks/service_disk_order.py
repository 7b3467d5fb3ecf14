"""What the shuffler's SQLite files tell a reader about arrival order; prints JSON.

Runs a shuffler and an analyzer as processes on loopback (a k-RR task with one
submission per client token), sends ``--users`` clients one request each,
``--min-gap`` to ``--max-gap`` seconds apart (uniform, seeded), and reads the
shuffler's files as raw bytes, as whoever copies them would
(:func:`shuffledp.service.disk_audit.file_report`), at three moments: while
the batch waits (one user short of ``min_batch_users``), after an idle
``--idle`` seconds, and once the last user has completed the batch and the
analyzer has acknowledged it. For each kind of id (submission ids, client
ids, and each ciphertext's first 20 bytes) it gives Spearman's ρ between
arrival rank and byte offset and the within-page rank statistic z (no leak:
ρ ~ N(0, 1/(n − 1)), z ~ N(0, 1)), in the database file, in the WAL and in
both, and how many of the i-th ids of two kinds pair up by byte order (no leak:
about 1). While idle it also counts the writes to the files (their sizes and
modification times, sampled every 0.1 s).

``--service-pythonpath DIR`` runs the services from another source tree (for
example an export of an earlier commit), the clients and the reader from this
one: the same attack on the old and the new store.

Usage: python benchmarks/service_disk_order.py [--users 100] [--min-gap 0.3]
[--max-gap 1.0] [--idle 12] [--seed 24] [--service-pythonpath DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from shuffledp.service.client import Client
from shuffledp.service.disk_audit import file_report
from shuffledp.service.processes import ServiceProcess
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.task import create_task, save_private_key, save_task
from shuffledp.service.tokens import issue_tokens, new_token_key, save_token_key

DOMAIN = ["red", "green", "blue", "cyan", "pink"]
LINKS = [
    ("client_ids", "submission_ids"),
    ("client_ids", "ciphertexts"),
    ("submission_ids", "ciphertexts"),
]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _wait(predicate: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _file_state(files: list[Path]) -> tuple[tuple[int, int], ...]:
    return tuple(
        (p.stat().st_size, p.stat().st_mtime_ns) if p.exists() else (-1, -1) for p in files
    )


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Run the services, the clients and the reader; return the figures."""
    users = args.users
    task, key = create_task("krr", DOMAIN, 1.0, 1e-6, users, one_submission_per_client=True)
    save_task(task, root / "task.json")
    save_private_key(key, root / "analyzer.key")
    write_secret_file(root / "forward.token", "forward-secret")
    token_key = new_token_key()
    save_token_key(token_key, root / "token.key")
    env = {} if args.service_pythonpath is None else {"PYTHONPATH": args.service_pythonpath}
    common = [
        "--task",
        str(root / "task.json"),
        "--forward-token-file",
        str(root / "forward.token"),
    ]
    analyzer = ServiceProcess(
        "analyzer",
        [*common, "--key", str(root / "analyzer.key"), "--store", f"sqlite:///{root / 'a.db'}"],
        root,
        env=env,
    )
    analyzer.start()
    shuffler = ServiceProcess(
        "shuffler",
        [*common, "--store", f"sqlite:///{root / 'shuffler.db'}", "--forward", analyzer.url,
         "--token-key-file", str(root / "token.key")],
        root,
        env=env,
    )  # fmt: skip
    shuffler.start()
    files = [root / f"shuffler.db{suffix}" for suffix in ("", "-wal", "-shm")]
    tokens = issue_tokens(token_key, task.task_id, users)
    rng = np.random.default_rng(args.seed)
    ids: dict[str, list[Any]] = {"submission_ids": [], "client_ids": [], "ciphertexts": []}

    def report(count: int) -> dict[str, Any]:
        return file_report(files, {kind: v[:count] for kind, v in ids.items()}, LINKS)

    def metrics() -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(f"{shuffler.url}/v1/metrics", timeout=30).json()
        return answer

    out: dict[str, Any] = {"users": users, "gaps_seconds": [args.min_gap, args.max_gap]}
    try:
        with Client(task, shuffler.url, token=tokens[0], seed=args.seed) as client:
            for i in range(users):
                if i == users - 1:
                    out["waiting"] = report(users - 1)
                    _log(f"idle for {args.idle} s")
                    states, start = {_file_state(files)}, time.monotonic()
                    while time.monotonic() - start < args.idle:
                        time.sleep(0.1)
                        states.add(_file_state(files))
                    out["idle"] = {"seconds": args.idle, "file_states_seen": len(states)}
                    out["waiting_after_idle"] = report(users - 1)
                sub = client.submit_many([DOMAIN[i % 5]], per_request=1, tokens=[tokens[i]])[0]
                ids["submission_ids"].append(sub.submission_id)
                ids["client_ids"].append(tokens[i].split(".")[0])
                ids["ciphertexts"].append(sub.ciphertexts[0][:20])
                if i < users - 2:
                    time.sleep(float(rng.uniform(args.min_gap, args.max_gap)))
        _wait(lambda: metrics()["batches_acknowledged"] >= 1, "the batch acknowledged")
        time.sleep(1.0)  # the checkpoint that follows the acknowledgement
        out["after_cut_and_sent"] = report(users)
    finally:
        shuffler.stop()
        analyzer.stop()
    out["null_law"] = (
        "no leak: spearman ~ N(0, 1/(n-1)), within_page_z ~ N(0, 1), "
        "linked_pairs ~ fixed points of a random permutation (mean 1)"
    )
    return out


def main() -> None:
    """Parse the options, run, print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--min-gap", type=float, default=0.3)
    parser.add_argument("--max-gap", type=float, default=1.0)
    parser.add_argument("--idle", type=float, default=12.0)
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--service-pythonpath", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        result = run(args, Path(work))
    result["service_pythonpath"] = args.service_pythonpath
    result["pid"] = os.getpid()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
