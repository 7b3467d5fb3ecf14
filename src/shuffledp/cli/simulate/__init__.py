"""``shuffledp simulate PROTOCOL``: message-level simulation at scale, locally or on Spark.

One module per protocol; what they share is in :mod:`._shared`.
"""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "simulate"
HELP = "simulate a protocol on synthetic users, message by message (locally or on Spark)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per protocol module of this package."""
    from shuffledp.cli import simulate

    protocols = parser.add_subparsers(dest="protocol", required=True, metavar="PROTOCOL")
    for module in command_modules(simulate):
        module.add_arguments(protocols.add_parser(module.NAME, help=module.HELP))
