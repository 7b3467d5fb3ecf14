"""The choices and defaults the parser shows, without importing the modules that define them.

Building the parser must not load numpy, scipy or the accountant (``shuffledp
--help`` would take a second), yet the options list names that live in those
modules. They are copied here; :data:`SOURCES` says where each is defined and
``tests/unit/test_cli_choices.py`` checks that every copy equals its source, so
a change there fails the test until it is made here too.
"""

from __future__ import annotations

__all__ = [
    "ACCOUNTING_MECHANISMS",
    "ACCOUNTING_METHODS",
    "AUGMENTED_CALIBRATIONS",
    "AUGMENTED_VARIANTS",
    "CLUSTERINGS",
    "CORRELATED_DEFAULT_SLACK",
    "CORRELATED_NEIGHBOURS",
    "CORRELATED_PAPER_GAMMA",
    "DEFAULT_NA_VALUES",
    "EMBEDDINGS",
    "FLIP_CALIBRATION_METHODS",
    "FLIP_DEFAULT_FAKE_USERS",
    "KRR_ESTIMATORS",
    "PER_USER_NEIGHBOURINGS",
    "PER_USER_POLICIES",
    "PER_USER_WEIGHTINGS",
    "SEGMENTED_BLANKET_GRID",
    "SEGMENTED_LEVEL_COUNT_MODES",
    "SEGMENTED_VARIANTS",
    "SOURCES",
]

ACCOUNTING_MECHANISMS: tuple[str, ...] = ("generic", "krr", "flip", "poisson")
ACCOUNTING_METHODS: tuple[str, ...] = (
    "erlingsson2019",
    "bbgn2019-hoeffding",
    "bbgn2019-bennett",
    "bbgn2019-bennett-published",
    "fmt2021-closed",
    "fmt2021-numeric",
    "vr2024",
    "krr-blanket",
    "krr-homogeneous",
    "krr-two-count",
    "krr-splits",
    "biswas2023",
    "flip-exact",
    "flip-lower",
    "poisson-exact",
    "poisson-lemma3",
)
AUGMENTED_CALIBRATIONS: tuple[str, ...] = ("exact", "paper")
AUGMENTED_VARIANTS: tuple[str, ...] = ("sageo", "s1geo", "sbin")
CLUSTERINGS: tuple[str, ...] = ("kmeans", "dbscan")
CORRELATED_DEFAULT_SLACK = 0.10
CORRELATED_NEIGHBOURS: tuple[str, ...] = ("replacement", "add-remove")
CORRELATED_PAPER_GAMMA = 0.1
DEFAULT_NA_VALUES: tuple[str, ...] = ("", "NA", "N/A")
EMBEDDINGS: tuple[str, ...] = ("simplex", "hellinger")
FLIP_CALIBRATION_METHODS: tuple[str, ...] = ("exact", "paper")
FLIP_DEFAULT_FAKE_USERS = 100
KRR_ESTIMATORS: tuple[str, ...] = ("raw", "inversion", "clip", "simplex")
PER_USER_NEIGHBOURINGS: tuple[str, ...] = ("moved-items", "l1-distance")
PER_USER_POLICIES: tuple[str, ...] = ("error", "first", "sample")
PER_USER_WEIGHTINGS: tuple[str, ...] = ("min-variance", "printed")
SEGMENTED_BLANKET_GRID: tuple[float, ...] = (
    *(0.1, 0.1277, 0.1629, 0.208, 0.2655, 0.3389, 0.4327, 0.5523, 0.705, 0.9),
    *(1.02, 1.5, 2.02, 2.5, 3.02, 4.02, 5.02, 6.5, 8.02, 10.02),
)
SEGMENTED_LEVEL_COUNT_MODES: tuple[str, ...] = ("exact", "dp")
SEGMENTED_VARIANTS: tuple[str, ...] = ("paper", "dummy")

#: Where each copy above is defined: ``module:name`` (``METHODS`` is the registry,
#: whose keys are the method names).
SOURCES: dict[str, str] = {
    "ACCOUNTING_MECHANISMS": "shuffledp.accounting.methods:MECHANISMS",
    "ACCOUNTING_METHODS": "shuffledp.accounting.methods:METHODS",
    "AUGMENTED_CALIBRATIONS": "shuffledp.protocols.augmented:AUGMENTED_CALIBRATIONS",
    "AUGMENTED_VARIANTS": "shuffledp.accounting.certificates.augmented:VARIANTS",
    "CLUSTERINGS": "shuffledp.shuffler.grouped:CLUSTERINGS",
    "CORRELATED_DEFAULT_SLACK": "shuffledp.protocols.correlated:DEFAULT_SLACK",
    "CORRELATED_NEIGHBOURS": "shuffledp.accounting.certificates.correlated:NEIGHBOURS",
    "CORRELATED_PAPER_GAMMA": "shuffledp.accounting.reproductions.correlated_paper:PAPER_GAMMA",
    "DEFAULT_NA_VALUES": "shuffledp.data.encoding:DEFAULT_NA_VALUES",
    "EMBEDDINGS": "shuffledp.shuffler.grouped:EMBEDDINGS",
    "FLIP_CALIBRATION_METHODS": "shuffledp.protocols.flip:CALIBRATION_METHODS",
    "FLIP_DEFAULT_FAKE_USERS": "shuffledp.protocols.flip:DEFAULT_FAKE_USERS",
    "KRR_ESTIMATORS": "shuffledp.analyzers.krr_estimators:ESTIMATORS",
    "PER_USER_NEIGHBOURINGS": "shuffledp.randomizers.laplace:NEIGHBOURINGS",
    "PER_USER_POLICIES": "shuffledp.data.users:PER_USER_POLICIES",
    "PER_USER_WEIGHTINGS": "shuffledp.randomizers.laplace:WEIGHTINGS",
    "SEGMENTED_BLANKET_GRID": "shuffledp.accounting.segmented_parameters:DEFAULT_BLANKET_GRID",
    "SEGMENTED_LEVEL_COUNT_MODES": "shuffledp.protocols.segmented:LEVEL_COUNT_MODES",
    "SEGMENTED_VARIANTS": "shuffledp.accounting.certificates.segmented:VARIANTS",
}
