"""Every protocol the package exports meets the ShuffleProtocol contract.

DESIGN.md, "How a protocol is put together": ``randomize`` (message level),
``statistic_from_messages``, ``sample_statistic`` (count level), ``estimate``
and ``privacy_report``, wired by ``run`` with the uniform shuffler and refused
on a number of users other than the guarantee's. Each protocol is built small
and driven only through the contract's methods, with its own kind of data:
one bin index per user (FLIP, k-RR, correlated, augmented), a set and a level
per user (segmented), a histogram per user (per-user).

The statistical check compares the two paths' mean statistic coordinate by
coordinate: with R independent replicates per path, Welch's statistic
(mean_message − mean_count) / √(s²_message/R + s²_count/R) follows about a
Student t with at least R − 1 degrees of freedom when the paths agree, and the
threshold is its two-sided quantile at FALSE_FAILURE split over the
coordinates (Bonferroni), so a protocol whose paths agree fails by chance with
probability at most about FALSE_FAILURE.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy import stats

import shuffledp
import shuffledp.protocols
from shuffledp import DataError
from shuffledp.analyzers.estimate import HistogramEstimate
from shuffledp.messages import MessageBatch, ShuffledBatch
from shuffledp.privacy import BoundKind, PrivacyReport
from shuffledp.protocols.augmented import AugmentedProtocol
from shuffledp.protocols.base import ShuffleProtocol
from shuffledp.protocols.correlated import CorrelatedProtocol
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.protocols.krr import KRRProtocol
from shuffledp.protocols.per_user import PerUserEstimate, PerUserHistograms
from shuffledp.protocols.segmented import SegmentedProtocol, UserSets
from shuffledp.shuffler.uniform import UniformShuffler

N = 200  # users
D = 4  # bins, items or classes
LABELS = ["a", "b", "c", "d"]
REPLICATES = 200  # per path, for the agreement in mean (per-user: see its case)
FALSE_FAILURE = 1e-6  # chance that a protocol whose paths agree fails the mean check

HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None


@dataclass(frozen=True)
class Case:
    """A protocol built small, and how to make its users' values."""

    cls: type[ShuffleProtocol[Any, Any, Any, Any, Any]]
    build: Callable[[], ShuffleProtocol[Any, Any, Any, Any, Any]]
    values: Callable[[np.random.Generator, int], Any]
    needs_sklearn: bool = False
    replicates: int = REPLICATES


def _bins(rng: np.random.Generator, n: int) -> Any:
    return rng.choice(D, size=n, p=[0.5, 0.3, 0.15, 0.05]).astype(np.int64)


def _sets(rng: np.random.Generator, n: int) -> UserSets:
    items = np.stack([rng.choice(D, size=2, replace=False) for _ in range(n)]).astype(np.int64)
    levels = np.arange(n, dtype=np.int64) % 2  # N/2 users at each level, as calibrated
    return UserSets(items, levels)


def _histograms(rng: np.random.Generator, n: int) -> Any:
    centres = np.array([[8, 1, 1, 0], [0, 1, 3, 6]])
    return centres[np.arange(n) % 2] + rng.integers(0, 3, size=(n, D))


CASES: dict[str, Case] = {
    "flip": Case(FlipProtocol, lambda: FlipProtocol.calibrated(N, LABELS, 1.0, 1e-6), _bins),
    "krr": Case(KRRProtocol, lambda: KRRProtocol.calibrated(N, LABELS, 1.0, 1e-6), _bins),
    "correlated": Case(
        CorrelatedProtocol, lambda: CorrelatedProtocol.calibrated(N, LABELS, 1.0, 1e-6), _bins
    ),
    "augmented": Case(
        AugmentedProtocol, lambda: AugmentedProtocol.calibrated(N, LABELS, 1.0, 1e-6), _bins
    ),
    "segmented": Case(
        SegmentedProtocol,
        lambda: SegmentedProtocol.calibrated(
            (1.0, 2.0),
            level_counts=(N // 2, N // 2),
            delta=1e-5,
            domain=LABELS,
            items_per_user=2,
            blanket_rate=1.0,
            workers=1,
        ),
        _sets,
    ),
    "per-user": Case(
        PerUserHistograms,
        lambda: PerUserHistograms(4.0, 1.0, 0.2, clusters=2, n=N, domain=LABELS),
        _histograms,
        needs_sklearn=True,
        replicates=60,  # each draw groups the users by k-means (about 25 ms)
    ),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request: pytest.FixtureRequest) -> tuple[Case, ShuffleProtocol[Any, Any, Any, Any, Any]]:
    chosen = CASES[request.param]
    if chosen.needs_sklearn and not HAS_SKLEARN:
        pytest.skip("the per-user protocol groups users with scikit-learn (the cluster extra)")
    return chosen, chosen.build()


def _statistic_array(statistic: object) -> np.ndarray:
    assert isinstance(statistic, np.ndarray)
    return statistic


def _estimate_values(estimate: object) -> np.ndarray:
    """The numbers an estimate states: counts per bin, or one histogram per user."""
    if isinstance(estimate, HistogramEstimate):
        return np.asarray(estimate.counts)
    assert isinstance(estimate, PerUserEstimate)
    return estimate.estimates


def _take(values: Any, n: int) -> Any:
    """The first n users' values, whatever their kind."""
    if isinstance(values, UserSets):
        return UserSets(values.items[:n], values.levels[:n])
    return values[:n]


def test_every_exported_protocol_class_is_checked() -> None:
    exported = set()
    for module in (shuffledp, shuffledp.protocols):
        for name in module.__all__:
            obj = getattr(module, name)
            runs = isinstance(obj, type) and callable(getattr(obj, "run", None))
            if runs and not inspect.isabstract(obj):  # ShuffleProtocol itself is the contract
                exported.add(obj)
    assert exported == {c.cls for c in CASES.values()}


def test_is_a_shuffle_protocol(case) -> None:
    chosen, protocol = case
    assert isinstance(protocol, ShuffleProtocol) and isinstance(protocol, chosen.cls)
    assert protocol.n == N and protocol.domain_size == D
    assert protocol.labels == tuple(LABELS)
    assert isinstance(protocol.name, str) and protocol.name
    assert isinstance(protocol.parameters(), dict)


def test_both_paths_give_the_same_kind_of_statistic(case) -> None:
    chosen, protocol = case
    values = chosen.values(np.random.default_rng(1), N)
    batch = protocol.randomize(values, np.random.default_rng(2))
    assert isinstance(batch, MessageBatch) and batch.n_users == N
    shuffled = UniformShuffler().shuffle(batch)  # the CSPRNG shuffle, as deployed
    assert isinstance(shuffled, ShuffledBatch) and len(shuffled) == len(batch)
    by_messages = _statistic_array(protocol.statistic_from_messages(shuffled))
    by_counts = _statistic_array(
        protocol.sample_statistic(protocol.histogram_of(values), np.random.default_rng(3))
    )
    assert by_messages.shape == by_counts.shape
    assert by_messages.dtype == by_counts.dtype
    assert protocol.messages_in(by_messages) == len(batch)
    assert protocol.messages_in(by_counts) >= 1


def test_estimate_of_either_statistic(case) -> None:
    chosen, protocol = case
    values = chosen.values(np.random.default_rng(4), N)
    shuffled = UniformShuffler().shuffle(protocol.randomize(values, 5), seed=6)
    statistics = [
        protocol.statistic_from_messages(shuffled),
        protocol.sample_statistic(protocol.histogram_of(values), 7),
    ]
    for statistic in statistics:
        estimate = protocol.estimate(statistic)
        numbers = _estimate_values(estimate)
        assert numbers.shape[-1] == D and np.all(np.isfinite(numbers))
        assert estimate.n == N and len(estimate.domain) == D
        named = protocol.estimate(statistic, ["w", "x", "y", "z"])
        assert list(named.domain) == ["w", "x", "y", "z"]
        assert type(named) is type(estimate)
        np.testing.assert_array_equal(_estimate_values(named), numbers)


def test_privacy_report(case) -> None:
    _, protocol = case
    report = protocol.privacy_report()
    assert isinstance(report, PrivacyReport)
    assert report.n == N and report.bound is BoundKind.UPPER
    assert report.epsilon > 0 and 0 <= report.delta < 1


@pytest.mark.parametrize("path", ["message", "count"])
def test_run_on_the_calibrated_number_of_users(case, path) -> None:
    chosen, protocol = case
    values = chosen.values(np.random.default_rng(8), N)
    run = protocol.run(values, path=path, seed=9)
    assert run.path == path
    again = protocol.run(values, path=path, seed=9)
    released = run.estimates if isinstance(protocol, PerUserHistograms) else run.estimate.counts
    repeated = again.estimates if isinstance(protocol, PerUserHistograms) else again.estimate.counts
    np.testing.assert_array_equal(released, repeated)  # a seed reproduces the run
    assert released.shape[-1] == D and np.all(np.isfinite(released))


@pytest.mark.parametrize("users", [N - 1, N + 1])
def test_run_refuses_another_number_of_users(case, users) -> None:
    chosen, protocol = case
    values = chosen.values(np.random.default_rng(10), N + 1)
    with pytest.raises(DataError, match=rf"n={N} users but got (counts of )?{users}\b"):
        protocol.run(_take(values, users), seed=11)


def test_paths_agree_in_mean(case) -> None:
    chosen, protocol = case
    rng = np.random.default_rng(12)
    values = chosen.values(rng, N)
    histogram = protocol.histogram_of(values)
    shuffler = UniformShuffler()
    r = chosen.replicates
    by_messages = np.array(
        [
            protocol.statistic_from_messages(
                shuffler.shuffle(protocol.randomize(values, rng), seed=rng)
            )
            for _ in range(r)
        ],
        dtype=np.float64,
    ).reshape(r, -1)
    by_counts = np.array(
        [protocol.sample_statistic(histogram, rng) for _ in range(r)], dtype=np.float64
    ).reshape(r, -1)
    difference = by_messages.mean(axis=0) - by_counts.mean(axis=0)
    variance = (by_messages.var(axis=0, ddof=1) + by_counts.var(axis=0, ddof=1)) / r
    constant = variance == 0
    np.testing.assert_array_equal(difference[constant], 0.0)  # no spread: the same value
    t = np.abs(difference[~constant]) / np.sqrt(variance[~constant])
    threshold = stats.t.isf(FALSE_FAILURE / (2 * difference.size), df=r - 1)
    assert t.size and t.max() < threshold, (
        f"largest |t| {t.max():.2f} over {t.size} coordinates, threshold {threshold:.2f}"
    )


def test_per_user_paths_release_the_same_histograms() -> None:
    if not HAS_SKLEARN:
        pytest.skip("the per-user protocol groups users with scikit-learn (the cluster extra)")
    protocol = CASES["per-user"].build()
    counts = _histograms(np.random.default_rng(13), N)
    by_messages = protocol.run(counts, seed=14)
    by_counts = protocol.run(counts, path="count", seed=14)
    np.testing.assert_array_equal(by_messages.estimates, by_counts.estimates)
    np.testing.assert_array_equal(by_messages.analysis.permutation, by_counts.analysis.permutation)
    direct = protocol.sample_statistic(protocol.histogram_of(counts), seed=14)
    np.testing.assert_array_equal(direct, by_counts.estimates)
    shuffled = UniformShuffler().shuffle(protocol.randomize(counts, seed=14))
    np.testing.assert_array_equal(protocol.statistic_from_messages(shuffled), direct)


def test_per_user_without_n_takes_each_runs_users() -> None:
    protocol = PerUserHistograms(4.0, 1.0, 0.2, release="laplace-ldp")
    counts = _histograms(np.random.default_rng(15), 30)
    assert protocol.run(counts, seed=16).n == 30
    assert protocol.privacy_report(30).n == 30
    with pytest.raises(AttributeError, match="n is not fixed"):
        _ = protocol.n
    with pytest.raises(ValueError, match="privacy_report"):
        protocol.privacy_report()


def test_segmented_report_is_the_weakest_level() -> None:
    protocol = CASES["segmented"].build()
    assert isinstance(protocol, SegmentedProtocol)
    levels = protocol.privacy_reports()
    report = protocol.privacy_report()
    assert report.epsilon == max(r.epsilon for r in levels)
    assert report.delta == max(r.delta for r in levels)
    assert report.parameters["level_epsilons"] == [r.epsilon for r in levels]


def test_segmented_two_array_forms_still_work() -> None:
    protocol = CASES["segmented"].build()
    assert isinstance(protocol, SegmentedProtocol)
    sets = _sets(np.random.default_rng(17), N)
    np.testing.assert_array_equal(
        protocol.randomize(sets.items, sets.levels, 18).payload,
        protocol.randomize(sets, 18).payload,
    )
    np.testing.assert_array_equal(
        protocol.sample_statistic(sets.items, sets.levels, seed=19),
        protocol.sample_statistic(protocol.histogram_of(sets), 19),
    )
    statistic = protocol.sample_statistic(protocol.histogram_of(sets), 20)
    np.testing.assert_array_equal(
        protocol.estimate(statistic, protocol.level_counts).counts,
        protocol.estimate(statistic).counts,
    )
    np.testing.assert_array_equal(
        protocol.run(sets.items, sets.levels, seed=21).statistic,
        protocol.run(sets, seed=21).statistic,
    )
