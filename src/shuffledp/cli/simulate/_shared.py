"""What every ``simulate`` protocol shares: options, the synthetic histogram, the run, the JSON.

A simulation runs the protocol's randomizer on ``--n`` synthetic users whose
values follow a Zipf or uniform histogram, shuffles every message (sort by a
random key) and counts them, on the chosen backend
(:class:`~shuffledp.backends.simulation.SimulationPlan`); the estimate and the
privacy report are computed here from the counts, as ``shuffledp run`` does.
The JSON has ``run``'s shape plus a ``simulation`` section (backend, tasks,
seed, the true counts and each replicate's error).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shuffledp._validation import (
    InvalidParameterError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp.cli._common import (
    checked,
    integer_at_least,
    number,
    open_unit_number,
    positive_number,
    writable,
    write_atomically,
)
from shuffledp.data.domains import builtin_domain, builtin_domain_names, parse_domain
from shuffledp.release.document import ReleaseContext
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from shuffledp.protocols.base import ProtocolRun, ShuffleProtocol

__all__ = ["SimulationSetup", "add_simulate_options", "prepare_simulation", "run_simulation"]


def add_simulate_options(parser: argparse.ArgumentParser) -> None:
    """Declare the options every ``simulate`` protocol takes."""
    users = parser.add_argument_group("synthetic users")
    users.add_argument(
        "--n", required=True, type=integer_at_least(1), help="number of users (e.g. 1e8)"
    )
    users.add_argument(
        "--data",
        choices=("zipf", "uniform"),
        default="zipf",
        help="how the users' values are spread over the bins (default zipf)",
    )
    users.add_argument(
        "--zipf-exponent", type=number, default=1.1, help="Zipf exponent (default 1.1)"
    )
    domain = parser.add_argument_group("public domain (one of these is required)")
    source = domain.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--domain-size", type=integer_at_least(2), default=None, help="d bins named 0..d-1"
    )
    source.add_argument("--domain", default=None, help="comma-separated labels, in bin order")
    source.add_argument(
        "--domain-name",
        default=None,
        help=f"a built-in domain: {', '.join(builtin_domain_names())}, or range:LO-HI",
    )
    privacy = parser.add_argument_group("privacy target")
    privacy.add_argument(
        "--epsilon", required=True, type=positive_number, help="target epsilon > 0"
    )
    privacy.add_argument(
        "--delta", required=True, type=open_unit_number, help="target delta in (0, 1)"
    )
    execution = parser.add_argument_group("execution and output")
    execution.add_argument(
        "--backend",
        choices=("local", "spark"),
        default="local",
        help="local: this process (default); spark: a Spark cluster (the spark extra)",
    )
    execution.add_argument(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master for a new session (local[4], spark://host:7077, yarn, ...)",
    )
    execution.add_argument(
        "--partitions",
        type=integer_at_least(1),
        default=None,
        help="tasks per replicate, each with its own seed (default: one per 2^20 users, at "
        "least 8); the messages depend on it, not on the backend",
    )
    execution.add_argument(
        "--replicates",
        type=integer_at_least(1),
        default=1,
        help="independent executions in one job (default 1); the release shows the first, "
        "the simulation section every replicate's error",
    )
    execution.add_argument(
        "--seed",
        type=integer_at_least(0),
        default=None,
        help="reproducible run: the same messages on every backend (default: OS entropy)",
    )
    execution.add_argument("--output", default=None, help="the JSON result (default: stdout)")
    execution.add_argument("--quiet", action="store_true", help="no summary on stderr")


@dataclass(frozen=True)
class SimulationSetup:
    """The checked options of a simulation.

    Attributes:
        n: Users per replicate.
        domain: The labels, or the number of bins.
        domain_source: ``synthetic`` (``--domain-size``), ``declared`` or ``builtin:NAME``.
        histogram: True users per bin.
        epsilon: Target ε.
        delta: Target δ.
        output: Where the JSON goes (None: stdout).
    """

    n: int
    domain: list[str] | int
    domain_source: str
    histogram: NDArray[np.int64]
    epsilon: float
    delta: float
    output: Path | None


def _histogram(args: argparse.Namespace, n: int, d: int) -> NDArray[np.int64]:
    import numpy as np

    from shuffledp.data.synthetic import zipf_histogram

    if args.data == "uniform":
        hist = np.full(d, n // d, dtype=np.int64)
        hist[: n - int(hist.sum())] += 1
        return hist
    exponent = args.zipf_exponent
    if not (isinstance(exponent, float) and math.isfinite(exponent) and exponent > 0):
        raise InvalidParameterError(f"--zipf-exponent must be a number > 0, got {exponent!r}")
    return zipf_histogram(n, d, exponent)


def prepare_simulation(args: argparse.Namespace) -> SimulationSetup:
    """Check every shared option before any work (and before a Spark session starts).

    Raises:
        InvalidParameterError: On the first bad option.
    """
    n = checked(check_int, args.n, "--n", minimum=1)
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    checked(check_int, args.replicates, "--replicates", minimum=1)
    if args.partitions is not None:
        partitions = checked(check_int, args.partitions, "--partitions", minimum=1)
        if partitions > n:
            raise InvalidParameterError(f"--partitions must be at most --n={n}, got {partitions}")
    if args.seed is not None:
        checked(check_int, args.seed, "--seed")
    if args.spark_master is not None and args.backend != "spark":
        raise InvalidParameterError("--spark-master needs --backend spark")
    output = writable(args.output, "--output")
    domain: list[str] | int
    if args.domain_size is not None:
        domain = checked(check_int, args.domain_size, "--domain-size", minimum=2)
        source = "synthetic"
    elif args.domain is not None:
        domain, source = parse_domain(args.domain), "declared"
    else:
        domain, source = builtin_domain(args.domain_name), f"builtin:{args.domain_name}"
    d = domain if isinstance(domain, int) else len(domain)
    return SimulationSetup(n, domain, source, _histogram(args, n, d), epsilon, delta, output)


def run_simulation(
    args: argparse.Namespace,
    setup: SimulationSetup,
    protocol: ShuffleProtocol,
    randomizer: Any,
    to_dict: Callable[[ProtocolRun, ReleaseContext], dict[str, Any]],
) -> int:
    """Simulate on the chosen backend, estimate each replicate, write the JSON and a summary."""
    import numpy as np

    from shuffledp._optional import require
    from shuffledp.protocols.base import ProtocolRun

    require("pyarrow", extra="parquet")
    from shuffledp.backends.base import make_backend
    from shuffledp.backends.simulation import SimulationPlan

    plan = SimulationPlan.create(
        randomizer,
        setup.histogram,
        partitions=args.partitions,
        replicates=args.replicates,
        seed=args.seed,
    )
    started = time.perf_counter()
    backend = make_backend(args.backend, spark_master=args.spark_master)
    try:
        setup_seconds = time.perf_counter() - started
        counts = backend.simulate(plan)
    finally:
        backend.close()
    seconds = time.perf_counter() - started
    statistics = counts.batch_counts()
    labels = None if isinstance(setup.domain, int) else setup.domain
    estimates = [protocol.estimate(statistic, labels) for statistic in statistics]
    truth = setup.histogram.astype(np.float64)
    linf = [float(np.max(np.abs(e.counts - truth))) for e in estimates]
    rmse = [float(np.sqrt(np.mean((e.counts - truth) ** 2))) for e in estimates]
    run = ProtocolRun(
        protocol.name,
        estimates[0],
        protocol.privacy_report(),
        "message",
        int(statistics[0].sum()),
        statistics[0],
    )
    data = "uniform" if args.data == "uniform" else f"zipf (exponent {args.zipf_exponent:g})"
    context = ReleaseContext(
        domain_source=setup.domain_source,
        assumptions=(
            f"synthetic users, one value each ({data}); every user follows the protocol; "
            "the shuffle is simulated (a sort by random keys)",
        ),
    )
    result = to_dict(run, context)
    result["schema"] = schema_id("simulation")
    result["simulation"] = {
        "backend": args.backend,
        "spark_master": args.spark_master,
        "replicates": plan.replicates,
        "partitions": plan.partitions,
        "seed": args.seed,
        "seed_entropy": str(plan.entropy),
        "data": data,
        "true_counts": [int(c) for c in setup.histogram],
        "messages": [int(s.sum()) for s in statistics],
        "linf_error": linf,
        "rmse": rmse,
        "mean_linf_error": float(np.mean(linf)),
        "seconds": seconds,
        "startup_seconds": setup_seconds,
    }
    text = json.dumps(result, indent=2) + "\n"
    if setup.output is None:
        sys.stdout.write(text)
    else:
        write_atomically(setup.output, text)
    if not args.quiet:
        messages = int(statistics.sum())
        print(
            f"shuffledp simulate {protocol.name} [{args.backend}]: {plan.replicates} x "
            f"{setup.n} users, {messages} messages in {plan.tasks} task(s), {seconds:.1f} s "
            f"({setup_seconds:.1f} s start-up, {messages / max(seconds - setup_seconds, 1e-9):.3g}"
            f" messages/s); mean l-inf error {np.mean(linf):.4g}; result: "
            f"{setup.output or 'stdout'}",
            file=sys.stderr,
        )
    return 0
