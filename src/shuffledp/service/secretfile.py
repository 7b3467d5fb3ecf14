"""Secret files: created once with mode 0600, never overwritten, read back with a check.

The analyzer's private key, the token key and the forwarding bearer secret
live in files of their own, never inside the (public) task document. A secret
file is created with ``O_CREAT | O_EXCL`` and mode ``0o600`` in one system call,
so it is never readable by others, not even for an instant, and an existing
file (perhaps another task's key) is never replaced.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from shuffledp._validation import InvalidParameterError

__all__ = ["SECRET_FILE_MODE", "read_secret_file", "write_secret_file"]

#: Owner read/write only.
SECRET_FILE_MODE = 0o600

_log = logging.getLogger("shuffledp.service")


def write_secret_file(path: str | Path, text: str) -> Path:
    """Create ``path`` with mode 0600 holding ``text`` (one line); refuse to overwrite.

    Raises:
        InvalidParameterError: If the file already exists or its directory does not.
    """
    path = Path(path)
    if not (path.parent if str(path.parent) else Path(".")).is_dir():
        raise InvalidParameterError(f"directory of {str(path)!r} does not exist")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_FILE_MODE)
    except FileExistsError:
        raise InvalidParameterError(
            f"{str(path)!r} already exists; a secret file is never overwritten "
            "(remove it first if it is really no longer needed)"
        ) from None
    try:
        # The umask cannot widen the mode, but a restrictive one may have narrowed it
        # below 0600; set it exactly.
        os.fchmod(fd, SECRET_FILE_MODE)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            fd = -1
            handle.write(text.rstrip("\n") + "\n")
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        if fd >= 0:
            os.close(fd)
    return path


def read_secret_file(path: str | Path, what: str) -> str:
    """Return the one-line content of a secret file (whitespace stripped).

    A file readable by group or others is used, with a warning in the log.

    Raises:
        FileNotFoundError: If the file does not exist.
        InvalidParameterError: If it is empty or not ASCII text.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} file {str(path)!r} does not exist")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        _log.warning("%s file %s has mode %o; it should be 600 (chmod 600)", what, path, mode)
    try:
        text = path.read_bytes().decode("ascii").strip()
    except UnicodeDecodeError:
        raise InvalidParameterError(f"{what} file {str(path)!r} is not ASCII text") from None
    if not text:
        raise InvalidParameterError(f"{what} file {str(path)!r} is empty")
    return text
