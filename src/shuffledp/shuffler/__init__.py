"""Shufflers: remove identities and order from a batch of messages."""

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
