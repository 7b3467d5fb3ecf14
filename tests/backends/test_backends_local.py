"""The dataset layout and the local backend: export, count, simulate, permute."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from shuffledp.backends import (
    METADATA_FILE,
    DatasetWriter,
    LocalBackend,
    SimulationPlan,
    export_analyzer_store,
    open_dataset,
)
from shuffledp.backends.analyzer import aggregate_dataset
from shuffledp.backends.kernels import encode_plaintexts
from shuffledp.randomizers.bitflip import FlipRandomizer
from shuffledp.randomizers.krr import KRRRandomizer
from shuffledp.service.sqlite_store import SQLiteAnalyzerStore
from shuffledp.service.store import open_analyzer_store


def _export(stored, out):
    store = open_analyzer_store(stored.url, stored.task.task_id, read_only=True)
    try:
        return export_analyzer_store(stored.task, store, out, rows_per_file=150)
    finally:
        store.close()


def test_export_writes_the_documented_layout(stores, tmp_path):
    stored = stores("flip")
    dataset = _export(stored, tmp_path / "ds")
    meta = json.loads((tmp_path / "ds" / METADATA_FILE).read_text())
    assert meta["format"] == "shuffledp-messages/1"
    assert meta["kind"] == "ciphertext" and meta["message_bytes"] == 53
    assert meta["task_id"] == stored.task.task_id and meta["domain_size"] == 5
    assert [b["batch_id"] for b in meta["batches"]] == stored.batch_ids
    assert [b["n_users"] for b in meta["batches"]] == [100, 130, 115]
    assert meta["n_users"] == stored.n_users
    assert len(meta["files"]) > 1  # 150 rows per file
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "ds" / meta["files"][0])
    assert table.schema.names == ["batch", "message"]
    assert str(table.schema.field("batch").type) == "int32"
    assert str(table.schema.field("message").type) == "binary"
    assert open_dataset(tmp_path / "ds") == dataset


def test_local_count_equals_the_service(stores, tmp_path):
    stored = stores("flip")
    dataset = _export(stored, tmp_path / "ds")
    key = stored.key.private_bytes_raw()
    counts = LocalBackend(chunk_rows=37).count(dataset, private_key=key)
    assert counts.counts.tolist() == stored.counts.tolist()
    assert counts.undecryptable == stored.undecryptable
    assert counts.undecodable == stored.undecodable
    assert counts.messages_per_batch.tolist() == [b.n_messages for b in dataset.batches]
    # Per batch, exactly the service's batch_counts.
    store = SQLiteAnalyzerStore(stored.path, stored.task.task_id, read_only=True)
    rows = store.db.read(
        lambda conn: conn.execute("SELECT batch_id, bin, count FROM batch_counts").fetchall()
    )
    store.close()
    service = np.zeros((3, 5), dtype=np.int64)
    for batch_id, j, c in rows:
        service[stored.batch_ids.index(batch_id), j] = c
    assert np.array_equal(counts.batch_counts(), service)
    assert LocalBackend(chunk_rows=10**6).count(dataset, private_key=key).same_as(counts)


def test_aggregate_refuses_a_wrong_or_short_dataset(stores, tmp_path):
    stored = stores("krr", bad=False)
    dataset = _export(stored, tmp_path / "ds")
    key = stored.key.private_bytes_raw()
    result = aggregate_dataset(stored.task, dataset, LocalBackend(), key)
    assert result.totals.n_users == stored.n_users
    assert result.totals.counts.tolist() == stored.counts.tolist()
    other = stores("flip", bad=False)
    with pytest.raises(ValueError, match="is for task"):
        aggregate_dataset(other.task, dataset, LocalBackend(), key)
    # Files that do not hold what the metadata lists: refused.
    flip = _export(other, tmp_path / "flip")
    shifted = replace(
        flip,
        batches=(
            replace(flip.batches[0], n_messages=flip.batches[0].n_messages + 1),
            replace(flip.batches[1], n_messages=flip.batches[1].n_messages - 1),
            flip.batches[2],
        ),
    )
    with pytest.raises(ValueError, match="missing or extra file"):
        aggregate_dataset(other.task, shifted, LocalBackend(), other.key.private_bytes_raw())


def test_metadata_is_checked(tmp_path):
    with DatasetWriter(tmp_path / "ds", "plaintext", 3) as writer:
        writer.write(writer.add_batch("b0", 10), encode_plaintexts(np.array([0, 1, 2]), 3))
    path = tmp_path / "ds" / METADATA_FILE
    good = json.loads(path.read_text())
    for change, match in [
        ({"files": ["../x.parquet"]}, "plain"),
        ({"n_users": 11}, "differ"),
        ({"message_bytes": 53}, "5 bytes"),
        ({"format": "other"}, "not a"),
    ]:
        path.write_text(json.dumps({**good, **change}))
        with pytest.raises(ValueError, match=match):
            open_dataset(tmp_path / "ds")
    path.unlink()
    with pytest.raises(FileNotFoundError, match="did not finish"):
        open_dataset(tmp_path / "ds")
    with pytest.raises(ValueError, match="not empty"):
        DatasetWriter(tmp_path / "ds", "plaintext", 3)


def test_an_interrupted_export_leaves_no_metadata(tmp_path):
    with pytest.raises(RuntimeError), DatasetWriter(tmp_path / "ds", "plaintext", 3) as writer:
        writer.write(writer.add_batch("b0", 10), encode_plaintexts(np.array([0, 1]), 3))
        raise RuntimeError("crash")
    assert not (tmp_path / "ds" / METADATA_FILE).exists()


def test_local_simulation_is_reproducible_and_bucketing_changes_nothing():
    randomizer = FlipRandomizer(6, 0.05, 3)
    hist = np.array([400, 200, 100, 50, 25, 25])
    plan = SimulationPlan.create(randomizer, hist, partitions=5, replicates=3, seed=11)
    a = LocalBackend().simulate(plan)
    b = LocalBackend(bucket_messages=300).simulate(plan)  # spilled to 2^k buckets
    assert a.same_as(b)
    assert a.batch_counts().shape == (3, 6)
    assert len({tuple(r) for r in a.batch_counts()}) == 3  # replicates differ
    other = LocalBackend().simulate(
        SimulationPlan.create(randomizer, hist, partitions=5, replicates=3, seed=12)
    )
    assert not other.same_as(a)


def test_local_simulation_matches_count_level_moments():
    """k-RR: per-bin means of the message-level counts against the exact law (4 sigma)."""
    k, eps0 = 4, 1.0
    randomizer = KRRRandomizer(k, eps0)
    hist = np.array([120, 50, 20, 10])
    reps = 400
    plan = SimulationPlan.create(randomizer, hist, partitions=3, replicates=reps, seed=5)
    counts = LocalBackend().simulate(plan).batch_counts()
    a, b = randomizer.keep_probability, randomizer.other_probability
    n = hist.sum()
    p = hist / n * a + (1 - hist / n) * b
    mean = n * p
    sd = np.sqrt(n * p * (1 - p))
    z = (counts.mean(axis=0) - mean) / (sd / np.sqrt(reps))
    assert np.max(np.abs(z)) < 4.0, z


def test_local_permute_keeps_each_batch(tmp_path):
    rng = np.random.default_rng(3)
    bins = [rng.integers(0, 50, size=400), rng.integers(0, 50, size=300)]
    with DatasetWriter(tmp_path / "in", "plaintext", 50, rows_per_file=250) as writer:
        for i, b in enumerate(bins):
            writer.write(writer.add_batch(f"b{i}", 100), encode_plaintexts(b, 50))
    dataset = writer.dataset
    permuted = LocalBackend().permute(dataset, str(tmp_path / "out"))
    assert [b.batch_id for b in permuted.batches] == ["b0", "b1"]
    assert LocalBackend().count(permuted).same_as(LocalBackend().count(dataset))
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "out" / permuted.files[0])
    pairs = zip(table["message"].to_pylist(), table["batch"].to_pylist(), strict=True)
    first = [m[4] for m, b in pairs if b == 0]
    assert first != bins[0].tolist() and sorted(first) == sorted(bins[0].tolist())
