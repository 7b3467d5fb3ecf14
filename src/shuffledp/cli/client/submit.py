"""``shuffledp client submit``: randomize one value, encrypt it to the analyzer, submit it."""

from __future__ import annotations

import argparse
import json
import sys

from shuffledp._validation import InvalidParameterError
from shuffledp.cli._common import number
from shuffledp.schemas import schema_id

NAME = "submit"
HELP = "randomize one value locally, encrypt every message, submit to the shuffler"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``client submit``'s options."""
    parser.add_argument(
        "--task",
        required=True,
        help="the task document: a file, or the shuffler's URL http(s)://HOST/v1/tasks/ID "
        "(then the shuffler is trusted for the analyzer's key unless --task-digest pins it)",
    )
    parser.add_argument("--task-digest", default=None, help="expected SHA-256 of the task")
    parser.add_argument("--shuffler", required=True, help="the shuffler's base URL")
    parser.add_argument("--value", required=True, help="this user's value (a domain label)")
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument("--token", default=None, help="client token (one submission per client)")
    tokens.add_argument("--token-file", default=None, help="file holding the client token")
    parser.add_argument(
        "--retry-seconds", type=number, default=60.0, help="keep retrying this long (default 60)"
    )
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Submit the value; print the submission id and message count as JSON (``submission``)."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service.client import Client, fetch_task
    from shuffledp.service.secretfile import read_secret_file

    if not args.retry_seconds >= 0:
        raise InvalidParameterError(f"--retry-seconds must be >= 0, got {args.retry_seconds}")
    if not args.shuffler.startswith(("http://", "https://")):
        raise InvalidParameterError(f"--shuffler must be an http(s):// URL, got {args.shuffler!r}")
    token = args.token
    if args.token_file is not None:
        token = read_secret_file(args.token_file, "client token")
    task = fetch_task(args.task, expected_digest=args.task_digest)
    with Client(task, args.shuffler, token=token, retry_seconds=args.retry_seconds) as client:
        submission = client.submit(args.value)
    json.dump(
        {
            "schema": schema_id("submission"),
            "task_id": task.task_id,
            "submission_id": submission.submission_id,
            "messages": len(submission.ciphertexts),
        },
        sys.stdout,
    )
    sys.stdout.write("\n")
    return 0
