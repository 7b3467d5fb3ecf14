"""``shuffledp analyzer publish``: the estimate over every aggregated batch, from the store.

The JSON has the shape of ``shuffledp run PROTOCOL`` plus a ``service``
section; see :mod:`shuffledp.service.release`. It can run while the analyzer
serves (it only reads).
"""

from __future__ import annotations

import argparse
import json
import sys

from shuffledp._validation import InvalidParameterError
from shuffledp.cli._common import writable, write_atomically

#: Mode of a release file: public, readable by everyone.
RELEASE_FILE_MODE = 0o644
#: Protocols whose stored batches ``analyzer export`` and ``analyzer aggregate`` handle.
BACKEND_PROTOCOLS = ("flip", "krr")


def check_backend_protocol(protocol: str, action: str) -> None:
    """Refuse a task whose messages the backends do not count (``analyzer export|aggregate``).

    A correlated message is a (bin, sign) pair and an augmented batch holds the
    shuffler's dummies: the dataset layout and the backends' checks know
    neither; such tasks are published by the analyzer service or ``analyzer publish``.

    Raises:
        InvalidParameterError: If ``protocol`` is not in :data:`BACKEND_PROTOCOLS`.
    """
    if protocol not in BACKEND_PROTOCOLS:
        raise InvalidParameterError(
            f"analyzer {action} handles flip and krr tasks, not {protocol}: publish a "
            f"{protocol} task from the analyzer's store (analyzer publish, or GET /v1/estimate)"
        )


NAME = "publish"
HELP = "write the estimate and its privacy report from the analyzer's store"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``analyzer publish``'s options."""
    parser.add_argument("--task", required=True, help="the task document")
    parser.add_argument(
        "--store", required=True, help="the analyzer's store (sqlite:///PATH or postgresql://...)"
    )
    parser.add_argument("--output", default=None, help="the JSON release (default: stdout)")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Publish the release."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service.release import build_release
    from shuffledp.service.store import open_analyzer_store
    from shuffledp.service.task import load_task

    output = writable(args.output, "--output")
    task = load_task(args.task)
    store = open_analyzer_store(args.store, task.task_id, read_only=True)
    try:
        totals = store.totals(task.message_domain_size)
    finally:
        store.close()
    result = build_release(task, totals)
    text = json.dumps(result, indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)
        output.chmod(RELEASE_FILE_MODE)  # a public document
    if not args.quiet:
        privacy = result["privacy"]
        print(
            f"shuffledp analyzer publish: {result['n']} users in {totals.n_batches} batch(es), "
            f"({privacy['epsilon']:g}, {privacy['delta']:.3g})-DP certified for "
            f"{task.min_batch_users} honest users per batch (min_batch_users; smallest batch "
            f"{totals.smallest_batch_users} submissions) [{privacy['method']}]; result: "
            f"{output or 'stdout'}",
            file=sys.stderr,
        )
        if totals.pending_batches:
            print(
                f"note: {totals.pending_batches} batch(es) received but not aggregated yet are "
                "not included; publish again once the analyzer has aggregated them",
                file=sys.stderr,
            )
    return 0
