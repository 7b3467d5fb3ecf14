"""The randomness policy.

* Randomizers and simulations draw from a :class:`numpy.random.Generator`.
  Without a seed it is seeded from operating-system entropy; a seed is used only
  when the caller gives one (reproducible experiments and tests).
* Shuffling real messages without a seed uses the operating system's
  cryptographically secure generator (see :mod:`shuffledp.shuffler`).
* One seed never feeds two consumers: a caller that hands randomness to
  several parts (a data loader's sample and the randomizers, the randomizers
  and the shuffle, …) splits it with :func:`child_seeds` first. Two
  generators built from the same integer draw the same numbers, which
  correlates the parts (e.g. the slot order of a sampled set with the
  decision to report that slot).
"""

from __future__ import annotations

import numpy as np

from shuffledp._validation import InvalidParameterError

__all__ = ["SEEDED_NOT_COVERED", "SeedLike", "child_seeds", "make_rng"]

SeedLike = int | np.random.Generator | None

#: What a release made with a seed states in ``privacy.not_covered``.
SEEDED_NOT_COVERED = (
    "the run's randomness: it was seeded (a seed was given, --seed), so the shuffle is a "
    "seeded pseudo-random "
    "permutation, not a cryptographic one, and every random draw follows from the seed; "
    "whoever knows or guesses the seed can undo the shuffle and the randomizers' noise "
    "(a seed is for tests and reproducible experiments, never for real data)"
)


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


def child_seeds(seed: SeedLike, count: int) -> tuple[np.random.Generator | None, ...]:
    """Split one seed into ``count`` independent streams, one per consumer.

    ``SeedSequence(seed).spawn(count)`` for an integer; :meth:`numpy.random.Generator.spawn`
    for a generator (children independent of it and of each other); ``None``
    stays ``None`` for every child, so each consumer keeps the default policy
    (fresh operating-system entropy for a randomizer, the cryptographic
    shuffle for a shuffler).

    Args:
        seed: ``None``, a non-negative ``int`` or a :class:`numpy.random.Generator`.
        count: Number of children, ≥ 1.

    Returns:
        ``count`` generators (or ``count`` times ``None``).

    Raises:
        InvalidParameterError: If ``seed`` is a negative integer or ``count`` < 1.
        TypeError: If ``seed`` is of another type.
    """
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise InvalidParameterError(f"count must be an integer >= 1, got {count!r}")
    if seed is None:
        return (None,) * int(count)
    if isinstance(seed, np.random.Generator):
        return tuple(seed.spawn(int(count)))
    make_rng(seed)  # the same checks as a single stream
    assert isinstance(seed, int | np.integer)
    children = np.random.SeedSequence(int(seed)).spawn(int(count))
    return tuple(np.random.default_rng(child) for child in children)
