"""Message batches: what randomizers emit and what the shuffler outputs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["MessageBatch", "ShuffledBatch"]

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class MessageBatch:
    """Messages as the users send them, before the shuffler.

    Attributes:
        payload: One entry per message (for histogram protocols, a bin index);
            a message of several words is a row (``payload[i]``: message i).
        sender: Index of the user who sent each message; the shuffler drops it.
        n_users: Number of users who took part (some may have sent no message).
    """

    payload: IntArray
    sender: IntArray
    n_users: int

    def __post_init__(self) -> None:
        if (
            self.sender.ndim != 1
            or self.payload.ndim < 1
            or self.payload.shape[0] != self.sender.shape[0]
        ):
            raise ValueError(
                "sender must be one-dimensional and payload hold one entry (or row) per "
                f"sender, got shapes {self.payload.shape} and {self.sender.shape}"
            )

    def __len__(self) -> int:
        return int(self.payload.shape[0])


@dataclass(frozen=True)
class ShuffledBatch:
    """The shuffler's output: payloads in uniformly random order, no senders.

    Attributes:
        payload: The messages' payloads (one entry, or row, per message).
        n_users: Number of users who took part (public, as in the shuffle model).
    """

    payload: IntArray
    n_users: int

    def __len__(self) -> int:
        return int(self.payload.shape[0])
