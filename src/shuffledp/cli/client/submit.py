"""``shuffledp client submit``: randomize a value, encrypt it to the analyzer, submit it.

``--value`` submits one user's value, as a device does. ``--values-file``
submits many users from one process, for load tests and demos: every line is
its own user, randomized with its own fresh randomness and submitted as its own
submission (with its own client token when the task admits one submission per
client: ``--tokens-file``), ``--per-request`` submissions per HTTP request.
Either way stdout gets one receipt per submission (schema ``submission``, one
JSON object a line) once the shuffler has stored it.

Ctrl-C. The receipts of every request the shuffler acknowledged are written (a
Ctrl-C waits while they are), and one line says which lines were stored, which
were in flight and which were not sent. A request in flight may or may not have
been stored: its submissions are saved as sent (ids, ciphertexts, tokens) in a
file of mode 0600 in the current directory, and ``--resend FILE`` posts exactly
them again, which cannot count anyone twice: the shuffler stores a submission id
once and answers a known one as stored. ``--first-line N`` then resumes with the
lines not sent. Fresh submissions for the in-flight lines would instead count
those users twice (or, with tokens, be refused as a second submission).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from shuffledp._interrupts import (
    INTERRUPTED,
    INTERRUPTED_LINE,
    caused_by_interrupt,
    deferred_interrupt,
    interrupt_received,
)
from shuffledp._validation import InvalidParameterError, ShuffleDPError
from shuffledp.cli._common import integer_at_least, non_negative_number
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.service.client import Client, Submission
    from shuffledp.service.task import Task

NAME = "submit"
HELP = "randomize a value (or a file of values) locally, encrypt every message, submit"

#: Submissions per request with --values-file unless --per-request says otherwise.
DEFAULT_PER_REQUEST = 100

#: Name of the file that keeps the submissions of a request in flight at Ctrl-C.
IN_FLIGHT_NAME = "shuffledp-in-flight-lines-{first}-{last}-{id}.json"


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
    parser.add_argument(
        "--ca-file",
        default=None,
        metavar="FILE",
        help="PEM file of the CA certificates that an https:// shuffler's (and --task URL's) "
        "certificate must chain to, in place of the default bundle (a private CA, a "
        "self-signed certificate)",
    )
    values = parser.add_mutually_exclusive_group(required=True)
    values.add_argument("--value", help="this user's value (a domain label)")
    values.add_argument(
        "--values-file",
        metavar="FILE",
        help="many users' values, one domain label per line ('-': stdin), for load tests "
        "and demos: each line is its own user, randomized with its own randomness and sent "
        "as its own submission",
    )
    values.add_argument(
        "--resend",
        metavar="FILE",
        help="post again, exactly as sent, the submissions that an interrupted run saved as "
        "in flight (the same ids: the shuffler stores each once, so nobody counts twice)",
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
        "--first-line",
        type=integer_at_least(1),
        default=None,
        metavar="N",
        help="with --values-file: start at line N of the values (and of --tokens-file), to "
        "resume an interrupted run where it says (default 1)",
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
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="print no summary on stderr (receipts still go to stdout, errors to stderr)",
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


def _span(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _stdout_name() -> str:
    """Where the receipts go: the file stdout writes to, if it is one, else ``stdout``."""
    try:
        fd = sys.stdout.fileno()
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return os.readlink(f"/proc/self/fd/{fd}")
    except (OSError, ValueError, AttributeError):
        pass
    return "stdout"


@dataclass
class _Sending:
    """Which lines the shuffler acknowledged, which request is in flight, which are left.

    Lines ``first`` to ``stored_to`` are stored (their receipts written); the
    ``in_flight`` submissions are lines ``stored_to + 1`` onwards; the rest,
    up to ``last``, were not sent. ``source`` names them in messages:
    ``"lines"`` (a values file), ``"value"`` (``--value``) or the resent file.
    """

    task: Task
    first: int
    last: int
    source: str = "lines"
    stored_to: int = 0
    in_flight: list[Submission] = field(default_factory=list)
    messages: int = 0
    requests: int = 0

    def __post_init__(self) -> None:
        self.stored_to = self.first - 1

    def post(self, client: Client, request: Sequence[Submission]) -> None:
        """Post one request; once acknowledged, write its receipts (Ctrl-C waits for them)."""
        self.in_flight = list(request)
        client.post(request)
        with deferred_interrupt():
            sys.stdout.write("".join(_receipt(self.task, s) + "\n" for s in request))
            sys.stdout.flush()
            self.stored_to += len(request)
            self.messages += sum(len(s.ciphertexts) for s in request)
            self.requests += 1
            self.in_flight = []

    @property
    def stored(self) -> int:
        """How many submissions the shuffler acknowledged."""
        return self.stored_to - self.first + 1

    def stopped(self, exc: Exception) -> str:
        """The error of a request, with which lines the shuffler had stored before it."""
        if self.stored == 0:
            return f"{exc}; nothing was stored"
        return (
            f"{exc}; {_span(self.first, self.stored_to)} of {self.last} were stored (their "
            f"receipts are on {_stdout_name()}), {_span(self.stored_to + 1, self.last)} were not"
        )

    def interrupted(self) -> int:
        """Say what was stored, in flight and not sent, saving the in-flight submissions; 130."""
        with deferred_interrupt(reraise=False):  # a second Ctrl-C cannot cut this report
            print(f"{INTERRUPTED_LINE}: {'; '.join(self._report())}", file=sys.stderr)
        return INTERRUPTED

    def _report(self) -> list[str]:
        if self.source != "lines":
            return self._report_one()
        parts = [
            "nothing was stored"
            if self.stored == 0
            else f"{_span(self.first, self.stored_to)} of {self.last} stored (receipts on "
            f"{_stdout_name()})"
        ]
        next_line = self.stored_to + 1
        if self.in_flight:
            end = self.stored_to + len(self.in_flight)
            parts.append(f"{_span(next_line, end)} in flight, maybe stored: {self._saved(end)}")
            next_line = end + 1
        if next_line <= self.last:
            parts.append(
                f"{_span(next_line, self.last)} not sent (resume with --first-line {next_line})"
            )
        return parts

    def _report_one(self) -> list[str]:
        if not self.in_flight:
            return ["the submission was stored" if self.stored else "nothing was sent"]
        if self.source == "value":
            return [f"the submission was in flight, maybe stored: {self._saved(self.first)}"]
        return [
            f"the submissions of {self.source} were in flight again, maybe stored; the file "
            f"still holds them: resend them with --resend {self.source}"
        ]

    def _saved(self, last: int) -> str:
        """Save the in-flight request as sent; say where and how to resend it."""
        from shuffledp.service.client import request_body_text
        from shuffledp.service.secretfile import write_secret_file

        name = IN_FLIGHT_NAME.format(
            first=self.stored_to + 1, last=last, id=self.in_flight[0].submission_id[:8]
        )
        try:
            path = write_secret_file(Path.cwd() / name, request_body_text(self.in_flight))
        except (OSError, ShuffleDPError) as exc:
            ids = " ".join(s.submission_id for s in self.in_flight)
            return (
                f"they could not be saved ({exc}); resending them needs these submission ids "
                f"and their ciphertexts, which are lost: {ids}"
            )
        return (
            f"saved as sent in {path} (resend them with --resend {path}: the same submission "
            "ids, which the shuffler stores once)"
        )


def _by_interrupt(exc: BaseException) -> bool:
    return caused_by_interrupt(exc) or interrupt_received()


def execute(args: argparse.Namespace) -> int:
    """Submit the value (or every line of the values file); print one receipt per submission."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service.client import Client, fetch_task, tls_verification
    from shuffledp.service.secretfile import read_secret_file

    if not args.shuffler.startswith(("http://", "https://")):
        raise InvalidParameterError(f"--shuffler must be an http(s):// URL, got {args.shuffler!r}")
    tls_verification(args.ca_file, "--ca-file")  # a bad file is refused before any work
    if args.values_file is not None:
        return _submit_file(args)
    for flag, given in (
        ("--tokens-file", args.tokens_file),
        ("--per-request", args.per_request),
        ("--first-line", args.first_line),
    ):
        if given is not None:
            source = "--value" if args.value is not None else "--resend"
            raise InvalidParameterError(f"{flag} goes with --values-file, not {source}")
    if args.resend is not None:
        return _resend(args)
    token = args.token
    if args.token_file is not None:
        token = read_secret_file(args.token_file, "client token")
    task = fetch_task(args.task, expected_digest=args.task_digest, ca_file=args.ca_file)
    sending = _Sending(task, 1, 1, source="value")
    with Client(
        task, args.shuffler, token=token, retry_seconds=args.retry_seconds, ca_file=args.ca_file
    ) as client:
        try:
            sending.post(client, [client.prepare(args.value)])
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) or _by_interrupt(exc):
                return sending.interrupted()
            raise
    return 0


def _resend(args: argparse.Namespace) -> int:
    """Post the submissions an interrupted run saved, exactly as they were sent."""
    from shuffledp.service.client import Client, fetch_task, submissions_from_body
    from shuffledp.service.secretfile import read_secret_file

    if args.token is not None or args.token_file is not None:
        flag = "--token" if args.token is not None else "--token-file"
        raise InvalidParameterError(f"{flag}: the resent submissions carry their own tokens")
    text = read_secret_file(args.resend, "in-flight submissions")
    submissions = submissions_from_body(text, f"--resend {args.resend!r}")
    task = fetch_task(args.task, expected_digest=args.task_digest, ca_file=args.ca_file)
    started = time.perf_counter()
    sending = _Sending(task, 1, len(submissions), source=args.resend)
    token = submissions[0].token
    with Client(
        task, args.shuffler, token=token, retry_seconds=args.retry_seconds, ca_file=args.ca_file
    ) as client:
        try:
            sending.post(client, submissions)  # one request, as the interrupted run sent it
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) or _by_interrupt(exc):
                return sending.interrupted()
            raise
    if not args.quiet:
        print(
            _summary(sending, len(submissions), args.shuffler, time.perf_counter() - started)
            + f"; resent from {args.resend} (an id the shuffler had is answered as stored, "
            "not stored twice)",
            file=sys.stderr,
        )
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


def _check_values(values: list[str], task: Task, source: str, first: int = 1) -> None:
    """Refuse, before anything is sent, a file without values or with a value off the domain.

    ``values`` start at line ``first`` of the file.
    """
    if not values:
        raise InvalidParameterError(f"--values-file: {source!r} holds no values")
    domain = set(task.domain)
    for line, value in enumerate(values, start=first):
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

    per_request = DEFAULT_PER_REQUEST if args.per_request is None else args.per_request
    first = 1 if args.first_line is None else args.first_line
    values = _read_values(args.values_file)
    if values and first > len(values):
        raise InvalidParameterError(
            f"--first-line {first} is past the last line ({len(values)}) of --values-file "
            f"{args.values_file!r}"
        )
    task = fetch_task(args.task, expected_digest=args.task_digest, ca_file=args.ca_file)
    _check_values(values[first - 1 :], task, args.values_file, first)
    tokens = _tokens(args, task, len(values))
    last = len(values)
    values = values[first - 1 :]
    if tokens is not None:
        tokens = tokens[first - 1 :]
    started = time.perf_counter()
    sending = _Sending(task, first, last)
    # With tokens every submission carries its own; the client's default is never used.
    default_token = None if tokens is None else tokens[0]
    try:
        with (
            Client(
                task,
                args.shuffler,
                token=default_token,
                retry_seconds=args.retry_seconds,
                ca_file=args.ca_file,
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
                        sending.post(client, request)
                    except ShuffleDPError as exc:
                        if _by_interrupt(exc):
                            raise
                        raise ShuffleDPError(sending.stopped(exc)) from None
                    bar.update(len(request))
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) or _by_interrupt(exc):
            return sending.interrupted()
        raise
    if not args.quiet:
        seconds = time.perf_counter() - started
        print(_summary(sending, per_request, args.shuffler, seconds), file=sys.stderr)
    return 0


def _summary(sending: _Sending, per_request: int, url: str, seconds: float) -> str:
    rate = sending.stored / seconds if seconds > 0 else float("inf")
    requests = sending.requests
    return (
        f"shuffledp client submit: {sending.stored} submissions ({sending.messages} encrypted "
        f"messages) in {requests} request{'s' if requests != 1 else ''} of at most "
        f"{per_request} to {url}, {seconds:.2f} s ({rate:.0f} submissions/s)"
    )
