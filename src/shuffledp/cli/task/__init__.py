"""``shuffledp task ACTION``: create a service task and issue client tokens (one module each)."""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "task"
HELP = "create a collection task for the services; issue client tokens"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per module of this package."""
    from shuffledp.cli import task

    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for module in command_modules(task):
        module.add_arguments(actions.add_parser(module.NAME, help=module.HELP))
