"""What every ``run`` protocol shares: the data options, loading, and writing the result."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from shuffledp import __version__
from shuffledp._validation import check_int
from shuffledp.cli._common import checked, integer, number, writable, write_atomically
from shuffledp.data.encoding import EncodedColumn, encode_values, parse_domain
from shuffledp.data.loaders import read_column
from shuffledp.protocols.base import ProtocolRun

__all__ = ["add_run_options", "finish_run", "load_encoded", "prepare_run", "run_to_dict"]


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """Declare the options every ``run`` protocol takes."""
    parser.add_argument("--input", required=True, help="CSV (with header) or Parquet file")
    parser.add_argument("--column", required=True, help="column holding each user's value")
    parser.add_argument("--epsilon", required=True, type=number)
    parser.add_argument("--delta", required=True, type=number)
    parser.add_argument("--domain", default=None, help="comma-separated values, in bin order")
    parser.add_argument(
        "--seed", type=integer, default=None, help="reproducible run (seeded shuffle)"
    )
    parser.add_argument("--path", choices=("message", "count"), default="message")
    parser.add_argument(
        "--output", default=None, help="write the JSON result here (default: stdout)"
    )
    parser.add_argument("--plot", default=None, help="write a bar chart with error bars (PNG)")


def prepare_run(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """Check the options every ``run`` shares; return the output and plot paths."""
    if args.seed is not None:
        checked(check_int, args.seed, "--seed")
    output = writable(args.output, "--output")
    plot = writable(args.plot, "--plot")
    if plot is not None:
        from shuffledp.plotting import require_matplotlib

        require_matplotlib()
    return output, plot


def load_encoded(args: argparse.Namespace) -> EncodedColumn:
    """Read the input column and encode it over the domain."""
    domain = parse_domain(args.domain) if args.domain is not None else None
    values = read_column(args.input, args.column)
    return encode_values(values, domain)


def run_to_dict(
    run: ProtocolRun,
    *,
    target_delta: float,
    calibration: str,
    parameters: dict[str, Any],
    expected_messages_per_user: float | None = None,
    local_epsilon: float | None = None,
) -> dict[str, Any]:
    """Return the JSON result of a run."""
    privacy = run.privacy.to_dict()
    privacy["target_delta"] = target_delta
    privacy["calibration"] = calibration
    if local_epsilon is not None:
        privacy["local_epsilon"] = local_epsilon
    out = {
        "protocol": run.protocol,
        "shuffledp_version": __version__,
        "n": run.estimate.n,
        "domain": list(run.estimate.domain),
        "path": run.path,
        "estimate": run.estimate.to_dict(),
        "privacy": privacy,
        "parameters": parameters,
        "messages": run.messages,
        "messages_per_user": run.messages_per_user,
    }
    if expected_messages_per_user is not None:
        out["expected_messages_per_user"] = expected_messages_per_user
    return out


def finish_run(
    result: dict[str, Any],
    run: ProtocolRun,
    args: argparse.Namespace,
    output: Path | None,
    plot: Path | None,
    title: str,
) -> int:
    """Plot (if asked), then write the JSON result; nothing is written before both succeed."""
    result["input"] = {"file": str(args.input), "column": args.column}
    if plot is not None:
        from shuffledp.plotting import plot_histogram_estimate

        plot_histogram_estimate(run.estimate, plot, title=title)
    text = json.dumps(result, indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomically(output, text)
    return 0
