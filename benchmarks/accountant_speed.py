"""Accountant speed: seconds per δ(ε) evaluation and per ε(δ) search, per method and n.

Prints one JSON object: {method: {n: {"delta_seconds": ..., "epsilon_seconds": ...,
"delta_at_epsilon_1": ..., "epsilon_at_delta_1e-6": ..., "bound": ..., "probe_epsilon": ...,
"delta_at_probe": ...}}}. ``delta_seconds`` times one δ evaluation at ``probe_epsilon``,
the ε where δ ≈ 1e-6 (where a calibration works; at ε ≥ ε₀ every bound is 0 at no
cost, which would measure nothing). Every timing starts from empty caches.

Generic methods use ε₀ = 1; k-RR methods k = 10, ε₀ = 3; FLIP d = 100, k = 100
fake users with its calibrated q; Poisson d = 100, one potential blanket message
per user, λ = 0.5, each blanket message sent (γ = 1) and, as ``poisson-gamma``,
with probability γ = 0.5. Methods not computed at some n (outside their range)
report null.

Usage: python benchmarks/accountant_speed.py [--sizes 1e4,1e6,1e8]
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from typing import Any

from shuffledp._progress import progress
from shuffledp.accounting import amplified_epsilon, delta, methods_for
from shuffledp.accounting.certificates.flip import calibrate_flip_q
from shuffledp.accounting.numerics import binomial, two_counts


def _params(kind: str, n: int) -> dict[str, Any]:
    if kind == "generic":
        return {"epsilon0": 1.0}
    if kind == "krr":
        return {"epsilon0": 3.0, "k": 10, "n_x0": n // 2}
    if kind == "flip":
        return {"q": calibrate_flip_q(1.0, 1e-6, n, 100), "fake_users": 100, "domain_size": 100}
    params: dict[str, Any] = {
        "report_probability": 0.5,
        "domain_size": 100,
        "blanket_messages": n,
    }
    if kind == "poisson-gamma":
        params["blanket_probability"] = 0.5
    return params


def _cold() -> None:
    binomial.binomial_window.cache_clear()
    two_counts._pair_lines.cache_clear()


def _timed(fn: Any) -> tuple[Any, float]:
    _cold()
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1e4,1e6,1e8")
    args = parser.parse_args()
    sizes = [int(float(x)) for x in args.sizes.split(",")]
    report: dict[str, dict[str, Any]] = {}
    jobs = [
        (kind, m.name) for kind in ("generic", "krr", "flip", "poisson") for m in methods_for(kind)
    ]
    jobs = [(k, m) for k, m in jobs if not (k == "krr" and m in _GENERIC_NAMES)]
    jobs.append(("poisson-gamma", "poisson-exact"))
    for kind, name in progress(jobs, desc="methods"):
        mechanism = "poisson" if kind == "poisson-gamma" else kind
        report[f"{kind}:{name}"] = {}
        for n in sizes:
            params = _params(kind, n)
            at_one = delta(1.0, n=n, mechanism=mechanism, method=name, **params)
            if at_one.delta is None:
                report[f"{kind}:{name}"][str(n)] = None
                continue
            eps_row, e_sec = _timed(
                partial(amplified_epsilon, 1e-6, n=n, mechanism=mechanism, method=name, **params)
            )
            probe = eps_row.epsilon if eps_row.epsilon is not None else 1.0
            row, d_sec = _timed(
                partial(delta, probe, n=n, mechanism=mechanism, method=name, **params)
            )
            report[f"{kind}:{name}"][str(n)] = {
                "delta_seconds": d_sec,
                "epsilon_seconds": e_sec,
                "delta_at_epsilon_1": at_one.delta,
                "epsilon_at_delta_1e-6": eps_row.epsilon,
                "bound": row.bound.value,
                "probe_epsilon": probe,
                "delta_at_probe": row.delta,
            }
    print(json.dumps(report, indent=2))


_GENERIC_NAMES = {m.name for m in methods_for("generic")}

if __name__ == "__main__":
    main()
