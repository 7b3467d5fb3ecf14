"""The ``shuffledp`` command line.

One sub-package or module per command family (``run``, ``account``,
``experiment``, ``demo``); inside a family every protocol or question is its
own module, found by :func:`shuffledp.cli._registry.command_modules`, so a new
protocol adds one module and touches nothing else.

Every error a user can cause (bad parameter, missing file or column, value
outside the domain, missing optional dependency) is printed as one line on
stderr with exit code 2, and no output file is written.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from shuffledp import __version__
from shuffledp._validation import ShuffleDPError
from shuffledp.cli._common import Parser, UsageError
from shuffledp.cli._registry import command_modules

__all__ = ["build_parser", "main"]


def build_parser() -> Parser:
    """Return the parser of the whole command line."""
    from shuffledp import cli

    parser = Parser(prog="shuffledp", description="Differential privacy in the shuffle model.")
    parser.add_argument("--version", action="version", version=f"shuffledp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for family in command_modules(cli):
        family.add_arguments(commands.add_parser(family.NAME, help=family.HELP))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 success, 2 bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        handler: Callable[..., int] = args.handler
        return handler(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (ShuffleDPError, FileNotFoundError) as exc:
        print(f"shuffledp: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"shuffledp: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 2
