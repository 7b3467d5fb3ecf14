import itertools

import numpy as np
import pytest
from scipy import stats

import shuffledp.shuffler.uniform as uniform
from shuffledp.messages import MessageBatch
from shuffledp.shuffler import UniformShuffler, secure_permutation


def test_secure_permutation_is_a_permutation():
    for size in (0, 1, 2, 1000):
        perm = secure_permutation(size)
        np.testing.assert_array_equal(np.sort(perm), np.arange(size))


def test_secure_permutation_uniform_given_uniform_keys(monkeypatch):
    # Replace the OS source by a seeded stream of bytes so the test is deterministic;
    # this checks the key-sorting construction, not the OS generator.
    rng = np.random.default_rng(2024)
    monkeypatch.setattr(uniform.secrets, "token_bytes", lambda k: rng.bytes(k))
    perms = list(itertools.permutations(range(3)))
    index = {p: i for i, p in enumerate(perms)}
    counts = np.zeros(len(perms))
    reps = 6000
    for _ in range(reps):
        counts[index[tuple(secure_permutation(3))]] += 1
    # Chi-square test of uniformity over the 6 permutations (fixed seed).
    assert stats.chisquare(counts).pvalue > 1e-3


def _byte_stream(monkeypatch, *draws: list[int]) -> list[int]:
    """Let ``secrets.token_bytes`` return all-zero first-round keys, then ``draws`` in turn."""
    calls: list[int] = []

    def fake_bytes(k: int) -> bytes:
        calls.append(k)
        if len(calls) == 1:
            return bytes(k)  # every 32-bit first-round key is 0: one class of ties
        return np.array(draws[len(calls) - 2], dtype=np.uint64).tobytes()

    monkeypatch.setattr(uniform.secrets, "token_bytes", fake_bytes)
    return calls


def test_tied_keys_are_ordered_by_fresh_keys_never_by_index(monkeypatch):
    calls = _byte_stream(monkeypatch, [7, 2, 9, 4])
    np.testing.assert_array_equal(secure_permutation(4), [1, 3, 0, 2])
    assert calls == [4 * 4, 8 * 4]  # 4-byte keys, then 8-byte keys for the class of four


def test_a_class_whose_fresh_keys_tie_again_gets_another_round(monkeypatch):
    # Round 2 orders index 2 first and ties 0, 1 and 3 again; round 3 orders those three.
    calls = _byte_stream(monkeypatch, [5, 5, 1, 5], [3, 1, 2])
    np.testing.assert_array_equal(secure_permutation(4), [2, 1, 3, 0])
    assert calls == [4 * 4, 8 * 4, 8 * 3]
    calls = _byte_stream(monkeypatch, [5, 5, 1, 5], [3, 1, 2])
    shuffled = uniform.secure_shuffle(np.array([10, 11, 12, 13]))
    np.testing.assert_array_equal(shuffled, [12, 11, 13, 10])  # the values ride along


def test_uniform_shuffler_keeps_multiset_and_drops_senders():
    batch = MessageBatch(payload=np.arange(50) % 7, sender=np.arange(50), n_users=50)
    for seed in (None, 3):
        out = UniformShuffler().shuffle(batch, seed=seed)
        np.testing.assert_array_equal(np.sort(out.payload), np.sort(batch.payload))
        assert out.n_users == 50
        assert not hasattr(out, "sender")
    a = UniformShuffler().shuffle(batch, seed=3).payload
    b = UniformShuffler().shuffle(batch, seed=3).payload
    np.testing.assert_array_equal(a, b)


def test_batch_shapes_checked():
    with pytest.raises(ValueError):
        MessageBatch(payload=np.arange(3), sender=np.arange(2), n_users=3)
