"""``shuffledp client ACTION``: what a user's device does (one module per action)."""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "client"
HELP = "randomize, encrypt and submit a value to a shuffler"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per module of this package."""
    from shuffledp.cli import client

    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for module in command_modules(client):
        module.add_arguments(actions.add_parser(module.NAME, help=module.HELP))
