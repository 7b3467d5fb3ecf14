"""The total guarantee of two releases on the same users (PLD composition).

The same users answer twice: their city through FLIP, their age band through
k-RR, each release calibrated for (ε, δ) on its own. What the two releases
together guarantee is computed from the releases' privacy reports: basic
composition gives (2ε, 2δ); composing their privacy loss distributions (the
``pld`` extra) gives a much smaller ε at the same total δ. The reports are
saved as JSON and read back, as ``shuffledp account compose a.json b.json``
does. See docs/composition.md.

    python examples/compose_releases.py --users 100000 --epsilon 1 --delta 1e-6
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import shuffledp
from shuffledp import FlipProtocol, KRRProtocol

CITIES = ["Paris", "Lyon", "Marseille", "Toulouse", "Nice", "Nantes", "Strasbourg", "Bordeaux"]
AGES = ["<18", "18-29", "30-44", "45-59", "60-74", "75+"]


def main() -> None:
    """Parse the flags, run both releases, compose them and print the totals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε of each release")
    parser.add_argument("--delta", type=float, default=1e-6, help="δ of each release")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--output-dir", type=Path, default=Path("example-output"))
    args = parser.parse_args()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    cities = rng.choice(CITIES, size=args.users).tolist()
    ages = rng.choice(AGES, size=args.users).tolist()

    releases = {
        "cities": FlipProtocol.calibrated(args.users, CITIES, args.epsilon, args.delta).run(
            cities, seed=rng
        ),
        "ages": KRRProtocol.calibrated(args.users, AGES, args.epsilon, args.delta).run(
            ages, seed=rng
        ),
    }
    paths = []
    for name, run in releases.items():
        privacy = run.privacy
        print(f"{name}: ({privacy.epsilon:g}, {privacy.delta:.3g})-DP [{privacy.method}]")
        path = args.output_dir / f"{name}.json"
        path.write_text(
            json.dumps({"estimate": run.estimate.to_dict(), "privacy": privacy.to_dict()})
        )
        paths.append(path)

    reports = shuffledp.reports_from_json([json.loads(p.read_text()) for p in paths])
    total = shuffledp.compose(*reports)
    basic = total.parameters["basic"]
    print(f"basic composition: ({basic['epsilon']:g}, {basic['delta']:.3g})")
    print(f"together: ({total.epsilon:.4f}, {total.delta:.3g}) [{total.method}]")
    ten = shuffledp.compose(*[releases["ages"].privacy] * 10)
    print(f"ten k-RR releases: ({ten.epsilon:.4f}, {ten.delta:.3g}) [{ten.method}]")
    out = args.output_dir / "composed.json"
    out.write_text(json.dumps({"two": total.to_dict(), "ten": ten.to_dict()}, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
