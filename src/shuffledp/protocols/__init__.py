"""Protocols: randomizer + shuffler + analyzer + accountant, one module each."""

from shuffledp.protocols.base import ExecutionPath, ProtocolRun, ShuffleProtocol
from shuffledp.protocols.flip import (
    FlipCalibration,
    FlipProtocol,
    calibrate_flip,
    default_fake_users,
)
from shuffledp.protocols.krr import KRRCalibration, KRRProtocol, calibrate_krr

__all__ = [
    "ExecutionPath",
    "FlipCalibration",
    "FlipProtocol",
    "KRRCalibration",
    "KRRProtocol",
    "ProtocolRun",
    "ShuffleProtocol",
    "calibrate_flip",
    "calibrate_krr",
    "default_fake_users",
]
