"""``shuffledp task tokens``: issue client tokens for a one-submission-per-client task."""

from __future__ import annotations

import argparse
import sys

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.cli._common import checked, integer_at_least, writable

NAME = "tokens"
HELP = "issue client tokens (one per user) for a task with --one-submission-per-client"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``task tokens``'s options."""
    parser.add_argument("--task", required=True, help="the task document")
    parser.add_argument("--key-file", required=True, help="the token key (from task create)")
    parser.add_argument("--count", required=True, type=integer_at_least(1), help="tokens to issue")
    parser.add_argument(
        "--out",
        default=None,
        help="write the tokens here, one per line, mode 0600 (default: stdout)",
    )
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Issue the tokens."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service.secretfile import write_secret_file
    from shuffledp.service.task import load_task
    from shuffledp.service.tokens import issue_tokens, load_token_key

    count = checked(check_int, args.count, "--count", minimum=1)
    out = writable(args.out, "--out")
    if out is not None and out.exists():
        raise InvalidParameterError(f"--out: {str(out)!r} already exists")
    task = load_task(args.task)
    if not task.one_submission_per_client:
        raise InvalidParameterError(
            f"task {task.task_id} does not admit one submission per client; it takes no tokens"
        )
    tokens = issue_tokens(load_token_key(args.key_file), task.task_id, count)
    text = "\n".join(tokens) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        write_secret_file(out, text)
        print(f"wrote {count} tokens to {out}", file=sys.stderr)
    return 0
