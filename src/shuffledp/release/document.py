"""The release document of a run (schema ``release``): the JSON that a run publishes.

:func:`run_to_dict` turns a protocol run and its :class:`ReleaseContext` (where
the data and the domain came from, what the guarantee assumes and does not
cover) into the JSON document; :mod:`shuffledp.release.runs` adds each protocol's
parameters. The FLIP, k-RR, correlated and augmented releases of ``run``,
``simulate``, ``demo`` and the services (:mod:`shuffledp.service.release`)
are built with it; ``run segmented`` and ``run per-user`` build their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from shuffledp import __version__
from shuffledp._validation import InvalidParameterError
from shuffledp.data.domains import check_domain_source
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.privacy import PrivacyReport
    from shuffledp.protocols.base import ProtocolRun

__all__ = ["ReleaseContext", "run_to_dict"]


@dataclass(frozen=True)
class ReleaseContext:
    """What a release states about where its data and domain came from.

    Attributes:
        domain_source: ``declared``, ``file``, ``builtin:NAME``, ``inferred-from-data``
            or ``synthetic``.
        assumptions: Statements the guarantee relies on.
        not_covered: What the release shows outside the guarantee.
        release_notes: Data-independent statements of the rules that adjusted the data.
        seed: ``--seed`` when given (the release states it in ``parameters.seed``).
    """

    domain_source: str
    assumptions: tuple[str, ...] = ()
    not_covered: tuple[str, ...] = ()
    release_notes: tuple[str, ...] = ()
    seed: int | None = None


def _names_a_public_domain(domain_source: str) -> bool:
    """Whether the domain came from the user (declared, a file, built in), not from the data.

    Anything else, ``"inferred-from-data"`` or a value this version does not
    know, is not covered.
    """
    try:
        check_domain_source(domain_source)
    except InvalidParameterError:
        return False
    return True


def run_to_dict(
    run: ProtocolRun,
    context: ReleaseContext,
    *,
    target_delta: float,
    calibration: str,
    parameters: dict[str, Any],
    notes: tuple[str, ...] = (),
    expected_messages_per_user: float | None = None,
    local_epsilon: float | None = None,
) -> dict[str, Any]:
    """Return the JSON result of a run (schema ``release``; see :mod:`shuffledp.schemas`)."""
    not_covered = context.not_covered
    domain_covered = _names_a_public_domain(context.domain_source)
    if not domain_covered and not any(item.startswith("the domain") for item in not_covered):
        # covers_release must agree with domain_covered whoever built the context.
        not_covered = (
            *not_covered,
            f"the domain: its source {context.domain_source!r} is not a public one, so its "
            "labels may come from the data and are released as they are",
        )
    # The protocol's own statements that the context does not repeat come first, then the
    # context's in its order (a statement both make, such as TRUSTED_SHUFFLER, is the
    # context's): the same run states the same assumptions from Python and from a command.
    own = tuple(a for a in run.privacy.assumptions if a not in context.assumptions)
    report: PrivacyReport = replace(run.privacy, assumptions=own).with_context(
        assumptions=context.assumptions, not_covered=not_covered
    )
    privacy = report.to_dict()
    privacy["target_delta"] = target_delta
    privacy["calibration"] = calibration
    privacy["domain_covered"] = domain_covered
    if local_epsilon is not None:
        privacy["local_epsilon"] = local_epsilon
    out = {
        "schema": schema_id("release"),
        "protocol": run.protocol,
        "shuffledp_version": __version__,
        "n": run.estimate.n,
        "domain": list(run.estimate.domain),
        "domain_source": context.domain_source,
        "path": run.path,
        "estimate": run.estimate.to_dict(),
        "privacy": privacy,
        "parameters": parameters if context.seed is None else {**parameters, "seed": context.seed},
        "messages": run.messages,
        "messages_per_user": run.messages_per_user,
        "notes": [*context.release_notes, *notes],
    }
    if expected_messages_per_user is not None:
        out["expected_messages_per_user"] = expected_messages_per_user
    return out
