import numpy as np
import pytest

from shuffledp._validation import DataError
from shuffledp.analyzers import FlipAnalyzer, flip_count_stderr
from shuffledp.randomizers import FlipRandomizer, bernoulli_positions


def test_bernoulli_positions_sorted_unique_in_range():
    rng = np.random.default_rng(0)
    pos = bernoulli_positions(10**9, 1e-5, rng)
    assert np.all(np.diff(pos) > 0) and pos.min() >= 0 and pos.max() < 10**9
    assert bernoulli_positions(0, 0.3, rng).size == 0


def test_bernoulli_positions_marginals():
    # Each of 20 positions is set with probability p; counts over reps are Bin(reps, p).
    rng = np.random.default_rng(1)
    reps, length, p = 4000, 20, 0.3
    hits = np.zeros(length)
    for _ in range(reps):
        hits[bernoulli_positions(length, p, rng)] += 1
    z = (hits - reps * p) / np.sqrt(reps * p * (1 - p))
    assert np.max(np.abs(z)) < 4.0


def test_messages_are_bin_indices_per_user():
    r = FlipRandomizer(domain_size=5, q=0.1, fake_users=3)
    values = np.array([0, 4, 2, 2])
    batch = r.randomize(values, seed=3)
    assert batch.n_users == 4
    assert batch.payload.min() >= 0 and batch.payload.max() < 5
    assert batch.sender.min() >= 0 and batch.sender.max() < 4
    # A user cannot send the same bin twice from one report; across k+1 reports at most k+1 times.
    for user in range(4):
        counts = np.bincount(batch.payload[batch.sender == user], minlength=5)
        assert counts.max() <= 4


def test_tiny_q_sends_almost_exactly_the_value():
    r = FlipRandomizer(domain_size=50, q=1e-12, fake_users=10)
    values = np.arange(50).repeat(3)
    batch = r.randomize(values, seed=5)
    np.testing.assert_array_equal(np.sort(batch.payload), np.sort(values))
    np.testing.assert_array_equal(batch.payload[np.argsort(batch.sender, kind="stable")], values)


def test_randomize_one_sorted_and_seeded():
    r = FlipRandomizer(domain_size=10, q=0.2, fake_users=2)
    a = r.randomize_one(3, seed=9)
    np.testing.assert_array_equal(a, np.sort(a))
    np.testing.assert_array_equal(a, r.randomize_one(3, seed=9))


def test_expected_messages_per_user():
    r = FlipRandomizer(domain_size=100, q=0.01, fake_users=4)
    assert r.expected_messages_per_user == pytest.approx(0.99 + 0.01 * 99 + 4 * 100 * 0.01)
    values = np.zeros(20000, dtype=np.int64)
    m = len(r.randomize(values, seed=2)) / 20000
    # Variance per user: q(1-q)·((k+1)·d) bits; sd of the mean ≈ 0.0046.
    assert m == pytest.approx(r.expected_messages_per_user, abs=0.03)


@pytest.mark.parametrize(
    "bad", [np.array([], dtype=np.int64), np.array([0, 5]), np.array([-1]), np.array([0.5])]
)
def test_bad_values(bad):
    with pytest.raises(DataError):
        FlipRandomizer(5, 0.1, 1).randomize(bad, seed=0)


def test_sample_counts_checks_histogram():
    r = FlipRandomizer(3, 0.1, 1)
    with pytest.raises(DataError):
        r.sample_counts(np.array([1, 2]))
    with pytest.raises(DataError):
        r.sample_counts(np.array([0, 0, 0]))


def test_analyzer_formula_and_stderr():
    n, d, q, k = 100, 4, 0.1, 2
    a = FlipAnalyzer(n, d, q, k)
    counts = np.array([60, 30, 30, 150])
    est = a.estimate(counts, ["a", "b", "c", "d"])
    N = n * (k + 1)
    np.testing.assert_allclose(est.counts, (counts - N * q) / (1 - 2 * q))
    np.testing.assert_allclose(est.stderr, np.sqrt(N * q * (1 - q)) / (1 - 2 * q))
    assert flip_count_stderr(n, q, k) == est.stderr[0]
    np.testing.assert_allclose(est.frequencies, est.counts / n)
    with pytest.raises(DataError):
        a.count_messages(np.array([0, 4]))
    np.testing.assert_array_equal(a.count_messages(np.array([0, 3, 3])), [1, 0, 0, 2])
