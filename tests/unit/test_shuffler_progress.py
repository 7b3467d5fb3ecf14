"""The shuffle's progress: every block reports its elements, and the bar ends at its total."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shuffledp.messages import MessageBatch
from shuffledp.shuffler import uniform
from shuffledp.shuffler.uniform import (
    PERMUTATION_PASSES,
    SORT_PASSES,
    UniformShuffler,
    argsort_random_keys,
    secure_permutation,
)


@pytest.mark.parametrize("size", [0, 1, 2, 63, 64, 65, 1000, 4097])
def test_permutation_reports_every_element_of_every_pass(monkeypatch, size: int) -> None:
    monkeypatch.setattr(uniform, "_SORT_CHUNK", 64)
    steps: list[int] = []
    perm = secure_permutation(size, advance=steps.append)
    np.testing.assert_array_equal(np.sort(perm), np.arange(size))
    assert sum(steps) == PERMUTATION_PASSES * size
    assert all(step >= 0 for step in steps)
    if size > 64:  # one step per block or bucket, so the bar moves while a big shuffle runs
        assert len(steps) >= PERMUTATION_PASSES * (size // 64)
        assert max(steps) <= 64  # a block; a bucket holds about a quarter to half of one


@pytest.mark.parametrize("values", [np.arange(4097) % 7, np.arange(4097) * 2**40])
def test_shuffle_of_values_reports_its_passes_and_the_conversion(monkeypatch, values) -> None:
    """Packed (a narrow range) or gathered through the permutation (a wide one): same total."""
    monkeypatch.setattr(uniform, "_SORT_CHUNK", 64)
    steps: list[int] = []
    shuffled = uniform.secure_shuffle(values, advance=steps.append)
    np.testing.assert_array_equal(np.sort(shuffled), np.sort(values))
    assert sum(steps) == (PERMUTATION_PASSES + 1) * 4097
    assert max(steps) <= 64


def test_argsort_reports_its_passes_also_in_one_block() -> None:
    keys = np.random.default_rng(1).integers(0, 2**63, 500, dtype=np.uint64)
    steps: list[int] = []
    order = argsort_random_keys(keys, advance=steps.append)
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    assert steps == [SORT_PASSES * 500]


class _Spy:
    """Stands in for the tqdm bar: records its options and the updates."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.updates: list[int] = []

    def update(self, k: int) -> None:
        self.updates.append(k)

    def __enter__(self) -> _Spy:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.mark.parametrize("seed", [None, 7])
@pytest.mark.parametrize("show", [True, False])
def test_shuffle_bar_ends_at_its_total(monkeypatch, seed: int | None, show: bool) -> None:
    monkeypatch.setattr(uniform, "_SORT_CHUNK", 128)
    bars: list[_Spy] = []

    def spy(**options: Any) -> _Spy:
        bars.append(_Spy(**options))
        return bars[-1]

    monkeypatch.setattr(uniform, "progress_bar", spy)
    payload = np.arange(3000, dtype=np.int64) % 11
    batch = MessageBatch(payload=payload, sender=np.arange(3000), n_users=3000)
    shuffled = UniformShuffler().shuffle(batch, seed=seed, show_progress=show)
    np.testing.assert_array_equal(np.sort(shuffled.payload), np.sort(payload))
    (bar,) = bars
    assert bar.options["desc"] == "shuffling" and bar.options["enabled"] is show
    assert sum(bar.updates) == bar.options["total"]
    assert len(bar.updates) > 3000 // 128  # at least one update per gathered block
