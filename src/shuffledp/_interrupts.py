"""Ctrl-C: telling it apart from the errors it can surface as, and catching it from the start.

A SIGINT that arrives while a C extension module initialises (scipy's
``pypocketfft`` does) surfaces as ``ImportError: initialization failed`` whose
cause is the ``KeyboardInterrupt``; code that turns import errors into its own
errors must not turn that one into "install the extra".

The command catches Ctrl-C from the package's first lines (its ``__init__``
imports this module first; the console script and ``python -m shuffledp`` both
start there): until :func:`shuffledp.cli.main` takes over
(:func:`stop_exiting_on_interrupt`), a SIGINT prints ``shuffledp:
interrupted`` and ends the process with 130 at once, instead of a traceback
from the middle of an import and an exit by signal. Nothing has been written
by then, so there is nothing to remove. Only the interpreter's own start
(``site`` and the console script's first line: 10 to 20 ms on a 2-core VM) is
outside Python's reach. After that the command's handler remembers that a
SIGINT came (:func:`interrupt_received`), so an error a C extension raises in
its place (numpy's ``PyCapsule_Import could not import module "datetime"``,
which chains nothing) still ends as an interrupt.

:func:`deferred_interrupt` holds a Ctrl-C back while a few statements that must
run together run (a receipt written for a submission the shuffler stored).
"""

from __future__ import annotations

# Only modules that the interpreter has loaded before any script runs: the package's
# __init__ imports this module first, so that the command catches Ctrl-C from there
# on, and anything slower to import here would widen the window it is meant to close.
# `_signal` is what the `signal` module wraps (that one imports enum, functools, ...).
import os
import sys

TYPE_CHECKING = False  # typing itself takes milliseconds to import
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable
    from types import FrameType, TracebackType
    from typing import Any

    _Handler = Callable[[int, FrameType | None], Any] | int | _signal.Handlers | None
else:
    import _signal

__all__ = [
    "INTERRUPTED",
    "INTERRUPTED_LINE",
    "caused_by_interrupt",
    "deferred_interrupt",
    "exit_on_interrupt_while_starting",
    "forget_unhandled_interrupt",
    "interrupt_received",
    "started_as_the_command",
    "stop_exiting_on_interrupt",
]

#: Exit code of a command stopped by Ctrl-C (128 + SIGINT, what shells report).
INTERRUPTED = 128 + int(_signal.SIGINT)

#: The line the command prints when Ctrl-C stops it.
INTERRUPTED_LINE = "shuffledp: interrupted"

#: The modules ``python -m`` runs as the command.
_COMMAND_MODULES = frozenset(
    {"shuffledp", "shuffledp.__main__", "shuffledp.cli", "shuffledp.cli.__main__"}
)

#: Names of the console script (``shuffledp-script.py``: setuptools' Windows launchers).
_COMMAND_SCRIPTS = frozenset({"shuffledp", "shuffledp.exe", "shuffledp-script.py"})


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a ``KeyboardInterrupt`` is ``exc`` or in its chain of causes and contexts."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def started_as_the_command() -> bool:
    """Whether this process is the ``shuffledp`` command (console script or ``python -m``).

    Decided from ``sys.orig_argv`` (``python -m shuffledp ...``) and from the main
    script's name (the console script), never from anything a library user's
    program would share: importing ``shuffledp.cli`` elsewhere changes no signal.
    """
    argv = list(getattr(sys, "orig_argv", ()))
    i = 1
    while i < len(argv):
        item = argv[i]
        if item == "-m":
            return i + 1 < len(argv) and argv[i + 1] in _COMMAND_MODULES
        if item.startswith("-m"):
            return item[2:] in _COMMAND_MODULES
        if item in ("-c", "-", "--") or not item.startswith("-"):
            break  # a command string, stdin or a script: look at the script's name
        i += 2 if item in ("-X", "-W") else 1  # the two options that take an argument
    main = sys.modules.get("__main__")
    if getattr(main, "__spec__", None) is not None:
        return False
    return os.path.basename(getattr(main, "__file__", None) or "") in _COMMAND_SCRIPTS


def _exit_interrupted(signum: int, frame: FrameType | None) -> None:
    """Print the interrupt's one line and end the process with 130, at once."""
    try:
        os.write(2, (INTERRUPTED_LINE + "\n").encode())
    finally:
        os._exit(INTERRUPTED)


def exit_on_interrupt_while_starting() -> None:
    """From now until :func:`stop_exiting_on_interrupt`, Ctrl-C ends the process with 130.

    For the first lines of the command's entry modules: imports are all that
    happens before the command takes over, so nothing needs cleaning up. Off the
    main thread (where signals cannot be set) nothing changes.
    """
    try:
        _signal.signal(_signal.SIGINT, _exit_interrupted)
    except ValueError:  # not the main thread
        pass


#: Set once :func:`_raise_interrupt` has run: a SIGINT reached the command.
_received: list[bool] = []


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    """Python's own SIGINT handler (raise ``KeyboardInterrupt``), remembering that it ran."""
    _received[:] = [True]
    raise KeyboardInterrupt


def stop_exiting_on_interrupt() -> None:
    """Turn Ctrl-C into ``KeyboardInterrupt`` if the start-up handler is in place.

    The handler installed then also remembers that a SIGINT came
    (:func:`interrupt_received`): a C extension may swallow the
    ``KeyboardInterrupt`` and raise an error that does not chain it (numpy's
    ``PyCapsule_Import could not import module "datetime"``).
    """
    try:
        if _signal.getsignal(_signal.SIGINT) is _exit_interrupted:
            _signal.signal(_signal.SIGINT, _raise_interrupt)
    except ValueError:  # not the main thread
        pass


def interrupt_received() -> bool:
    """Whether a SIGINT reached the command since it took over (:func:`stop_exiting_on_interrupt`).

    An error raised after that is the interrupt's doing, whatever its chain says.
    """
    return bool(_received)


def forget_unhandled_interrupt() -> None:
    """Clear CPython's note of a ``KeyboardInterrupt`` that escaped an ``exec`` of a string.

    When a KeyboardInterrupt leaves an ``exec("...")`` (dataclasses and
    namedtuple build their methods that way, so a Ctrl-C during an import can),
    CPython notes it as unhandled even if the program catches it further up;
    under ``python -m`` the interpreter then kills itself with SIGINT at exit
    instead of returning the program's code (130, with a clean line, became an
    exit by signal). Every ``exec`` of a string resets the note first, so one
    that does not raise clears it.
    """
    exec("pass")


class deferred_interrupt:  # noqa: N801 - used like a function: ``with deferred_interrupt():``
    """Hold Ctrl-C back while the block runs; raise ``KeyboardInterrupt`` after it if one came.

    For a few statements that must not be cut in two (writing the receipts of
    submissions the shuffler acknowledged). Off the main thread, or when SIGINT
    is ignored or not Python's (or the command's) handler, the block just runs.

    Args:
        reraise: ``False`` drops a Ctrl-C that came during the block (for the last
            words of a command that is stopping anyway).
    """

    def __init__(self, *, reraise: bool = True) -> None:
        self._reraise = reraise
        self._received = False
        self._previous: _Handler = None

    def _remember(self, signum: int, frame: FrameType | None) -> None:
        self._received = True

    def __enter__(self) -> None:
        try:
            current = _signal.getsignal(_signal.SIGINT)
            if current is _signal.default_int_handler or current is _raise_interrupt:
                self._previous = _signal.signal(_signal.SIGINT, self._remember)
        except ValueError:  # not the main thread
            self._previous = None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._previous is not None:
            _signal.signal(_signal.SIGINT, self._previous)
        if self._received and self._reraise and exc is None:
            raise KeyboardInterrupt
