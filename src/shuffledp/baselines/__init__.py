"""The baselines of the segmented paper's §6, for set-valued frequency estimation.

Source: S. Wang, H. Chen, S. Zeng et al., "Segmented private data aggregation in the
multi-message shuffle model", arXiv 2407.19639 (the version implemented names no venue).

Users hold sets of s items from a public domain of d items (an n × s matrix,
:func:`shuffledp.data.movies.fixed_size_items`); every baseline estimates
w_j, the fraction of users holding item j, with per-item standard errors, and
states a certified guarantee (:class:`~shuffledp.privacy.PrivacyReport`):

* :func:`calibrate_subexp_local`: PrivSet's subset selection, pure ε-LDP (ε = 2).
* :func:`calibrate_subexp_shuffle`: the same randomizer, one shuffled message,
  ε₀ from the generic amplification bound (ε = 0.5, δ = 0.01/n).
* :func:`calibrate_mm`: balls-into-bins multi-message (Luo, Wang & Yi), the
  smallest blanket rate this package's accountant certifies (ε = 0.5).
* :func:`calibrate_sepmm`, :func:`calibrate_weighted_sepmm`: MM per level,
  the estimates averaged with equal or the paper's weights.

Each calibrated object meets :class:`SetFrequencyMechanism`.
"""

from shuffledp.baselines.base import PAD, SetFrequencyEstimate, SetFrequencyMechanism
from shuffledp.baselines.mm_shuffle import MMShuffle, calibrate_mm, mm_level_delta
from shuffledp.baselines.privset import SubexpMechanism, SubsetSelection
from shuffledp.baselines.sepmm import SepMM, calibrate_sepmm, calibrate_weighted_sepmm
from shuffledp.baselines.subexp_local import calibrate_subexp_local
from shuffledp.baselines.subexp_shuffle import calibrate_subexp_shuffle

__all__ = [
    "PAD",
    "MMShuffle",
    "SepMM",
    "SetFrequencyEstimate",
    "SetFrequencyMechanism",
    "SubexpMechanism",
    "SubsetSelection",
    "calibrate_mm",
    "calibrate_sepmm",
    "calibrate_subexp_local",
    "calibrate_subexp_shuffle",
    "calibrate_weighted_sepmm",
    "mm_level_delta",
]
