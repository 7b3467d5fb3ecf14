"""The per-chunk kernels: vectorized plaintext coding against the wire module, sums."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from shuffledp.backends.counts import (
    BinTriples,
    MessageCounts,
    combine_triples,
    count_bins,
)
from shuffledp.backends.kernels import (
    CIPHERTEXT_LENGTH,
    PLAINTEXT_LENGTH,
    PLAINTEXT_VERSION,
    ChunkCounter,
    binary_array,
    decode_plaintexts,
    encode_plaintexts,
    fixed_width_rows,
)
from shuffledp.backends.replays import KEY_BYTES
from shuffledp.backends.simulation import SimulationPlan, default_partitions
from shuffledp.randomizers.krr import KRRRandomizer
from shuffledp.service import wire


def test_wire_constants_agree():
    assert PLAINTEXT_VERSION == wire.WIRE_VERSION
    assert PLAINTEXT_LENGTH == wire.PLAINTEXT_LENGTH
    assert CIPHERTEXT_LENGTH == wire.CIPHERTEXT_LENGTH
    assert KEY_BYTES == wire.ENCAPSULATED_KEY_LENGTH


def test_encode_matches_wire():
    d = 1000
    bins = np.array([0, 1, 255, 256, 999])
    rows = encode_plaintexts(bins, d)
    assert [bytes(r) for r in rows] == [wire.encode_plaintext(int(b), d) for b in bins]


def test_decode_matches_wire_on_random_and_edge_rows():
    d = 300
    rng = np.random.default_rng(1)
    rows = rng.integers(0, 256, size=(5000, PLAINTEXT_LENGTH), dtype=np.uint8)
    rows[:2500, 0] = 1  # half with the right version
    rows[:1000, 1:4] = 0  # many indices inside the domain
    edge = encode_plaintexts(np.array([0, d - 1]), 10**6)
    edge2 = np.array([[1, 0, 0, 1, 44], [1, 255, 255, 255, 255]], dtype=np.uint8)
    rows = np.vstack([rows, edge, edge2])
    got = decode_plaintexts(rows, d)
    for row, value in zip(rows, got, strict=True):
        try:
            expected = wire.decode_plaintext(bytes(row), d)
        except wire.WireError:
            expected = d + 1
        assert value == expected
    assert (got < d).sum() > 500


@pytest.mark.parametrize("kind", ["binary", "large_binary", "fixed"])
def test_fixed_width_rows_reads_sliced_arrays_with_nulls(kind):
    values = [b"abcde", None, b"xy", b"12345", b"zzzzz", b"123456"]
    arrow_type = {
        "binary": pa.binary(),
        "large_binary": pa.large_binary(),
        "fixed": pa.binary(5),
    }[kind]
    if kind == "fixed":
        values = [b"abcde", None, b"xyxyx", b"12345", b"zzzzz", b"65432"]
    arr = pa.array(values, arrow_type).slice(1)
    rows, good = fixed_width_rows(arr, 5)
    expected = [v for v in values[1:] if v is not None and len(v) == 5]
    assert [bytes(r) for r in rows] == expected
    assert good.tolist() == [v is not None and len(v) == 5 for v in values[1:]]


def test_binary_array_round_trip():
    rows = np.arange(30, dtype=np.uint8).reshape(6, 5)
    arr = binary_array(rows)
    assert arr.to_pylist() == [bytes(r) for r in rows]
    assert np.array_equal(fixed_width_rows(arr, 5)[0], rows)


def test_plaintext_counter_counts_bad_rows_as_undecodable():
    d = 4
    rows = encode_plaintexts(np.array([0, 1, 1, 3]), d)
    values = [bytes(r) for r in rows] + [
        b"\x01\x00\x00\x00\x04",
        b"",
        None,
        b"\x02\x00\x00\x00\x00",
    ]
    counter = ChunkCounter("plaintext", d)
    triples = counter.count(np.array([0, 0, 1, 1, 1, 0, 0, 1]), pa.array(values, pa.binary()))
    counts = MessageCounts.from_parts([triples], d, 2)
    assert counts.counts.tolist() == [1, 2, 0, 1]
    assert counts.undecodable == 4 and counts.undecryptable == 0
    assert counts.messages_per_batch.tolist() == [4, 4]
    assert counts.batch_counts().tolist() == [[1, 1, 0, 0], [0, 1, 0, 1]]


def test_combine_is_exact_and_order_free():
    rng = np.random.default_rng(2)
    parts = []
    for _ in range(20):
        batch = rng.integers(0, 5, size=1000)
        bins = rng.integers(0, 9, size=1000)
        parts.append(count_bins(batch, bins, 9))
    big = BinTriples(np.array([4]), np.array([8]), np.array([2**62]))
    a = combine_triples([*parts, big], 9)
    b = combine_triples([combine_triples(parts[::-1], 9), big], 9)
    assert np.array_equal(a.batch, b.batch) and np.array_equal(a.count, b.count)
    assert int(a.count.sum()) == 20 * 1000 + 2**62
    assert np.all(np.diff(a.batch * 9 + a.bin) > 0)


def test_counts_refuse_unknown_batches():
    with pytest.raises(ValueError, match="outside the dataset"):
        MessageCounts.from_parts([count_bins(np.array([3]), np.array([0]), 4)], 2, 2)


def test_task_seeds_are_spawned_children():
    plan = SimulationPlan.create(
        KRRRandomizer(3, 1.0), np.array([5, 5, 10]), partitions=4, replicates=2, seed=7
    )
    children = np.random.SeedSequence(7).spawn(plan.tasks)
    for task, child in enumerate(children):
        assert (
            plan.seed_sequence(task).generate_state(4).tolist() == child.generate_state(4).tolist()
        )
    users = [plan.users(t) for t in range(plan.tasks)]
    assert users[:4] == [(0, 0, 5), (0, 5, 10), (0, 10, 15), (0, 15, 20)]
    assert users[4] == (1, 0, 5)


def test_generated_users_follow_the_histogram():
    hist = np.array([3, 0, 7, 1])
    plan = SimulationPlan.create(KRRRandomizer(4, 50.0), hist, partitions=3, seed=1)
    bins = np.concatenate([b for t in range(3) for _, _, b in plan.generate(t)])
    assert np.array_equal(np.bincount(bins, minlength=4), hist)  # epsilon0 = 50 keeps values


def test_default_partitions_depends_on_n_only():
    assert default_partitions(5) == 5
    assert default_partitions(1000) == 8
    assert default_partitions(10**8) == 96


def test_weighted_plaintexts_count_like_repeated_rows():
    d = 3
    distinct = [bytes(r) for r in encode_plaintexts(np.array([0, 2]), d)] + [
        b"\x05\x00\x00\x00\x00"
    ]
    counter = ChunkCounter("plaintext", d)
    weighted = counter.count(np.array([0, 1, 1]), pa.array(distinct), np.array([3, 2**40, 7]))
    counts = MessageCounts.from_parts([weighted], d, 2)
    assert counts.batch_counts().tolist() == [[3, 0, 0], [0, 0, 2**40]]
    assert counts.undecodable == 7
