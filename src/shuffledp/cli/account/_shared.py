"""What the generic accounting questions (amplify, delta, calibrate) share."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.cli._choices import ACCOUNTING_MECHANISMS, ACCOUNTING_METHODS
from shuffledp.cli._common import (
    checked,
    fmt,
    fmt_bound,
    integer,
    integer_at_least,
    number,
    open_unit_number,
    positive_number,
)
from shuffledp.privacy import BoundKind
from shuffledp.schemas import schema_id

if TYPE_CHECKING:
    from shuffledp.accounting.api import AccountingResult

__all__ = [
    "MECHANISM_OPTIONS",
    "account_rows",
    "add_mechanism_options",
    "add_target_arguments",
    "print_rows",
    "target_arguments",
]

#: (key of the accountant's mechanism parameters, attribute of the parsed arguments);
#: ``--domain-size`` is k-RR's k or FLIP's / the Poisson randomizer's d (see mechanism_params).
MECHANISM_OPTIONS = (
    ("epsilon0", "epsilon0"),
    ("q", "q"),
    ("fake_users", "fake_users"),
    ("domain_size", "domain_size"),
    ("report_probability", "report_probability"),
    ("blanket_messages", "blanket_messages"),
    ("blanket_probability", "blanket_probability"),
    ("items", "items"),
    ("n_x0", "n_x0"),
)


def add_target_arguments(
    parser: argparse.ArgumentParser,
    *,
    domain_alias: str = "--k",
    domain_help: str = "number of values d (alias --k)",
) -> None:
    """Declare a calibration's target: ``--n``, ``--domain-size``, ``--epsilon`` and ``--delta``.

    Args:
        parser: The command's parser.
        domain_alias: The other spelling of ``--domain-size``.
        domain_help: Its help text.
    """
    parser.add_argument("--n", required=True, type=integer_at_least(1), help="number of users")
    parser.add_argument(
        "--domain-size",
        domain_alias,
        dest="domain_size",
        required=True,
        type=integer_at_least(2),
        help=domain_help,
    )
    parser.add_argument("--epsilon", required=True, type=positive_number, help="target epsilon > 0")
    parser.add_argument(
        "--delta", required=True, type=open_unit_number, help="target delta in (0, 1)"
    )


def target_arguments(args: argparse.Namespace) -> tuple[int, int, float, float]:
    """Return the target (n, d, ε, δ) of :func:`add_target_arguments`, checked.

    Raises:
        InvalidParameterError: Naming the first flag out of range (n ≥ 1, d ≥ 2,
            ε > 0, δ in (0, 1)).
    """
    return (
        checked(check_int, args.n, "--n", minimum=1),
        checked(check_int, args.domain_size, "--domain-size", minimum=2),
        checked(check_epsilon, args.epsilon, "--epsilon"),
        checked(check_delta, args.delta, "--delta"),
    )


def mechanism_params(args: argparse.Namespace, *, need_epsilon0: bool = True) -> dict[str, Any]:
    """Return the mechanism parameters given on the command line.

    ``--domain-size`` (alias ``--k``) is the domain size whatever the mechanism:
    k-RR's k, FLIP's number of bins d, the Poisson randomizer's items d.
    """
    params = {
        key: getattr(args, attr)
        for key, attr in MECHANISM_OPTIONS
        if getattr(args, attr, None) is not None
    }
    if args.domain_size is not None:
        params["domain_size"] = checked(check_int, args.domain_size, "--domain-size", minimum=2)
    if need_epsilon0 and args.mechanism in ("generic", "krr") and "epsilon0" not in params:
        raise InvalidParameterError(f"--epsilon0 is required for the {args.mechanism} mechanism")
    if args.mechanism == "krr" and "domain_size" not in params:
        raise InvalidParameterError(
            "--domain-size (k-RR's k, alias --k) is required for --mechanism krr"
        )
    return params


def print_rows(
    rows: list[AccountingResult], as_json: bool, header: str, *, given: str = "epsilon"
) -> None:
    """Print one row per method, as a table or JSON.

    Only certified upper bounds are guarantees: an upper-bound method outside its
    theorem's range is starred, and lower and reproduction rows say what they
    are in the footnote. The JSON is an object (schema ``account-bounds``) whose
    ``rows`` holds one object per method.
    """
    if as_json:
        document = {"schema": schema_id("account-bounds"), "rows": [r.to_dict() for r in rows]}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return
    print(header)
    print(f"{'method':26s}{'bound':>14s}{'epsilon':>12s}{'delta':>12s}  note")
    for r in rows:
        # Computed digits stay on the safe side: upper bounds rounded up, lower bounds
        # down; the ``given`` column is the user's own number, shown as given.
        up = r.bound is not BoundKind.LOWER
        eps = dlt = "-"
        if r.epsilon is not None:
            eps = fmt(r.epsilon) if given == "epsilon" else fmt_bound(r.epsilon, up=up)
        if r.delta is not None and not math.isnan(r.delta):
            dlt = fmt(r.delta) if given == "delta" else fmt_bound(r.delta, up=up)
        starred = r.bound is BoundKind.UPPER and not r.certified
        kind = f"{r.bound.value}*" if starred else r.bound.value
        print(f"{r.method:26s}{kind:>14s}{eps:>12s}{dlt:>12s}  {r.note}")
    kinds = {r.bound for r in rows}
    if any(r.bound is BoundKind.UPPER and not r.certified for r in rows):
        print("* upper bound outside its theorem's range here (see the note): not a guarantee")
    if BoundKind.LOWER in kinds:
        print(
            "lower: attained by some dataset, so the true delta is at least this; not a guarantee"
        )
    if BoundKind.REPRODUCTION in kinds:
        print("reproduction: a published formula as printed or out of range; not a guarantee")
    print("only certified upper bounds are guarantees, and only they are used to calibrate")


def account_rows(
    args: argparse.Namespace, *, epsilon: float | None, delta: float | None
) -> list[AccountingResult]:
    """Evaluate the chosen method (or all) at ε or at δ, with progress on a terminal."""
    from shuffledp._progress import progress, working
    from shuffledp.accounting import api as accounting_api

    n = checked(check_int, args.n, "--n", minimum=1)
    params = mechanism_params(args)
    question = "delta" if epsilon is not None else "epsilon"
    if args.method == "all":
        return accounting_api.compare(
            epsilon=epsilon,
            delta=delta,
            n=n,
            mechanism=args.mechanism,
            each=lambda methods: progress(methods, desc=f"{question} per method", delay=1.0),
            **params,
        )
    with working(f"{question} by {args.method}"):
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


def add_mechanism_options(parser: argparse.ArgumentParser, *, calibrating: bool = False) -> None:
    """Declare the mechanism and its parameters."""
    parser.add_argument("--n", required=True, type=integer_at_least(1), help="number of users")
    parser.add_argument(
        "--mechanism",
        choices=ACCOUNTING_MECHANISMS,
        default="generic",
        help="what is shuffled: generic (any epsilon0-LDP randomizer, default), krr, flip, poisson",
    )
    method_names = ", ".join(ACCOUNTING_METHODS)
    parser.add_argument(
        "--method",
        default="best" if calibrating else "all",
        help="'all' (one row per method), 'best' (tightest certified upper bound) or one of: "
        + method_names,
    )
    if not calibrating:
        parser.add_argument("--epsilon0", type=positive_number, help="local epsilon (generic, krr)")
    parser.add_argument(
        "--domain-size",
        "--k",
        dest="domain_size",
        type=integer,
        help="domain size: k-RR's k, FLIP's bins d, the Poisson randomizer's items d",
    )
    parser.add_argument("--q", type=number, help="FLIP flip probability")
    parser.add_argument("--fake-users", type=integer, help="FLIP fake users per user")
    parser.add_argument("--report-probability", type=number, help="Poisson randomizer lambda")
    parser.add_argument(
        "--blanket-messages", type=integer, help="Poisson: potential blanket messages"
    )
    parser.add_argument("--blanket-probability", type=number, help="Poisson: each sent with this")
    parser.add_argument("--items", type=integer, help="Poisson: items per user")
    parser.add_argument("--n-x0", type=integer, help="k-RR paper formula: other users holding x0")
    parser.add_argument("--json", action="store_true", help="print JSON")
