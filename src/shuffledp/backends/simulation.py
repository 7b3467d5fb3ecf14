"""Message-level simulation split into independent tasks: what each backend runs in parallel.

A :class:`SimulationPlan` describes ``replicates`` independent executions of a
protocol's randomizer on ``n`` users whose values follow a known histogram.
Each execution is cut into ``partitions`` tasks of consecutive users; task
``t`` (replicate ``t // partitions``) draws from its own stream
``SeedSequence(seed).spawn(replicates * partitions)[t]``, so the messages do
not depend on which machine, process or order runs the tasks: the local and
the Spark backend generate exactly the same messages from the same seed.

Every message also gets a 64-bit shuffle key from its task's stream; sorting
by the keys is the shuffle (a uniformly random permutation of all messages
whenever the keys are distinct; with m messages two keys collide with
probability at most m²/2⁶⁵, which only makes the order of those two messages
follow the input). The keys come from the task's stream rather than from the
OS so that a task Spark runs again (after a lost executor) sends every message
to the same place; the root entropy itself comes from the OS unless a seed is
given. A simulated shuffle protects nobody: the shuffle of real messages
(:meth:`~shuffledp.backends.base.Backend.permute`) uses a CSPRNG.

The histogram is laid out sorted by value (user i holds the value whose
cumulative count first exceeds i); the randomizers treat users independently,
so the law of the shuffled messages depends on the histogram only.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from shuffledp._rng import SeedLike
from shuffledp._validation import DataError, InvalidParameterError, check_int
from shuffledp.messages import MessageBatch

__all__ = [
    "USERS_PER_CHUNK",
    "MessageRandomizer",
    "SimulationPlan",
    "default_partitions",
]

IntArray = NDArray[np.int64]

#: Users randomized per vectorized step inside a task (bounds a task's memory).
USERS_PER_CHUNK = 1 << 20
#: Users per task when the caller does not choose the number of partitions.
DEFAULT_USERS_PER_TASK = 1 << 20
#: Fewest tasks per replicate by default (enough for a few executors to share).
DEFAULT_MIN_PARTITIONS = 8


class MessageRandomizer(Protocol):
    """The client side of a histogram protocol (FLIP's or k-RR's randomizer)."""

    domain_size: int

    def randomize(self, values: NDArray[np.integer], seed: SeedLike = None) -> MessageBatch:
        """All users' messages, before the shuffle."""
        ...


def default_partitions(n: int) -> int:
    """Tasks per replicate by default: one per 2^20 users, at least 8, at most n.

    It depends on n only, so a seeded run gives the same messages on every backend.
    """
    return max(1, min(n, max(DEFAULT_MIN_PARTITIONS, -(-n // DEFAULT_USERS_PER_TASK))))


def expected_messages_per_user(randomizer: MessageRandomizer) -> float:
    """E[messages per user]: FLIP's stated value, one for k-RR."""
    value = getattr(randomizer, "expected_messages_per_user", 1.0)
    return float(value)


@dataclass(frozen=True)
class SimulationPlan:
    """Independent tasks that together simulate ``replicates`` message-level executions.

    Attributes:
        randomizer: The protocol's randomizer (pickled to every executor).
        histogram: True number of users per bin.
        partitions: Tasks per replicate.
        replicates: Independent executions (each is one batch of the result).
        entropy: The root :class:`numpy.random.SeedSequence`'s entropy.
        seeded: Whether a seed was given (else the entropy came from the OS).
    """

    randomizer: MessageRandomizer
    histogram: IntArray
    partitions: int
    replicates: int
    entropy: int
    seeded: bool

    @classmethod
    def create(
        cls,
        randomizer: MessageRandomizer,
        histogram: NDArray[np.integer],
        *,
        partitions: int | None = None,
        replicates: int = 1,
        seed: int | None = None,
    ) -> SimulationPlan:
        """Check the inputs and fix the root seed (OS entropy unless ``seed`` is given).

        Raises:
            DataError: If the histogram is not d non-negative counts with a user.
            InvalidParameterError: On a bad number of partitions, replicates or seed.
        """
        hist = np.asarray(histogram)
        d = randomizer.domain_size
        if hist.shape != (d,) or not np.issubdtype(hist.dtype, np.integer):
            raise DataError(f"histogram must be {d} integer counts, got shape {hist.shape}")
        if np.any(hist < 0) or int(hist.sum()) == 0:
            raise DataError("histogram counts must be >= 0 with at least one user")
        n = int(hist.sum())
        if partitions is None:
            partitions = default_partitions(n)
        partitions = check_int(partitions, "partitions", minimum=1)
        if partitions > n:
            raise InvalidParameterError(f"partitions must be at most n={n}, got {partitions}")
        replicates = check_int(replicates, "replicates", minimum=1)
        if seed is None:
            entropy = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
        else:
            entropy = check_int(seed, "seed", minimum=0)
        return cls(
            randomizer, hist.astype(np.int64), partitions, replicates, entropy, seed is not None
        )

    @property
    def n(self) -> int:
        """Users per replicate."""
        return int(self.histogram.sum())

    @property
    def domain_size(self) -> int:
        """Number of bins d."""
        return int(self.histogram.shape[0])

    @property
    def tasks(self) -> int:
        """Tasks in all: replicates × partitions."""
        return self.replicates * self.partitions

    @property
    def expected_messages(self) -> float:
        """E[messages] over every replicate."""
        return self.replicates * self.n * expected_messages_per_user(self.randomizer)

    def seed_sequence(self, task: int) -> np.random.SeedSequence:
        """Task ``task``'s stream: ``SeedSequence(seed).spawn(tasks)[task]``."""
        return np.random.SeedSequence(self.entropy, spawn_key=(task,))

    def users(self, task: int) -> tuple[int, int, int]:
        """(replicate, first user, end user) of a task."""
        if not 0 <= task < self.tasks:
            raise InvalidParameterError(f"task must be in [0, {self.tasks}), got {task}")
        replicate, part = divmod(task, self.partitions)
        n, p = self.n, self.partitions
        return replicate, part * n // p, (part + 1) * n // p

    def generate(self, task: int) -> Iterator[tuple[int, NDArray[np.uint64], IntArray]]:
        """Yield (replicate, shuffle keys, bins) of a task's messages, chunk by chunk."""
        replicate, start, stop = self.users(task)
        rng = np.random.default_rng(self.seed_sequence(task))
        bounds = np.cumsum(self.histogram)
        for first in range(start, stop, USERS_PER_CHUNK):
            last = min(stop, first + USERS_PER_CHUNK)
            values = np.searchsorted(bounds, np.arange(first, last), side="right")
            batch = self.randomizer.randomize(values.astype(np.int64), rng)
            keys = np.asarray(rng.bit_generator.random_raw(len(batch)), dtype=np.uint64)
            yield replicate, keys, batch.payload.astype(np.int64, copy=False)

    def shuffle_partitions(self, parallelism: int, messages_per_partition: int = 1 << 22) -> int:
        """How many key ranges to shuffle into: enough for ``parallelism`` and bounded size."""
        wanted = math.ceil(self.expected_messages / messages_per_partition)
        return max(1, parallelism, wanted)
