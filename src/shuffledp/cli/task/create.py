"""``shuffledp task create``: calibrate a protocol for a minimum batch and make the analyzer's key.

``--protocol`` is ``flip``, ``krr``, ``correlated`` (``--slack``,
``--neighbours``; ``min_honest`` is ``--min-batch-users``) or ``augmented``
(``--variant``, ``--beta``, ``--nu``, ``--trials``; the shuffler adds the noise).
Writes the public task document (``--out``), the analyzer's private key
(``--key-out``, mode 0600, never overwritten), and optionally the bearer
secret the shuffler uses to forward batches (``--forward-token-out``) and the
key that signs client tokens (``--token-key-out``, needed with
``--one-submission-per-client``).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path
from typing import Any

from shuffledp._validation import InvalidParameterError, check_delta, check_epsilon, check_int
from shuffledp.cli._common import (
    checked,
    integer,
    integer_at_least,
    number,
    open_unit_number,
    positive_number,
    writable,
)
from shuffledp.data.domains import (
    builtin_domain,
    builtin_domain_names,
    parse_domain,
    read_domain_file,
)

NAME = "create"
HELP = "create a task: calibrated parameters, domain, minimum batch, analyzer key pair"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``task create``'s options."""
    parser.add_argument(
        "--protocol",
        choices=("flip", "krr", "correlated", "augmented"),
        required=True,
        help="the protocol clients run (correlated: signed noise shares calibrated for "
        "--min-batch-users honest users; augmented: one plain message per user, the shuffler "
        "adds sealed dummies)",
    )
    domain = parser.add_argument_group("public domain (one of these is required)")
    source = domain.add_mutually_exclusive_group(required=True)
    source.add_argument("--domain", help="comma-separated labels, in bin order (spaces trimmed)")
    source.add_argument("--domain-file", help="file with one label per line, kept exactly")
    source.add_argument(
        "--domain-name",
        help=f"a built-in domain: {', '.join(builtin_domain_names())}, or range:LO-HI",
    )
    domain.add_argument("--encoding", default="utf-8", help="domain file encoding (default utf-8)")
    privacy = parser.add_argument_group("privacy target")
    privacy.add_argument(
        "--epsilon", required=True, type=positive_number, help="target epsilon > 0"
    )
    privacy.add_argument(
        "--delta", required=True, type=open_unit_number, help="target delta in (0, 1)"
    )
    privacy.add_argument(
        "--min-batch-users",
        required=True,
        type=integer_at_least(2),
        help="n: the parameters are calibrated for n users and the shuffler forwards no "
        "batch of fewer (the guarantee holds for every batch of at least n honest users; "
        "correlated: min_honest, the users whose noise shares the guarantee counts on)",
    )
    privacy.add_argument(
        "--one-submission-per-client",
        action="store_true",
        help="the shuffler admits one submission per client token (needs --token-key-out)",
    )
    flip = parser.add_argument_group("FLIP")
    flip.add_argument(
        "--fake-users", type=integer_at_least(0), default=None, help="k (default 100)"
    )
    flip.add_argument(
        "--calibration",
        choices=("exact", "paper"),
        default="exact",
        help="how q (FLIP) or nu (augmented sageo) is chosen: our exact accountant (default) "
        "or the paper's formula; the release reports the exact certificate either way",
    )
    krr = parser.add_argument_group("k-RR")
    krr.add_argument(
        "--estimator",
        choices=("inversion", "raw", "clip", "simplex"),
        default="inversion",
        help="the analyzer's k-RR estimator (default inversion: matrix inversion, unbiased)",
    )
    correlated = parser.add_argument_group("correlated")
    correlated.add_argument(
        "--slack",
        type=positive_number,
        default=None,
        help="per-bin standard deviation at most (1 + slack) times the central discrete "
        "Laplace's, at min-batch-users users' noise (default 0.1)",
    )
    correlated.add_argument(
        "--neighbours",
        choices=("replacement", "add-remove"),
        default=None,
        help="replacement: one user's value changes (default); add-remove: one user "
        "present or absent, an absent user sending nothing (noise shares included)",
    )
    augmented = parser.add_argument_group("augmented")
    augmented.add_argument(
        "--variant",
        choices=("sageo", "s1geo", "sbin"),
        default=None,
        help="the shuffler's dummy law: sageo (default; at beta 1 the central discrete "
        "Laplace), s1geo (pure epsilon-DP), sbin (binomial)",
    )
    augmented.add_argument(
        "--beta",
        type=number,
        default=None,
        help="probability that the shuffler keeps each message (default 1; sageo needs "
        "beta >= 1 - e^(-epsilon/2); s1geo fixes it)",
    )
    augmented.add_argument(
        "--nu", type=integer, default=None, help="sageo: a fixed shift nu to certify"
    )
    augmented.add_argument(
        "--trials", type=integer, default=None, help="sbin: a fixed number M of trials to certify"
    )
    out = parser.add_argument_group("output")
    out.add_argument("--out", required=True, help="the task document (public JSON)")
    out.add_argument("--key-out", required=True, help="the analyzer's private key (mode 0600)")
    out.add_argument(
        "--forward-token-out", default=None, help="a new shuffler-to-analyzer bearer secret (0600)"
    )
    out.add_argument("--token-key-out", default=None, help="a new client-token signing key (0600)")
    parser.set_defaults(handler=execute)


def _domain(args: argparse.Namespace) -> tuple[list[str], str]:
    if args.domain is not None:
        return parse_domain(args.domain), "declared"
    if args.domain_file is not None:
        return read_domain_file(args.domain_file, encoding=args.encoding), "file"
    return builtin_domain(args.domain_name), f"builtin:{args.domain_name}"


def _new_path(path: str | None, flag: str) -> Path | None:
    out = writable(path, flag)
    if out is not None and out.exists():
        raise InvalidParameterError(
            f"{flag}: {str(out)!r} already exists; secrets are never overwritten"
        )
    return out


#: The protocol options of this command, by the spec option each sets.
_FLAGS = {
    "slack": "--slack",
    "neighbours": "--neighbours",
    "variant": "--variant",
    "beta": "--beta",
    "nu": "--nu",
    "trials": "--trials",
}


def _protocol_options(args: argparse.Namespace, epsilon: float) -> dict[str, Any]:
    """The options of the protocol's spec (its ``calibrate``); another protocol's is refused.

    A flag given for a protocol whose spec does not take it names the
    protocols that do (``specs.SPECS``); ``--calibration`` must be one its
    spec calibrates with. Nothing here branches on the protocol's name.
    """
    from shuffledp.specs import SPECS, spec_class

    spec = spec_class(args.protocol)
    takes = spec.calibration_options()
    for option, flag in _FLAGS.items():
        if getattr(args, option) is not None and option not in takes:
            users = [name for name, other in SPECS.items() if option in other.calibration_options()]
            raise InvalidParameterError(
                f"{flag} is an option of --protocol {' or '.join(users)}, not {args.protocol}"
            )
    # (A protocol that takes no --calibration is refused by create_task, naming the others.)
    if spec.calibrations and args.calibration not in spec.calibrations:
        raise InvalidParameterError(
            f"--calibration {args.calibration}: the {args.protocol} protocol is calibrated by "
            f"{', '.join(spec.calibrations)} only"
        )
    options: dict[str, Any] = {}
    if "slack" in takes:
        options["slack"] = (
            None if args.slack is None else checked(check_epsilon, args.slack, "--slack")
        )
    if "neighbours" in takes:
        options["neighbours"] = args.neighbours or "replacement"
    if "variant" in takes:
        from shuffledp.cli.run.augmented import augmented_options

        args.variant = args.variant or "sageo"
        chosen = augmented_options(args, epsilon)
        options.update(variant=chosen.variant, beta=chosen.beta, nu=chosen.nu, trials=chosen.trials)
    return options


def execute(args: argparse.Namespace) -> int:
    """Create the task and its secret files."""
    from shuffledp.service._extra import require_service_extra

    require_service_extra()
    from shuffledp.service.secretfile import write_secret_file
    from shuffledp.service.task import create_task, save_private_key, save_task
    from shuffledp.service.tokens import new_token_key, save_token_key

    epsilon = checked(check_epsilon, args.epsilon, "--epsilon")
    delta = checked(check_delta, args.delta, "--delta")
    n = checked(check_int, args.min_batch_users, "--min-batch-users", minimum=2)
    fake = None if args.fake_users is None else checked(check_int, args.fake_users, "--fake-users")
    options = _protocol_options(args, epsilon)
    if args.one_submission_per_client and args.token_key_out is None:
        raise InvalidParameterError("--one-submission-per-client needs --token-key-out")
    task_path = writable(args.out, "--out")
    assert task_path is not None
    key_path = _new_path(args.key_out, "--key-out")
    forward_path = _new_path(args.forward_token_out, "--forward-token-out")
    token_key_path = _new_path(args.token_key_out, "--token-key-out")
    paths = [p.resolve() for p in (task_path, key_path, forward_path, token_key_path) if p]
    if len(set(paths)) != len(paths):
        raise InvalidParameterError(
            "--out, --key-out and the other outputs must be different files"
        )
    labels, source = _domain(args)
    task, key = create_task(
        args.protocol,
        labels,
        epsilon,
        delta,
        n,
        domain_source=source,
        one_submission_per_client=args.one_submission_per_client,
        fake_users=fake,
        calibration=args.calibration,
        estimator=args.estimator,
        **options,
    )
    assert key_path is not None
    save_private_key(key, key_path)
    if forward_path is not None:
        write_secret_file(forward_path, secrets.token_urlsafe(32))
    if token_key_path is not None:
        save_token_key(new_token_key(), token_key_path)
    save_task(task, task_path)
    params = ", ".join(f"{k}={v}" for k, v in task.parameters.items())
    print(
        f"task {task.task_id} ({task.protocol}, {task.domain_size} bins, epsilon={epsilon:g}, "
        f"delta={delta:g}, min batch {n} users; {params}); at most "
        f"{task.max_messages_per_submission} message(s) per submission",
        file=sys.stderr,
    )
    if task.cap_delta() > 0:
        print(
            f"the message bounds take {task.cap_delta():.3g} of delta (an honest party exceeds "
            "its bound with probability 1e-30 and does not send); the parameters are "
            "calibrated for the rest",
            file=sys.stderr,
        )
    if task.max_dummies_per_batch() > 0:
        print(
            f"the shuffler adds about {task.domain_size * task.dummy_law().mean:.1f} sealed "
            f"dummies per batch (at most {task.max_dummies_per_batch()})",
            file=sys.stderr,
        )
    print(f"task digest (pin it in clients): {task.digest()}", file=sys.stderr)
    print(f"wrote {task_path} (public) and {key_path} (analyzer only, mode 600)", file=sys.stderr)
    return 0
