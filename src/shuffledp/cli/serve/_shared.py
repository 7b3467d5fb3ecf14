"""What ``serve shuffler`` and ``serve analyzer`` share: the server options and their checks.

Every option of both roles can also come from an environment variable
(``--store`` from ``SHUFFLEDP_STORE``; :mod:`~shuffledp.cli.serve._environment`).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from shuffledp._validation import InvalidParameterError, check_int
from shuffledp.cli._common import checked, integer_at_least, number, writable

__all__ = ["add_server_arguments", "run_server", "server_settings"]


def add_server_arguments(
    parser: argparse.ArgumentParser,
    *,
    default_listen: str,
    max_body_help: str,
    default_body_timeout: float,
) -> None:
    """Declare ``--listen``, the request and connection limits, ``--port-file`` and TLS options."""
    from shuffledp.service.limits import (
        DEFAULT_HEADER_TIMEOUT,
        DEFAULT_MAX_CONNECTIONS,
        MAX_HEADER_BYTES,
    )

    parser.add_argument(
        "--listen",
        default=default_listen,
        help=f"HOST:PORT (default {default_listen}; port 0: any)",
    )
    parser.add_argument(
        "--max-body-bytes", type=integer_at_least(1024), default=None, help=max_body_help
    )
    parser.add_argument(
        "--header-timeout",
        type=number,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="SECONDS",
        help="a request's line and headers (at most "
        f"{MAX_HEADER_BYTES // 1024} KiB, 431 above) must arrive within this time of its "
        f"first byte (408 otherwise; default {DEFAULT_HEADER_TIMEOUT:g})",
    )
    parser.add_argument(
        "--body-timeout",
        type=number,
        default=default_body_timeout,
        metavar="SECONDS",
        help="a request's body must arrive within this time of its headers "
        f"(408 otherwise; default {default_body_timeout:g})",
    )
    parser.add_argument(
        "--max-connections",
        type=integer_at_least(1),
        default=DEFAULT_MAX_CONNECTIONS,
        help="most open connections; above it, the one waiting longest on its client is "
        f"closed (default {DEFAULT_MAX_CONNECTIONS})",
    )
    parser.add_argument("--port-file", default=None, help="write the bound port here")
    parser.add_argument("--ssl-certfile", default=None, help="serve HTTPS with this certificate")
    parser.add_argument("--ssl-keyfile", default=None, help="the certificate's private key")
    parser.add_argument(
        "--metrics-token-file",
        default=None,
        help="bearer token that GET /metrics and /v1/metrics then require (default: both "
        "open, for a service that listens on loopback only)",
    )
    from shuffledp.cli.serve._environment import environment_defaults

    environment_defaults(parser)  # last: every option above, and the role's, get their variable


def _seconds(value: float, flag: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"{flag} must be a positive number of seconds, got {value!r}")
    return value


def server_settings(args: argparse.Namespace, default_max_body: int) -> tuple[int, Path | None]:
    """Check ``--max-body-bytes``, the limits and ``--port-file``; return the body limit and file.

    Raises:
        InvalidParameterError: If the body limit is below 1024, a timeout is not
            positive, the connection cap is below 1 or the port file cannot be written.
    """
    max_body = default_max_body
    if args.max_body_bytes is not None:
        max_body = checked(check_int, args.max_body_bytes, "--max-body-bytes", minimum=1024)
    _seconds(args.header_timeout, "--header-timeout")
    _seconds(args.body_timeout, "--body-timeout")
    checked(check_int, args.max_connections, "--max-connections", minimum=1)
    args.metrics_token = None
    if args.metrics_token_file is not None:
        from shuffledp.service.secretfile import read_secret_file

        args.metrics_token = read_secret_file(args.metrics_token_file, "metrics token")
    return max_body, writable(args.port_file, "--port-file")


def run_server(app: Any, args: argparse.Namespace, port_file: Path | None) -> None:
    """Serve ``app`` on ``--listen`` (HTTPS with ``--ssl-certfile``) until interrupted."""
    from shuffledp.service._server import parse_listen, serve
    from shuffledp.service.limits import ConnectionLimits
    from shuffledp.service.operations import set_metrics_token

    set_metrics_token(app, args.metrics_token)
    host, _ = parse_listen(args.listen)
    if args.metrics_token is None and not _loopback(host):
        import logging

        logging.getLogger("shuffledp.service").warning(
            "listening on %s without --metrics-token-file: whoever reaches it can read "
            "/metrics and /v1/metrics (the shuffler's reveal when submissions arrive)",
            args.listen,
        )
    serve(
        app,
        args.listen,
        port_file=port_file,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
        limits=ConnectionLimits(
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            max_connections=args.max_connections,
        ),
    )


def _loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is a loopback address."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False
