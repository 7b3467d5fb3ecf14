"""Protocols: randomizer + shuffler + analyzer + accountant, one module each."""

from shuffledp.protocols.base import ExecutionPath, ProtocolRun, ShuffleProtocol
from shuffledp.protocols.flip import (
    FlipCalibration,
    FlipProtocol,
    calibrate_flip,
    default_fake_users,
)

__all__ = [
    "ExecutionPath",
    "FlipCalibration",
    "FlipProtocol",
    "ProtocolRun",
    "ShuffleProtocol",
    "calibrate_flip",
    "default_fake_users",
]
