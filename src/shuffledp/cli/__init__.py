"""The ``shuffledp`` command line.

One sub-package or module per command family (``run``, ``account``,
``experiment``, ``demo``); inside a family every protocol or question is its
own module, found by :func:`shuffledp.cli._registry.command_modules`, so a new
protocol adds one module and touches nothing else.

Every error a user can cause (bad parameter, missing file or column, value
outside the domain, missing optional dependency) is printed as one line on
stderr with exit code 2, and no output file is written. An output path that
exists and is not a regular file (a device, FIFO, symbolic link, directory)
is refused before any work. Ctrl-C prints one line, removes every file the
command had created (temporary files are removed where they are written) and
exits with 130, as shells expect of a command stopped by SIGINT. That holds
from this module's first line: when it is the ``shuffledp`` command that
imports it, a Ctrl-C before :func:`main` takes over ends the process with that
line and 130 (:mod:`shuffledp._interrupts`).

Every error is one line that starts ``shuffledp: error: ``; the parser's errors name
the command (``shuffledp: error: run krr: argument --delta: ...``).
"""

from __future__ import annotations

# First of all (the console script imports this module, then calls main()): Ctrl-C
# during the imports below is one line and exit 130, not a traceback.
from shuffledp._interrupts import (
    INTERRUPTED,
    INTERRUPTED_LINE,
    caused_by_interrupt,
    exit_on_interrupt_while_starting,
    forget_unhandled_interrupt,
    interrupt_received,
    started_as_the_command,
    stop_exiting_on_interrupt,
)

if started_as_the_command():
    exit_on_interrupt_while_starting()

import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from shuffledp import __version__
from shuffledp._files import forget_created_outputs, remove_created_outputs
from shuffledp._validation import ShuffleDPError
from shuffledp._wording import command_line_message
from shuffledp.cli._common import Parser, UsageError
from shuffledp.cli._registry import command_modules

__all__ = ["build_parser", "main"]

#: What every error line the command prints starts with.
ERROR_PREFIX = "shuffledp: error: "


def build_parser(argv: Sequence[str] | None = None) -> Parser:
    """Return the parser of the command line.

    Building it imports no numpy, scipy or protocol code: each command imports
    what it uses when it runs.

    Args:
        argv: The arguments it will parse. The command family they name (the
            first argument that is not an option) is then the only one whose
            sub-commands are declared, so ``shuffledp --version`` or ``shuffledp
            run flip --help`` does not import every command module. ``None``
            declares every command.
    """
    from shuffledp import cli

    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    parser = Parser(prog="shuffledp", description="Differential privacy in the shuffle model.")
    parser.add_argument("--version", action="version", version=f"shuffledp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for family in command_modules(cli):
        command = commands.add_parser(family.NAME, help=family.HELP)
        if chosen is None or chosen == family.NAME:
            family.add_arguments(command)
    return parser


def _ignore_sigint() -> Callable[[int, FrameType | None], Any] | int | signal.Handlers | None:
    """Ignore SIGINT from now on; return the previous handler (``None`` off the main thread)."""
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals go to the main thread anyway
        return None


def interrupted(*, restore: bool) -> int:
    """Stop after Ctrl-C: ignore further ones, remove what was created, say so in one line.

    Args:
        restore: Put the previous SIGINT handler back afterwards (when called in
            process, e.g. by tests); the program itself keeps ignoring SIGINT
            until it exits, so a second Ctrl-C cannot print a traceback.
    """
    previous = _ignore_sigint()
    try:
        remove_created_outputs()
        print(INTERRUPTED_LINE, file=sys.stderr)
        forget_unhandled_interrupt()  # or `python -m shuffledp` could exit by SIGINT
    except Exception:  # nothing may turn the interrupt into a traceback
        pass
    if restore and previous is not None:
        signal.signal(signal.SIGINT, previous)
    return INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 success, 2 bad input, 130 Ctrl-C).

    A command that fails or is interrupted leaves no file it had created.
    """
    forget_created_outputs()
    try:
        code = _run(argv)
    except BaseException:  # a bug (a traceback follows) or SystemExit from a handler
        remove_created_outputs()
        raise
    if code not in (0, INTERRUPTED):
        remove_created_outputs()
    return code


def _run(argv: Sequence[str] | None) -> int:
    try:
        stop_exiting_on_interrupt()  # from here on Ctrl-C is a KeyboardInterrupt, handled below
        arguments = sys.argv[1:] if argv is None else list(argv)
        parser = build_parser(arguments)
        args = parser.parse_args(arguments)
        handler: Callable[..., int] = args.handler
        code = handler(args)
        if interrupt_received() and code != INTERRUPTED:
            # A SIGINT reached the command but its KeyboardInterrupt was lost in a C
            # extension (numpy.random's Cython modules drop it while they initialise, and
            # the command then ran to its end): interrupted all the same, nothing left.
            # (A handler that caught the interrupt itself, as `client submit` does, has
            # said so and returned 130.)
            return interrupted(restore=argv is not None)
        if argv is None:
            # The command is done and only Python's exit is left, during which SIGINT
            # would kill the process silently: a late Ctrl-C no longer changes anything.
            _ignore_sigint()
        return code
    except KeyboardInterrupt:
        return interrupted(restore=argv is not None)
    except UsageError as exc:
        print(f"{ERROR_PREFIX}{exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (ShuffleDPError, FileNotFoundError) as exc:
        if caused_by_interrupt(exc) or interrupt_received():
            return interrupted(restore=argv is not None)
        # Shared messages name Python parameters; their Worded form names the flags.
        print(f"{ERROR_PREFIX}{command_line_message(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        if caused_by_interrupt(exc) or interrupt_received():
            return interrupted(restore=argv is not None)
        print(
            f"{ERROR_PREFIX}{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 2
    except Exception as exc:
        if caused_by_interrupt(exc) or interrupt_received():
            return interrupted(restore=argv is not None)
        raise
