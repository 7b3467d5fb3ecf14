"""The Spark backend against the local one: the same counts, bit for bit, on the same input."""

from __future__ import annotations

import base64
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _stores import write_task_files

from shuffledp.backends import (
    DatasetWriter,
    LocalBackend,
    SimulationPlan,
    export_analyzer_store,
    open_dataset,
)
from shuffledp.backends.kernels import encode_plaintexts
from shuffledp.backends.spark import SparkBackend, spark_session
from shuffledp.cli import main
from shuffledp.randomizers.bitflip import FlipRandomizer
from shuffledp.service.store import open_analyzer_store

pytestmark = pytest.mark.slow


def _export(stored, out, rows_per_file=200):
    store = open_analyzer_store(stored.url, stored.task.task_id, read_only=True)
    try:
        return export_analyzer_store(stored.task, store, out, rows_per_file=rows_per_file)
    finally:
        store.close()


def test_ciphertext_counts_equal_local_and_the_service(spark, stores, tmp_path):
    stored = stores("flip")
    dataset = _export(stored, tmp_path / "ds")
    key = stored.key.private_bytes_raw()
    on_spark = SparkBackend(spark).count(dataset, private_key=key)
    local = LocalBackend().count(dataset, private_key=key)
    assert on_spark.same_as(local)
    assert on_spark.counts.tolist() == stored.counts.tolist()
    assert on_spark.undecryptable == stored.undecryptable
    assert on_spark.undecodable == stored.undecodable


def test_plaintext_counts_equal_local(spark, tmp_path):
    d = 40
    rng = np.random.default_rng(4)
    with DatasetWriter(tmp_path / "ds", "plaintext", d, rows_per_file=900) as writer:
        for i in range(5):
            rows = encode_plaintexts(rng.integers(0, d, size=700 + i), d)
            rows[rng.integers(0, len(rows), size=5), 0] = 9  # undecodable
            writer.write(writer.add_batch(f"b{i}", 300), rows)
        writer.write(0, encode_plaintexts(np.array([1, 2, 3]), d))  # batch 0 again, later
    dataset = writer.dataset
    on_spark = SparkBackend(spark).count(dataset)
    assert on_spark.same_as(LocalBackend(chunk_rows=100).count(dataset))
    assert on_spark.messages == dataset.n_messages
    assert 0 < on_spark.undecodable <= 25


def test_aggregate_cli_on_spark_equals_publish(spark, stores, tmp_path, capsys):
    stored = stores("krr")
    task, key = write_task_files(stored, tmp_path)
    assert main(["analyzer", "publish", "--task", str(task), "--store", stored.url]) == 0
    published = json.loads(capsys.readouterr().out)
    data = tmp_path / "ds"
    assert (
        main(
            [
                "analyzer",
                "export",
                "--task",
                str(task),
                "--store",
                stored.url,
                "--output",
                str(data),
                "--quiet",
            ]
        )
        == 0
    )
    out = tmp_path / "release.json"
    code = main(
        [
            "analyzer",
            "aggregate",
            "--task",
            str(task),
            "--key",
            str(key),
            "--input",
            str(data),
            "--backend",
            "spark",
            "--output",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "aggregate [spark]" in err
    assert json.loads(out.read_text()) == published
    # The key went to the executors as a broadcast: it is in no file the job read or wrote.
    raw = stored.key.private_bytes_raw()
    for path in [*data.iterdir(), out]:
        content = path.read_bytes()
        assert raw not in content and base64.b64encode(raw) not in content
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session was not stopped


def test_simulation_equals_local(spark):
    plan = SimulationPlan.create(
        FlipRandomizer(5, 0.03, 4),
        np.array([300, 120, 50, 20, 10]),
        partitions=3,
        replicates=4,
        seed=21,
    )
    on_spark = SparkBackend(spark).simulate(plan)
    assert on_spark.same_as(LocalBackend().simulate(plan))
    assert on_spark.batch_counts().shape == (4, 5)


def test_permute_on_spark(spark, stores, tmp_path):
    stored = stores("flip", bad=False)
    dataset = _export(stored, tmp_path / "in", rows_per_file=10**6)
    permuted = SparkBackend(spark).permute(dataset, str(tmp_path / "out"))
    assert permuted == open_dataset(tmp_path / "out")
    assert [b.batch_id for b in permuted.batches] == stored.batch_ids
    key = stored.key.private_bytes_raw()
    assert (
        LocalBackend()
        .count(permuted, private_key=key)
        .same_as(LocalBackend().count(dataset, private_key=key))
    )
    before = pq.read_table(tmp_path / "in" / dataset.files[0])
    after = pa.concat_tables(pq.read_table(tmp_path / "out" / f) for f in permuted.files)
    assert after.schema.names == ["batch", "message"]  # no key column left
    rows = list(zip(after["batch"].to_pylist(), after["message"].to_pylist(), strict=True))
    original = list(zip(before["batch"].to_pylist(), before["message"].to_pylist(), strict=True))
    assert sorted(rows) == sorted(original) and rows != original
    with pytest.raises(ValueError, match="not empty"):
        SparkBackend(spark).permute(dataset, str(tmp_path / "out"))


def test_the_active_session_is_reused_and_left_running(spark):
    session, created = spark_session("local[1]")
    assert session is spark and not created
    backend = SparkBackend()
    backend.close()
    assert not spark.sparkContext._jsc.sc().isStopped()


def test_simulate_cli_on_spark_equals_local(spark, tmp_path, capsys):
    outputs = {}
    for backend in ("local", "spark"):
        out = tmp_path / f"{backend}.json"
        argv = [
            "simulate",
            "krr",
            "--n",
            "5000",
            "--domain-size",
            "6",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--seed",
            "3",
            "--backend",
            backend,
            "--output",
            str(out),
        ]
        assert main(argv) == 0
        assert f"[{backend}]" in capsys.readouterr().err
        outputs[backend] = json.loads(out.read_text())
    assert outputs["spark"]["estimate"] == outputs["local"]["estimate"]
    assert outputs["spark"]["simulation"]["backend"] == "spark"
