"""The public domain on the command line: ``--domain``, ``--domain-file``, ``--domain-name``.

The domain is public input: it comes from the analyst's declaration (a list
of labels, a file of labels one per line, or a built-in domain), never from
the private data.
"""

from __future__ import annotations

import argparse

from shuffledp.data.domains import (
    builtin_domain,
    builtin_domain_names,
    parse_domain,
    read_domain_file,
)

__all__ = ["add_domain_sources", "declared_domain"]


def add_domain_sources(
    source: argparse._MutuallyExclusiveGroup, *, domain_help: str, label: str = "label"
) -> None:
    """Declare ``--domain``, ``--domain-file`` and ``--domain-name`` in ``source``."""
    source.add_argument("--domain", default=None, help=domain_help)
    source.add_argument(
        "--domain-file",
        default=None,
        help=f"file with one {label} per line, kept exactly (labels may contain commas)",
    )
    source.add_argument(
        "--domain-name",
        default=None,
        help=f"a built-in domain: {', '.join(builtin_domain_names())}, or range:LO-HI",
    )


def declared_domain(args: argparse.Namespace, undeclared: str) -> tuple[list[str] | None, str]:
    """Return the domain the options declare and its source (``None``, ``undeclared`` if none)."""
    if args.domain is not None:
        return parse_domain(args.domain), "declared"
    if args.domain_file is not None:
        return read_domain_file(args.domain_file, encoding=args.encoding), "file"
    if args.domain_name is not None:
        return builtin_domain(args.domain_name), f"builtin:{args.domain_name}"
    return None, undeclared
