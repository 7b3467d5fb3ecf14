"""shuffledp: differential privacy in the shuffle model.

Users randomize their own data, a shuffler strips identities and order, and an
analyzer estimates histograms with a stated (ε, δ) guarantee and error bars.
The public API is re-exported here.
"""

from shuffledp._optional import MissingExtraError
from shuffledp._rng import child_seeds, make_rng
from shuffledp._validation import DataError, InvalidParameterError, ShuffleDPError
from shuffledp.accounting.augmented import augmented_delta
from shuffledp.accounting.calibration import calibrate_flip_q
from shuffledp.accounting.compose import compose, reports_from_json
from shuffledp.accounting.correlated import correlated_delta
from shuffledp.accounting.flip import (
    flip_delta,
    flip_delta_for_pair,
    flip_delta_lower_bound,
    flip_epsilon,
    flip_local_epsilon,
)
from shuffledp.accounting.flip_paper import paper_error_bound, paper_flip_q, paper_min_fake_users
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
    "reports_from_json",
    "secure_permutation",
    "top_t",
    "top_t_metrics",
]
