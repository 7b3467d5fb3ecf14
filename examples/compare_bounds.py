"""Compare the amplification bounds for k-RR and plot the amplified ε against n.

For a k-RR randomizer with local ε₀ (every report ε₀-DP on its own), the
accountant gives one row per method: the generic bounds (any ε₀-LDP
randomizer), the k-RR certificate ``krr-blanket``, and a lower bound some
dataset attains (``krr-two-count``). Only certified rows are guarantees; the
lower bound shows how much room is left above the truth.

    python examples/compare_bounds.py --epsilon0 2 --k 10 --n 1000,10000,100000,1000000

Writes ``bounds.json`` (every row) and ``epsilon_vs_n.png`` to ``--output-dir``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from shuffledp.accounting import compare
from shuffledp.plotting import require_matplotlib
from shuffledp.privacy import BoundKind

SHOWN = ("fmt2021-numeric", "vr2024", "krr-blanket", "krr-two-count")


def main() -> None:
    """Parse the flags, evaluate every bound at every n, print, plot and save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon0", type=float, default=2.0, help="local ε₀ of each report")
    parser.add_argument("--k", type=int, default=10, help="domain size of k-RR")
    parser.add_argument("--delta", type=float, default=1e-6)
    parser.add_argument("--n", default="1000,10000,100000,1000000", help="comma-separated")
    parser.add_argument("--output-dir", type=Path, default=Path("example-output"))
    args = parser.parse_args()
    ns = [int(float(text)) for text in args.n.split(",")]
    args.output_dir.mkdir(parents=True, exist_ok=True)

    curves: dict[str, list[tuple[int, float]]] = {}
    lower: set[str] = set()
    rows = []
    for n in ns:
        for row in compare(
            delta=args.delta, n=n, mechanism="krr", epsilon0=args.epsilon0, domain_size=args.k
        ):
            rows.append({"n": n, **row.to_dict()})
            usable = row.certified or row.bound is BoundKind.LOWER
            if row.epsilon is not None and usable:
                curves.setdefault(row.method, []).append((n, row.epsilon))
                if row.bound is BoundKind.LOWER:
                    lower.add(row.method)

    print(f"amplified ε at δ = {args.delta:g}, k-RR with k = {args.k}, ε₀ = {args.epsilon0:g}")
    print(f"{'n':>9s}" + "".join(f"{name:>17s}" for name in SHOWN))
    for n in ns:
        cells = [dict(curves.get(name, [])).get(n) for name in SHOWN]
        print(f"{n:>9d}" + "".join(f"{'-' if c is None else f'{c:.4f}':>17s}" for c in cells))
    print(f"lower bounds (attained by a dataset): {', '.join(sorted(lower))}; the rest certified")

    plt = require_matplotlib()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, points in sorted(curves.items()):
        xs, ys = zip(*points, strict=True)
        is_lower = method in lower
        label = method + (" (lower bound)" if is_lower else "")
        ax.loglog(xs, ys, "o" if is_lower else ".-", label=label)
    ax.axhline(args.epsilon0, color="#999999", lw=0.8)
    ax.set_xlabel("n (users)")
    ax.set_ylabel(f"ε at δ = {args.delta:g}")
    ax.set_title(f"Shuffled k-RR, k = {args.k}, ε₀ = {args.epsilon0:g}")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    png = args.output_dir / "epsilon_vs_n.png"
    fig.savefig(png, dpi=110)
    (args.output_dir / "bounds.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {png} and {args.output_dir / 'bounds.json'}")


if __name__ == "__main__":
    main()
