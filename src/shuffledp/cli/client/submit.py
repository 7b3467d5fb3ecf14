"""``shuffledp client submit``: randomize a value, encrypt it to the analyzer, submit it.

``--value`` submits one user's value, as a device does. ``--values-file``
submits many users from one process, for load tests and demos: every line is
its own user, randomized with its own fresh randomness and submitted as its own
submission (with its own client token when the task admits one submission per
client: ``--tokens-file``), ``--per-request`` submissions per HTTP request.
Either way stdout gets one receipt per submission (schema ``submission``, one
JSON object a line) once the shuffler has stored it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from shuffledp._validation import InvalidParameterError, ShuffleDPError, check_int
from shuffledp.cli._common import checked, integer_at_least, non_negative_number
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.service.client import Submission
    from shuffledp.service.task import Task

NAME = "submit"
HELP = "randomize a value (or a file of values) locally, encrypt every message, submit"

#: Submissions per request with --values-file unless --per-request says otherwise.
DEFAULT_PER_REQUEST = 100


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
    values = parser.add_mutually_exclusive_group(required=True)
    values.add_argument("--value", help="this user's value (a domain label)")
    values.add_argument(
        "--values-file",
        metavar="FILE",
        help="many users' values, one domain label per line ('-': stdin), for load tests "
        "and demos: each line is its own user, randomized with its own randomness and sent "
        "as its own submission",
    )
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument("--token", default=None, help="client token (one submission per client)")
    tokens.add_argument("--token-file", default=None, help="file holding the client token")
    tokens.add_argument(
        "--tokens-file",
        default=None,
        metavar="FILE",
        help="with --values-file, when the task admits one submission per client: one token "
        "per line, the i-th for the i-th value (as 'shuffledp task tokens --out' writes them)",
    )
    parser.add_argument(
        "--per-request",
        type=integer_at_least(1),
        default=None,
        metavar="K",
        help=f"with --values-file: most submissions per HTTP request (default "
        f"{DEFAULT_PER_REQUEST}; the shuffler takes at most 1000 unless configured otherwise); "
        "fewer where the body would pass 4 MiB, the shuffler's default limit",
    )
    parser.add_argument(
        "--retry-seconds",
        type=non_negative_number,
        default=60.0,
        help="keep retrying this long (default 60)",
    )
    parser.set_defaults(handler=execute)


def _receipt(task: Task, submission: Submission) -> str:
    """One line of JSON (schema ``submission``): the task, the submission id, the message count."""
    return json.dumps(
        {
            "schema": schema_id("submission"),
            "task_id": task.task_id,
            "submission_id": submission.submission_id,
            "messages": len(submission.ciphertexts),
        }
    )


def execute(args: argparse.Namespace) -> int:
    """Submit the value (or every line of the values file); print one receipt per submission."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service.client import Client, fetch_task
    from shuffledp.service.secretfile import read_secret_file

    if not args.retry_seconds >= 0:
        raise InvalidParameterError(f"--retry-seconds must be >= 0, got {args.retry_seconds}")
    if not args.shuffler.startswith(("http://", "https://")):
        raise InvalidParameterError(f"--shuffler must be an http(s):// URL, got {args.shuffler!r}")
    if args.values_file is not None:
        return _submit_file(args)
    for flag, given in (("--tokens-file", args.tokens_file), ("--per-request", args.per_request)):
        if given is not None:
            raise InvalidParameterError(f"{flag} goes with --values-file, not --value")
    token = args.token
    if args.token_file is not None:
        token = read_secret_file(args.token_file, "client token")
    task = fetch_task(args.task, expected_digest=args.task_digest)
    with Client(task, args.shuffler, token=token, retry_seconds=args.retry_seconds) as client:
        submission = client.submit(args.value)
    print(_receipt(task, submission))
    return 0


def _read_values(source: str) -> list[str]:
    """The lines of ``--values-file`` (``-``: stdin), each kept exactly but for its line end."""
    if source == "-":
        text = sys.stdin.read()
    else:
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"--values-file: {source!r} does not exist or is not a file")
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InvalidParameterError(
                f"--values-file: {source!r} is not UTF-8 text: {exc}"
            ) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the file's last line end
    return [line.removesuffix("\r") for line in lines]


def _check_values(values: list[str], task: Task, source: str) -> None:
    """Refuse, before anything is sent, a file without values or with a value off the domain."""
    if not values:
        raise InvalidParameterError(f"--values-file: {source!r} holds no values")
    domain = set(task.domain)
    for line, value in enumerate(values, start=1):
        if value not in domain:
            shown = ", ".join(task.domain[:5]) + (", ..." if len(task.domain) > 5 else "")
            raise InvalidParameterError(
                f"--values-file: line {line}: {value!r} is not in the task's domain "
                f"({len(task.domain)} labels: {shown}); nothing was submitted"
            )


def _tokens(args: argparse.Namespace, task: Task, count: int) -> list[str] | None:
    """One client token per value when the task admits one submission per client, else None."""
    from shuffledp.service.secretfile import read_secret_file

    if args.token is not None or args.token_file is not None:
        flag = "--token" if args.token is not None else "--token-file"
        raise InvalidParameterError(
            f"{flag} is one client's token; --values-file submits one client per line: give "
            "their tokens with --tokens-file, one per line"
        )
    if not task.one_submission_per_client:
        if args.tokens_file is not None:
            raise InvalidParameterError(
                f"--tokens-file: task {task.task_id} does not admit one submission per client; "
                "it takes no tokens"
            )
        return None
    if args.tokens_file is None:
        raise InvalidParameterError(
            f"--tokens-file is needed: task {task.task_id} admits one submission per client, so "
            f"each of the {count} values needs its own client token (shuffledp task tokens "
            f"--count {count} --out FILE)"
        )
    tokens = read_secret_file(args.tokens_file, "client tokens").split()
    if len(tokens) != count:
        raise InvalidParameterError(
            f"--tokens-file holds {len(tokens)} tokens for {count} values: give one token per "
            "value, in the order of the values"
        )
    if len(set(tokens)) != count:
        raise InvalidParameterError(
            "--tokens-file: a token repeats; each value is a different client with its own token"
        )
    return tokens


def _submit_file(args: argparse.Namespace) -> int:
    """Submit every line of ``--values-file`` as its own user, ``--per-request`` per request."""
    from shuffledp._progress import progress_bar
    from shuffledp.service.client import Client, fetch_task

    per_request = DEFAULT_PER_REQUEST
    if args.per_request is not None:
        per_request = checked(check_int, args.per_request, "--per-request", minimum=1)
    values = _read_values(args.values_file)
    task = fetch_task(args.task, expected_digest=args.task_digest)
    _check_values(values, task, args.values_file)
    tokens = _tokens(args, task, len(values))
    started = time.perf_counter()
    stored = messages = requests = 0
    # With tokens every submission carries its own; the client's default is never used.
    default_token = None if tokens is None else tokens[0]
    with (
        Client(
            task, args.shuffler, token=default_token, retry_seconds=args.retry_seconds
        ) as client,
        progress_bar(total=len(values), desc="submitting", unit="sub", delay=0.5) as bar,
    ):
        for start in range(0, len(values), per_request):
            chunk = values[start : start + per_request]
            mine = None if tokens is None else tokens[start : start + per_request]
            # Each value is its own user: fresh randomness, its own submission id and token.
            prepared = client.prepare_many(chunk, tokens=mine)
            # Fewer per request where the bodies would pass the shuffler's default limit.
            for request in client.requests(prepared, per_request):
                try:
                    client.post(request)
                except ShuffleDPError as exc:
                    raise ShuffleDPError(_stopped(exc, stored, len(values))) from None
                sys.stdout.write("".join(_receipt(task, s) + "\n" for s in request))
                sys.stdout.flush()
                stored += len(request)
                messages += sum(len(s.ciphertexts) for s in request)
                requests += 1
                bar.update(len(request))
    seconds = time.perf_counter() - started
    print(
        _summary(stored, messages, requests, per_request, args.shuffler, seconds), file=sys.stderr
    )
    return 0


def _stopped(exc: Exception, stored: int, total: int) -> str:
    """The error of a request, with which lines the shuffler had stored before it."""
    if stored == 0:
        return f"{exc}; nothing was stored"
    return (
        f"{exc}; lines 1-{stored} of {total} were stored (their receipts are on stdout), "
        f"lines {stored + 1}-{total} were not"
    )


def _summary(
    stored: int, messages: int, requests: int, per_request: int, url: str, seconds: float
) -> str:
    rate = stored / seconds if seconds > 0 else float("inf")
    return (
        f"shuffledp client submit: {stored} submissions ({messages} encrypted messages) in "
        f"{requests} request{'s' if requests != 1 else ''} of at most {per_request} to {url}, "
        f"{seconds:.2f} s ({rate:.0f} submissions/s)"
    )
