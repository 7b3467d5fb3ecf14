"""``shuffledp analyzer ACTION``: offline actions on the analyzer's store (one module each)."""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "analyzer"
HELP = "offline analyzer actions: publish, export stored batches, aggregate on a backend"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per module of this package."""
    from shuffledp.cli import analyzer

    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for module in command_modules(analyzer):
        module.add_arguments(actions.add_parser(module.NAME, help=module.HELP))
