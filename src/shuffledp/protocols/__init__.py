"""Protocols: randomizer + shuffler + analyzer + accountant, one module each.

The names below are re-exported lazily (PEP 562): ``import shuffledp.protocols.flip``
(what ``shuffledp run flip`` does) loads FLIP's module only, not every protocol's
accountant (the correlated certificate's scipy.signal, the augmented one's
scipy.optimize).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports

if TYPE_CHECKING:
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

#: Where each re-exported name lives, imported on first use.
_LAZY: dict[str, str] = {
    "AugmentedCalibration": "shuffledp.protocols.augmented",
    "AugmentedProtocol": "shuffledp.protocols.augmented",
    "calibrate_augmented": "shuffledp.protocols.augmented",
    "ExecutionPath": "shuffledp.protocols.base",
    "ProtocolRun": "shuffledp.protocols.base",
    "ShuffleProtocol": "shuffledp.protocols.base",
    "CorrelatedCalibration": "shuffledp.protocols.correlated",
    "CorrelatedProtocol": "shuffledp.protocols.correlated",
    "calibrate_correlated": "shuffledp.protocols.correlated",
    "FlipCalibration": "shuffledp.protocols.flip",
    "FlipProtocol": "shuffledp.protocols.flip",
    "calibrate_flip": "shuffledp.protocols.flip",
    "default_fake_users": "shuffledp.protocols.flip",
    "KRRCalibration": "shuffledp.protocols.krr",
    "KRRProtocol": "shuffledp.protocols.krr",
    "calibrate_krr": "shuffledp.protocols.krr",
    "PerUserAnalysis": "shuffledp.protocols.per_user",
    "PerUserHistograms": "shuffledp.protocols.per_user",
    "PerUserRun": "shuffledp.protocols.per_user",
    "LevelCounts": "shuffledp.protocols.segmented",
    "SegmentedProtocol": "shuffledp.protocols.segmented",
    "SegmentedRun": "shuffledp.protocols.segmented",
    "aggregate_levels": "shuffledp.protocols.segmented",
    "run_segmented": "shuffledp.protocols.segmented",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
