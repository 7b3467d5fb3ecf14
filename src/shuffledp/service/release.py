"""What the analyzer publishes: the same JSON as ``shuffledp run flip|krr``.

The estimate is computed over every aggregated batch: the protocol is rebuilt
for N = all their users (:func:`~shuffledp.service.task.build_protocol`) and
its estimator applied to the summed counts.

The privacy report is certified for n = ``min_batch_users`` users, whatever
the batches' sizes. Every user is in exactly one batch and the other batches
do not depend on its value, so its guarantee is its batch's. A batch's
stated size m counts every submission, the adversary's included, and a
submission the adversary made itself hides nobody: the shuffle-model bound
holds for the users who follow the protocol, and the task promises only that
a batch holds ``min_batch_users`` of them (the assumption the report states).
A batch of m ≥ n submissions of which at least n are honest is at least as
private as n honest users alone (the other m − n reports can be handed to the
adversary: post-processing), so the δ certified at n covers it; the δ at m
would not (with k-RR over 3 values, ε₀ calibrated for (1, 10⁻⁶) at n = 1000
and m = 2000, δ(m) ≤ 4.86·10⁻¹¹ while 1000 honest users alone have δ ≥ 9.87·10⁻⁷, a
lower bound; ``tests/service/test_service_release.py`` recomputes both).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from shuffledp._validation import ShuffleDPError
from shuffledp.cli.run._shared import ReleaseContext, run_to_dict
from shuffledp.cli.run.flip import flip_run_to_dict
from shuffledp.protocols.base import ProtocolRun
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.protocols.krr import KRRProtocol
from shuffledp.service.store import AggregateTotals, AnalyzerStore
from shuffledp.service.task import Task, build_protocol

__all__ = ["NothingToPublishError", "build_release", "publish"]


class NothingToPublishError(ShuffleDPError):
    """No batch has been aggregated: there is nothing a guarantee covers yet."""


def _context(task: Task, totals: AggregateTotals, smallest: int) -> ReleaseContext:
    if task.one_submission_per_client:
        one_each = (
            "each user submitted once: the shuffler admits one submission per client token, "
            "and the task owner issued one token per user"
        )
    else:
        one_each = (
            "each user submitted once (not enforced: the task issues no client tokens); a "
            "user who submits several times is not protected as one user"
        )
    assumptions = (
        one_each,
        "every user is in exactly one batch and its guarantee is that of its batch "
        "(the other batches do not depend on its value)",
        f"each batch holds at least {task.min_batch_users} users who follow the protocol "
        f"(min_batch_users), and the guarantee is certified for exactly {task.min_batch_users} "
        f"such users: a batch's size counts every submission (the smallest batch holds "
        f"{smallest}), and submissions an adversary makes itself count towards it but hide "
        "nobody; honest users beyond the minimum only add privacy (their reports could be "
        "handed to the adversary: post-processing)",
        "the shuffler is trusted: it does not reveal who sent which message, in which order "
        "or how many messages each submission held, and it does not collude with the analyzer",
    )
    notes = (
        f"parameters calibrated for batches of at least {task.min_batch_users} users "
        f"(task {task.task_id}); the estimate pools {totals.n_batches} batch(es) of "
        f"{totals.n_users} users in all",
        "messages that did not decrypt or decode are not counted (an honest client never "
        "sends one)",
    )
    return ReleaseContext(
        domain_source=task.domain_source, assumptions=assumptions, release_notes=notes
    )


def build_release(task: Task, totals: AggregateTotals) -> dict[str, Any]:
    """Return the release for the aggregated totals, in ``shuffledp run``'s JSON shape.

    Raises:
        NothingToPublishError: If no batch has been aggregated.
    """
    if totals.n_batches == 0 or totals.smallest_batch_users is None:
        raise NothingToPublishError(
            "no batch has been aggregated yet: nothing is published until a batch of at "
            f"least {task.min_batch_users} users has arrived"
        )
    labels = list(task.domain)
    at_total = build_protocol(task, totals.n_users)
    estimate = at_total.estimate(totals.counts, labels)
    # Certified at the honest users the task promises, not at the batch's submissions.
    certified = build_protocol(task, task.min_batch_users)
    context = _context(task, totals, totals.smallest_batch_users)
    if isinstance(certified, FlipProtocol):
        flip_cal = replace(certified.calibration, method=task.calibration, target_delta=task.delta)
        run = ProtocolRun(
            "flip",
            estimate,
            flip_cal.privacy_report(),
            "message",
            totals.n_messages,
            totals.counts,
        )
        result = flip_run_to_dict(run, flip_cal, context)
    else:
        assert isinstance(certified, KRRProtocol)
        krr_cal = replace(certified.calibration, method=task.calibration, target_delta=task.delta)
        run = ProtocolRun(
            "krr",
            estimate,
            krr_cal.privacy_report(),
            "message",
            totals.n_messages,
            totals.counts,
        )
        result = run_to_dict(
            run,
            context,
            target_delta=task.delta,
            calibration=krr_cal.method,
            parameters={**at_total.parameters(), "calibration": task.calibration},
            notes=krr_cal.notes,
            local_epsilon=krr_cal.epsilon0,
        )
    result["service"] = {
        "task_id": task.task_id,
        "min_batch_users": task.min_batch_users,
        "batches": totals.n_batches,
        "smallest_batch_users": totals.smallest_batch_users,
    }
    return result


def publish(task: Task, store: AnalyzerStore) -> dict[str, Any]:
    """Return the release over every batch aggregated so far (see :func:`build_release`).

    Raises:
        NothingToPublishError: If no batch has been aggregated.
    """
    return build_release(task, store.totals(task.domain_size))
