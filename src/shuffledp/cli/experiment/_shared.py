"""What the ``experiment`` commands share: checking their common options before any work."""

from __future__ import annotations

import argparse

from shuffledp._validation import check_int
from shuffledp.cli._common import checked

__all__ = ["run_options"]


def run_options(args: argparse.Namespace) -> tuple[int, int | None, int | None]:
    """Check the plotting backend (unless ``--no-plots``) and return seed, repetitions, workers.

    ``None`` repetitions or workers leave the experiment's default.
    """
    if not args.no_plots:
        from shuffledp.plotting import require_matplotlib

        require_matplotlib()
    seed = checked(check_int, args.seed, "--seed", minimum=0)
    reps = (
        None
        if args.repetitions is None
        else checked(check_int, args.repetitions, "--repetitions", minimum=1)
    )
    workers = (
        None if args.workers is None else checked(check_int, args.workers, "--workers", minimum=1)
    )
    return seed, reps, workers
