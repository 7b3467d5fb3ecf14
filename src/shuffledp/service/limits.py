"""The limits a service puts on each HTTP connection, and their defaults (no web stack needed).

Enforced by :class:`shuffledp.service._http.GuardedProtocol`; ``serve
shuffler|analyzer`` take them as ``--header-timeout``, ``--body-timeout`` and
``--max-connections``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from shuffledp._validation import InvalidParameterError

__all__ = [
    "DEFAULT_BODY_TIMEOUT",
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_MAX_CONNECTIONS",
    "FD_RESERVE",
    "MAX_HEADER_BYTES",
    "ConnectionLimits",
]

#: Most bytes of request line and headers one request may take (431 above).
MAX_HEADER_BYTES = 64 * 1024
#: Default seconds for a request's line and headers to arrive.
DEFAULT_HEADER_TIMEOUT = 10.0
#: Default seconds for a request's body to arrive once its headers have.
DEFAULT_BODY_TIMEOUT = 60.0
#: Default most open connections per service.
DEFAULT_MAX_CONNECTIONS = 1000
#: File descriptors kept for the process itself (store files, threads, logs).
FD_RESERVE = 64


@dataclass(frozen=True)
class ConnectionLimits:
    """Per-connection and per-server limits (see the module docstring).

    Attributes:
        header_timeout: Seconds for a request's line and headers.
        body_timeout: Seconds for a request's body once its headers are in.
        max_connections: Most open connections.
        max_header_bytes: Most bytes of request line and headers.

    Raises:
        InvalidParameterError: If a timeout is not positive or a count below 1.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_header_bytes: int = MAX_HEADER_BYTES

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout"):
            value = getattr(self, name)
            real = isinstance(value, int | float) and not isinstance(value, bool)
            if not (real and math.isfinite(value) and value > 0):
                raise InvalidParameterError(
                    f"{name} must be a positive number of seconds, got {value!r}"
                )
        for name in ("max_connections", "max_header_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidParameterError(f"{name} must be an integer >= 1, got {value!r}")
