"""Protocols: randomizer + shuffler + analyzer + accountant, one module each."""

from shuffledp.protocols.augmented import (
    AugmentedCalibration,
    AugmentedProtocol,
    calibrate_augmented,
)
from shuffledp.protocols.base import ExecutionPath, ProtocolRun, ShuffleProtocol
from shuffledp.protocols.correlated import (
    CorrelatedCalibration,
    CorrelatedProtocol,
    calibrate_correlated,
)
from shuffledp.protocols.flip import (
    FlipCalibration,
    FlipProtocol,
    calibrate_flip,
    default_fake_users,
)
from shuffledp.protocols.krr import KRRCalibration, KRRProtocol, calibrate_krr
from shuffledp.protocols.per_user import PerUserAnalysis, PerUserHistograms, PerUserRun
from shuffledp.protocols.segmented import (
    LevelCounts,
    SegmentedProtocol,
    SegmentedRun,
    aggregate_levels,
    run_segmented,
)

__all__ = [
    "AugmentedCalibration",
    "AugmentedProtocol",
    "CorrelatedCalibration",
    "CorrelatedProtocol",
    "ExecutionPath",
    "FlipCalibration",
    "FlipProtocol",
    "KRRCalibration",
    "KRRProtocol",
    "LevelCounts",
    "PerUserAnalysis",
    "PerUserHistograms",
    "PerUserRun",
    "ProtocolRun",
    "SegmentedProtocol",
    "SegmentedRun",
    "ShuffleProtocol",
    "aggregate_levels",
    "calibrate_augmented",
    "calibrate_correlated",
    "calibrate_flip",
    "calibrate_krr",
    "default_fake_users",
    "run_segmented",
]
