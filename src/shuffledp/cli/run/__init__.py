"""``shuffledp run PROTOCOL``: run a protocol on a data file (one module per protocol)."""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "run"
HELP = "run a protocol on a data file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per protocol module of this package."""
    from shuffledp.cli import run

    protocols = parser.add_subparsers(dest="protocol", required=True, metavar="PROTOCOL")
    for module in command_modules(run):
        module.add_arguments(protocols.add_parser(module.NAME, help=module.HELP))
