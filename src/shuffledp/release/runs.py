"""The release documents of the histogram protocols: FLIP, k-RR, correlated, augmented.

Each builder takes a run (its estimate, certified report, path and message
count), the calibration the report was certified from and the
:class:`~shuffledp.release.document.ReleaseContext` (where the data and domain
came from, what the guarantee assumes and does not cover) and returns the JSON
document: ``release`` for FLIP and k-RR, ``correlated-release`` and
``augmented-release`` for the near-central protocols. ``run``, ``simulate``,
``demo`` and the analyzer service (:mod:`shuffledp.service.release`) all build
their documents here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shuffledp.release.document import ReleaseContext, run_to_dict
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.protocols.augmented import AugmentedCalibration
    from shuffledp.protocols.base import ProtocolRun
    from shuffledp.protocols.correlated import CorrelatedCalibration
    from shuffledp.protocols.flip import FlipCalibration
    from shuffledp.protocols.krr import KRRCalibration

__all__ = [
    "augmented_run_to_dict",
    "correlated_run_to_dict",
    "flip_run_to_dict",
    "krr_run_to_dict",
]


def flip_run_to_dict(
    run: ProtocolRun, calibration: FlipCalibration, context: ReleaseContext
) -> dict[str, Any]:
    """Return the JSON result of a FLIP run."""
    return run_to_dict(
        run,
        context,
        target_delta=calibration.target_delta,
        calibration=calibration.method,
        parameters=calibration.release_parameters(),
        notes=calibration.notes,
        expected_messages_per_user=calibration.expected_messages_per_user,
    )


def krr_run_to_dict(
    run: ProtocolRun,
    calibration: KRRCalibration,
    parameters: dict[str, Any],
    context: ReleaseContext,
) -> dict[str, Any]:
    """Return the JSON result of a k-RR run (``parameters``: the protocol's and ``calibration``)."""
    return run_to_dict(
        run,
        context,
        target_delta=calibration.target_delta,
        calibration=calibration.method,
        parameters=parameters,
        notes=calibration.notes,
        local_epsilon=calibration.epsilon0,
    )


def correlated_run_to_dict(
    run: ProtocolRun, calibration: CorrelatedCalibration, context: ReleaseContext
) -> dict[str, Any]:
    """Return the JSON result of a correlated run (schema ``correlated-release``)."""
    result = run_to_dict(
        run,
        context,
        target_delta=calibration.target_delta,
        calibration=calibration.method,
        parameters={
            "a": calibration.a,
            "alpha": calibration.alpha,
            "flood_r": calibration.flood_r,
            "flood_q": calibration.flood_q,
            "min_honest": calibration.min_honest,
            "neighbours": calibration.neighbours,
            "slack": calibration.slack,
            "calibration": calibration.method,
        },
        notes=calibration.notes,
        expected_messages_per_user=calibration.expected_messages_per_user,
    )
    result["schema"] = schema_id("correlated-release")
    result["accuracy"] = {
        "per_bin_std": calibration.per_bin_std_all_users,
        "per_bin_std_min_honest": calibration.per_bin_std,
        "central_std": calibration.central_std,
        "std_ratio": calibration.std_ratio,
    }
    return result


def augmented_run_to_dict(
    run: ProtocolRun,
    calibration: AugmentedCalibration,
    parameters: dict[str, Any],
    context: ReleaseContext,
) -> dict[str, Any]:
    """Return the JSON result of an augmented run (schema ``augmented-release``)."""
    result = run_to_dict(
        run,
        context,
        target_delta=calibration.target_delta,
        calibration=calibration.method,
        parameters=parameters,
        notes=(
            *calibration.notes,
            "each user sent exactly one message; messages counts the kept ones and the "
            "shuffler's dummies",
        ),
    )
    result["schema"] = schema_id("augmented-release")
    return result
