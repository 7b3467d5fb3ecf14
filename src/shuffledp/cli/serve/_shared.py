"""What ``serve shuffler`` and ``serve analyzer`` share: the server options and their checks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from shuffledp._validation import check_int
from shuffledp.cli._common import checked, integer, writable

__all__ = ["add_server_arguments", "run_server", "server_settings"]


def add_server_arguments(
    parser: argparse.ArgumentParser, *, default_listen: str, max_body_help: str
) -> None:
    """Declare ``--listen``, ``--max-body-bytes``, ``--port-file`` and the TLS options."""
    parser.add_argument(
        "--listen",
        default=default_listen,
        help=f"HOST:PORT (default {default_listen}; port 0: any)",
    )
    parser.add_argument("--max-body-bytes", type=integer, default=None, help=max_body_help)
    parser.add_argument("--port-file", default=None, help="write the bound port here")
    parser.add_argument("--ssl-certfile", default=None, help="serve HTTPS with this certificate")
    parser.add_argument("--ssl-keyfile", default=None, help="the certificate's private key")


def server_settings(args: argparse.Namespace, default_max_body: int) -> tuple[int, Path | None]:
    """Check ``--max-body-bytes`` and ``--port-file``; return the body limit and the port file.

    Raises:
        InvalidParameterError: If the limit is below 1024 or the port file cannot be written.
    """
    max_body = default_max_body
    if args.max_body_bytes is not None:
        max_body = checked(check_int, args.max_body_bytes, "--max-body-bytes", minimum=1024)
    return max_body, writable(args.port_file, "--port-file")


def run_server(app: Any, args: argparse.Namespace, port_file: Path | None) -> None:
    """Serve ``app`` on ``--listen`` (HTTPS with ``--ssl-certfile``) until interrupted."""
    from shuffledp.service._server import serve

    serve(
        app,
        args.listen,
        port_file=port_file,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )
