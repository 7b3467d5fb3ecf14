"""Browsers: which web pages may submit to the shuffler (CORS), decided before the app runs.

A web page on another origin than the shuffler's may call it only if the
shuffler says so (the Fetch standard's CORS protocol). A submission is
``POST`` with ``Content-Type: application/json``, which is not a "simple"
request: the browser first sends a preflight, ``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``, and sends the submission only if the answer
allows that origin. The shuffler runs with an explicit allow-list of origins
(``serve shuffler --allow-origin ORIGIN``, repeatable; none by default), and
:class:`CorsMiddleware` answers on the routes it is given (the shuffler's
``POST /v1/tasks/{task_id}/submissions`` and ``GET /v1/tasks/{task_id}``):

* a preflight from a listed origin: ``204`` with
  ``Access-Control-Allow-Origin`` (the origin, echoed), ``-Allow-Methods`` (the
  route's), ``-Allow-Headers: Content-Type``, ``-Max-Age`` (:data:`MAX_AGE_SECONDS`)
  and ``Vary: Origin``;
* a preflight from any other origin: ``403`` (reason ``origin_not_allowed``)
  without any ``Access-Control-*`` header, so the browser does not send the request;
* a request from a listed origin: answered by the app, with
  ``Access-Control-Allow-Origin`` (so the page can read the answer, errors
  included), ``Access-Control-Expose-Headers: Retry-After`` (so it can read
  how long a 503 asks it to wait) and ``Vary: Origin``;
* a ``POST`` (any method but ``GET``, ``HEAD`` and ``OPTIONS``) whose ``Origin``
  is not listed: ``403`` ``origin_not_allowed`` before the app sees it, nothing
  read or stored. A browser sends ``Origin`` with every ``POST``, same-origin
  ones included, and a client outside a browser sends none, so refusing here
  costs an honest client nothing, while letting it through would rely on the
  browser alone: a request that needs no preflight (a form, a ``no-cors``
  ``fetch``) reaches the server whatever the answer says, and only the
  ``Content-Type`` rule (415, :func:`~shuffledp.service._server.check_json_content_type`)
  would then keep it out. Two independent checks keep a page on another site
  from making its visitors' browsers submit;
* a ``GET`` or ``HEAD`` whose ``Origin`` is not listed: answered as without
  one (the task document is public), with no ``Access-Control-*`` header, so
  a browser keeps the answer from the page;
* a request without ``Origin`` (a client outside a browser): as before.

No ``Access-Control-Allow-Credentials`` is ever sent: nothing in the services
uses cookies or HTTP authentication from a browser. Every answer on these
routes carries ``Vary: Origin``, since its headers depend on it. An answer
the connection limits give before the app runs (408, 431, 503, see
:mod:`~shuffledp.service._http`) carries no CORS header: a page sees it as a
network error.

An origin is written as browsers send it (RFC 6454): ``scheme://host[:port]``,
lower case, without a path (not even ``/``), without the scheme's default port
and with an internationalized host in its ASCII form; :func:`check_origin`
refuses anything else, the wildcard ``*`` and ``null`` included, and says why.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from shuffledp._validation import InvalidParameterError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "ALLOWED_HEADERS",
    "EXPOSED_HEADERS",
    "MAX_AGE_SECONDS",
    "CorsMiddleware",
    "check_origin",
    "check_origins",
]

#: Request headers a page may send besides the safelisted ones (``-Allow-Headers``).
ALLOWED_HEADERS = "Content-Type"
#: Response headers a page may read besides the safelisted ones (``-Expose-Headers``):
#: the pause a 503 asks for, which the TypeScript client honours.
EXPOSED_HEADERS = "Retry-After"
#: How long a browser may keep a preflight's answer (``-Max-Age``): an origin removed
#: from the list stops working in a browser that asked before at most this long after.
MAX_AGE_SECONDS = 600

_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*")
_WILDCARD = (
    "a wildcard is refused: every web page a user visits could then make the user's "
    "browser submit whatever its script chooses, and read the answers; list the origins "
    "of the pages that run the task's client"
)


def _loopback_host(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_origin(value: object, flag: str = "allow_origins") -> str:
    """Return ``value`` if it is an origin as browsers send it; refuse it otherwise.

    ``https://host[:port]``, or ``http://`` for a loopback host only (``localhost``,
    ``*.localhost``, ``127.0.0.0/8``, ``[::1]``): a page served over plain HTTP
    elsewhere is no secure context (browsers give it no WebCrypto, which the
    client's encryption needs) and anyone on its network path can replace its
    script, the randomizer included, and read the users' values before they are
    randomized.

    Args:
        value: The origin.
        flag: How the error names it (``--allow-origin`` on the command line).

    Raises:
        InvalidParameterError: Saying what is wrong: a wildcard, ``null``, a path,
            a default port, upper case, a user name, a scheme other than
            ``https`` (or ``http`` on loopback), a malformed host or port.
    """
    if not isinstance(value, str):
        raise InvalidParameterError(
            f"{flag} must be an origin such as 'https://survey.example.org', "
            f"got {type(value).__name__}"
        )
    shown = f"{flag} {value!r}"
    if "*" in value:
        raise InvalidParameterError(f"{shown}: {_WILDCARD}")
    if value == "null":
        raise InvalidParameterError(
            f"{shown}: 'null' is the origin browsers send for sandboxed frames, data: URLs "
            "and local files, which any web page can create; list real origins"
        )
    if not value.isascii() or not value.isprintable() or " " in value:
        raise InvalidParameterError(
            f"{shown}: an origin is ASCII without spaces (browsers send an "
            "internationalized host in its xn-- form)"
        )
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise InvalidParameterError(f"{shown} is not an origin ({exc})") from None
    scheme = parts.scheme
    if scheme not in _DEFAULT_PORTS or not value.lower().startswith(f"{scheme}://"):
        raise InvalidParameterError(
            f"{shown}: an origin is scheme://host[:port] with scheme https (or http on "
            "loopback), e.g. 'https://survey.example.org'"
        )
    if value != value.lower():
        raise InvalidParameterError(
            f"{shown}: browsers send origins in lower case: write {value.lower()!r}"
        )
    if parts.path or parts.query or parts.fragment or value.endswith(("?", "#")):
        bare = f"{scheme}://{parts.netloc}"
        raise InvalidParameterError(
            f"{shown}: an origin has no path, not even '/': browsers send "
            f"{bare!r} in the Origin header"
        )
    if "@" in parts.netloc:
        raise InvalidParameterError(f"{shown}: an origin has no user name")
    host = parts.netloc if port is None else parts.netloc.rsplit(":", 1)[0]
    if parts.netloc.endswith(":"):
        raise InvalidParameterError(f"{shown}: the port is missing after ':'")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
            valid_host = host.endswith("]")
        except ValueError:
            valid_host = False
    else:
        valid_host = _HOST_NAME.fullmatch(host) is not None
    if not valid_host:
        raise InvalidParameterError(f"{shown}: {host!r} is not a host name or address")
    if port is not None and (port == 0 or port == _DEFAULT_PORTS[scheme]):
        if port == 0:
            raise InvalidParameterError(f"{shown}: port 0 is no port a page is served from")
        raise InvalidParameterError(
            f"{shown}: browsers send the origin without the default port {port}: write "
            f"'{scheme}://{host}'"
        )
    if scheme == "http" and not _loopback_host(host):
        raise InvalidParameterError(
            f"{shown}: a page served over plain HTTP is no secure context (no WebCrypto for "
            "the client's encryption) and whoever is on its network path can replace its "
            "script and read the values it randomizes: serve it over https (http:// is "
            "accepted for loopback hosts only)"
        )
    return value


def check_origins(values: Iterable[object], flag: str = "allow_origins") -> frozenset[str]:
    """Check every origin of an allow-list (:func:`check_origin`); return them as a set.

    Raises:
        InvalidParameterError: Naming the first bad origin; a single string (not a list).
    """
    if isinstance(values, str):
        raise InvalidParameterError(f"{flag} must be a list of origins, got the string {values!r}")
    return frozenset(check_origin(value, flag) for value in values)


def _header(scope: Scope, name: bytes) -> str | None:
    values = [value for key, value in scope["headers"] if key == name]
    if len(values) != 1:  # absent, or sent twice: no single origin to judge
        return None if not values else ""
    return bytes(values[0]).decode("latin-1")


class CorsMiddleware:
    """ASGI middleware: CORS for an explicit allow-list of origins on some routes only.

    See the module docstring for what each request gets. Requests on other
    routes pass through untouched (no CORS header: a browser keeps their
    answers from pages on other origins).

    Args:
        app: The application.
        origins: The allowed origins (checked with :func:`check_origins`).
        routes: The routes that take part (Starlette routes: a request matches
            one by its path, whatever its method).
        refused: Called with ``"origin_not_allowed"`` for every refusal (the
            service's metrics).
        max_age: ``Access-Control-Max-Age`` of a preflight's answer, in seconds.

    Raises:
        InvalidParameterError: If an origin is malformed.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        origins: Iterable[str],
        routes: Sequence[Any],
        refused: Callable[[str], None] | None = None,
        max_age: int = MAX_AGE_SECONDS,
    ) -> None:
        from starlette.routing import Match

        self.app = app
        self.origins = check_origins(origins)
        self.routes = list(routes)
        self.refused = refused
        self.max_age = max_age
        self._none = Match.NONE

    def _methods(self, scope: Scope) -> list[str] | None:
        """The methods of the CORS route the request's path matches (None: no such route)."""
        for route in self.routes:
            match, _ = route.matches(scope)
            if match != self._none:
                return sorted(set(route.methods or ()) - {"HEAD"})
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a preflight or a refused request, or pass the request on with CORS headers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        methods = self._methods(scope)
        if methods is None:
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        allowed = origin is not None and origin in self.origins
        method = scope["method"]
        preflight = (
            method == "OPTIONS"
            and origin is not None
            and _header(scope, b"access-control-request-method") is not None
        )
        if preflight:
            if not allowed:
                await self._refuse(send, "a preflight")
                return
            assert origin is not None
            await send(
                {
                    "type": "http.response.start",
                    "status": 204,
                    "headers": [
                        (b"access-control-allow-origin", origin.encode("latin-1")),
                        (b"access-control-allow-methods", ", ".join(methods).encode()),
                        (b"access-control-allow-headers", ALLOWED_HEADERS.encode()),
                        (b"access-control-max-age", str(self.max_age).encode()),
                        (b"vary", b"Origin"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        if origin is not None and not allowed and method not in ("GET", "HEAD", "OPTIONS"):
            await self._refuse(send, f"a {method}")
            return
        extra = [(b"vary", b"Origin")]
        if allowed:
            assert origin is not None
            extra[:0] = [
                (b"access-control-allow-origin", origin.encode("latin-1")),
                (b"access-control-expose-headers", EXPOSED_HEADERS.encode()),
            ]

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _refuse(self, send: Send, what: str) -> None:
        if self.refused is not None:
            self.refused("origin_not_allowed")
        body = json.dumps(
            {
                "error": f"{what} from this Origin is refused: it is not in the shuffler's "
                "allow-list (serve shuffler --allow-origin)",
                "reason": "origin_not_allowed",
            }
        ).encode("ascii")
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"vary", b"Origin"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
