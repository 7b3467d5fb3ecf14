"""The release document of a segmented run (schema ``segmented-release``).

Every privacy level's certified guarantee, the level counts (and whether the
release covers them), the pooled item-frequency estimate and the parameters
the segmented protocol chose; built for ``run segmented``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shuffledp import __version__
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.data.sets import LoadedSets
    from shuffledp.protocols.segmented import SegmentedProtocol, SegmentedRun

__all__ = ["segmented_run_to_dict"]


def segmented_run_to_dict(
    protocol: SegmentedProtocol,
    run: SegmentedRun,
    data: LoadedSets,
    *,
    target_delta: float,
    blanket_choice: str,
    extra_notes: tuple[str, ...] = (),
    seed: int | None = None,
) -> dict[str, Any]:
    """Return the JSON result of a segmented run (schema ``segmented-release``).

    ``seed`` (``--seed``) goes into ``parameters.seed``; the run's own
    ``not_covered`` already says that a seeded shuffle is not cryptographic.
    """
    from shuffledp.protocols.segmented import NEIGHBOURING, SEGMENTED_PRIVACY_METHODS

    params = run.parameters
    level_objects = []
    for level, report in zip(params.levels, run.privacy, strict=True):
        entry: dict[str, Any] = dict(level.to_dict())
        entry["method"] = report.method
        entry["bound"] = report.bound.value
        level_objects.append(entry)
    counts = run.level_counts
    level_counts = counts.to_dict()
    level_counts["covered"] = counts.report is not None
    privacy: dict[str, Any] = {
        "method": SEGMENTED_PRIVACY_METHODS[params.variant],
        "bound": "upper",
        "n": run.n,
        "neighbouring": NEIGHBOURING,
        "target_delta": target_delta,
        "levels": level_objects,
        "level_counts": level_counts,
        "assumptions": list(run.assumptions),
        "not_covered": list(run.not_covered),
        "covers_release": not run.not_covered,
        "domain_covered": True,
        "notes": run.privacy[0].notes,
    }
    estimate = run.estimate.to_dict()
    estimate["estimand"] = (
        "sum_k n_k lambda_k w_jk / sum_k n_k lambda_k, w_jk = fraction of level-k users whose "
        "(sampled) set holds item j"
    )
    return {
        "schema": schema_id("segmented-release"),
        "protocol": run.protocol,
        "shuffledp_version": __version__,
        "n": run.n,
        "domain": list(run.estimate.domain),
        "domain_source": data.domain_source,
        "path": run.path,
        "levels": list(protocol.levels),
        "estimate": estimate,
        "privacy": privacy,
        "parameters": {
            "blanket_rate": params.blanket_rate,
            "blanket_choice": blanket_choice,
            "variant": params.variant,
            "items_per_user": params.items_per_user,
            "padding": protocol.padding,
            "message_domain": params.message_domain,
            "lambda": list(params.report_probabilities),
            "error_bound": params.error_bound,
            **({} if seed is None else {"seed": seed}),
        },
        "messages": run.messages,
        "messages_per_user": run.messages_per_user,
        "expected_messages_per_user": params.messages_per_user,
        "level_step_messages_per_user": counts.messages / run.n,
        "notes": [*data.release_notes, *extra_notes, *run.notes],
    }
