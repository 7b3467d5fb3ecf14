"""``shuffledp experiment NAME``: paper reproductions (one module per experiment)."""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "experiment"
HELP = "paper reproductions (CSV and PNG)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per experiment module of this package."""
    from shuffledp.cli import experiment

    experiments = parser.add_subparsers(dest="experiment", required=True, metavar="NAME")
    for module in command_modules(experiment):
        module.add_arguments(experiments.add_parser(module.NAME, help=module.HELP))
