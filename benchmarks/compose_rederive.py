"""What re-deriving a release's guarantee costs when it is composed; prints JSON.

``reports_from_json`` (and so ``shuffledp account compose``) recomputes every
release's δ at its stated ε with its method's certificate
(:mod:`shuffledp.accounting.composition.rederive`). For one release of each
kind, calibrated for (ε, δ) = (1, 1e-6) at ``--n`` users and a domain of
``--domain-size`` values (segmented: levels 0.5 and 1, half the users each, 2
items per user, blanket rate 1; per-user: c = 0.5, ε₁ = 0.5; a service FLIP
release at ``min_batch_users`` = n; a composed report of the FLIP and k-RR
ones), the release's JSON is written once and each repeat runs in a fresh
process, as the command does, timing after the imports:

* ``read_s``: ``reports_from_json([release])``, the re-derivation with cold
  caches (one certificate evaluation; a segmented release one per level; a
  composed report its components' and a recomposition);
* ``compose_two_s``: then ``shuffledp.compose(report, report)``, which takes
  the re-derivation from the read and composes (PLD, the ``pld`` extra).

Calibration is not timed. The median over ``--repeats`` processes is printed
with every run.

Usage: python benchmarks/compose_rederive.py [--n 1000000] [--domain-size 100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: What each child process runs: import, then time the read and the composition.
_CHILD = """
import json, sys, time
import dp_accounting.pld.privacy_loss_distribution
import shuffledp
from shuffledp.accounting.composition.compose import reports_from_json
document = json.loads(open(sys.argv[1]).read())
start = time.perf_counter()
(report,) = reports_from_json([document])
read = time.perf_counter() - start
start = time.perf_counter()
shuffledp.compose(report, report)
print(json.dumps({"read_s": read, "compose_two_s": time.perf_counter() - start}))
"""


def _documents(n: int, d: int) -> list[tuple[str, dict[str, Any]]]:
    """(kind, the release's JSON as reports_from_json reads it)."""
    import shuffledp
    from shuffledp.protocols.augmented import AugmentedProtocol
    from shuffledp.protocols.correlated import CorrelatedProtocol
    from shuffledp.protocols.flip import FlipProtocol
    from shuffledp.protocols.krr import KRRProtocol
    from shuffledp.protocols.per_user import PerUserHistograms
    from shuffledp.protocols.segmented import NEIGHBOURING, SegmentedProtocol

    eps, delta = 1.0, 1e-6
    flip = FlipProtocol.calibrated(n, d, eps, delta).privacy_report()
    krr = KRRProtocol.calibrated(n, d, eps, delta).privacy_report()
    segmented = SegmentedProtocol.calibrated(
        (0.5, 1.0),
        level_counts=(n // 2, n - n // 2),
        delta=delta,
        domain=d,
        items_per_user=2,
        blanket_rate=1.0,
        workers=1,
    )
    levels = segmented.privacy_reports()
    first = levels[0].parameters
    segmented_release = {
        "n": n,
        "privacy": {
            "method": levels[0].method,
            "bound": "upper",
            "n": n,
            "neighbouring": NEIGHBOURING,
            "levels": [
                {"epsilon": r.epsilon, "delta": r.delta, "lambda": r.parameters["lambda"]}
                for r in levels
            ],
        },
        "parameters": {
            name: first[name]
            for name in ("blanket_rate", "items_per_user", "variant", "message_domain")
        },
    }
    service = {
        "protocol": "flip",
        "n": n,
        "privacy": flip.to_dict(),
        "parameters": {},
        "service": {"min_batch_users": n},
    }
    reports = {
        "flip": flip,
        "krr": krr,
        "correlated": CorrelatedProtocol.calibrated(n, d, eps, delta).privacy_report(),
        "augmented sageo": AugmentedProtocol.calibrated(n, d, eps, delta).privacy_report(),
        "augmented sbin": AugmentedProtocol.calibrated(
            n, d, eps, delta, variant="sbin"
        ).privacy_report(),
        "per-user": PerUserHistograms(eps, 0.5, 0.5, clusters=2).privacy_report(n),
        "composed (flip, krr)": shuffledp.compose(flip, krr, same_users=True),
    }
    out = [(kind, {"privacy": report.to_dict()}) for kind, report in reports.items()]
    return [*out, ("flip (service release)", service), ("segmented", segmented_release)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--domain-size", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for i, (kind, document) in enumerate(_documents(args.n, args.domain_size)):
            path = Path(folder) / f"{i}.json"
            path.write_text(json.dumps(document))
            runs: dict[str, list[float]] = {"read_s": [], "compose_two_s": []}
            for _ in range(args.repeats):
                done = subprocess.run(
                    [sys.executable, "-c", _CHILD, str(path)],
                    check=True,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                for key, value in json.loads(done.stdout).items():
                    runs[key].append(value)
            medians = {f"median_{key}": statistics.median(v) for key, v in runs.items()}
            rows.append({"kind": kind, **medians, "runs": runs})
    print(
        json.dumps(
            {
                "benchmark": "compose_rederive",
                "n": args.n,
                "domain_size": args.domain_size,
                "repeats": args.repeats,
                "python": platform.python_version(),
                "machine": platform.machine(),
                "releases": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
