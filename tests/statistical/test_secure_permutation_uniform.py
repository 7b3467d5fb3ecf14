"""The secure permutation is uniform, ties included: chi-square tests over many small shuffles.

:func:`~shuffledp.shuffler.uniform.secure_permutation` sorts CSPRNG keys packed
above the indices with an unstable sort and puts every class of equal keys in
an order drawn from fresh keys (uniform by the argument in its docstring);
:func:`~shuffledp.shuffler.uniform.secure_shuffle` packs the values instead of
the indices. With the real 32-bit keys ties are rare at these sizes, so the
tests also shrink the keys (the ``_KEY_BITS`` and ``_TIE_KEY_BITS`` hooks) to
1 or 2 bits: then most of the order comes from the tie rounds, several rounds
deep, and, with blocks of 8 (``_SORT_CHUNK``), from the buckets too.

Three statistics, each with its law under uniformity and a false-alarm
probability of :data:`ALPHA` per check:

* all 24 orders of 4 elements: Pearson's chi-square with 23 degrees of freedom;
* the positions of 30 elements (a 30 × 30 table of counts): a uniform
  permutation matrix P has covariance Π/(m − 1) (Π the projection on the
  (m − 1)² matrices with zero row and column sums, by its symmetry under
  permuting rows and columns, and trace Σ Var P_ij = m − 1), so Pearson's
  statistic X over T shuffles has mean m(m − 1) and X(m − 1)/m is
  asymptotically chi-square with (m − 1)² degrees of freedom;
* the order of every pair: "i before j" in T shuffles is Binomial(T, 1/2),
  standard deviation √T/2; the largest standardized deviation over the
  435 pairs stays below the Bonferroni bound z with 2·435·Φ̄(z) = ALPHA.

Each check is also run on a broken variant (ties left in index order, what a
plain sort of packed keys gives) to show that it catches that failure.

Seeded byte streams stand in for ``secrets.token_bytes`` where the keys are
shrunk (so the tests are reproducible: they check the construction, given
uniform bytes); one test uses the OS generator itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from shuffledp.shuffler import uniform

pytestmark = pytest.mark.slow

#: Probability that a check fails although the shuffle is uniform.
ALPHA = 1e-6

#: (first-round key bits, tie key bits, block size): real keys; 1-bit first keys (about
#: half of the elements tie in each round); 1-bit keys everywhere (several tie rounds);
#: 2-bit keys in blocks of 8 (buckets, each holding one class of equal keys).
CONFIGS = {
    "real-widths": (32, 64, 1 << 20),
    "1-bit-keys": (1, 64, 1 << 20),
    "1-bit-keys-and-tie-keys": (1, 1, 1 << 20),
    "2-bit-keys-in-blocks": (2, 64, 8),
}

Shuffle = Callable[[int], np.ndarray]


def _permutation(m: int) -> np.ndarray:
    return uniform.secure_permutation(m)


def _shuffled_values(m: int) -> np.ndarray:
    """The order of ``secure_shuffle`` on distinct values (the packed-values path)."""
    return uniform.secure_shuffle(np.arange(m, dtype=np.int64) + 5) - 5


def _configure(monkeypatch: pytest.MonkeyPatch, config: str, seed: int | None) -> None:
    key_bits, tie_bits, block = CONFIGS[config]
    monkeypatch.setattr(uniform, "_KEY_BITS", key_bits)
    monkeypatch.setattr(uniform, "_TIE_KEY_BITS", tie_bits)
    monkeypatch.setattr(uniform, "_SORT_CHUNK", block)
    if seed is not None:
        rng = np.random.default_rng(seed)
        monkeypatch.setattr(uniform.secrets, "token_bytes", lambda k: rng.bytes(k))


def _leave_ties_in_index_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uniform, "_order_ties", lambda carried, tied: None)


def _stop_after_one_tie_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """Order each class by one round of fresh keys, leaving their ties in index order."""

    def one_round(carried: np.ndarray, tied: np.ndarray) -> None:
        items, classes = uniform._tie_classes(tied)
        keys = uniform._random_bits(items.shape[0], uniform._TIE_KEY_BITS)
        carried[items] = carried[items[np.lexsort((keys, classes))]]

    monkeypatch.setattr(uniform, "_order_ties", one_round)


def _draws(shuffle: Shuffle, m: int, reps: int) -> np.ndarray:
    """``reps`` shuffles of ``m`` elements: row r lists the element at each position."""
    return np.stack([shuffle(m) for _ in range(reps)])


def _orders_pvalue(draws: np.ndarray) -> float:
    """Pearson's chi-square p-value of the m! orders' counts against the uniform law."""
    m = draws.shape[1]
    weights = m ** np.arange(m)
    codes = draws @ weights
    every = [int(np.dot(order, weights)) for order in itertools.permutations(range(m))]
    counts = np.bincount(codes, minlength=m**m)[every]
    assert counts.sum() == draws.shape[0]  # every draw is a permutation
    return float(stats.chisquare(counts).pvalue)


def _positions_pvalue(draws: np.ndarray) -> float:
    """p-value of the positions table: X(m − 1)/m against chi-square with (m − 1)² d.f."""
    reps, m = draws.shape
    table = np.zeros((m, m))
    np.add.at(table, (draws, np.broadcast_to(np.arange(m), draws.shape)), 1)
    assert (table.sum(axis=0) == reps).all() and (table.sum(axis=1) == reps).all()
    expected = reps / m
    x = float(((table - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(x * (m - 1) / m, (m - 1) ** 2))


def _largest_pair_z(draws: np.ndarray) -> tuple[float, float]:
    """The largest |standardized deviation| of "i before j" over all pairs, and its bound."""
    reps, m = draws.shape
    where = np.argsort(draws, axis=1)  # where[r, i]: the position of element i
    i, j = np.triu_indices(m, 1)
    before = (where[:, i] < where[:, j]).sum(axis=0)
    z = np.abs(before - reps / 2) / (math.sqrt(reps) / 2)
    bound = float(stats.norm.isf(ALPHA / (2 * i.shape[0])))
    return float(z.max()), bound


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("shuffle", [_permutation, _shuffled_values], ids=["perm", "values"])
def test_all_orders_of_four_are_equally_likely(monkeypatch, config: str, shuffle) -> None:
    _configure(monkeypatch, config, seed=24)
    assert _orders_pvalue(_draws(shuffle, 4, 24 * 250)) > ALPHA


@pytest.mark.parametrize("config", list(CONFIGS))
def test_positions_and_pair_orders_of_thirty_are_uniform(monkeypatch, config: str) -> None:
    _configure(monkeypatch, config, seed=30)
    draws = _draws(_permutation, 30, 3000)
    assert _positions_pvalue(draws) > ALPHA
    z, bound = _largest_pair_z(draws)
    assert z < bound


@pytest.mark.parametrize(
    ("config", "break_ties"),
    [
        ("1-bit-keys", _leave_ties_in_index_order),
        ("2-bit-keys-in-blocks", _leave_ties_in_index_order),
        ("1-bit-keys-and-tie-keys", _stop_after_one_tie_round),
    ],
    ids=["no-tie-rounds", "no-tie-rounds-in-blocks", "one-tie-round"],
)
def test_the_checks_catch_ties_left_in_index_order(monkeypatch, config: str, break_ties) -> None:
    """Without the tie rounds (or with one round only, when a round's keys tie again) the
    permutation is biased, and every statistic sees it."""
    _configure(monkeypatch, config, seed=7)
    break_ties(monkeypatch)
    assert _orders_pvalue(_draws(_permutation, 4, 24 * 250)) < ALPHA
    draws = _draws(_permutation, 30, 3000)
    assert _positions_pvalue(draws) < ALPHA
    z, bound = _largest_pair_z(draws)
    assert z > bound


@pytest.mark.parametrize("config", ["real-widths", "1-bit-keys-and-tie-keys"])
def test_uniform_with_the_os_generator(monkeypatch, config: str) -> None:
    """The same checks on keys from ``secrets`` itself (not reproducible; ALPHA per check)."""
    _configure(monkeypatch, config, seed=None)
    assert _orders_pvalue(_draws(_shuffled_values, 4, 24 * 250)) > ALPHA
    draws = _draws(_permutation, 30, 3000)
    assert _positions_pvalue(draws) > ALPHA
    z, bound = _largest_pair_z(draws)
    assert z < bound
