"""``shuffledp serve shuffler``: the shuffler service (see :mod:`shuffledp.service.shuffler`)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.cli._common import Checked, checked, integer_at_least
from shuffledp.cli.serve._shared import (
    add_server_arguments,
    check_tls,
    run_server,
    server_settings,
)

NAME = "shuffler"
HELP = "collect encrypted submissions, batch them once enough users wait, forward to the analyzer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``serve shuffler``'s options."""
    parser.add_argument("--task", required=True, help="the task document")
    parser.add_argument(
        "--store",
        required=True,
        help="sqlite:///relative.db, sqlite:////absolute.db or postgresql://user@host:port/db "
        "(a password: PGPASSWORD or PGPASSFILE, or in SHUFFLEDP_STORE, not on the command line)",
    )
    parser.add_argument("--forward", required=True, help="the analyzer's base URL")
    parser.add_argument(
        "--forward-token-file", required=True, help="bearer secret shared with the analyzer"
    )
    parser.add_argument(
        "--token-key-file",
        default=None,
        help="client-token key (required when the task admits one submission per client)",
    )
    parser.add_argument(
        "--max-submissions-per-request",
        type=integer_at_least(1),
        default=None,
        help="default 1000 (more makes batches larger than the analyzer admits by default: "
        "give the analyzer --max-batch-users min_batch_users - 1 + this)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        type=Checked(str, _check_origin),
        default=None,
        metavar="ORIGIN",
        help="the origin of a web page that may submit from a browser (CORS), as browsers "
        "send it: https://host[:port], no path, no wildcard; repeat for each (default none: "
        "a browser's POST, which carries Origin, is refused 403); in the variable, separate "
        "them by commas",
    )
    add_server_arguments(
        parser,
        default_listen="127.0.0.1:8080",
        max_body_help="largest request (default 4 MiB, or one submission at the task's "
        "max_messages_per_submission if that is larger)",
        default_body_timeout=60.0,
    )
    parser.set_defaults(handler=execute)


def _check_origin(value: Any, flag: str) -> str:
    """:func:`shuffledp.service.cors.check_origin` (imported once a value is given)."""
    from shuffledp.service.cors import check_origin

    return check_origin(value, flag)


def execute(args: argparse.Namespace) -> int:
    """Run the shuffler until interrupted."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service import shuffler
    from shuffledp.service._server import configure_logging, parse_listen
    from shuffledp.service.secretfile import read_secret_file
    from shuffledp.service.store import check_store_url, open_shuffler_store
    from shuffledp.service.task import load_task
    from shuffledp.service.tokens import load_token_key

    parse_listen(args.listen)
    check_store_url(args.store)
    if not args.forward.startswith(("http://", "https://")):
        raise InvalidParameterError(f"--forward must be an http(s):// URL, got {args.forward!r}")
    check_tls(args)
    task = load_task(args.task)
    max_body, port_file = server_settings(args, shuffler.default_max_body_bytes(task))
    max_subs = shuffler.DEFAULT_MAX_SUBMISSIONS_PER_REQUEST
    if args.max_submissions_per_request is not None:
        max_subs = checked(
            check_int, args.max_submissions_per_request, "--max-submissions-per-request", minimum=1
        )
    forward_token = read_secret_file(args.forward_token_file, "forward token")
    token_key = None if args.token_key_file is None else load_token_key(args.token_key_file)
    if task.one_submission_per_client and token_key is None:
        raise InvalidParameterError(
            "the task admits one submission per client: --token-key-file is required"
        )
    configure_logging()
    if max_subs > shuffler.DEFAULT_MAX_SUBMISSIONS_PER_REQUEST:
        logging.getLogger("shuffledp.service").warning(
            "--max-submissions-per-request %d: batches may hold up to %d users; start the "
            "analyzer with --max-batch-users %d or it refuses them (422)",
            max_subs,
            task.min_batch_users - 1 + max_subs,
            task.min_batch_users - 1 + max_subs,
        )
    largest = shuffler.submission_body_bytes(task.max_messages_per_submission)
    if max_body < largest:
        logging.getLogger("shuffledp.service").warning(
            "--max-body-bytes %d: a submission of up to max_messages_per_submission = %d "
            "ciphertexts takes up to %d bytes; an honest client's larger one is refused (413)",
            max_body,
            task.max_messages_per_submission,
            largest,
        )
    store = open_shuffler_store(args.store, task.task_id)
    app = shuffler.create_shuffler_app(
        task,
        store,
        forward_url=args.forward,
        forward_token=forward_token,
        token_key=token_key,
        max_body_bytes=max_body,
        max_submissions_per_request=max_subs,
        allow_origins=args.allow_origin or (),
    )
    run_server(app, args, port_file)
    return 0
