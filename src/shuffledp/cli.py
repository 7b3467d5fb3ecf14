"""The ``shuffledp`` command line.

Every error a user can cause (bad parameter, missing file or column, value
outside the domain, missing optional dependency) is printed as one line on
stderr with exit code 2, and no output file is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from shuffledp import __version__
from shuffledp._validation import (
    InvalidParameterError,
    ShuffleDPError,
    check_delta,
    check_epsilon,
    check_int,
)
from shuffledp.accounting import api as accounting_api
from shuffledp.accounting import methods as accounting_methods
from shuffledp.accounting.api import AccountingResult
from shuffledp.analyzers.krr_estimators import ESTIMATORS
from shuffledp.analyzers.top_t import top_t, top_t_metrics
from shuffledp.data.encoding import EncodedColumn, encode_values, parse_domain
from shuffledp.data.loaders import read_column
from shuffledp.data.synthetic import zipf_values
from shuffledp.protocols.base import ProtocolRun
from shuffledp.protocols.flip import (
    CALIBRATION_METHODS,
    FlipCalibration,
    FlipProtocol,
    calibrate_flip,
    default_fake_users,
)
from shuffledp.protocols.krr import KRRProtocol, calibrate_krr

__all__ = ["main"]


class _UsageError(Exception):
    """Raised by the argument parser instead of exiting, to keep errors on one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}")


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _checked(check: Callable[..., Any], value: Any, flag: str, **kwargs: Any) -> Any:
    """Run a validation function so that its message names the command-line flag."""
    return check(value, flag, **kwargs)


def _writable(path: str | None, flag: str) -> Path | None:
    if path is None:
        return None
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidParameterError(f"{flag}: directory {str(parent)!r} does not exist")
    if out.is_dir():
        raise InvalidParameterError(f"{flag}: {str(out)!r} is a directory")
    return out


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.", dir=path.parent if str(path.parent) else "."
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _run_to_dict(
    run: ProtocolRun,
    *,
    target_delta: float,
    calibration: str,
    parameters: dict[str, Any],
    expected_messages_per_user: float | None = None,
    local_epsilon: float | None = None,
) -> dict[str, Any]:
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


def _flip_run_to_dict(run: ProtocolRun, calibration: FlipCalibration) -> dict[str, Any]:
    return _run_to_dict(
        run,
        target_delta=calibration.target_delta,
        calibration=calibration.method,
        parameters={
            "q": calibration.q,
            "k": calibration.fake_users,
            "calibration": calibration.method,
            "local_epsilon": calibration.local_epsilon,
        },
        expected_messages_per_user=calibration.expected_messages_per_user,
    )


# --------------------------------------------------------------------------- run


def _prepare_run(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """Check the options every ``run`` shares; return the output and plot paths."""
    if args.seed is not None:
        _checked(check_int, args.seed, "--seed")
    output = _writable(args.output, "--output")
    plot = _writable(args.plot, "--plot")
    if plot is not None:
        from shuffledp.plotting import require_matplotlib

        require_matplotlib()
    return output, plot


def _load_encoded(args: argparse.Namespace) -> EncodedColumn:
    domain = parse_domain(args.domain) if args.domain is not None else None
    values = read_column(args.input, args.column)
    return encode_values(values, domain)


def _finish_run(
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
        _write_atomically(output, text)
    return 0


def _cmd_run_flip(args: argparse.Namespace) -> int:
    epsilon = _checked(check_epsilon, args.epsilon, "--epsilon")
    delta = _checked(check_delta, args.delta, "--delta")
    fake = None if args.fake_users is None else _checked(check_int, args.fake_users, "--fake-users")
    output, plot = _prepare_run(args)
    encoded = _load_encoded(args)
    n = len(encoded.indices)
    protocol = FlipProtocol.calibrated(
        n, len(encoded.domain), epsilon, delta, fake_users=fake, calibration=args.calibration
    )
    run = protocol.run(encoded.indices, path=args.path, seed=args.seed, domain=encoded.domain)
    title = f"FLIP estimate of {args.column!r} (n={n}, ε={epsilon:g}, δ={run.privacy.delta:.2g})"
    return _finish_run(_flip_run_to_dict(run, protocol.calibration), run, args, output, plot, title)


def _cmd_run_krr(args: argparse.Namespace) -> int:
    epsilon = _checked(check_epsilon, args.epsilon, "--epsilon")
    delta = _checked(check_delta, args.delta, "--delta")
    epsilon0 = (
        None if args.epsilon0 is None else _checked(check_epsilon, args.epsilon0, "--epsilon0")
    )
    output, plot = _prepare_run(args)
    encoded = _load_encoded(args)
    n = len(encoded.indices)
    protocol = KRRProtocol.calibrated(
        n, len(encoded.domain), epsilon, delta, epsilon0=epsilon0, estimator=args.estimator
    )
    run = protocol.run(encoded.indices, path=args.path, seed=args.seed, domain=encoded.domain)
    cal = protocol.calibration
    result = _run_to_dict(
        run,
        target_delta=delta,
        calibration=cal.method,
        parameters=protocol.parameters(),
        local_epsilon=cal.epsilon0,
    )
    title = (
        f"k-RR ({args.estimator}) estimate of {args.column!r} "
        f"(n={n}, ε={epsilon:g}, δ={run.privacy.delta:.2g}, ε₀={cal.epsilon0:.3g})"
    )
    return _finish_run(result, run, args, output, plot, title)


# ----------------------------------------------------------------------- account


def _fmt(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return str(value)
    if abs(value) >= 1e4 or abs(value) < 1e-3:
        return f"{value:.3e}"
    return f"{value:.4g}"


def _cmd_account_krr(args: argparse.Namespace) -> int:
    n = _checked(check_int, args.n, "--n", minimum=1)
    k = _checked(check_int, args.domain_size, "--domain-size", minimum=2)
    epsilon = _checked(check_epsilon, args.epsilon, "--epsilon")
    delta = _checked(check_delta, args.delta, "--delta")
    exact = calibrate_krr(n, k, epsilon, delta)
    # The paper's experiments run k-RR at epsilon0 = epsilon; certify what that gives.
    paper = calibrate_krr(n, k, epsilon, delta, epsilon0=epsilon).to_dict()
    if args.json:
        out = {
            "n": n,
            "domain_size": k,
            "epsilon": epsilon,
            "target_delta": delta,
            "exact": exact.to_dict(),
            "paper_setting": paper,
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    print(f"k-RR at n={n}, k={k}, epsilon={epsilon:g}, target delta={delta:g}")
    print(f"{'':40s}{'epsilon0 = epsilon':>20s}{'exact':>14s}")
    rows = [
        ("local epsilon0", "epsilon0"),
        ("certified delta at epsilon", "delta"),
        ("delta of a concrete pair (lower bound)", "delta_lower"),
        ("per-bin standard error (uniform data)", "stderr"),
        ("expected l-inf error (counts)", "linf_error"),
    ]
    exact_d = exact.to_dict()
    for label, key in rows:
        print(f"{label:40s}{_fmt(paper[key]):>20s}{_fmt(exact_d[key]):>14s}")
    print(
        f"exact calibration: epsilon0 {exact.epsilon0:.3g} instead of {epsilon:g}, "
        f"standard error {paper['stderr'] / exact.stderr:.2f}x smaller"
    )
    return 0


def _cmd_account_flip(args: argparse.Namespace) -> int:
    n = _checked(check_int, args.n, "--n", minimum=1)
    d = _checked(check_int, args.domain_size, "--domain-size", minimum=2)
    epsilon = _checked(check_epsilon, args.epsilon, "--epsilon")
    delta = _checked(check_delta, args.delta, "--delta")
    k = (
        default_fake_users(n, epsilon, delta)
        if args.fake_users is None
        else _checked(check_int, args.fake_users, "--fake-users")
    )
    exact = calibrate_flip(n, d, epsilon, delta, fake_users=k, method="exact")
    paper: FlipCalibration | None
    paper_note = ""
    try:
        paper = calibrate_flip(n, d, epsilon, delta, fake_users=k, method="paper")
    except InvalidParameterError as exc:
        paper, paper_note = None, str(exc)
    if args.json:
        out: dict[str, Any] = {
            "n": n,
            "domain_size": d,
            "epsilon": epsilon,
            "target_delta": delta,
            "paper": None if paper is None else paper.to_dict(),
            "exact": exact.to_dict(),
        }
        if paper is None:
            out["paper_unavailable"] = paper_note
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    rows: list[tuple[str, Callable[[FlipCalibration], str]]] = [
        ("flip probability q", lambda c: _fmt(c.q)),
        ("fake users per user k", lambda c: str(c.fake_users)),
        ("certified delta at epsilon", lambda c: _fmt(c.delta)),
        ("delta of a concrete pair (lower bound)", lambda c: _fmt(c.delta_lower)),
        ("expected l-inf error (counts)", lambda c: _fmt(c.linf_error)),
        ("per-bin standard error (counts)", lambda c: _fmt(c.stderr)),
        ("expected messages per user", lambda c: _fmt(c.expected_messages_per_user)),
        ("local epsilon of one report", lambda c: _fmt(c.local_epsilon)),
    ]
    print(f"FLIP at n={n}, d={d}, epsilon={epsilon:g}, target delta={delta:g}")
    print(f"{'':40s}{'paper (Claim III.1)':>22s}{'exact':>14s}")
    for label, get in rows:
        left = get(paper) if paper is not None else "n/a"
        print(f"{label:40s}{left:>22s}{get(exact):>14s}")
    if paper is None:
        print(f"paper calibration unavailable: {paper_note}")
    else:
        print(
            f"exact calibration: q {paper.q / exact.q:.2f}x smaller, "
            f"expected l-inf error {paper.linf_error / exact.linf_error:.2f}x smaller"
        )
    return 0


_MECHANISM_OPTIONS = (
    ("epsilon0", "epsilon0"),
    ("k", "k"),
    ("q", "q"),
    ("fake_users", "fake_users"),
    ("domain_size", "domain_size"),
    ("report_probability", "report_probability"),
    ("blanket_messages", "blanket_messages"),
    ("blanket_probability", "blanket_probability"),
    ("items", "items"),
    ("n_x0", "n_x0"),
)


def _mechanism_params(args: argparse.Namespace) -> dict[str, Any]:
    params = {
        key: getattr(args, attr)
        for key, attr in _MECHANISM_OPTIONS
        if getattr(args, attr, None) is not None
    }
    if args.mechanism in ("generic", "krr") and "epsilon0" not in params:
        raise InvalidParameterError(f"--epsilon0 is required for the {args.mechanism} mechanism")
    if args.mechanism == "krr" and "k" not in params:
        raise InvalidParameterError("--k (the domain size of k-RR) is required for --mechanism krr")
    return params


def _print_rows(rows: list[AccountingResult], as_json: bool, header: str) -> None:
    if as_json:
        sys.stdout.write(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
        return
    print(header)
    print(f"{'method':22s}{'bound':>14s}{'epsilon':>12s}{'delta':>12s}  note")
    for r in rows:
        eps = "-" if r.epsilon is None else _fmt(r.epsilon)
        dlt = "-" if r.delta is None else _fmt(r.delta)
        kind = r.bound.value if r.certified else f"{r.bound.value}*"
        print(f"{r.method:22s}{kind:>14s}{eps:>12s}{dlt:>12s}  {r.note}")
    if any(not r.certified for r in rows):
        print("* not certified at these parameters (see the note); never used to calibrate")


def _account_rows(
    args: argparse.Namespace, *, epsilon: float | None, delta: float | None
) -> list[AccountingResult]:
    n = _checked(check_int, args.n, "--n", minimum=1)
    params = _mechanism_params(args)
    if args.method == "all":
        return accounting_api.compare(
            epsilon=epsilon, delta=delta, n=n, mechanism=args.mechanism, **params
        )
    if epsilon is not None:
        return [
            accounting_api.delta(
                epsilon, n=n, mechanism=args.mechanism, method=args.method, **params
            )
        ]
    assert delta is not None
    return [
        accounting_api.amplified_epsilon(
            delta, n=n, mechanism=args.mechanism, method=args.method, **params
        )
    ]


def _cmd_account_amplify(args: argparse.Namespace) -> int:
    delta = _checked(check_delta, args.delta, "--delta")
    rows = _account_rows(args, epsilon=None, delta=delta)
    _print_rows(rows, args.json, f"epsilon at delta={delta:g} ({args.mechanism}, n={args.n})")
    return 0


def _cmd_account_delta(args: argparse.Namespace) -> int:
    epsilon = _checked(check_epsilon, args.epsilon, "--epsilon")
    rows = _account_rows(args, epsilon=epsilon, delta=None)
    _print_rows(rows, args.json, f"delta at epsilon={epsilon:g} ({args.mechanism}, n={args.n})")
    return 0


def _cmd_account_calibrate(args: argparse.Namespace) -> int:
    epsilon = _checked(check_epsilon, args.epsilon, "--epsilon")
    delta = _checked(check_delta, args.delta, "--delta")
    n = _checked(check_int, args.n, "--n", minimum=1)
    params = {
        key: getattr(args, attr)
        for key, attr in _MECHANISM_OPTIONS
        if getattr(args, attr, None) is not None
    }
    method = "best" if args.method == "all" else args.method
    result = accounting_api.calibrate(
        epsilon,
        delta,
        n=n,
        mechanism=args.mechanism,
        method=method,
        parameter=args.parameter,
        **params,
    )
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        r = result.result
        print(
            f"{result.parameter} = {result.value:.6g} ({r.method}: certified delta "
            f"{_fmt(r.delta or 0.0)} at epsilon={epsilon:g}, n={n})"
        )
    return 0


def _add_mechanism_options(parser: argparse.ArgumentParser, *, calibrating: bool = False) -> None:
    parser.add_argument("--n", required=True, type=_int, help="number of users")
    parser.add_argument("--mechanism", choices=accounting_methods.MECHANISMS, default="generic")
    parser.add_argument(
        "--method",
        default="best" if calibrating else "all",
        help="a method name, 'all' (one row each) or 'best' (tightest certified upper bound)",
    )
    if not calibrating:
        parser.add_argument("--epsilon0", type=_float, help="local epsilon (generic, krr)")
    parser.add_argument("--k", type=_int, help="k-RR domain size")
    parser.add_argument("--q", type=_float, help="FLIP flip probability")
    parser.add_argument("--fake-users", type=_int, help="FLIP fake users per user")
    parser.add_argument("--domain-size", type=_int, help="FLIP bins / Poisson items d")
    parser.add_argument("--report-probability", type=_float, help="Poisson randomizer lambda")
    parser.add_argument("--blanket-messages", type=_int, help="Poisson: potential blanket messages")
    parser.add_argument("--blanket-probability", type=_float, help="Poisson: each sent with this")
    parser.add_argument("--items", type=_int, help="Poisson: items per user")
    parser.add_argument("--n-x0", type=_int, help="k-RR paper formula: other users holding x0")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _cmd_experiment_krr(args: argparse.Namespace) -> int:
    from shuffledp.data.real import BoundingBox, load_flights_destinations, load_gowalla_cells
    from shuffledp.experiments.krr_vs_gaussian import (
        DataSet,
        ExperimentConfig,
        run_krr_vs_gaussian,
    )
    from shuffledp.plotting import require_matplotlib

    require_matplotlib()
    seed = _checked(check_int, args.seed, "--seed")
    reps = (
        _checked(check_int, args.repetitions, "--repetitions", minimum=1)
        if args.repetitions
        else None
    )
    out_dir = Path(args.output_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidParameterError(f"--output-dir: {str(out_dir)!r} is not a directory")
    config = ExperimentConfig.quick(seed) if args.quick else ExperimentConfig(seed=seed)
    if args.data != "synthetic":
        sizes = (10_000,) if args.quick else (10_000, 100_000)
        extra: list[DataSet] = []
        if args.data == "flights":
            for size in sizes:
                enc = load_flights_destinations(sample=size, seed=seed)
                extra.append(DataSet(f"flights dest (n={size})", enc.histogram, enc.domain))
        else:
            if args.gowalla_path is None:
                raise InvalidParameterError("--data gowalla needs --gowalla-path FILE")
            grid = tuple(
                _checked(check_int, int(v), "--grid", minimum=1) for v in args.grid.split(",")
            )
            if len(grid) != 2:
                raise InvalidParameterError(f"--grid must be ROWS,COLS, got {args.grid!r}")
            enc = load_gowalla_cells(
                args.gowalla_path, BoundingBox.parse(args.bbox), (grid[0], grid[1])
            )
            extra.append(DataSet(f"gowalla (n={len(enc.indices)})", enc.histogram, enc.domain))
        config = ExperimentConfig(
            ks=(),
            ns=(),
            epsilon0=config.epsilon0,
            epsilons=config.epsilons,
            repetitions=config.repetitions,
            seed=seed,
            extra_data=tuple(extra),
        )
    if reps is not None:
        config = ExperimentConfig(
            ks=config.ks,
            ns=config.ns,
            epsilon0=config.epsilon0,
            epsilons=config.epsilons,
            repetitions=reps,
            seed=seed,
            extra_data=config.extra_data,
        )
    result = run_krr_vs_gaussian(config, out_dir)
    eps_show = 1.0 if 1.0 in config.epsilons else min(config.epsilons)
    print(
        f"k-RR (epsilon0={config.epsilon0:g}) vs central mechanisms; median TV distance at "
        f"epsilon={eps_show:g} over {config.repetitions} runs"
    )
    print(
        f"{'data':28s}{'delta source':>14s}{'delta':>11s}{'gaussian':>10s}{'laplace':>10s}"
        f"{'shuffle':>10s}{'shuf+INV':>10s}"
    )
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for row in result["summary"]:
        if row["epsilon"] == eps_show:
            entry = table.setdefault((row["data"], row["delta_source"]), {"delta": row["delta"]})
            entry[row["mechanism"]] = row["median_tv"]
    for (name, source), entry in table.items():
        cells = "".join(
            f"{_fmt(entry[m]) if m in entry else '-':>10s}"
            for m in ("gaussian", "laplace", "shuffle", "shuffle+INV")
        )
        print(f"{name:28s}{source:>14s}{_fmt(entry['delta']):>11s}{cells}")
    print("paper: delta from the k-RR paper's printed formula (a reproduction, not a guarantee);")
    print("exact: the certified worst-case delta of the shuffled k-RR")
    print("       (what the comparison really is).")
    print(
        "At epsilon = epsilon0 both deltas are 0: only the Laplace mechanism is comparable there."
    )
    for path in result["files"]:
        print(f"wrote {path}")
    return 0


# -------------------------------------------------------------------------- demo


def _cmd_demo(args: argparse.Namespace) -> int:
    n = _checked(check_int, args.n, "--n", minimum=2)
    d = _checked(check_int, args.domain_size, "--domain-size", minimum=2)
    epsilon = _checked(check_epsilon, args.epsilon, "--epsilon")
    delta = _checked(check_delta, args.delta, "--delta")
    if args.seed is not None:
        _checked(check_int, args.seed, "--seed")
    out_dir = Path(args.output_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidParameterError(f"--output-dir: {str(out_dir)!r} is not a directory")
    from shuffledp.plotting import Z95, plot_histogram_estimate, require_matplotlib

    require_matplotlib()
    values = zipf_values(n, d, seed=args.seed)
    truth = np.bincount(values, minlength=d)
    domain = [f"v{j:03d}" for j in range(d)]
    protocol = FlipProtocol.calibrated(n, d, epsilon, delta)
    run = protocol.run(values, path="message", seed=args.seed, domain=domain)
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
    out_dir.mkdir(parents=True, exist_ok=True)
    plot_path = plot_histogram_estimate(
        est,
        out_dir / "flip_demo.png",
        true_counts=truth,
        title=(
            f"FLIP demo: n={n}, ε={epsilon:g}, δ={run.privacy.delta:.2g} "
            "(bars: estimate, red: truth)"
        ),
    )
    result = _flip_run_to_dict(run, cal)
    result["true_counts"] = [int(c) for c in truth]
    result["linf_error"] = linf
    _write_atomically(out_dir / "flip_demo.json", json.dumps(result, indent=2) + "\n")
    print(f"wrote {plot_path} and {out_dir / 'flip_demo.json'}")
    return 0


# ------------------------------------------------------------------------ parser


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, help="CSV (with header) or Parquet file")
    parser.add_argument("--column", required=True, help="column holding each user's value")
    parser.add_argument("--epsilon", required=True, type=_float)
    parser.add_argument("--delta", required=True, type=_float)
    parser.add_argument("--domain", default=None, help="comma-separated values, in bin order")
    parser.add_argument("--seed", type=_int, default=None, help="reproducible run (seeded shuffle)")
    parser.add_argument("--path", choices=("message", "count"), default="message")
    parser.add_argument(
        "--output", default=None, help="write the JSON result here (default: stdout)"
    )
    parser.add_argument("--plot", default=None, help="write a bar chart with error bars (PNG)")


def _build_parser() -> _Parser:
    parser = _Parser(prog="shuffledp", description="Differential privacy in the shuffle model.")
    parser.add_argument("--version", action="version", version=f"shuffledp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run a protocol on a data file")
    run_protocols = run.add_subparsers(dest="protocol", required=True, metavar="PROTOCOL")
    flip = run_protocols.add_parser("flip", help="FLIP: bit flipping plus fake users")
    _add_run_options(flip)
    flip.add_argument("--fake-users", type=_int, default=None, help="k (default: 100 or more)")
    flip.add_argument("--calibration", choices=CALIBRATION_METHODS, default="exact")
    flip.set_defaults(handler=_cmd_run_flip)

    krr = run_protocols.add_parser("krr", help="k-randomized response, one message per user")
    _add_run_options(krr)
    krr.add_argument(
        "--epsilon0",
        type=_float,
        default=None,
        help="local epsilon (default: the largest the target allows)",
    )
    krr.add_argument("--estimator", choices=ESTIMATORS, default="inversion")
    krr.set_defaults(handler=_cmd_run_krr)

    account = commands.add_parser("account", help="privacy accounting and calibration")
    account_protocols = account.add_subparsers(dest="protocol", required=True, metavar="QUESTION")
    aflip = account_protocols.add_parser("flip", help="FLIP: paper vs exact calibration")
    aflip.add_argument("--n", required=True, type=_int, help="number of users")
    aflip.add_argument("--domain-size", required=True, type=_int, help="number of values d")
    aflip.add_argument("--epsilon", required=True, type=_float)
    aflip.add_argument("--delta", required=True, type=_float)
    aflip.add_argument("--fake-users", type=_int, default=None)
    aflip.add_argument("--json", action="store_true", help="print JSON")
    aflip.set_defaults(handler=_cmd_account_flip)

    akrr = account_protocols.add_parser("krr", help="k-RR: epsilon0 = epsilon vs exact calibration")
    akrr.add_argument("--n", required=True, type=_int, help="number of users")
    akrr.add_argument("--domain-size", required=True, type=_int, help="number of values k")
    akrr.add_argument("--epsilon", required=True, type=_float)
    akrr.add_argument("--delta", required=True, type=_float)
    akrr.add_argument("--json", action="store_true", help="print JSON")
    akrr.set_defaults(handler=_cmd_account_krr)

    amplify = account_protocols.add_parser(
        "amplify", help="amplified epsilon at a delta, every bound"
    )
    amplify.add_argument("--delta", required=True, type=_float)
    _add_mechanism_options(amplify)
    amplify.set_defaults(handler=_cmd_account_amplify)

    adelta = account_protocols.add_parser("delta", help="delta at an epsilon, every bound")
    adelta.add_argument("--epsilon", required=True, type=_float)
    _add_mechanism_options(adelta)
    adelta.set_defaults(handler=_cmd_account_delta)

    acal = account_protocols.add_parser(
        "calibrate", help="least noisy local parameter for a target (epsilon, delta)"
    )
    acal.add_argument("--epsilon", required=True, type=_float)
    acal.add_argument("--delta", required=True, type=_float)
    acal.add_argument(
        "--parameter", choices=("report_probability", "blanket_messages"), default=None
    )
    _add_mechanism_options(acal, calibrating=True)
    acal.set_defaults(handler=_cmd_account_calibrate)

    experiment = commands.add_parser("experiment", help="paper reproductions (CSV and PNG)")
    experiments = experiment.add_subparsers(dest="experiment", required=True, metavar="NAME")
    kvg = experiments.add_parser("krr-vs-gaussian", help="shuffled k-RR vs the central Gaussian")
    kvg.add_argument("--quick", action="store_true", help="a reduced grid (well under a minute)")
    kvg.add_argument("--output-dir", default="experiment-output")
    kvg.add_argument("--data", choices=("synthetic", "flights", "gowalla"), default="synthetic")
    kvg.add_argument("--gowalla-path", default=None, help="SNAP Gowalla check-ins file")
    kvg.add_argument(
        "--bbox",
        default="37.70,37.81,-122.52,-122.38",
        help="lat_min,lat_max,lon_min,lon_max (default: northern San Francisco)",
    )
    kvg.add_argument("--grid", default="10,10", help="ROWS,COLS of the cell grid")
    kvg.add_argument("--repetitions", type=_int, default=None)
    kvg.add_argument("--seed", type=_int, default=2023)
    kvg.set_defaults(handler=_cmd_experiment_krr)

    demo = commands.add_parser("demo", help="FLIP end to end on built-in Zipf data")
    demo.add_argument("--n", type=_int, default=100_000)
    demo.add_argument("--domain-size", type=_int, default=100)
    demo.add_argument("--epsilon", type=_float, default=1.0)
    demo.add_argument("--delta", type=_float, default=1e-6)
    demo.add_argument("--seed", type=_int, default=None)
    demo.add_argument("--output-dir", default="demo-output")
    demo.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 success, 2 bad input)."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except _UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (ShuffleDPError, FileNotFoundError) as exc:
        print(f"shuffledp: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"shuffledp: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
