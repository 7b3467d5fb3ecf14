"""``shuffledp serve ROLE``: run the shuffler or the analyzer service (one module per role)."""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "serve"
HELP = "run the shuffler or the analyzer as an HTTP service"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per module of this package."""
    from shuffledp.cli import serve

    roles = parser.add_subparsers(dest="role", required=True, metavar="ROLE")
    for module in command_modules(serve):
        module.add_arguments(roles.add_parser(module.NAME, help=module.HELP))
