"""One submission per client: tokens the task owner issues and the shuffler checks.

The task owner holds a secret token key (32 random bytes, in a 0600 file). A
client token is ``CLIENT_ID.MAC`` where ``CLIENT_ID`` is a random 128-bit id
(32 hex digits) and ``MAC`` = HMAC-SHA256(key, ``shuffledp-token/1`` ‖ task_id
‖ client_id) in hex. The shuffler, given the key file, recomputes the MAC,
records the client id as used (a UNIQUE column, in the same transaction as the
submission) and refuses a second submission from the same client with another
submission id (HTTP 409). The token is dropped at the shuffler: nothing derived
from it is forwarded, and no column of the used-client table names a
submission (a PostgreSQL store's files place a client id next to its
submission, a SQLite store's do not: see :mod:`shuffledp.service.sqlite_store`).

What this buys: a user cannot weigh in several times, and an outsider without
tokens cannot fill a batch with reports of its own (a Sybil attack that would
shrink the honest crowd each user hides in). It assumes tokens are handed out
one per real user, which is the task owner's job.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from pathlib import Path

from shuffledp._validation import DataError, check_int
from shuffledp.service.secretfile import read_secret_file, write_secret_file

__all__ = [
    "TokenError",
    "issue_token",
    "issue_tokens",
    "load_token_key",
    "new_token_key",
    "save_token_key",
    "verify_token",
]

_KEY_BYTES = 32
_DOMAIN = b"shuffledp-token/1"
_TOKEN = re.compile("[0-9a-f]{32}[.][0-9a-f]{64}")


class TokenError(DataError):
    """A client token is malformed or was not issued with this key for this task."""


def new_token_key() -> bytes:
    """Return a fresh random token key."""
    return secrets.token_bytes(_KEY_BYTES)


def save_token_key(key: bytes, path: str | Path) -> Path:
    """Write the token key (hex) to a new 0600 file."""
    return write_secret_file(path, key.hex())


def load_token_key(path: str | Path) -> bytes:
    """Read a token key file.

    Raises:
        TokenError: If the file does not hold 32 bytes in hex.
    """
    text = read_secret_file(path, "token key")
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise TokenError(f"token key file {str(path)!r} is not hex") from None
    if len(key) != _KEY_BYTES:
        raise TokenError(f"token key file {str(path)!r} must hold {_KEY_BYTES} bytes")
    return key


def _mac(key: bytes, task_id: str, client_id: str) -> str:
    message = b"\x00".join((_DOMAIN, task_id.encode("ascii"), client_id.encode("ascii")))
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def issue_token(key: bytes, task_id: str) -> str:
    """Return one new client token for ``task_id``."""
    client_id = secrets.token_hex(16)
    return f"{client_id}.{_mac(key, task_id, client_id)}"


def issue_tokens(key: bytes, task_id: str, count: int) -> list[str]:
    """Return ``count`` new client tokens."""
    return [issue_token(key, task_id) for _ in range(check_int(count, "count", minimum=1))]


def verify_token(key: bytes, task_id: str, token: object) -> str:
    """Return the client id of a valid token.

    Raises:
        TokenError: If the token is malformed or its MAC does not verify.
    """
    if not isinstance(token, str) or _TOKEN.fullmatch(token) is None:
        raise TokenError("malformed client token: expected 32 hex digits, '.', 64 hex digits")
    client_id, mac = token[:32], token[33:]
    # Both are ASCII now (compare_digest refuses str with other characters).
    if not hmac.compare_digest(mac.encode("ascii"), _mac(key, task_id, client_id).encode("ascii")):
        raise TokenError("client token does not verify for this task")
    return client_id
