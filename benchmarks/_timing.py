"""What the throughput benchmarks share: a timer and the message path's stages.

Imported by the scripts of this folder (``python benchmarks/NAME.py`` puts the
folder on ``sys.path``); not a benchmark itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from shuffledp._progress import progress
from shuffledp.shuffler.uniform import UniformShuffler

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Call ``fn`` and return its result and the wall-clock seconds it took."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def message_path_stages(
    protocol: Any, values: Any, repeats: int, *, desc: str = "message-level runs"
) -> tuple[dict[str, list[float]], int]:
    """Time randomize, the secure shuffle and analyze ``repeats`` times.

    Args:
        protocol: A shuffle protocol (``randomize``, ``statistic_from_messages``,
            ``estimate``).
        values: The users' bin indices.
        repeats: Runs.
        desc: The progress bar's label.

    Returns:
        The seconds of each stage per run (``randomize``, ``shuffle``,
        ``analyze`` and their ``total``) and the last run's message count.
    """
    stages: dict[str, list[float]] = {"randomize": [], "shuffle": [], "analyze": [], "total": []}
    messages = 0
    for _ in progress(range(repeats), desc=desc):
        batch, t_r = timed(lambda: protocol.randomize(values))
        shuffled, t_s = timed(lambda: UniformShuffler().shuffle(batch))  # noqa: B023
        _, t_a = timed(
            lambda: protocol.estimate(protocol.statistic_from_messages(shuffled))  # noqa: B023
        )
        messages = len(batch)
        for key, value in zip(stages, (t_r, t_s, t_a, t_r + t_s + t_a), strict=True):
            stages[key].append(value)
    return stages, messages
