"""Output files: never damage what a path points at, never leave a partial or temporary file.

Every file the command line writes (releases, reports, tables, plots,
experiment CSVs and summaries) goes through :func:`write_file_atomically` or
:func:`write_text_atomically`:

* the target is checked first (:func:`check_output_file`): an existing path
  that is not a regular file (a symbolic link, a directory, a device such as
  ``/dev/full``, a FIFO, a socket) or a read-only file is refused, and so is a
  directory in which no file can be created (``/proc``, a read-only mount).
  The check runs before any work and again just before the write;
* the content goes to a temporary file in the same directory, is flushed to
  disk and renamed over the target, so a reader sees the old file or the whole
  new one; the new file gets the old one's permissions (a new file: 0666 less
  the umask, as ``open`` would give it);
* on any exception, Ctrl-C included, the temporary file is removed, and an
  ``OSError`` names the path the user gave, never the temporary file.

:func:`owner_only` makes what is created inside it readable and writable by
its owner only (files 0600, directories 0700), whatever the umask: for
outputs written by a library that creates its files itself (pyarrow's
Parquet writer for ``analyzer export``).

Files and directories this process created are recorded;
:func:`remove_created_outputs` deletes them, which the command line does when
a command fails or is interrupted, so such a command leaves nothing behind (a
file that existed before was replaced whole or not at all).
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from shuffledp._validation import InvalidParameterError

__all__ = [
    "check_output_dir",
    "check_output_file",
    "finite_or_none",
    "forget_created_outputs",
    "make_output_dir",
    "owner_only",
    "remove_created_outputs",
    "save_figure",
    "write_csv_atomically",
    "write_file_atomically",
    "write_json_atomically",
    "write_text_atomically",
]

#: Files and directories created by this process, in creation order.
_CREATED: list[Path] = []


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _label(flag: str | None) -> str:
    return f"{flag}: " if flag else ""


def _refuse_existing(path: Path, flag: str | None, shown: str | None = None) -> bool:
    """Raise unless ``path`` is absent or a writable regular file; return whether it exists.

    ``shown`` is the path as the user wrote it (default: ``path``).
    """
    name = str(path) if shown is None else shown
    try:
        info = path.lstat()
    except FileNotFoundError:
        return False
    kind = _kind(info.st_mode)
    if kind is not None:
        raise InvalidParameterError(
            f"{_label(flag)}{name!r} is {kind}; refusing to write to it (give a regular "
            "file or a new name)"
        )
    if not os.access(path, os.W_OK):
        raise InvalidParameterError(f"{_label(flag)}{name!r} is read-only; refusing to replace it")
    return True


def _probe(directory: Path, shown: str, flag: str | None) -> None:
    """Raise unless a file can be created in ``directory`` (the target, as given: ``shown``)."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".shuffledp-probe.", dir=directory)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InvalidParameterError(
            f"{_label(flag)}cannot write {shown!r}: no file can be created in "
            f"{str(directory)!r} ({reason})"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _parent(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def check_output_file(path: str | Path, flag: str | None = None) -> Path:
    """Return ``path`` as a Path if a file can be written there without damaging anything.

    Args:
        path: The output file the user named.
        flag: The option that named it (``"--output"``), for the message.

    Raises:
        InvalidParameterError: If its directory does not exist or takes no new
            file, or the path exists and is not a writable regular file (a
            symbolic link, directory, device, FIFO or socket). The message
            names ``path`` as given.
    """
    shown = os.fspath(path)
    out = Path(path)
    parent = _parent(out)
    if not parent.is_dir():
        raise InvalidParameterError(f"{_label(flag)}directory {str(parent)!r} does not exist")
    _refuse_existing(out, flag, shown)
    _probe(parent, shown, flag)
    return out


def check_output_dir(path: str | Path, flag: str | None = None) -> Path:
    """Return ``path`` as a Path if it is, or can become, a directory that takes new files.

    Nothing is created: :func:`make_output_dir` does that when the files are
    written. A symbolic link to a directory is accepted (files are written
    inside it; the link itself is never replaced).

    Raises:
        InvalidParameterError: If ``path`` exists and is not a directory, or
            no file can be created in it (or in its nearest existing ancestor
            when it does not exist yet).
    """
    shown = os.fspath(path)
    out = Path(path)
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise InvalidParameterError(f"{_label(flag)}{shown!r} is not a directory")
        _probe(out, shown, flag)
        return out
    ancestor = out
    while not ancestor.exists():
        if ancestor.is_symlink():  # a dangling link: mkdir would fail on it
            raise InvalidParameterError(
                f"{_label(flag)}{str(ancestor)!r} is a symbolic link to nothing"
            )
        ancestor = _parent(ancestor) if ancestor != _parent(ancestor) else Path(".")
    if not ancestor.is_dir():
        raise InvalidParameterError(
            f"{_label(flag)}{shown!r}: {str(ancestor)!r} is not a directory"
        )
    _probe(ancestor, shown, flag)
    return out


def make_output_dir(path: str | Path) -> Path:
    """Create ``path`` and its missing parents, recording each one this process created."""
    out = Path(path)
    missing: list[Path] = []
    current = out
    while not current.exists() and current != _parent(current):
        missing.append(current)
        current = _parent(current)
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        _CREATED.append(directory)
    if not out.is_dir():
        raise InvalidParameterError(f"{str(out)!r} is not a directory")
    return out


#: The umask inside :func:`owner_only`: no permission for group or others.
OWNER_ONLY_UMASK = 0o077


@contextlib.contextmanager
def owner_only() -> Iterator[None]:
    """Create files 0600 and directories 0700 inside the block, whatever the umask.

    Sets the process's umask to :data:`OWNER_ONLY_UMASK` (adding to it, never
    loosening it) and restores it on exit. The umask is process-wide: use it
    in a command's main thread around the writing, not in a library that
    other threads may be creating files in.
    """
    previous = os.umask(OWNER_ONLY_UMASK)
    os.umask(previous | OWNER_ONLY_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def _new_file_mode() -> int:
    """0666 less the process's umask (read without changing it), as ``open`` would create.

    Falls back to 0600 where the umask cannot be read without setting it
    (``os.umask`` is process-wide; toggling it could race another thread).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o600


def write_file_atomically(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Have ``write`` fill a temporary file, then rename it over ``path`` (module docstring).

    Args:
        path: The target (checked again here, as in :func:`check_output_file`).
        write: Writes the whole content to the path it is given (a temporary
            file in the same directory, with ``path``'s suffix, so that writers
            that choose a format by the suffix, such as ``savefig``, work).

    Raises:
        InvalidParameterError: If the target is not (or no longer) a writable
            regular file or absent.
        OSError: From the writing, naming ``path`` instead of the temporary file.
    """
    out = Path(path)
    existed = _refuse_existing(out, None, os.fspath(path))
    parent = _parent(out)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(out)) from None
    replaced = False
    try:
        os.close(fd)
        write(Path(tmp_name))
        with open(tmp_name, "rb") as handle:
            os.fsync(handle.fileno())
        mode = stat.S_IMODE(out.stat().st_mode) if existed else _new_file_mode()
        os.chmod(tmp_name, mode)
        if not existed:
            _CREATED.append(out)
        os.replace(tmp_name, out)
        replaced = True
    except OSError as exc:
        if exc.filename is None or str(exc.filename) == tmp_name:
            # Name the target, never the temporary file (some writers, e.g. pyarrow, put
            # the path they were given in the message itself).
            reason = (exc.strerror or str(exc)).replace(tmp_name, os.fspath(path))
            raise OSError(exc.errno, reason, os.fspath(path)) from None
        raise
    finally:
        if not replaced:
            Path(tmp_name).unlink(missing_ok=True)
    return out


def write_text_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through :func:`write_file_atomically`."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)

    return write_file_atomically(path, write)


def write_csv_atomically(
    path: str | Path,
    fields: Iterable[str],
    rows: Iterable[Mapping[str, Any]],
    *,
    restval: Any = "",
) -> Path:
    """Write ``rows`` as a CSV with a header of ``fields`` through :func:`write_file_atomically`.

    A field a row lacks is written as ``restval``; a key not in ``fields`` is an
    error (:class:`csv.DictWriter`'s rule).
    """
    columns = list(fields)

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, restval=restval)
            writer.writeheader()
            writer.writerows(rows)

    return write_file_atomically(path, write)


def finite_or_none(value: Any) -> Any:
    """``value`` with every non-finite float (in dicts, lists, tuples) replaced by ``None``.

    numpy scalars become Python numbers, dict keys strings: the result is what
    strict JSON (``allow_nan=False``) can write.
    """
    if isinstance(value, dict):
        return {str(k): finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        return finite_or_none(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json_atomically(path: str | Path, document: Any) -> Path:
    """Write ``document`` as strict JSON (non-finite numbers as null, indent 2, final newline)."""
    text = json.dumps(finite_or_none(document), indent=2, allow_nan=False) + "\n"
    return write_text_atomically(path, text)


def save_figure(figure: Any, path: str | Path, **savefig_options: Any) -> Path:
    """Save a matplotlib figure to ``path`` through :func:`write_file_atomically`.

    The format follows ``path``'s suffix, as with ``figure.savefig(path)``.
    """

    def write(tmp: Path) -> None:
        figure.savefig(tmp, **savefig_options)

    return write_file_atomically(path, write)


def forget_created_outputs() -> None:
    """Start a new record: what was created so far is kept whatever happens next."""
    _CREATED.clear()


def remove_created_outputs() -> None:
    """Delete the files and (now empty) directories this process created, newest first."""
    while _CREATED:
        path = _CREATED.pop()
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        except OSError:
            continue
