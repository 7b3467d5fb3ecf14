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

__all__ = ["add_server_arguments", "check_tls", "run_server", "server_settings"]


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
    parser.add_argument(
        "--tls-certfile",
        "--ssl-certfile",
        dest="tls_certfile",
        default=None,
        metavar="FILE",
        help="serve HTTPS with this PEM certificate chain (with --tls-keyfile; both are "
        "loaded before the service starts; --ssl-certfile: its former name)",
    )
    parser.add_argument(
        "--tls-keyfile",
        "--ssl-keyfile",
        dest="tls_keyfile",
        default=None,
        metavar="FILE",
        help="the certificate's PEM private key, unencrypted (--ssl-keyfile: its former name)",
    )
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


def check_tls(args: argparse.Namespace) -> None:
    """Check ``--tls-certfile`` and ``--tls-keyfile``: both or neither, and that they load.

    The files are read, parsed and loaded as uvicorn will load them
    (``SSLContext.load_cert_chain``), so a missing file, a file that is not
    PEM, a key that is not the certificate's or a key protected by a
    passphrase is one line and exit 2 before the service starts, not a
    traceback once it has (nor a passphrase prompt on its terminal).

    Raises:
        InvalidParameterError: Saying which file and what is wrong.
    """
    import ssl

    certfile, keyfile = args.tls_certfile, args.tls_keyfile
    if (certfile is None) != (keyfile is None):
        given, missing = (
            ("--tls-certfile", "--tls-keyfile")
            if keyfile is None
            else ("--tls-keyfile", "--tls-certfile")
        )
        raise InvalidParameterError(
            f"{given} needs {missing}: give both to serve HTTPS, or neither"
        )
    if certfile is None:
        return
    contents = {}
    for flag, name in (("--tls-certfile", certfile), ("--tls-keyfile", keyfile)):
        path = Path(name)
        if not path.is_file():
            raise InvalidParameterError(f"{flag} {name!r}: no such file")
        try:
            contents[flag] = path.read_bytes()
        except OSError as exc:
            raise InvalidParameterError(
                f"{flag} {name!r}: cannot read it ({exc.strerror})"
            ) from None
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        x509.load_pem_x509_certificates(contents["--tls-certfile"])
    except ValueError:
        raise InvalidParameterError(
            f"--tls-certfile {certfile!r} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ) from None
    try:
        load_pem_private_key(contents["--tls-keyfile"], password=None)
    except TypeError:  # cryptography: "Password was not given but private key is encrypted"
        raise InvalidParameterError(
            f"--tls-keyfile {keyfile!r} is encrypted: give the key without a passphrase "
            "(a file readable by the service's user only)"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise InvalidParameterError(
            f"--tls-keyfile {keyfile!r} holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)"
        ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise InvalidParameterError(
                f"--tls-keyfile {keyfile!r} is not the private key of --tls-certfile {certfile!r}"
            ) from None
        raise InvalidParameterError(
            f"--tls-certfile {certfile!r} / --tls-keyfile {keyfile!r}: cannot load them ({exc})"
        ) from None


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
    """Serve ``app`` on ``--listen`` (HTTPS with ``--tls-certfile``) until interrupted."""
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
        ssl_certfile=args.tls_certfile,
        ssl_keyfile=args.tls_keyfile,
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
