"""Shufflers: remove identities and order from a batch of messages.

The names below are re-exported lazily (PEP 562), so that the uniform shuffler
(what every protocol's run uses) loads without the grouped one's clustering
(scipy.sparse, scipy.special).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports

if TYPE_CHECKING:
    from shuffledp.shuffler.grouped import (
        ClusteringConfig,
        GroupedShuffle,
        GroupedShuffler,
        grouped_permutation,
    )
    from shuffledp.shuffler.uniform import UniformShuffler, secure_permutation

__all__ = [
    "ClusteringConfig",
    "GroupedShuffle",
    "GroupedShuffler",
    "UniformShuffler",
    "grouped_permutation",
    "secure_permutation",
]

#: Where each re-exported name lives, imported on first use.
_LAZY: dict[str, str] = {
    "ClusteringConfig": "shuffledp.shuffler.grouped",
    "GroupedShuffle": "shuffledp.shuffler.grouped",
    "GroupedShuffler": "shuffledp.shuffler.grouped",
    "grouped_permutation": "shuffledp.shuffler.grouped",
    "UniformShuffler": "shuffledp.shuffler.uniform",
    "secure_permutation": "shuffledp.shuffler.uniform",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
