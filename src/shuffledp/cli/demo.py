"""``shuffledp demo``: FLIP end to end on built-in Zipf data (what ``make demo`` runs).

``--deploy`` runs it through the real services instead (analyzer and shuffler
as child processes on loopback, HTTP, HPKE, SQLite): see
:mod:`shuffledp.service.deploy_demo`.
"""

from __future__ import annotations

import argparse
import json

from shuffledp._files import make_output_dir
from shuffledp._validation import check_delta, check_epsilon, check_int
from shuffledp.cli._common import (
    checked,
    existing_dir_or_new,
    integer_at_least,
    open_unit_number,
    positive_number,
    write_atomically,
)
from shuffledp.release.document import ReleaseContext
from shuffledp.release.runs import flip_run_to_dict
from shuffledp.schemas import schema_id

NAME = "demo"
HELP = "FLIP end to end on built-in Zipf data"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options."""
    parser.add_argument(
        "--n",
        type=integer_at_least(2),
        default=None,
        help="users (default 100000; 2000 with --deploy)",
    )
    parser.add_argument(
        "--domain-size",
        type=integer_at_least(2),
        default=100,
        help="number of values (default 100)",
    )
    parser.add_argument(
        "--epsilon", type=positive_number, default=1.0, help="target epsilon (default 1)"
    )
    parser.add_argument(
        "--delta", type=open_unit_number, default=1e-6, help="target delta (default 1e-6)"
    )
    parser.add_argument(
        "--seed", type=integer_at_least(0), default=None, help="reproducible run (seeded shuffle)"
    )
    parser.add_argument(
        "--output-dir",
        default="demo-output",
        help="where the plot and JSON go (default demo-output)",
    )
    parser.add_argument(
        "--deploy",
        action="store_true",
        help="run through the real services: analyzer and shuffler as local processes, "
        "encrypted client submissions over HTTP (needs the service extra)",
    )
    parser.set_defaults(handler=execute)


def execute(args: argparse.Namespace) -> int:
    """Run FLIP on Zipf data and print how close the estimate is."""
    default_n = 2000 if args.deploy else 100_000
    n = checked(check_int, default_n if args.n is None else args.n, "--n", minimum=2)
    d = checked(check_int, args.domain_size, "--domain-size", minimum=2)
    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    if args.seed is not None:
        checked(check_int, args.seed, "--seed")
    out_dir = existing_dir_or_new(args.output_dir, "--output-dir")
    if args.deploy:
        from shuffledp.service._extra import require_service_extra

        require_service_extra()
        from shuffledp.service.deploy_demo import run_deploy_demo

        return run_deploy_demo(n, d, epsilon, delta, args.seed, out_dir)
    from shuffledp.plotting import Z95, plot_histogram_estimate, require_matplotlib

    require_matplotlib()
    import numpy as np

    from shuffledp._rng import SEEDED_NOT_COVERED, child_seeds
    from shuffledp.analyzers.top_t import top_t, top_t_metrics
    from shuffledp.data.synthetic import zipf_values
    from shuffledp.protocols.flip import FlipProtocol

    # Independent streams for the synthetic data and the protocol.
    data_seed, run_seed = child_seeds(args.seed, 2)
    values = zipf_values(n, d, seed=data_seed)
    truth = np.bincount(values, minlength=d)
    domain = [f"v{j:03d}" for j in range(d)]
    protocol = FlipProtocol.calibrated(n, domain, epsilon, delta)
    run = protocol.run(values, path="message", seed=run_seed)
    est = run.estimate
    assert est.stderr is not None
    cal = protocol.calibration
    print(f"FLIP demo: n={n} users, d={d} values (Zipf), message-level run with a real shuffle")
    print(
        f"privacy: ({epsilon:g}, {run.privacy.delta:.3g})-DP certified "
        f"[{run.privacy.method}], lower bound delta {cal.delta_lower:.3g}"
    )
    print(
        f"parameters: q={cal.q:.4g}, k={cal.fake_users} fake users per user, "
        f"{run.messages_per_user:.3f} messages per user"
    )
    print()
    print(f"{'value':>7s}{'true':>9s}{'estimate':>11s}{'± 95%':>9s}{'error':>9s}")
    shown = top_t(truth, min(10, d))
    for j in shown[np.argsort(-truth[shown], kind="stable")]:
        err = est.counts[j] - truth[j]
        half = Z95 * est.stderr[j]
        print(f"{domain[j]:>7s}{truth[j]:>9d}{est.counts[j]:>11.1f}{half:>9.1f}{err:>9.1f}")
    linf = est.linf_error(truth)
    print()
    print(
        f"l-inf error {linf:.1f} users (expected {cal.linf_error:.1f}); "
        f"per-bin stderr {cal.stderr:.2f}"
    )
    t = min(10, d)
    metrics = top_t_metrics(top_t(est.counts, t), truth, t)
    print(
        f"top-{t}: precision {metrics.precision:.2f}, recall {metrics.recall:.2f}, "
        f"alpha {metrics.alpha:g}"
    )
    make_output_dir(out_dir)
    plot_path = plot_histogram_estimate(
        est,
        out_dir / "flip_demo.png",
        true_counts=truth,
        title=(
            f"FLIP demo: n={n}, ε={epsilon:g}, δ={run.privacy.delta:.2g} "
            "(blue: estimate, orange: truth)"
        ),
        listing_note="all labels are in flip_demo.json",
    )
    context = ReleaseContext(
        domain_source="synthetic",
        assumptions=("synthetic users, one value each (Zipf); the shuffle is real",),
        not_covered=() if args.seed is None else (SEEDED_NOT_COVERED,),
        seed=args.seed,
    )
    result = flip_run_to_dict(run, cal, context)
    result["schema"] = schema_id("demo")
    result["true_counts"] = [int(c) for c in truth]
    result["linf_error"] = linf
    write_atomically(out_dir / "flip_demo.json", json.dumps(result, indent=2) + "\n")
    print(f"wrote {plot_path} and {out_dir / 'flip_demo.json'}")
    return 0
