"""``shuffledp analyzer export``: the analyzer's stored batches as a Parquet message dataset.

Writes every batch of the store (aggregated or not), as received: permuted
ciphertexts, one row per message, with the batch's index, plus the metadata
file that names the task and each batch's id and number of users. The layout
is documented in :mod:`shuffledp.backends.dataset`; ``shuffledp analyzer
aggregate`` reads it with either backend. Replayed copies are exported as
stored; ``analyzer aggregate`` counts each encapsulated key at most once, as
the analyzer does, whatever version wrote the store or the dataset. The dataset holds no secret (the
messages are sealed to the analyzer's key), so it may go to shared storage.
It can run while the analyzer serves (it only reads the store).

Local files are written readable and writable by their owner only (0600, and
0700 for the directories it creates), whatever the umask: whoever could
change them could change the counts that ``analyzer aggregate`` publishes.
"""

from __future__ import annotations

import argparse
import sys

from shuffledp._validation import check_int
from shuffledp.cli._common import checked, integer_at_least
from shuffledp.cli.analyzer.publish import check_backend_protocol

NAME = "export"
HELP = "write the stored batches as Parquet files for `analyzer aggregate`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``analyzer export``'s options."""
    parser.add_argument("--task", required=True, help="the task document")
    parser.add_argument(
        "--store", required=True, help="the analyzer's store (sqlite:///PATH or postgresql://...)"
    )
    parser.add_argument(
        "--output",
        required=True,
        help="a new or empty directory (local path, or a URI such as s3://bucket/dir)",
    )
    parser.add_argument(
        "--rows-per-file",
        type=integer_at_least(1),
        default=None,
        help="most messages per Parquet file (default 4194304, about 220 MB)",
    )
    parser.add_argument("--quiet", action="store_true", help="no summary on stderr")
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Export the store."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp._files import owner_only
    from shuffledp._optional import require

    require("pyarrow", extra="parquet")
    from shuffledp.backends.dataset import DEFAULT_ROWS_PER_FILE, export_analyzer_store
    from shuffledp.service.store import open_analyzer_store
    from shuffledp.service.task import load_task

    rows = DEFAULT_ROWS_PER_FILE
    if args.rows_per_file is not None:
        rows = checked(check_int, args.rows_per_file, "--rows-per-file", minimum=1)
    task = load_task(args.task)
    check_backend_protocol(task.protocol, "export")
    store = open_analyzer_store(args.store, task.task_id, read_only=True)
    try:
        with owner_only():
            dataset = export_analyzer_store(task, store, args.output, rows_per_file=rows)
    finally:
        store.close()
    if not args.quiet:
        print(
            f"shuffledp analyzer export: {len(dataset.batches)} batch(es), {dataset.n_users} "
            f"users, {dataset.n_messages} messages in {len(dataset.files)} file(s) under "
            f"{args.output}",
            file=sys.stderr,
        )
    return 0
