"""``shuffledp analyzer aggregate``: decrypt and count exported batches locally or on Spark.

Reads a message dataset written by ``shuffledp analyzer export`` (layout:
:mod:`shuffledp.backends.dataset`), has the chosen backend decrypt, decode and
count the messages (:mod:`shuffledp.backends`), and writes the release: the
same JSON as ``shuffledp analyzer publish`` over the same batches
(:func:`shuffledp.service.release.build_release`). Messages that do not
decrypt or decode are counted on stderr and left out, as the service does,
and so are copies: each HPKE encapsulated key counts at most once over all
the batches (:mod:`shuffledp.backends.replays`).

The private key is read from ``--key`` (as ``serve analyzer`` does); with
``--backend spark`` it reaches the executors as a broadcast variable and is
destroyed after the job, never written anywhere (see ``docs/scaling.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from shuffledp.cli._common import writable, write_atomically
from shuffledp.cli.analyzer.publish import RELEASE_FILE_MODE, check_backend_protocol

NAME = "aggregate"
HELP = "decrypt and count exported batches on a backend (local or Spark), write the release"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``analyzer aggregate``'s options."""
    parser.add_argument("--task", required=True, help="the task document")
    parser.add_argument("--key", required=True, help="the analyzer's private key file")
    parser.add_argument(
        "--input", required=True, help="the dataset directory written by `analyzer export`"
    )
    parser.add_argument(
        "--backend",
        choices=("local", "spark"),
        default="local",
        help="local: this process, numpy (default); spark: a Spark cluster (the spark extra)",
    )
    parser.add_argument(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master for a new session (local[4], spark://host:7077, yarn, k8s://...); "
        "default: spark-submit's, or local[*]",
    )
    parser.add_argument("--output", default=None, help="the JSON release (default: stdout)")
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Aggregate the dataset and write the release."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp._optional import require

    require("pyarrow", extra="parquet")
    from shuffledp.backends.analyzer import aggregate_dataset, check_dataset
    from shuffledp.backends.base import make_backend
    from shuffledp.backends.dataset import open_dataset
    from shuffledp.service.release import build_release
    from shuffledp.service.task import load_private_key, load_task

    output = writable(args.output, "--output")
    task = load_task(args.task)
    check_backend_protocol(task.protocol, "aggregate")
    key = load_private_key(args.key, task).private_bytes_raw()
    dataset = open_dataset(args.input)
    check_dataset(task, dataset)  # refuse before a Spark session starts
    started = time.perf_counter()
    backend = make_backend(args.backend, spark_master=args.spark_master)
    try:
        setup = time.perf_counter() - started
        result = aggregate_dataset(task, dataset, backend, key)
    finally:
        backend.close()
    seconds = time.perf_counter() - started
    release = build_release(task, result.totals)
    text = json.dumps(release, indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)
        output.chmod(RELEASE_FILE_MODE)  # a public document
    if not args.quiet:
        counts = result.counts
        privacy = release["privacy"]
        print(
            f"shuffledp analyzer aggregate [{args.backend}]: {counts.messages} messages of "
            f"{release['n']} users in {len(dataset.batches)} batch(es) in {seconds:.1f} s "
            f"({setup:.1f} s start-up); ({privacy['epsilon']:g}, {privacy['delta']:.3g})-DP "
            f"certified for {task.min_batch_users} honest users per batch (min_batch_users; "
            f"smallest batch {dataset.smallest_batch_users} submissions) "
            f"[{privacy['method']}]; result: {output or 'stdout'}",
            file=sys.stderr,
        )
        if counts.undecryptable or counts.undecodable:
            print(
                f"note: {counts.undecryptable} message(s) did not decrypt and "
                f"{counts.undecodable} did not decode; they are not counted",
                file=sys.stderr,
            )
        if counts.duplicates:
            print(
                f"note: {counts.duplicates} message(s) are copies of a message counted "
                "(the same encapsulated key: a replay); each is counted once",
                file=sys.stderr,
            )
    return 0
