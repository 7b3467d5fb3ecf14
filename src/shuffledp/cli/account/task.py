"""``shuffledp account task``: re-derive a task document's guarantee from its spec.

What an auditor (or a client about to pin a task) asks of a task document:
does the protocol it names, with the parameters it records, certify the
target it states? The spec's certificate is evaluated afresh at the task's
ε for ``min_batch_users`` honest users (or ``--n``, at least that many: the
service certifies every release at ``min_batch_users``), the message bounds'
charge is added exactly as the analyzer adds it, and the total is compared
with the task's target δ. Nothing in the document is taken as stated but its
parameters.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from shuffledp.cli._common import checked, fmt, fmt_bound, integer_at_least, positive_number
from shuffledp.schemas import schema_id

NAME = "task"
HELP = "a task document's guarantee, re-derived from its protocol spec"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument("--task", required=True, help="the task document (task.json)")
    parser.add_argument(
        "--n",
        type=integer_at_least(2),
        default=None,
        help="honest users per batch to certify at (default and minimum: min_batch_users)",
    )
    parser.add_argument(
        "--epsilon", type=positive_number, default=None, help="epsilon (default: the task's)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Print the spec, the certified delta, the message bounds' charge and the verdict."""
    from shuffledp._validation import InvalidParameterError, check_epsilon, check_int
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.accounting.certificates.message_bounds import honest_cap_delta, with_cap_delta
    from shuffledp.service.task import load_task

    task = load_task(args.task)
    n = task.min_batch_users if args.n is None else args.n
    if n < task.min_batch_users:
        raise InvalidParameterError(
            f"--n {n}: a task's releases are certified at min_batch_users = "
            f"{task.min_batch_users} honest users or more"
        )
    n = checked(check_int, n, "--n", minimum=2)
    epsilon = (
        task.epsilon if args.epsilon is None else checked(check_epsilon, args.epsilon, "--epsilon")
    )
    report = task.spec.protocol(n, task.domain, epsilon, task.delta).privacy_report()
    cost = honest_cap_delta(epsilon, task.capped_parties())
    total = with_cap_delta(report.delta, cost) if cost > 0.0 else report.delta
    out: dict[str, Any] = {
        "schema": schema_id("account-task"),
        "task_id": task.task_id,
        "digest": task.digest(),
        "protocol": task.protocol,
        "spec_schema": task.spec.schema(),
        "parameters": task.spec.to_dict(),
        "domain_size": task.domain_size,
        "min_batch_users": task.min_batch_users,
        "n": n,
        "epsilon": epsilon,
        "certificate_method": report.method,
        "certificate_delta": report.delta,
        "certificate_delta_lower": report.lower_bound_delta,
        "message_bounds_delta": cost,
        "delta": total,
        "target_epsilon": task.epsilon,
        "target_delta": task.delta,
        "meets_target": epsilon <= task.epsilon and total <= task.delta,
    }
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    print(f"task {task.task_id} ({task.protocol}), digest {out['digest']}")
    print(f"  parameters                 {json.dumps(out['parameters'])}")
    print(f"  certified at               n={n:,} honest users, epsilon={epsilon:g}")
    print(f"  certificate delta          {fmt_bound(report.delta, up=True)}  [{report.method}]")
    if report.lower_bound_delta is not None:
        print(f"  attained by a dataset      {fmt(report.lower_bound_delta)} (lower bound)")
    print(f"  message bounds add         {fmt(cost)}")
    print(f"  delta                      {fmt_bound(total, up=True)}")
    verdict = "meets" if out["meets_target"] else "does NOT meet"
    print(f"  {verdict} the task's target (epsilon={task.epsilon:g}, delta={task.delta:g})")
    return 0
