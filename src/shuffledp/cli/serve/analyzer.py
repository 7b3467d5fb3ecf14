"""``shuffledp serve analyzer``: the analyzer service (see :mod:`shuffledp.service.analyzer`)."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_int
from shuffledp.cli._common import checked, integer
from shuffledp.cli.serve._shared import (
    add_server_arguments,
    check_tls,
    run_server,
    server_settings,
)

NAME = "analyzer"
HELP = "receive batches from the shuffler, decrypt and count them, serve the estimate"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``serve analyzer``'s options."""
    parser.add_argument("--task", required=True, help="the task document")
    parser.add_argument("--key", required=True, help="the analyzer's private key file")
    parser.add_argument(
        "--store",
        required=True,
        help="sqlite:///relative.db, sqlite:////absolute.db or postgresql://user@host:port/db "
        "(a password: PGPASSWORD or PGPASSFILE, or in SHUFFLEDP_STORE, not on the command line)",
    )
    parser.add_argument(
        "--forward-token-file", required=True, help="bearer secret the shuffler sends"
    )
    parser.add_argument(
        "--max-batch-users",
        type=integer,
        default=None,
        help="most users a batch may state (422 above; default: min_batch_users - 1 + 1000, "
        "the most a shuffler with the default --max-submissions-per-request puts in a batch; "
        "raise it with the shuffler's --max-submissions-per-request)",
    )
    add_server_arguments(
        parser,
        default_listen="127.0.0.1:8081",
        max_body_help="largest batch request (413 above; default: the body of a batch of "
        "--max-batch-users users at the task's max_messages_per_submission)",
        default_body_timeout=600.0,
    )
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run the analyzer until interrupted."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service import analyzer
    from shuffledp.service._server import configure_logging, parse_listen
    from shuffledp.service.secretfile import read_secret_file
    from shuffledp.service.store import check_store_url, open_analyzer_store
    from shuffledp.service.task import MAX_BATCH_USERS, load_private_key, load_task

    parse_listen(args.listen)
    check_store_url(args.store)
    check_tls(args)
    task = load_task(args.task)
    max_users = analyzer.default_max_batch_users(task)
    if args.max_batch_users is not None:
        max_users = checked(
            check_int,
            args.max_batch_users,
            "--max-batch-users",
            minimum=task.min_batch_users,
            maximum=MAX_BATCH_USERS,
        )
    max_body, port_file = server_settings(args, analyzer.batch_body_bytes(task, max_users))
    key = load_private_key(args.key, task)
    forward_token = read_secret_file(args.forward_token_file, "forward token")
    configure_logging()
    store = open_analyzer_store(args.store, task.task_id)
    app = analyzer.create_analyzer_app(
        task,
        key,
        store,
        forward_token=forward_token,
        max_batch_users=max_users,
        max_body_bytes=max_body,
    )
    run_server(app, args, port_file)
    return 0
