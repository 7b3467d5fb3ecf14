"""Run the three parties on this machine: analyzer and shuffler services, clients, a release.

The task owner creates the task (protocol calibrated for ``min_batch_users``
users, the analyzer's key pair) and the shared secret the shuffler uses to
forward batches. The analyzer and the shuffler start as separate processes on
loopback with SQLite stores; the clients randomize and seal their values with
the task's public key and post them to the shuffler; once the batch has
arrived, the analyzer's store publishes the release (the JSON of ``shuffledp
run``, plus a ``service`` section); then both services stop. See
docs/deployment.md for what each party learns.

    python examples/local_deployment.py --users 500 --protocol flip

Needs the ``service`` extra. Writes ``release.json`` to ``--output-dir``; the
keys, secrets and stores live in a temporary directory removed at the end.
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.service.client import Client
from shuffledp.service.processes import ServiceProcess
from shuffledp.service.release import NothingToPublishError, publish
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.store import open_analyzer_store
from shuffledp.service.task import Task, create_task, save_private_key, save_task

DOMAIN = ["red", "green", "blue", "cyan", "pink"]


def wait_and_publish(task: Task, store_url: str, timeout: float = 60.0) -> dict[str, Any]:
    """Publish from the analyzer's store as soon as a batch has been aggregated."""
    deadline = time.monotonic() + timeout
    while True:
        store = open_analyzer_store(store_url, task.task_id, read_only=True)
        try:
            return publish(task, store)
        except NothingToPublishError:
            if time.monotonic() > deadline:
                raise
        finally:
            store.close()
        time.sleep(0.1)


def main() -> None:
    """Parse the flags, deploy, submit, publish, stop."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=500, help="clients (= min batch users)")
    parser.add_argument("--protocol", choices=("flip", "krr"), default="flip")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=7, help="the simulated users' randomness")
    parser.add_argument("--output-dir", type=Path, default=Path("example-output"))
    args = parser.parse_args()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    values = rng.choice(DOMAIN, size=args.users, p=[0.4, 0.25, 0.2, 0.1, 0.05]).tolist()

    with tempfile.TemporaryDirectory(prefix="shuffledp-example-") as tmp:
        work = Path(tmp)
        # 1. The task owner: a public task document and two secrets (files 0600).
        task, key = create_task(args.protocol, DOMAIN, args.epsilon, args.delta, args.users)
        save_task(task, work / "task.json")
        save_private_key(key, work / "analyzer.key")
        write_secret_file(work / "forward.token", secrets.token_urlsafe(32))
        analyzer_store = f"sqlite:///{work / 'analyzer.db'}"
        common = [
            "--task",
            str(work / "task.json"),
            "--forward-token-file",
            str(work / "forward.token"),
        ]
        # 2. and 3. The analyzer (holds the key) and the shuffler (holds no key).
        analyzer = ServiceProcess(
            "analyzer",
            [*common, "--key", str(work / "analyzer.key"), "--store", analyzer_store],
            work,
        )
        shuffler = None
        try:
            analyzer.start()
            shuffler_store = f"sqlite:///{work / 'shuffler.db'}"
            shuffler = ServiceProcess(
                "shuffler", [*common, "--store", shuffler_store, "--forward", analyzer.url], work
            )
            shuffler.start()
            print(f"task {task.task_id}: {args.protocol}, batches of at least {args.users} users")
            print(f"analyzer at {analyzer.url}, shuffler at {shuffler.url}")
            # 4. Every client randomizes and seals its own value (here: one process for all).
            with Client(task, shuffler.url, seed=args.seed) as client:
                submitted = client.submit_many(values)
            messages = sum(len(s.ciphertexts) for s in submitted)
            print(f"{len(submitted)} clients submitted {messages} sealed messages")
            # 5. The analyzer publishes once the shuffler has forwarded the batch.
            release = wait_and_publish(task, analyzer_store)
        finally:
            for service in (shuffler, analyzer):
                if service is not None:
                    service.stop()

    privacy, estimate = release["privacy"], release["estimate"]
    print(
        f"published ({privacy['epsilon']:g}, {privacy['delta']:.3g})-DP [{privacy['method']}] "
        f"for {release['service']['min_batch_users']} honest users per batch; services stopped"
    )
    print(f"{'value':8s}{'true':>6s}{'estimate':>10s}{'± 95%':>8s}")
    for label, count, se in zip(
        release["domain"], estimate["counts"], estimate["stderr"], strict=True
    ):
        print(f"{label:8s}{values.count(label):>6d}{count:>10.1f}{1.96 * se:>8.1f}")
    out = args.output_dir / "release.json"
    out.write_text(json.dumps(release, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
