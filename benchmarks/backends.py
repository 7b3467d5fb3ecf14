"""Local and Spark backends on the same messages; prints one JSON object.

1. Plaintext counting: ``--messages`` (default 1e8) 5-byte wire plaintexts over
   ``--domain-size`` bins (Zipf), written once as a Parquet message dataset,
   then decoded and counted by the local backend and by Spark.
2. Decryption: ``--encrypted`` (default 40 000) HPKE ciphertexts of one task,
   decrypted, decoded and counted by each backend, each encapsulated key at
   most once (the local backend's CPU seconds too: they depend little on the
   machine's load).

Spark runs at every master of ``--masters`` (default ``local[1],local[2]``),
each in a fresh process so that every start-up is cold. Start-up (JVM and
session), a warm-up job (Python workers, imports) and the measured jobs are
timed apart. The counts of every backend must be equal, bit for bit
(``counts_equal``). Progress goes to stderr; the machine's load average is
recorded before and after, since other work on a shared machine slows every
figure.

Usage: python benchmarks/backends.py [--messages 1e6] [--encrypted 5000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from shuffledp.backends import DatasetWriter, LocalBackend, MessageCounts, open_dataset
from shuffledp.backends.kernels import encode_plaintexts

CHUNK = 1 << 22
SPARK_CONFIG = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}


def log(message: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"[backends benchmark {stamp}] {message}", file=sys.stderr, flush=True)


def write_plaintexts(path: Path, messages: int, d: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    weights = np.arange(1, d + 1, dtype=np.float64) ** -1.1
    weights /= weights.sum()
    batches = max(1, messages // 10_000_000)
    with DatasetWriter(path, "plaintext", d, rows_per_file=1 << 24) as writer:
        for b in range(batches):
            index = writer.add_batch(f"{b:032x}", 1)
            total = messages // batches + (1 if b < messages % batches else 0)
            for start in range(0, total, CHUNK):
                size = min(CHUNK, total - start)
                writer.write(index, encode_plaintexts(rng.choice(d, size=size, p=weights), d))
            log(f"wrote batch {b + 1}/{batches} of plaintexts")


def write_ciphertexts(path: Path, messages: int, d: int) -> bytes:
    from shuffledp.service.task import create_task
    from shuffledp.service.wire import MessageSealer, public_key_from_b64

    task, key = create_task("krr", [str(j) for j in range(d)], 1.0, 1e-6, 1000)
    sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, d)
    rng = np.random.default_rng(1)
    started = time.perf_counter()
    with DatasetWriter(
        path, "ciphertext", d, task_id=task.task_id, rows_per_file=max(1, messages // 8)
    ) as writer:
        index = writer.add_batch("0" * 32, messages)
        for start in range(0, messages, 10_000):
            bins = rng.integers(0, d, size=min(10_000, messages - start))
            writer.write(index, b"".join(sealer.seal_all(bins)))
    log(f"sealed {messages} messages in {time.perf_counter() - started:.1f} s")
    return key.private_bytes_raw()


def timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _triples(counts: MessageCounts) -> list[list[int]]:
    t = counts.triples
    return [t.batch.tolist(), t.bin.tolist(), t.count.tolist()]


def spark_child(master: str, plain_dir: str, cipher_dir: str) -> None:
    """Run in a fresh process: one master's figures as JSON on stdout (the key on stdin)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    key = bytes.fromhex(sys.stdin.readline().strip())
    plain, cipher = open_dataset(plain_dir), open_dataset(cipher_dir)
    from shuffledp.backends.simulation import SimulationPlan
    from shuffledp.backends.spark import SparkBackend, spark_session
    from shuffledp.randomizers.krr import KRRRandomizer

    log(f"starting Spark at {master}")
    (session, _), startup = timed(lambda: spark_session(master, "benchmark", SPARK_CONFIG))
    session.sparkContext.setLogLevel("ERROR")
    backend = SparkBackend(session)
    tiny_plan = SimulationPlan.create(KRRRandomizer(4, 1.0), np.array([10, 10, 10, 10]), seed=0)
    _, warmup = timed(lambda: backend.simulate(tiny_plan))
    with tempfile.TemporaryDirectory() as tmp:
        with DatasetWriter(Path(tmp) / "one", "plaintext", plain.domain_size) as writer:
            writer.write(writer.add_batch("0" * 32, 1), encode_plaintexts(np.array([0]), 2))
        assert writer.dataset is not None
        one = writer.dataset
        backend.count(one)
        _, job_overhead = timed(lambda: backend.count(one))
    figures: dict[str, Any] = {
        "master": master,
        "cores": session_cores(master),
        "startup_seconds": startup,
        "warmup_seconds": warmup,
        "job_overhead_seconds": job_overhead,
    }
    for name, dataset, key_or_none in (("plaintext", plain, None), ("decrypt", cipher, key)):
        runs = []
        for attempt in range(2):
            log(f"{master}: {name} of {dataset.n_messages} messages, run {attempt + 1} of 2")
            counts, seconds = timed(
                lambda d=dataset, k=key_or_none: backend.count(d, private_key=k)
            )
            runs.append(seconds)
        figures[f"{name}_first_seconds"] = runs[0]
        figures[f"{name}_seconds"] = runs[1]
        figures[f"{name}_per_s"] = dataset.n_messages / runs[1]
        figures[f"{name}_per_s_beyond_job_overhead"] = dataset.n_messages / max(
            runs[1] - job_overhead, 1e-9
        )
        figures[f"{name}_triples"] = _triples(counts)
    session.stop()
    json.dump(figures, sys.stdout)


def session_cores(master: str) -> int:
    inside = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    if inside == "*":
        return os.cpu_count() or 1
    return int(inside)


def run_spark(master: str, plain: Path, cipher: Path, key: bytes) -> dict[str, Any]:
    child = subprocess.run(
        [sys.executable, __file__, "--spark-child", master, str(plain), str(cipher)],
        input=key.hex() + "\n",
        capture_output=True,
        text=True,
        check=False,
    )
    for line in child.stderr.splitlines():
        if line.startswith("[backends benchmark"):
            print(line, file=sys.stderr, flush=True)
    if child.returncode != 0:
        raise SystemExit(f"Spark run at {master} failed:\n{child.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(child.stdout)
    return figures


def breakeven(overhead_s: float, local_rate: float, spark_rate: float) -> float | None:
    """Messages above which Spark (fixed overhead + n / spark_rate) beats n / local_rate."""
    gain = 1.0 / local_rate - 1.0 / spark_rate
    return None if gain <= 0 else overhead_s / gain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=float, default=1e8, help="plaintexts (default 1e8)")
    parser.add_argument("--encrypted", type=float, default=40_000, help="ciphertexts")
    parser.add_argument("--domain-size", type=int, default=100)
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--workdir", default=None, help="keep the datasets here (default: temp)")
    parser.add_argument("--spark-child", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_child is not None:
        spark_child(*args.spark_child)
        return
    messages, encrypted, d = int(args.messages), int(args.encrypted), args.domain_size
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="shuffledp-bench-"))
    load_before = os.getloadavg()
    try:
        plain_path, cipher_path = workdir / "plaintexts", workdir / "ciphertexts"
        reuse = (plain_path / "_shuffledp.json").exists()
        if reuse and open_dataset(plain_path).n_messages == messages:
            log(f"reusing the {messages} plaintexts in {plain_path}")
        else:
            shutil.rmtree(plain_path, ignore_errors=True)
            log(f"writing {messages} plaintext messages to {plain_path}")
            _, write_s = timed(lambda: write_plaintexts(plain_path, messages, d, seed=0))
            log(f"written in {write_s:.1f} s")
        plain = open_dataset(plain_path)
        shutil.rmtree(cipher_path, ignore_errors=True)
        key = write_ciphertexts(cipher_path, encrypted, d)
        cipher = open_dataset(cipher_path)

        local = LocalBackend(chunk_rows=1 << 20, show_progress=False)
        log("counting plaintexts locally")
        local_plain, local_s = timed(lambda: local.count(plain))
        log(f"local: {local_s:.1f} s; decrypting locally")
        cpu_before = time.process_time()
        local_cipher, local_decrypt_s = timed(lambda: local.count(cipher, private_key=key))
        local_decrypt_cpu_s = time.process_time() - cpu_before
        masters = [m.strip() for m in args.masters.split(",")]
        spark = [run_spark(m, plain_path, cipher_path, key) for m in masters]
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    for figures in spark:
        figures["counts_equal"] = figures.pop("plaintext_triples") == _triples(
            local_plain
        ) and figures.pop("decrypt_triples") == _triples(local_cipher)
    last = spark[-1]
    local_rate = plain.n_messages / local_s
    local_decrypt_rate = cipher.n_messages / local_decrypt_s
    overhead = sum(
        float(last[k]) for k in ("startup_seconds", "warmup_seconds", "job_overhead_seconds")
    )
    one = min(spark, key=lambda s: int(s["cores"]))
    per_core_decrypt = float(one["decrypt_per_s_beyond_job_overhead"]) / int(one["cores"])
    per_core_plain = float(one["plaintext_per_s_beyond_job_overhead"]) / int(one["cores"])
    import pyspark

    result = {
        "messages": plain.n_messages,
        "domain_size": d,
        "local_seconds": local_s,
        "spark_seconds": last["plaintext_seconds"],
        "spark_master": last["master"],
        "spark_startup_seconds": last["startup_seconds"],
        "spark_warmup_seconds": last["warmup_seconds"],
        "spark_job_overhead_seconds": last["job_overhead_seconds"],
        "local_per_s": local_rate,
        "spark_per_s": last["plaintext_per_s"],
        "encrypted_messages": cipher.n_messages,
        "local_decrypt_seconds": local_decrypt_s,
        "local_decrypt_cpu_seconds": local_decrypt_cpu_s,
        "local_decrypt_per_s": local_decrypt_rate,
        "spark_decrypt_per_s": last["decrypt_per_s"],
        "counts_equal": all(bool(s["counts_equal"]) for s in spark),
        "spark": spark,
        "breakeven_messages": {
            "plaintext": breakeven(overhead, local_rate, float(last["plaintext_per_s"])),
            "decrypt": breakeven(overhead, local_decrypt_rate, float(last["decrypt_per_s"])),
        },
        "spark_per_core": {"plaintext_per_s": per_core_plain, "decrypt_per_s": per_core_decrypt},
        "extrapolated_hours_for_1e10": {
            f"{cores}_cores": {
                "decrypt": 1e10 / (per_core_decrypt * cores) / 3600,
                "plaintext": 1e10 / (per_core_plain * cores) / 3600,
            }
            for cores in (1, 64, 256, 1024)
        },
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pyspark": pyspark.__version__,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
