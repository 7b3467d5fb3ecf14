"""Shufflers: remove identities and order from a batch of messages."""

from shuffledp.shuffler.uniform import UniformShuffler, secure_permutation

__all__ = ["UniformShuffler", "secure_permutation"]
