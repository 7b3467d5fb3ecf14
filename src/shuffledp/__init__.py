"""shuffledp: differential privacy in the shuffle model.

Users randomize their own data, a shuffler strips identities and order, and an
analyzer estimates histograms with a stated (ε, δ) guarantee and error bars.
The public API is re-exported here.
"""

from __future__ import annotations

# The ``shuffledp`` command takes Ctrl-C as one line and exit 130 from here on, even
# during its imports; importing the package elsewhere changes no signal handler.
from shuffledp import _interrupts

if _interrupts.started_as_the_command():
    _interrupts.exit_on_interrupt_while_starting()

from typing import TYPE_CHECKING

from shuffledp._lazy import lazy_exports
from shuffledp._optional import MissingExtraError
from shuffledp._validation import DataError, InvalidParameterError, ShuffleDPError

if TYPE_CHECKING:
    from shuffledp._rng import child_seeds, make_rng
    from shuffledp.accounting.calibration import calibrate_flip_q
    from shuffledp.accounting.certificates.augmented import augmented_delta
    from shuffledp.accounting.certificates.correlated import correlated_delta
    from shuffledp.accounting.certificates.flip import (
        flip_delta,
        flip_delta_for_pair,
        flip_delta_lower_bound,
        flip_epsilon,
        flip_local_epsilon,
    )
    from shuffledp.accounting.composition.compose import (
        compose,
        populations_from_json,
        reports_from_json,
    )
    from shuffledp.accounting.reproductions.flip_paper import (
        paper_error_bound,
        paper_flip_q,
        paper_min_fake_users,
    )
    from shuffledp.analyzers import (
        FlipAnalyzer,
        HistogramEstimate,
        TopTMetrics,
        expected_max_abs_normal,
        top_t,
        top_t_metrics,
    )
    from shuffledp.data.encoding import EncodedColumn, encode_values
    from shuffledp.messages import MessageBatch, ShuffledBatch
    from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
    from shuffledp.protocols import (
        AugmentedCalibration,
        AugmentedProtocol,
        CorrelatedCalibration,
        CorrelatedProtocol,
        FlipCalibration,
        FlipProtocol,
        KRRCalibration,
        KRRProtocol,
        ProtocolRun,
        ShuffleProtocol,
        calibrate_augmented,
        calibrate_correlated,
        calibrate_flip,
        calibrate_krr,
        default_fake_users,
    )
    from shuffledp.randomizers import FlipRandomizer, KRRRandomizer
    from shuffledp.shuffler import UniformShuffler, secure_permutation

__version__ = "0.2.0"

__all__ = [
    "ApproxDP",
    "AugmentedCalibration",
    "AugmentedProtocol",
    "BoundKind",
    "CorrelatedCalibration",
    "CorrelatedProtocol",
    "DataError",
    "EncodedColumn",
    "FlipAnalyzer",
    "FlipCalibration",
    "FlipProtocol",
    "FlipRandomizer",
    "HistogramEstimate",
    "InvalidParameterError",
    "KRRCalibration",
    "KRRProtocol",
    "KRRRandomizer",
    "MessageBatch",
    "MissingExtraError",
    "PrivacyReport",
    "ProtocolRun",
    "ShuffleDPError",
    "ShuffleProtocol",
    "ShuffledBatch",
    "TopTMetrics",
    "UniformShuffler",
    "__version__",
    "augmented_delta",
    "calibrate_augmented",
    "calibrate_correlated",
    "calibrate_flip",
    "calibrate_flip_q",
    "calibrate_krr",
    "child_seeds",
    "compose",
    "correlated_delta",
    "default_fake_users",
    "encode_values",
    "expected_max_abs_normal",
    "flip_delta",
    "flip_delta_for_pair",
    "flip_delta_lower_bound",
    "flip_epsilon",
    "flip_local_epsilon",
    "make_rng",
    "paper_error_bound",
    "paper_flip_q",
    "paper_min_fake_users",
    "populations_from_json",
    "reports_from_json",
    "secure_permutation",
    "top_t",
    "top_t_metrics",
]

#: Where each re-exported name lives. Imported on first use: ``import shuffledp`` (and
#: so the command line's start-up) does not load numpy, scipy or the accountant.
_LAZY: dict[str, str] = {
    "ApproxDP": "shuffledp.privacy",
    "augmented_delta": "shuffledp.accounting.certificates.augmented",
    "AugmentedCalibration": "shuffledp.protocols",
    "AugmentedProtocol": "shuffledp.protocols",
    "BoundKind": "shuffledp.privacy",
    "calibrate_augmented": "shuffledp.protocols",
    "calibrate_correlated": "shuffledp.protocols",
    "calibrate_flip": "shuffledp.protocols",
    "calibrate_flip_q": "shuffledp.accounting.calibration",
    "calibrate_krr": "shuffledp.protocols",
    "child_seeds": "shuffledp._rng",
    "compose": "shuffledp.accounting.composition.compose",
    "correlated_delta": "shuffledp.accounting.certificates.correlated",
    "CorrelatedCalibration": "shuffledp.protocols",
    "CorrelatedProtocol": "shuffledp.protocols",
    "default_fake_users": "shuffledp.protocols",
    "encode_values": "shuffledp.data.encoding",
    "EncodedColumn": "shuffledp.data.encoding",
    "expected_max_abs_normal": "shuffledp.analyzers",
    "flip_delta": "shuffledp.accounting.certificates.flip",
    "flip_delta_for_pair": "shuffledp.accounting.certificates.flip",
    "flip_delta_lower_bound": "shuffledp.accounting.certificates.flip",
    "flip_epsilon": "shuffledp.accounting.certificates.flip",
    "flip_local_epsilon": "shuffledp.accounting.certificates.flip",
    "FlipAnalyzer": "shuffledp.analyzers",
    "FlipCalibration": "shuffledp.protocols",
    "FlipProtocol": "shuffledp.protocols",
    "FlipRandomizer": "shuffledp.randomizers",
    "HistogramEstimate": "shuffledp.analyzers",
    "KRRCalibration": "shuffledp.protocols",
    "KRRProtocol": "shuffledp.protocols",
    "KRRRandomizer": "shuffledp.randomizers",
    "make_rng": "shuffledp._rng",
    "MessageBatch": "shuffledp.messages",
    "paper_error_bound": "shuffledp.accounting.reproductions.flip_paper",
    "paper_flip_q": "shuffledp.accounting.reproductions.flip_paper",
    "paper_min_fake_users": "shuffledp.accounting.reproductions.flip_paper",
    "PrivacyReport": "shuffledp.privacy",
    "ProtocolRun": "shuffledp.protocols",
    "populations_from_json": "shuffledp.accounting.composition.compose",
    "reports_from_json": "shuffledp.accounting.composition.compose",
    "secure_permutation": "shuffledp.shuffler",
    "ShuffledBatch": "shuffledp.messages",
    "ShuffleProtocol": "shuffledp.protocols",
    "top_t": "shuffledp.analyzers",
    "top_t_metrics": "shuffledp.analyzers",
    "TopTMetrics": "shuffledp.analyzers",
    "UniformShuffler": "shuffledp.shuffler",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
