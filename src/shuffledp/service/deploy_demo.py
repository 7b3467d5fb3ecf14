"""``shuffledp demo --deploy``: FLIP end to end through real services on loopback.

Creates a task (min batch = n users, so one batch), starts the analyzer and the
shuffler as child processes with temporary SQLite stores, submits n simulated
clients' values (Zipf data; 100 submissions per request), waits until the
analyzer has aggregated the batch, fetches the release from ``GET
/v1/estimate``, prints it beside the truth, and stops both services.
"""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from shuffledp._rng import child_seeds
from shuffledp._validation import ShuffleDPError
from shuffledp.schemas import schema_id
from shuffledp.service.client import Client
from shuffledp.service.processes import ServiceProcess
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.task import create_task, save_private_key, save_task
from shuffledp.specs import FlipSpec

__all__ = ["run_deploy_demo"]


def _wait_for_users(analyzer: ServiceProcess, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        metrics = httpx.get(f"{analyzer.url}/v1/metrics", timeout=5.0).json()
        if metrics.get("users_aggregated", 0) >= n:
            return
        time.sleep(0.1)
    raise ShuffleDPError(f"the analyzer did not aggregate {n} users within {timeout:g} s")


#: What a seeded deploy demo states in ``privacy.not_covered`` (its shuffle is the service's).
SEEDED_CLIENTS_NOT_COVERED = (
    "the clients' randomness: the demo's clients were seeded (--seed), so every client's "
    "messages follow from the seed and whoever knows or guesses it can undo their noise "
    "(the shuffler service still shuffles with the operating system's cryptographic "
    "generator); a seed is for tests and demonstrations, never for real data"
)


def run_deploy_demo(
    n: int,
    domain_size: int,
    epsilon: float,
    delta: float,
    seed: int | None,
    out_dir: Path,
) -> int:
    """Run the demo; return the exit code (0).

    Raises:
        ShuffleDPError: If a service fails to start or the batch does not arrive.
    """
    from shuffledp.data.synthetic import zipf_values

    domain = [f"v{j:03d}" for j in range(domain_size)]
    # Independent streams for the synthetic data and the clients' randomizers (the
    # shuffler service always shuffles with the operating system's CSPRNG).
    data_seed, client_seed = child_seeds(seed, 2)
    values = zipf_values(n, domain_size, seed=data_seed)
    truth = np.bincount(values, minlength=domain_size)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="shuffledp-deploy-") as tmp:
        work = Path(tmp)
        task, key = create_task("flip", domain, epsilon, delta, n, domain_source="synthetic")
        save_task(task, work / "task.json")
        save_private_key(key, work / "analyzer.key")
        write_secret_file(work / "forward.token", "demo-" + task.task_id)
        spec = task.spec
        assert isinstance(spec, FlipSpec)
        print(
            f"FLIP deploy demo: n={n} users, d={domain_size}, task {task.task_id} "
            f"(q={spec.q:.4g}, {spec.fake_users} fake users per user, min batch {n} users)"
        )
        analyzer = ServiceProcess(
            "analyzer",
            [
                "--task", str(work / "task.json"), "--key", str(work / "analyzer.key"),
                "--store", f"sqlite:///{work / 'analyzer.db'}",
                "--forward-token-file", str(work / "forward.token"),
            ],
            work,
        )  # fmt: skip
        shuffler = None
        try:
            analyzer.start()
            shuffler = ServiceProcess(
                "shuffler",
                [
                    "--task", str(work / "task.json"),
                    "--store", f"sqlite:///{work / 'shuffler.db'}",
                    "--forward", analyzer.url,
                    "--forward-token-file", str(work / "forward.token"),
                ],
                work,
            )  # fmt: skip
            shuffler.start()
            print(
                f"analyzer at {analyzer.url}, shuffler at {shuffler.url} (SQLite stores in {tmp})"
            )
            t0 = time.perf_counter()
            with Client(task, shuffler.url, seed=client_seed) as client:
                subs = client.submit_many([domain[v] for v in values], per_request=100)
            took = time.perf_counter() - t0
            messages = sum(len(s.ciphertexts) for s in subs)
            print(
                f"{n} clients submitted {messages} encrypted messages in {took:.2f} s "
                f"({n / took:.0f} users/s, 100 per request)"
            )
            _wait_for_users(analyzer, n, timeout=120.0)
            result = httpx.get(f"{analyzer.url}/v1/estimate", timeout=60.0).json()
        finally:
            for service in (shuffler, analyzer):
                if service is not None:
                    code = service.stop()
                    if code not in (0, None, -signal.SIGTERM):
                        print(f"{service.role} exited with code {code}", file=sys.stderr)
    counts = np.asarray(result["estimate"]["counts"])
    stderr = np.asarray(result["estimate"]["stderr"])
    privacy = result["privacy"]
    print(
        f"published: ({privacy['epsilon']:g}, {privacy['delta']:.3g})-DP certified "
        f"[{privacy['method']}] for {result['service']['min_batch_users']} honest users per "
        f"batch (the batch holds {result['service']['smallest_batch_users']} submissions)"
    )
    print()
    print(f"{'value':>7s}{'true':>9s}{'estimate':>11s}{'± 95%':>9s}{'error':>9s}")
    for j in np.argsort(-truth, kind="stable")[: min(10, domain_size)]:
        print(
            f"{domain[j]:>7s}{truth[j]:>9d}{counts[j]:>11.1f}{1.96 * stderr[j]:>9.1f}"
            f"{counts[j] - truth[j]:>9.1f}"
        )
    linf = float(np.max(np.abs(counts - truth)))
    print()
    print(f"l-inf error {linf:.1f} users; per-bin stderr {float(stderr[0]):.2f}")
    out_dir.mkdir(parents=True, exist_ok=True)
    result["schema"] = schema_id("demo")
    if seed is not None:
        result["parameters"]["seed"] = seed
        result["privacy"]["not_covered"].append(SEEDED_CLIENTS_NOT_COVERED)
        result["privacy"]["covers_release"] = False
    result["true_counts"] = [int(c) for c in truth]
    result["linf_error"] = linf
    from shuffledp._files import write_text_atomically

    write_text_atomically(out_dir / "flip_deploy.json", json.dumps(result, indent=2) + "\n")
    print(
        f"wrote {out_dir / 'flip_deploy.json'}; services stopped "
        f"({time.perf_counter() - started:.1f} s in all)"
    )
    return 0
