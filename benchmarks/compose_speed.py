"""Composition speed at deployment size: dominating pair, its PLD, compose of 10; prints JSON.

At n = 1e6, ε = 1, δ = 1e-6 for each release: k-RR calibrated at k = 10, 30
and 100 (certificate ``krr-blanket``) and FLIP at d = 100, k = 100 fake users
(``flip-exact-fake-blanket``); then weakly amplified k-RR (k = 10, ε₀ = 3,
hand-picked). For each: the seconds of building the dominating pair
(``dominating_pair``, first call, its cache cleared), of its privacy loss
distribution (``pair.accountant()``, discretization 1e-4), and of
``shuffledp.compose`` of 10 copies of the release (which finds the k-RR pair in
the cache the first step filled). ``dp-accounting``'s import is timed on its
own, first, and excluded from the rest. Needs the ``pld`` extra.

Usage: python benchmarks/compose_speed.py
"""

from __future__ import annotations

import argparse
import json
import platform
from typing import Any

from _timing import timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    _, import_s = timed(lambda: __import__("dp_accounting.pld.privacy_loss_distribution"))

    import shuffledp
    from shuffledp.accounting.composition import pld
    from shuffledp.accounting.composition.compose import dominating_pair
    from shuffledp.protocols.flip import FlipProtocol
    from shuffledp.protocols.krr import KRRProtocol

    n, eps, delta = 1_000_000, 1.0, 1e-6
    # (name, report, whether to time compose of 10 copies)
    releases: list[tuple[str, Any, bool]] = [
        (f"krr k={k}", KRRProtocol.calibrated(n, k, eps, delta).privacy_report(), True)
        for k in (10, 30, 100)
    ]
    flip = FlipProtocol.calibrated(n, 100, eps, delta)
    releases.append(("flip d=100 k=100", flip.privacy_report(), True))
    weak = KRRProtocol.from_parameters(epsilon0=3.0, n=n, domain=10, delta=delta)
    releases.append(("krr k=10 epsilon0=3", weak.privacy_report(), False))

    rows = []
    for name, report, with_compose in releases:
        pld._krr_dominating_pair.cache_clear()  # the pair's first call, as in a new process
        pair, pair_s = timed(lambda report=report: dominating_pair(report))
        assert pair is not None, name
        _, pld_s = timed(lambda pair=pair: pair.accountant(1e-4))
        components = getattr(pair, "components", None)
        row: dict[str, Any] = {
            "release": name,
            "method": report.method,
            "parameters": dict(report.parameters),
            "blocks": None if components is None else len(components),
            "pair_seconds": round(pair_s, 3),
            "pld_seconds": round(pld_s, 3),
        }
        if with_compose:
            total, compose_s = timed(lambda report=report: shuffledp.compose(*[report] * 10))
            row["compose_10_seconds"] = round(compose_s, 3)
            row["compose_10_epsilon"] = total.epsilon
        rows.append(row)

    result = {
        "benchmark": "compose_speed",
        "setting": {"n": n, "epsilon": eps, "delta": delta, "discretization": 1e-4},
        "python": platform.python_version(),
        "dp_accounting_import_seconds": round(import_s, 3),
        "releases": rows,
    }
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
