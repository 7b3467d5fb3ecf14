"""Estimate a histogram from a CSV column over a public domain, with FLIP or k-RR.

The analyst's path through the Python API: read one value per user from a CSV
(the file holds several visits per user; the first one counts), calibrate the
protocol for the number of users and a target (ε, δ), run it, and write the
estimate with its certified privacy report as JSON. The domain is public
input, declared here, never read off the data. Without ``--input`` the script
writes a small sample file first.

    python examples/histogram_from_csv.py --protocol flip --users 20000 --output-dir out

A fixed ``--seed`` makes the run reproducible with a seeded (not cryptographic)
shuffle; leave it out (``--seed -1``) for a real release.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from shuffledp import FlipProtocol, KRRProtocol
from shuffledp.data import load_values

CITIES = ["Paris", "Lyon", "Marseille", "Toulouse", "Nice", "Nantes", "Strasbourg", "Bordeaux"]


def write_sample(path: Path, users: int, seed: int) -> None:
    """Write ``users`` users' visits (1 to 3 rows each, the first at their home city)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(CITIES) + 1)
    home = rng.choice(len(CITIES), size=users, p=weights / weights.sum())
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user_id", "city"])
        for user, city in enumerate(home.tolist()):
            writer.writerow([f"u{user}", CITIES[city]])
            for other in rng.integers(len(CITIES), size=int(rng.integers(0, 3))).tolist():
                writer.writerow([f"u{user}", CITIES[other]])


def main() -> None:
    """Parse the flags, run the protocol, print and write the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, help="a CSV with user_id,city (default: a sample)")
    parser.add_argument("--protocol", choices=("flip", "krr"), default="flip")
    parser.add_argument("--users", type=int, default=20_000, help="users in the sample file")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=7, help="-1: OS entropy, secure shuffle")
    parser.add_argument("--output-dir", type=Path, default=Path("example-output"))
    args = parser.parse_args()
    seed = None if args.seed < 0 else args.seed
    args.output_dir.mkdir(parents=True, exist_ok=True)
    path = args.input or args.output_dir / "visits.csv"
    if args.input is None:
        write_sample(path, args.users, seed=11)

    loaded = load_values(
        path, "city", domain=CITIES, user_column="user_id", per_user="first", show_progress=False
    )
    protocol_class = FlipProtocol if args.protocol == "flip" else KRRProtocol
    protocol = protocol_class.calibrated(loaded.n, loaded.domain, args.epsilon, args.delta)
    run = protocol.run(loaded.indices, seed=seed)

    estimate, privacy = run.estimate, run.privacy
    assert estimate.stderr is not None  # FLIP and k-RR's inversion both give standard errors
    print(f"{args.protocol}: {loaded.n} users, {run.messages_per_user:.3f} messages per user")
    print(f"{'city':12s}{'true':>8s}{'estimate':>10s}{'± 95%':>8s}")
    for city, true, count, se in zip(
        loaded.domain, loaded.histogram, estimate.counts, estimate.stderr, strict=True
    ):
        print(f"{city:12s}{true:>8d}{count:>10.0f}{1.96 * se:>8.0f}")
    print(f"certified ({privacy.epsilon:g}, {privacy.delta:.3g})-DP by {privacy.method}")

    result = {
        "protocol": run.protocol,
        "n": loaded.n,
        "domain": loaded.domain,
        "estimate": estimate.to_dict(),
        "privacy": privacy.to_dict(),
    }
    out = args.output_dir / "result.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
