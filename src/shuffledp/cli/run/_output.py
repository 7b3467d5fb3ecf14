"""Where a run's release goes: the plot (if asked), the JSON (a file or stdout), the summary.

Nothing is written before the plot succeeds; a JSON file is written
atomically. The summary on stderr states what the run adjusted, with counts
(the operator's), and what the guarantee does not cover.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp._wording import command_line_document, for_command_line
from shuffledp.cli._common import write_atomically

if TYPE_CHECKING:
    from shuffledp.analyzers.estimate import HistogramEstimate
    from shuffledp.cli.run._input import RunInput
    from shuffledp.protocols.base import ProtocolRun

__all__ = ["finish_run", "write_release"]


def _summary(result: dict[str, Any], data: RunInput, destination: str) -> list[str]:
    privacy = result["privacy"]
    lines = [
        f"shuffledp run {result['protocol']}: {result['n']} users, {len(result['domain'])} bins "
        f"(domain: {result['domain_source']}), ({privacy['epsilon']:g}, "
        f"{privacy['delta']:.3g})-DP certified [{privacy['method']}]; result: {destination}"
    ]
    if data.loaded.user_column is None:
        lines.append("assumed one row per user (give --user-column to enforce one value per user)")
    calibration_notes = [note for note in result["notes"] if note not in data.release_notes]
    lines += [
        f"note: {for_command_line(note)}" for note in (*data.operator_notes, *calibration_notes)
    ]
    lines += [
        f"warning: not covered by the guarantee: {for_command_line(item)}"
        for item in privacy["not_covered"]
    ]
    return lines


def finish_run(
    result: dict[str, Any],
    run: ProtocolRun,
    data: RunInput,
    args: argparse.Namespace,
    output: Path | None,
    plot: Path | None,
    title: str,
) -> int:
    """Plot (if asked), then write the JSON result; nothing is written before both succeed."""
    result["input"] = {
        "file": str(args.input),
        "column": args.column,
        "user_column": args.user_column,
    }
    destination = write_release(result, run.estimate, output, plot, title)
    if not args.quiet:
        for line in _summary(result, data, destination):
            print(line, file=sys.stderr)
    return 0


def write_release(
    result: dict[str, Any],
    estimate: HistogramEstimate,
    output: Path | None,
    plot: Path | None,
    title: str,
    ylabel: str = "users",
) -> str:
    """Plot ``estimate`` (if asked), then write ``result`` as JSON; return where it went.

    The JSON goes to ``output`` (atomically) or to stdout; nothing is written
    before the plot succeeds. ``ylabel`` says what the plot's counts count;
    the labels' axis is named after the input column (``result["input"]``).
    """
    if plot is not None:
        from shuffledp.plotting import plot_histogram_estimate

        given = result.get("input", {})
        plot_histogram_estimate(
            estimate,
            plot,
            title=title,
            ylabel=ylabel,
            label_name=str(given.get("column") or given.get("item_column") or "value"),
            listing_note="all labels are in the JSON release",
        )
    text = json.dumps(command_line_document(result), indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
        destination = "stdout"
    else:
        write_atomically(output, text)
        destination = str(output)
    if plot is not None:
        destination += f", plot {plot}"
    return destination
