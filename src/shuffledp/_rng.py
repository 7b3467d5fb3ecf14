"""The randomness policy.

* Randomizers and simulations draw from a :class:`numpy.random.Generator`.
  Without a seed it is seeded from operating-system entropy; a seed is used only
  when the caller gives one (reproducible experiments and tests).
* Shuffling real messages without a seed uses the operating system's
  cryptographically secure generator (see :mod:`shuffledp.shuffler`).
"""

from __future__ import annotations

import numpy as np

from shuffledp._validation import InvalidParameterError

__all__ = ["SeedLike", "make_rng"]

SeedLike = int | np.random.Generator | None


def make_rng(seed: SeedLike = None) -> np.random.Generator:
    """Return a generator following the package's randomness policy.

    Args:
        seed: ``None`` for fresh operating-system entropy, an ``int`` for a
            reproducible stream, or an existing generator, returned unchanged.

    Returns:
        A :class:`numpy.random.Generator`.

    Raises:
        InvalidParameterError: If ``seed`` is a negative integer.
        TypeError: If ``seed`` is of another type (a float seed is a mistake
            that would silently change the stream).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        # SeedSequence() with no entropy argument draws 128 bits from os.urandom.
        return np.random.default_rng(np.random.SeedSequence())
    if isinstance(seed, int | np.integer) and not isinstance(seed, bool):
        if int(seed) < 0:
            raise InvalidParameterError(f"seed must be a non-negative integer, got {seed}")
        return np.random.default_rng(int(seed))
    raise TypeError(f"seed must be None, a non-negative int or a numpy Generator, got {seed!r}")
