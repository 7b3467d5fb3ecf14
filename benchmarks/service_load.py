"""Load test of the shuffler and analyzer services on loopback; prints one JSON object.

Both services run as real processes, started as the service tests start them
(``python -m shuffledp serve shuffler|analyzer`` through
:class:`shuffledp.service.processes.ServiceProcess`, SQLite stores in a
temporary directory, the shuffler forwarding to the analyzer). One k-RR task
(one ciphertext per submission) with ``--min-batch-users`` users per batch.
Each run, on fresh stores:

* ``single``: clients post ONE submission per request over
  ``--single-connections`` keep-alive connections (closed loop): requests/s,
  latency percentiles (from sending a request to reading its answer);
* ``batched``: clients post ``--per-request`` submissions per request over
  ``--batched-connections`` connections: messages/s;
* ``drain``: waits until the analyzer has decrypted and counted every batch,
  then checks the analyzer's stored histogram against the messages the
  clients sent (``counts_match``); ``pipeline_messages_per_s`` is counted
  messages over the time from the first request to the last message counted.

Both totals are multiples of ``--min-batch-users``, so every acknowledged
submission ends up in a forwarded batch and ``counted`` must equal
``acknowledged`` (if a request failed, the users short of a batch stay in the
shuffler and are reported as ``waiting_remainder``). Finally ``decrypt`` times
the analyzer's decryption (:meth:`MessageOpener.open_payload`) in one thread,
services stopped.

The load generator is a lean asyncio HTTP/1.1 client in this process (uvloop
when installed): keep-alive connections opened before the clock starts,
requests built before the clock starts from ciphertexts sealed before the
clock starts, a response read as status line + Content-Length. Sealing (HPKE,
one X25519 encapsulation per message) is client-side work, not the shuffler's:
it is done once, by a process pool, and reused by every run (each run has fresh
stores, so the submissions are new to it).

Both services run at the same priority by default. In a deployment the
analyzer is another party on another machine; here its decryption (one X25519
operation per message, slower per core than the shuffler's ingest) takes the
second core while the shuffler is measured, and falls behind until ``drain``.
``--analyzer-nice 19`` lowers every analyzer thread's priority, so that it only
uses CPU the shuffler leaves idle.

The output records the CPU each party used in each phase (cores, and CPU µs
per submission), the rest of the machine's load (``other_processes``) and
``os.getloadavg()``: on a shared machine the figures are noisy, so with
``--repeats`` > 1 it reports every run, the best and the median.

Usage: python benchmarks/service_load.py [--repeats R] [--single-users N]
    [--batched-users N] [--per-request K] [--min-batch-users B]
    [--single-connections C] [--batched-connections C] [--analyzer-nice N]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import secrets
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import shuffledp
from shuffledp.service.processes import ServiceProcess
from shuffledp.service.secretfile import write_secret_file
from shuffledp.service.shuffler import SUBMISSIONS_FORMAT
from shuffledp.service.store import open_analyzer_store
from shuffledp.service.task import Task, build_randomizer, create_task, save_private_key, save_task
from shuffledp.service.wire import CIPHERTEXT_LENGTH, MessageOpener, MessageSealer

_CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def _log(message: str) -> None:
    print(f"[service_load] {message}", file=sys.stderr, flush=True)


# --- sealing (client side, before the clock) ----------------------------------------------


def _seal_chunk(public_key: bytes, task_id: str, domain_size: int, indices: list[int]) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

    sealer = MessageSealer(X25519PublicKey.from_public_bytes(public_key), task_id, domain_size)
    return b"".join(sealer.seal(i) for i in indices)


def seal_all(task: Task, indices: np.ndarray, workers: int) -> list[str]:
    """Seal one message per index with a process pool; return base64 ciphertexts in order."""
    public_key = base64.b64decode(task.public_key)
    chunks = [c.tolist() for c in np.array_split(indices, max(1, len(indices) // 2000))]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        sealed = pool.map(
            _seal_chunk,
            [public_key] * len(chunks),
            [task.task_id] * len(chunks),
            [task.domain_size] * len(chunks),
            chunks,
        )
        out: list[str] = []
        for blob in sealed:
            out.extend(
                base64.b64encode(blob[i : i + CIPHERTEXT_LENGTH]).decode("ascii")
                for i in range(0, len(blob), CIPHERTEXT_LENGTH)
            )
    return out


def build_requests(
    host: str, port: int, task_id: str, ciphertexts: list[str], ids: list[str], per_request: int
) -> list[bytes]:
    """Raw HTTP/1.1 requests posting ``per_request`` submissions each."""
    head = (
        f"POST /v1/tasks/{task_id}/submissions HTTP/1.1\r\n"
        f"Host: {host}:{port}\r\nContent-Type: application/json\r\n"
    ).encode("ascii")
    out = []
    for start in range(0, len(ciphertexts), per_request):
        body = json.dumps(
            {
                "format": SUBMISSIONS_FORMAT,
                "submissions": [
                    {"submission_id": sid, "ciphertexts": [ct]}
                    for sid, ct in zip(
                        ids[start : start + per_request],
                        ciphertexts[start : start + per_request],
                        strict=True,
                    )
                ],
            },
            separators=(",", ":"),
        ).encode("ascii")
        out.append(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return out


# --- the load generator ---------------------------------------------------------------------


@dataclass
class PhaseResult:
    """What one phase measured (times in seconds)."""

    seconds: float
    latencies: np.ndarray
    statuses: np.ndarray
    errors: Counter[str] = field(default_factory=Counter)


def _content_length(head: bytes) -> int:
    lower = head.lower()
    at = lower.find(b"\r\ncontent-length:")
    if at < 0:
        return 0
    end = lower.find(b"\r\n", at + 2)
    return int(lower[at + 17 : end])


async def _worker(
    host: str,
    port: int,
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    jobs: Iterator[tuple[int, bytes]],
    result: PhaseResult,
) -> None:
    reader, writer = connection
    clock = time.perf_counter
    latencies, statuses = result.latencies, result.statuses
    for index, request in jobs:
        start = clock()
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = _content_length(head)
            if length:
                await reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            result.errors[type(exc).__name__] += 1
            writer.close()
            reader, writer = await asyncio.open_connection(host, port)
            continue
        latencies[index] = clock() - start
        statuses[index] = int(head[9:12])
    writer.close()


async def _run_phase(host: str, port: int, requests: list[bytes], connections: int) -> PhaseResult:
    opened = [await asyncio.open_connection(host, port) for _ in range(connections)]
    result = PhaseResult(0.0, np.full(len(requests), np.nan), np.zeros(len(requests), np.int64))
    jobs = iter(enumerate(requests))  # shared: each worker takes the next request
    start = time.perf_counter()
    await asyncio.gather(*(_worker(host, port, c, jobs, result) for c in opened))
    result.seconds = time.perf_counter() - start
    return result


def run_phase(host: str, port: int, requests: list[bytes], connections: int) -> PhaseResult:
    """Post every request over ``connections`` keep-alive connections (closed loop)."""
    try:
        import uvloop

        factory: Any = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_run_phase(host, port, requests, connections))


# --- CPU accounting -------------------------------------------------------------------------


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICK


def _machine_busy() -> float:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / _CLOCK_TICK


def _self_cpu() -> float:
    times = os.times()
    return times.user + times.system


class CpuMeter:
    """CPU seconds of the generator (this process), the two services and the rest."""

    def __init__(self, shuffler: int, analyzer: int) -> None:
        self.pids = {"shuffler": shuffler, "analyzer": analyzer}
        self.start = self._sample()

    def _sample(self) -> dict[str, float]:
        sample = {name: _process_cpu(pid) for name, pid in self.pids.items()}
        sample["generator"] = _self_cpu()
        sample["machine"] = _machine_busy()
        sample["wall"] = time.perf_counter()
        return sample

    def stop(self, units: int = 0) -> dict[str, Any]:
        """Cores each party used since the meter started, and CPU µs per unit of work."""
        end = self._sample()
        delta = {k: end[k] - self.start[k] for k in end}
        wall = delta.pop("wall")
        machine = delta.pop("machine")
        delta["other_processes"] = max(0.0, machine - sum(delta.values()))
        out: dict[str, Any] = {"cores_used": {k: round(v / wall, 2) for k, v in delta.items()}}
        if units:
            out["cpu_us_per_submission"] = {
                k: round(delta[k] / units * 1e6, 1) for k in ("shuffler", "analyzer", "generator")
            }
        out["load_average_1m_after"] = round(os.getloadavg()[0], 2)
        return out


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _server_stack(pid: int) -> dict[str, bool]:
    """Whether the service loaded uvloop and httptools (uvicorn's "auto" picks them)."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {"uvloop": "/uvloop/" in maps, "httptools": "/httptools/" in maps}


def renice(pid: int, nice: int) -> None:
    """Set the nice value of every thread of ``pid`` (on Linux a priority is per thread)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.setpriority(os.PRIO_PROCESS, int(tid), nice)


# --- one run --------------------------------------------------------------------------------


def _percentile_ms(latencies: np.ndarray, q: float) -> float:
    good = latencies[~np.isnan(latencies)]
    return round(float(np.percentile(good, q)) * 1e3, 2) if good.size else float("nan")


def _summary(result: PhaseResult, per_request: list[int], cpu: dict[str, Any]) -> dict[str, Any]:
    ok = result.statuses == 200
    submissions = int(np.asarray(per_request)[ok].sum())
    bad = Counter(str(s) for s in result.statuses[~ok].tolist())
    return {
        "requests": len(per_request),
        "requests_ok": int(ok.sum()),
        "submissions_acknowledged": submissions,
        "seconds": round(result.seconds, 3),
        "requests_per_s": round(int(ok.sum()) / result.seconds, 1),
        "messages_per_s": round(submissions / result.seconds, 1),
        "p50_ms": _percentile_ms(result.latencies, 50),
        "p90_ms": _percentile_ms(result.latencies, 90),
        "p99_ms": _percentile_ms(result.latencies, 99),
        "max_ms": _percentile_ms(result.latencies, 100),
        "failed": {**bad, **result.errors},
        **cpu,
    }


_HTTP = httpx.Client(timeout=30)  # one keep-alive client: polling should cost little CPU


def _metrics(url: str) -> dict[str, Any]:
    answer: dict[str, Any] = _HTTP.get(f"{url}/v1/metrics").json()
    return answer


def one_run(
    args: argparse.Namespace,
    run: int,
    files: Path,
    task: Task,
    single: tuple[list[str], list[str]],
    batched: tuple[list[str], list[str]],
    indices: np.ndarray,
) -> dict[str, Any]:
    """Start fresh services, run the two phases, wait for the analyzer, check, stop."""
    workdir = Path(tempfile.mkdtemp(prefix=f"service_load_{run}_", dir=args.dir))
    for name in ("task.json", "analyzer.key", "forward.token"):
        (workdir / name).symlink_to(files / name)
    analyzer = ServiceProcess(
        "analyzer",
        [
            "--task", str(workdir / "task.json"),
            "--key", str(workdir / "analyzer.key"),
            "--store", f"sqlite:///{workdir / 'analyzer.db'}",
            "--forward-token-file", str(workdir / "forward.token"),
        ],
        workdir,
    )  # fmt: skip
    analyzer.start()
    if args.analyzer_nice:
        assert analyzer.process is not None
        renice(analyzer.process.pid, args.analyzer_nice)
    shuffler = ServiceProcess(
        "shuffler",
        [
            "--task", str(workdir / "task.json"),
            "--store", f"sqlite:///{workdir / 'shuffler.db'}",
            "--forward-token-file", str(workdir / "forward.token"),
            "--forward", analyzer.url,
        ],
        workdir,
    )  # fmt: skip
    shuffler.start()
    assert shuffler.process is not None and analyzer.process is not None
    host, port = shuffler.host, shuffler.port
    out: dict[str, Any] = {"run": run, "shuffler_server": _server_stack(shuffler.process.pid)}
    try:
        phases = (
            ("single", single, 1, args.single_connections),
            ("batched", batched, args.per_request, args.batched_connections),
        )
        clock_started = clock_stopped = 0.0
        for name, (cts, ids), per, connections in phases:
            requests = build_requests(host, port, task.task_id, cts, ids, per)
            sizes = [min(per, len(cts) - i) for i in range(0, len(cts), per)]
            _log(f"run {run}: {name}: {len(requests)} requests over {connections} connections")
            meter = CpuMeter(shuffler.process.pid, analyzer.process.pid)
            load_before = round(os.getloadavg()[0], 2)
            clock_started = clock_started or time.perf_counter()
            result = run_phase(host, port, requests, connections)
            clock_stopped = time.perf_counter()
            out[name] = _summary(result, sizes, {"load_average_1m_before": load_before})
            out[name].update(meter.stop(out[name]["submissions_acknowledged"]))
            _log(
                f"run {run}: {name}: {out[name]['requests_per_s']} req/s, "
                f"{out[name]['messages_per_s']} msg/s, p99 {out[name]['p99_ms']} ms"
            )
        acknowledged = out["single"]["submissions_acknowledged"]
        acknowledged += out["batched"]["submissions_acknowledged"]
        # Submissions short of a whole batch (only if some request failed) stay in the shuffler.
        remainder = int(_metrics(shuffler.url).get("users_waiting", 0))
        expected_users = acknowledged - remainder
        _log(f"run {run}: waiting for the analyzer to count {expected_users} submissions")
        meter = CpuMeter(shuffler.process.pid, analyzer.process.pid)
        deadline = time.monotonic() + args.drain_timeout
        while True:
            stats = _metrics(analyzer.url)
            users = int(stats.get("users_aggregated", 0))
            if users >= expected_users or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        all_counted = time.perf_counter()
        out["drain"] = {"seconds_after_last_ack": round(all_counted - clock_stopped, 2)}
        out["drain"].update(meter.stop())
        shuffler_stats = _metrics(shuffler.url)
        out["acknowledged"] = acknowledged
        out["counted"] = int(stats.get("messages_counted", 0))
        out["users_aggregated"] = users
        out["waiting_remainder"] = remainder
        out["pipeline_messages_per_s"] = round(
            out["counted"] / (all_counted - clock_started), 1
        )  # first request sent -> last message counted, both phases
        out["batches_aggregated"] = int(stats.get("batches_aggregated", 0))
        out["peak_rss_mib"] = {
            "shuffler": _peak_rss_mib(shuffler.process.pid),
            "analyzer": _peak_rss_mib(analyzer.process.pid),
        }
        out["users_waiting_in_shuffler"] = int(shuffler_stats.get("users_waiting", -1))
        out["batches_unsent"] = int(shuffler_stats.get("batches_unsent", -1))
        out["messages_rejected_by_analyzer"] = int(
            stats.get("messages_undecryptable", 0) + stats.get("messages_undecodable", 0)
        )
    finally:
        shuffler.stop()
        analyzer.stop()
    store = open_analyzer_store(
        f"sqlite:///{workdir / 'analyzer.db'}", task.task_id, read_only=True
    )
    try:
        counts = store.totals(task.domain_size).counts
    finally:
        store.close()
    if out["acknowledged"] == len(indices):
        expected = np.bincount(indices, minlength=task.domain_size)
        out["counts_match"] = bool(np.array_equal(counts, expected))
    else:  # some request failed: which users are counted is not known here
        out["counts_match"] = None
    if not args.keep:
        for path in sorted(workdir.iterdir()):
            path.unlink()
        workdir.rmdir()
    return out


def decrypt_rate(task: Task, key: Any, ciphertexts: list[str], indices: np.ndarray) -> float:
    """Messages/s of :meth:`MessageOpener.open_payload` in this thread (best of 3)."""
    payload = b"".join(base64.b64decode(c) for c in ciphertexts)
    opener = MessageOpener(key, task.task_id, task.domain_size)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        opened = opener.open_payload(payload)
        best = min(best, time.perf_counter() - start)
        if not np.array_equal(opened.indices, indices):
            raise AssertionError("decrypted indices differ from the sealed ones")
    return len(ciphertexts) / best


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "shuffledp": shuffledp.__version__}
    for name in ("uvicorn", "starlette", "uvloop", "httptools", "cryptography", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["sqlite"] = sqlite3.sqlite_version
    return out


def _best_and_median(runs: list[dict[str, Any]], path: tuple[str, ...], best: str) -> Any:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value[key]
        values.append(value)
    pick = max(values) if best == "max" else min(values)
    return {"best": pick, "median": statistics.median(values), "all": values}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs, each on fresh stores")
    parser.add_argument("--single-users", type=int, default=10_000)
    parser.add_argument("--batched-users", type=int, default=200_000)
    parser.add_argument("--per-request", type=int, default=100)
    parser.add_argument("--min-batch-users", type=int, default=10_000)
    parser.add_argument("--single-connections", type=int, default=32)
    parser.add_argument("--batched-connections", type=int, default=128)
    parser.add_argument("--domain-size", type=int, default=10)
    parser.add_argument("--decrypt-messages", type=int, default=10_000)
    parser.add_argument(
        "--analyzer-nice",
        type=int,
        default=0,
        help="nice value of the analyzer's threads (default 0: same priority as the shuffler)",
    )
    parser.add_argument("--seal-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--dir", default=None, help="where the temporary stores go")
    parser.add_argument("--keep", action="store_true", help="keep the stores and logs")
    args = parser.parse_args()
    b = args.min_batch_users
    for name in ("single_users", "batched_users"):
        if getattr(args, name) % b or getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be a positive multiple of {b}")

    started = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    domain = [f"v{i}" for i in range(args.domain_size)]
    task, key = create_task("krr", domain, 1.0, 1e-6, b)
    files = Path(tempfile.mkdtemp(prefix="service_load_task_", dir=args.dir))
    save_task(task, files / "task.json")
    save_private_key(key, files / "analyzer.key")
    write_secret_file(files / "forward.token", secrets.token_urlsafe(32))

    n_single, n_total = args.single_users, args.single_users + args.batched_users
    rng = np.random.default_rng()
    values = rng.integers(0, args.domain_size, n_total)
    indices = build_randomizer(task).randomize(values, rng).payload  # k-RR: one per user
    _log(f"sealing {n_total} ciphertexts with {args.seal_workers} processes (before any clock)")
    seal_start = time.perf_counter()
    ciphertexts = seal_all(task, indices, args.seal_workers)
    seal_seconds = time.perf_counter() - seal_start
    ids = [secrets.token_hex(16) for _ in range(n_total)]
    single = (ciphertexts[:n_single], ids[:n_single])
    batched = (ciphertexts[n_single:], ids[n_single:])

    runs = [
        one_run(args, run, files, task, single, batched, indices)
        for run in range(1, args.repeats + 1)
    ]
    _log("timing the analyzer's decryption in one thread")
    m = min(args.decrypt_messages, n_total)
    decrypt = [decrypt_rate(task, key, ciphertexts[:m], indices[:m]) for _ in range(args.repeats)]
    for path in sorted(files.iterdir()):
        path.unlink()
    files.rmdir()

    best_single = max(runs, key=lambda r: r["single"]["requests_per_s"])
    best_batched = max(runs, key=lambda r: r["batched"]["messages_per_s"])
    result = {
        # Each figure from its best run, with that run's latencies.
        "single_requests_per_s": best_single["single"]["requests_per_s"],
        "single_p50_ms": best_single["single"]["p50_ms"],
        "single_p99_ms": best_single["single"]["p99_ms"],
        "batched_messages_per_s": best_batched["batched"]["messages_per_s"],
        "batched_p50_ms": best_batched["batched"]["p50_ms"],
        "batched_p99_ms": best_batched["batched"]["p99_ms"],
        "decrypt_messages_per_s_per_core": round(max(decrypt), 1),
        "acknowledged": best_batched["acknowledged"],
        "counted": best_batched["counted"],
        "counts_match": best_batched["counts_match"],
        "every_run_counted_all_acknowledged": all(
            r["counted"] == r["acknowledged"] and r["counts_match"] for r in runs
        ),
        "summary": {
            "single_requests_per_s": _best_and_median(runs, ("single", "requests_per_s"), "max"),
            "single_p99_ms": _best_and_median(runs, ("single", "p99_ms"), "min"),
            "batched_messages_per_s": _best_and_median(runs, ("batched", "messages_per_s"), "max"),
            "decrypt_messages_per_s_per_core": {
                "best": round(max(decrypt), 1),
                "median": round(statistics.median(decrypt), 1),
                "all": [round(x, 1) for x in decrypt],
            },
        },
        "runs": runs,
        "config": {
            "protocol": "krr",
            "messages_per_submission": 1,
            "domain_size": args.domain_size,
            "min_batch_users": b,
            "single_users": n_single,
            "single_connections": args.single_connections,
            "batched_users": args.batched_users,
            "submissions_per_batched_request": args.per_request,
            "batched_connections": args.batched_connections,
            "repeats": args.repeats,
            "analyzer_nice": args.analyzer_nice,
            "store": "sqlite (WAL, synchronous=FULL, group commit), temporary directory",
            "store_directory": args.dir or tempfile.gettempdir(),
            "ciphertexts_sealed_before_clock": n_total,
            "sealing_seconds": round(seal_seconds, 2),
            "sealing_processes": args.seal_workers,
            "sealing_note": "client-side HPKE sealing precomputed; not in any throughput",
            "load_generator": "asyncio streams (uvloop), keep-alive HTTP/1.1, this process",
            "decrypt_messages_timed": m,
            "cpu_count": os.cpu_count(),
            "load_average_at_start": load_at_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "total_seconds": round(time.perf_counter() - started, 1),
            "machine": platform.machine(),
            **_versions(),
        },
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
