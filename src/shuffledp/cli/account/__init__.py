"""``shuffledp account QUESTION``: privacy accounting and calibration (one module per question)."""

from __future__ import annotations

import argparse

from shuffledp.cli._registry import command_modules

NAME = "account"
HELP = "privacy accounting and calibration"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one sub-command per module of this package."""
    from shuffledp.cli import account

    questions = parser.add_subparsers(dest="protocol", required=True, metavar="QUESTION")
    for module in command_modules(account):
        module.add_arguments(questions.add_parser(module.NAME, help=module.HELP))
