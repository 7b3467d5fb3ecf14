"""Shufflers: remove identities and order from a batch of messages.

The names below are re-exported lazily (PEP 562), so that the uniform shuffler
(what every protocol's run uses) loads without the grouped one's clustering
(scipy.sparse, scipy.special).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    """Return a re-exported name, importing its module on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shuffledp.shuffler' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    """List the public names, the lazily imported ones included."""
    return sorted({*globals(), *__all__})
