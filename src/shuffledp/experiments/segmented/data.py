"""The segmented experiment's data: synthetic sets or real set-valued tables, per repetition.

``_Source`` holds d, whether sets are padded and how to draw n users' s-item
matrices with the frequency of their kept items (the estimand);
``_load_source`` builds it from the configuration and ``_data_summary`` says
what keeping s items per user changes for real data.

Imports only :mod:`.config` of this package.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.data.movies import PAD, SetValuedData, fixed_size_items
from shuffledp.experiments.segmented.config import SegmentedExperimentConfig

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class _Source:
    """A data source: d, whether sets are padded, and how to draw n users' s-item matrices."""

    name: str
    domain_size: int
    padding: bool
    table: SetValuedData | None
    description: str

    @property
    def message_domain(self) -> int:
        return self.domain_size + (1 if self.padding else 0)

    def draw(self, n: int, s: int, rng: np.random.Generator) -> tuple[IntArray, FloatArray]:
        """Return (items, w): n × s items (padding symbol d) and the kept items' frequency."""
        d = self.domain_size
        if self.table is None:
            keys = rng.random((n, d))
            items = np.argpartition(keys, s - 1, axis=1)[:, :s].astype(np.int64)
        else:
            sample = self.table if n == self.table.n else self.table.sample_users(n, rng)
            items = fixed_size_items(sample, s, rng)
            items[items == PAD] = d
        held = items[items < d]
        w = np.bincount(held, minlength=d)[:d].astype(np.float64) / n
        return items, w


def _load_source(config: SegmentedExperimentConfig) -> _Source:
    if config.data == "synthetic":
        d = check_int(config.synthetic_domain, "synthetic_domain", minimum=2)
        if max(config.items_per_user) > d:
            raise InvalidParameterError(
                f"items_per_user must be at most the domain size {d}, got "
                f"{max(config.items_per_user)}"
            )
        return _Source("synthetic", d, False, None, f"{d} items, s distinct uniform items each")
    from shuffledp.data.movies import load_movie_genres, load_pizza_orders

    table = load_movie_genres() if config.data == "movies" else load_pizza_orders()
    too_many = [n for n in config.ns if n > table.n]
    if too_many:
        raise InvalidParameterError(
            f"--data {config.data} has {table.n:,} users; n={too_many[0]:,} is too many"
        )
    return _Source(config.data, table.d, True, table, table.source)


def _data_summary(source: _Source, config: SegmentedExperimentConfig) -> dict[str, Any]:
    """What the data look like, and what keeping s items per user changes (real data)."""
    if source.table is None:
        return {"source": source.description, "d": source.domain_size, "padding": False}
    out: dict[str, Any] = {**source.table.summary(), "padding": True}
    out.pop("size_histogram", None)
    sizes = source.table.sizes
    full = source.table.frequencies()
    for s in config.items_per_user:
        kept = fixed_size_items(source.table, s, np.random.default_rng(config.seed))
        counts = np.bincount(kept[kept != PAD], minlength=source.domain_size)
        w_kept = counts / source.table.n
        out[f"s={s}"] = {
            "users_with_more_than_s_items": float(np.mean(sizes > s)),
            "users_with_fewer_than_s_items": float(np.mean(sizes < s)),
            "sum_w_full": float(full.sum()),
            "sum_w_kept": float(w_kept.sum()),
            "squared_distance_kept_to_full": float(np.sum((w_kept - full) ** 2)),
        }
    return out
