"""What the analyzer publishes: the same JSON as ``shuffledp run flip|krr``.

The estimate is computed over every aggregated batch: the protocol is rebuilt
for N = all their users (:func:`~shuffledp.service.task.build_protocol`) and
its estimator applied to the summed counts. The privacy report is that of the
smallest batch, of m users: every user is in exactly one batch, the other
batches do not depend on its value, so its guarantee is its batch's; and a
batch of m ≥ ``min_batch_users`` users is certified at m (at least as private
as at ``min_batch_users``, by post-processing). The report states this among
its assumptions.
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
        f"every user is in exactly one batch and its guarantee is that of its batch "
        f"(the other batches do not depend on its value); it is stated for the smallest "
        f"batch, of {smallest} users; a larger batch is at least as private (its extra "
        "users' reports could be handed to the adversary: post-processing)",
        f"each batch holds at least {task.min_batch_users} users who follow the protocol "
        "(min_batch_users): submissions an adversary makes itself count towards a batch's "
        "size but hide nobody",
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
    at_smallest = build_protocol(task, totals.smallest_batch_users)
    context = _context(task, totals, totals.smallest_batch_users)
    if isinstance(at_smallest, FlipProtocol):
        flip_cal = replace(
            at_smallest.calibration, method=task.calibration, target_delta=task.delta
        )
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
        assert isinstance(at_smallest, KRRProtocol)
        krr_cal = replace(at_smallest.calibration, method=task.calibration, target_delta=task.delta)
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
