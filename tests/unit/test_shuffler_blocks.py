"""The uniform shuffle in blocks: the same permutation as one argsort, a block per step."""

from __future__ import annotations

import numpy as np
import pytest

from shuffledp.messages import MessageBatch
from shuffledp.shuffler import uniform
from shuffledp.shuffler.uniform import UniformShuffler, argsort_random_keys, secure_permutation


@pytest.mark.parametrize("size", [0, 1, 2, 63, 64, 65, 200, 1000, 4097])
def test_block_argsort_is_the_stable_argsort(monkeypatch, size: int) -> None:
    monkeypatch.setattr(uniform, "_SORT_CHUNK", 64)  # many buckets and blocks at a small size
    rng = np.random.default_rng(size)
    keys = rng.integers(0, 2**64 - 1, size, dtype=np.uint64, endpoint=True)
    np.testing.assert_array_equal(argsort_random_keys(keys), np.argsort(keys, kind="stable"))
    # Ties and keys crowded in one bucket still give the stable argsort (only slower).
    tied = rng.integers(0, 5, size).astype(np.uint64) << np.uint64(60)
    np.testing.assert_array_equal(argsort_random_keys(tied), np.argsort(tied, kind="stable"))


def test_steps_handle_about_one_block(monkeypatch) -> None:
    """No sort inside the shuffle sees much more than a block, so Ctrl-C lands between steps."""
    monkeypatch.setattr(uniform, "_SORT_CHUNK", 1000)
    sizes: list[int] = []
    real = uniform._sort

    def counting(keys: np.ndarray) -> None:
        sizes.append(int(keys.shape[0]))
        real(keys)

    monkeypatch.setattr(uniform, "_sort", counting)
    perm = secure_permutation(50_000)
    np.testing.assert_array_equal(np.sort(perm), np.arange(50_000))
    # 50 blocks, then 128 buckets holding about 390 keys each (half a block, as for any
    # size): 4 sigma above is still below a block.
    assert len(sizes) == 50 + 128 and max(sizes) <= 1000
    assert sum(sizes[50:]) == 50_000
    values = np.arange(50_000) % 13
    sizes.clear()
    shuffled = uniform.secure_shuffle(values)
    np.testing.assert_array_equal(np.sort(shuffled), np.sort(values))
    assert len(sizes) == 50 + 128 and max(sizes) <= 1000


def test_shuffle_gathers_in_blocks_and_keeps_the_multiset(monkeypatch) -> None:
    monkeypatch.setattr(uniform, "_SORT_CHUNK", 128)
    payload = np.arange(5000, dtype=np.int64) % 17
    batch = MessageBatch(payload=payload, sender=np.arange(5000), n_users=5000)
    shuffled = UniformShuffler().shuffle(batch)
    assert shuffled.n_users == 5000
    np.testing.assert_array_equal(np.sort(shuffled.payload), np.sort(payload))
    seeded = UniformShuffler().shuffle(batch, seed=3)
    np.testing.assert_array_equal(
        seeded.payload, payload[np.random.default_rng(3).permutation(5000)]
    )
