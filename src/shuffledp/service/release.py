"""What the analyzer publishes: the same JSON as ``shuffledp run PROTOCOL``.

The estimate is computed over every aggregated batch: the protocol is rebuilt
for N = all their users (:meth:`~shuffledp.service.task.Task.build_protocol`) and
its estimator applied to the summed counts. The augmented protocol's shuffler
adds dummies to each of the B batches, so its estimate subtracts B·E[z] per
bin (and divides by β), with variance B·Var z + β(1 − β)h_j over β²; the
correlated protocol's statistic is (N⁺_j, N⁻_j), the counts of the messages
2j and 2j + 1, and its estimate N⁺_j − N⁻_j.

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
For the correlated protocol the n honest users are those whose noise shares
add up to the certified noise (``min_honest`` = ``min_batch_users``); for the
augmented protocol the certificate does not depend on n at all (the
shuffler's dummies carry it), and the report states its trust model instead.

Every report's δ also carries what the message bounds cost
(:meth:`~shuffledp.service.task.Task.cap_delta`): an honest party that would
exceed its bound does not send, so the published messages come from the
honest law conditioned on staying within it; the argument is in
:mod:`shuffledp.accounting.certificates.message_bounds`. Tasks are calibrated for the target
δ minus that cost, so the sum stays within the target.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from shuffledp._validation import ShuffleDPError
from shuffledp.accounting.certificates.message_bounds import with_cap_delta
from shuffledp.analyzers.augmented import AugmentedAnalyzer
from shuffledp.privacy import ApproxDP, PrivacyReport
from shuffledp.protocols.augmented import AugmentedProtocol
from shuffledp.protocols.base import ProtocolRun, ShuffleProtocol
from shuffledp.protocols.correlated import CorrelatedProtocol
from shuffledp.protocols.flip import FlipProtocol
from shuffledp.protocols.krr import KRRProtocol
from shuffledp.release.document import ReleaseContext
from shuffledp.release.runs import (
    augmented_run_to_dict,
    correlated_run_to_dict,
    flip_run_to_dict,
    krr_run_to_dict,
)
from shuffledp.service.store_protocols import AggregateTotals, AnalyzerStore
from shuffledp.service.task import Task
from shuffledp.specs import AugmentedSpec, CorrelatedSpec

__all__ = ["NothingToPublishError", "build_release", "certified_protocol", "publish"]


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
        task.spec.batch_assumption(task.min_batch_users, smallest),
        task.spec.shuffler_assumption(),
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


def _above_target(certified: float, task: Task) -> str:
    """Why the certificate of the task's own parameters exceeds its target δ."""
    if isinstance(task.spec, CorrelatedSpec) and task.spec.neighbours == "add-remove":
        return (
            f"the certificate's delta {certified:.3g} is above the task's target "
            f"{task.delta:g}: the task was calibrated by shuffledp 0.2 for a relation in "
            "which an absent user still sent its noise shares; under add/remove (an absent "
            "user sends nothing) its parameters certify this delta; create the task again "
            "to stay within the target"
        )
    return (
        f"the certificate's delta {certified:.3g} is above the task's target {task.delta:g}: "
        "the task's parameters certify no less; create the task again"
    )


def _with_message_bounds(report: PrivacyReport, task: Task) -> PrivacyReport:
    """Add what the message bounds cost to the report's δ (and take it off its lower bound)."""
    cost = task.cap_delta()
    notes: list[str] = []
    delta, lower = report.delta, report.lower_bound_delta
    if cost > 0.0:
        delta = with_cap_delta(report.delta, cost)
        if lower is not None:
            lower = max(0.0, math.nextafter(lower - cost, -math.inf))
        parties = task.capped_parties()
        who = task.spec.capped_parties_description(parties)
        notes.append(
            f"delta includes {cost:.3g} for the message bounds: each of the {who} the "
            "certificate counts on exceeds its bound with probability at most 1e-30 and then "
            "does not send, which (1 + e^epsilon) x 2e-30 per party covers"
        )
    if report.delta > task.delta:
        notes.append(_above_target(report.delta, task))
    elif delta > task.delta:
        notes.append(
            f"delta is above the task's target {task.delta:g}: the task was calibrated for "
            "all of its target, before releases charged the message bounds (shuffledp 0.2 "
            "and earlier); a task created now stays within its target"
        )
    if not notes:
        return report
    return replace(
        report,
        guarantee=ApproxDP(report.epsilon, delta),
        lower_bound_delta=lower,
        notes="; ".join([report.notes, *notes] if report.notes else notes),
    )


def _correlated_release(
    task: Task, totals: AggregateTotals, context: ReleaseContext
) -> dict[str, Any]:
    """N⁺_j − N⁻_j over all batches; certified at min_batch_users users' noise."""
    d = task.domain_size
    statistic = np.asarray(totals.counts, dtype=np.int64).reshape(d, 2).T.copy()
    protocol = certified_protocol(task)
    assert isinstance(protocol, CorrelatedProtocol)
    certified = protocol.calibration
    # The certificate does not depend on n: the calibration at N users is the same
    # certificate with N's standard errors (no δ is evaluated again).
    at_n = replace(certified, n=totals.n_users)
    estimate = CorrelatedProtocol(at_n, labels=task.domain).estimate(statistic, list(task.domain))
    # The calibration's own assumption speaks of "m of the n users"; the service's
    # (each batch holds min_batch_users users who send their shares) replaces it.
    report = replace(certified.privacy_report(), assumptions=())
    report = _with_message_bounds(report, task)
    run = ProtocolRun("correlated", estimate, report, "message", totals.n_messages, statistic)
    return correlated_run_to_dict(run, at_n, context)


def _augmented_release(
    task: Task, totals: AggregateTotals, context: ReleaseContext
) -> dict[str, Any]:
    """(c_j − B·E[z])/β over B batches; the certificate and trust model of the dummy law."""
    protocol = certified_protocol(task)
    assert isinstance(protocol, AugmentedProtocol)
    certified = protocol.calibration
    batches = totals.n_batches
    analyzer = AugmentedAnalyzer(
        totals.n_users,
        task.domain_size,
        certified.beta,
        batches * certified.noise_mean,
        batches * certified.noise_variance,
    )
    estimate = analyzer.estimate(totals.counts, list(task.domain))
    run = ProtocolRun(
        "augmented",
        estimate,
        _with_message_bounds(certified.privacy_report(), task),
        "message",
        totals.n_messages,
        totals.counts,
    )
    parameters = AugmentedProtocol(certified, labels=task.domain).parameters()
    result = augmented_run_to_dict(run, certified, parameters, context)
    result["notes"].append(
        f"the shuffler added dummies to each of the {batches} batch(es): the estimate "
        f"subtracts {batches} x E[z] = {batches * certified.noise_mean:.6g} from every bin's "
        f"count and divides by beta = {certified.beta:.6g}"
    )
    return result


@lru_cache(maxsize=64)
def certified_protocol(task: Task) -> ShuffleProtocol:
    """The task's protocol at ``min_batch_users`` users: its certificate, once per task.

    Every release of a task is certified at the same n (the honest users each
    batch holds), so the exact δ is computed at the first release and kept
    with the task (a task is a frozen value) for every later one.
    """
    return task.build_protocol(task.min_batch_users)


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
    context = _context(task, totals, totals.smallest_batch_users)
    if isinstance(task.spec, CorrelatedSpec):
        result = _correlated_release(task, totals, context)
    elif isinstance(task.spec, AugmentedSpec):
        result = _augmented_release(task, totals, context)
    else:
        result = _local_randomizer_release(task, totals, context)
    result["service"] = {
        "task_id": task.task_id,
        "min_batch_users": task.min_batch_users,
        "batches": totals.n_batches,
        "smallest_batch_users": totals.smallest_batch_users,
    }
    return result


def _local_randomizer_release(
    task: Task, totals: AggregateTotals, context: ReleaseContext
) -> dict[str, Any]:
    """FLIP and k-RR: the estimator at N users, the certificate at min_batch_users."""
    labels = list(task.domain)
    at_total = task.build_protocol(totals.n_users)
    estimate = at_total.estimate(totals.counts, labels)
    # Certified at the honest users the task promises, not at the batch's submissions.
    certified = certified_protocol(task)
    if isinstance(certified, FlipProtocol):
        flip_cal = replace(certified.calibration, method=task.calibration, target_delta=task.delta)
        run = ProtocolRun(
            "flip",
            estimate,
            # The service's own statements (batch, shuffler) replace the library's.
            _with_message_bounds(replace(flip_cal.privacy_report(), assumptions=()), task),
            "message",
            totals.n_messages,
            totals.counts,
        )
        return flip_run_to_dict(run, flip_cal, context)
    assert isinstance(certified, KRRProtocol)
    krr_cal = replace(certified.calibration, method=task.calibration, target_delta=task.delta)
    run = ProtocolRun(
        "krr",
        estimate,
        replace(krr_cal.privacy_report(), assumptions=()),
        "message",
        totals.n_messages,
        totals.counts,
    )
    parameters = {**at_total.parameters(), "calibration": task.calibration}
    return krr_run_to_dict(run, krr_cal, parameters, context)


def publish(task: Task, store: AnalyzerStore) -> dict[str, Any]:
    """Return the release over every batch aggregated so far (see :func:`build_release`).

    Raises:
        NothingToPublishError: If no batch has been aggregated.
    """
    return build_release(task, store.totals(task.message_domain_size))
