"""Accountant speed: seconds per δ(ε) evaluation and per ε(δ) search, per method and n.

Two modes.

Table (default): prints one JSON object {method: {n: {"delta_seconds": ...,
"epsilon_seconds": ..., "delta_at_epsilon_1": ..., "epsilon_at_delta_1e-6": ...,
"bound": ..., "probe_epsilon": ..., "delta_at_probe": ...}}}. ``delta_seconds``
times one δ evaluation at ``probe_epsilon``, the ε where δ ≈ 1e-6 (where a
calibration works; at ε ≥ ε₀ every bound is 0 at no cost, which would measure
nothing). Every timing starts from empty caches. Generic methods use ε₀ = 1;
k-RR methods k = 10, ε₀ = 3; FLIP d = 100, k = 100 fake users with its
calibrated q; Poisson d = 100, one potential blanket message per user, λ = 0.5,
each blanket message sent (γ = 1) and, as ``poisson-gamma``, with probability
γ = 0.5. Methods not computed at some n (outside their range) report null.

Against an older revision (``--against REV``): the package's public questions
(``amplified_epsilon``, ``delta``, ``calibrate``) on fixed settings, asked of the
code at REV (``git archive`` of its ``src`` into a temporary directory) and of
the working tree's code, each in its own worker process (``PYTHONPATH`` pointing
at that ``src``), alternating old/new and new/old call by call, every call from
empty caches. Prints one JSON object: per setting both medians, their ratio
new/old and both answers; per group (``epsilon-generic``, ``epsilon-krr``,
``delta-generic``, ``calibrate``) the min / median / max ratio. The generic
settings are 20: n = 1e3 … 1e7 and (ε₀, δ) in (0.5, 1e-6), (1, 1e-8), (2, 1e-6),
(4, 1e-10), method ``best``.

Usage:
    python benchmarks/accountant_speed.py [--sizes 1e4,1e6,1e8]
    python benchmarks/accountant_speed.py --against b0955a4 [--repeats 5] [--groups ...]
        [--n 1e7] [--clock cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from functools import partial
from io import BytesIO
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[1]


# -- table mode ---------------------------------------------------------------------------------


def _params(kind: str, n: int) -> dict[str, Any]:
    from shuffledp.accounting.certificates.flip import calibrate_flip_q

    if kind == "generic":
        return {"epsilon0": 1.0}
    if kind == "krr":
        return {"epsilon0": 3.0, "domain_size": 10, "n_x0": n // 2}
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
    """Empty every cache of the loaded package: whatever module attribute has ``cache_clear``.

    The ``functools.lru_cache`` functions (pair lines, …) and the binomial windows'
    own cache (``binomial_window.cache_clear``), under whichever module names the
    loaded revision has them.
    """
    for name, module in list(sys.modules.items()):
        if name == "shuffledp" or name.startswith("shuffledp."):
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                if callable(clear) and not isinstance(value, type):
                    clear()


def _timed(fn: Any) -> tuple[Any, float]:
    _cold()
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _table(sizes: list[int]) -> dict[str, dict[str, Any]]:
    from shuffledp._progress import progress
    from shuffledp.accounting import amplified_epsilon, delta, methods_for

    generic_names = {m.name for m in methods_for("generic")}
    report: dict[str, dict[str, Any]] = {}
    jobs = [
        (kind, m.name) for kind in ("generic", "krr", "flip", "poisson") for m in methods_for(kind)
    ]
    jobs = [(k, m) for k, m in jobs if not (k == "krr" and m in generic_names)]
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
    return report


# -- against an older revision -------------------------------------------------------------------

#: (ε₀, δ) of the generic settings, each at every n in _GENERIC_SIZES.
_GENERIC_POINTS = ((0.5, 1e-6), (1.0, 1e-8), (2.0, 1e-6), (4.0, 1e-10))
_GENERIC_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
#: (n, k, ε₀, δ) of the k-RR settings (method best: krr-blanket).
_KRR_POINTS = (
    (1_000, 2, 1.0, 1e-6),
    (10_000, 3, 2.0, 1e-6),
    (10_000, 10, 3.0, 1e-6),
    (100_000, 10, 3.0, 1e-6),
    (100_000, 50, 1.0, 1e-8),
    (1_000_000, 3, 1.0, 1e-6),
    (1_000_000, 100, 4.0, 1e-9),
)
#: (mechanism, n, ε, δ, extra parameters) of the calibrations (method best).
_CALIBRATIONS: tuple[tuple[str, int, float, float, dict[str, Any]], ...] = (
    ("generic", 10_000, 1.0, 1e-6, {}),
    ("generic", 1_000_000, 0.1, 1e-8, {}),
    ("generic", 10_000_000, 0.05, 1e-6, {}),
    ("krr", 10_000, 1.0, 1e-6, {"domain_size": 3}),
    ("krr", 100_000, 0.3, 1e-9, {"domain_size": 10}),
)
GROUPS = ("epsilon-generic", "epsilon-krr", "delta-generic", "calibrate")


def _settings(groups: list[str], sizes: set[int] | None = None) -> list[dict[str, Any]]:
    """Every call to time, as {"group", "name", "call", "args", "kwargs"} (JSON-ready).

    With ``sizes``, only the settings whose n is one of them.
    """
    out: list[dict[str, Any]] = []
    for n in _GENERIC_SIZES:
        for epsilon0, target in _GENERIC_POINTS:
            kwargs = {"n": n, "epsilon0": epsilon0}
            name = f"n={n:g} eps0={epsilon0:g} delta={target:g}"
            if "epsilon-generic" in groups:
                out.append(
                    {
                        "group": "epsilon-generic",
                        "name": name,
                        "call": "amplified_epsilon",
                        "args": [target],
                        "kwargs": kwargs,
                    }
                )
            if "delta-generic" in groups:
                # δ at the ε the settled answer reports: filled in by the driver.
                out.append(
                    {
                        "group": "delta-generic",
                        "name": name,
                        "call": "delta",
                        "args": [None],
                        "kwargs": kwargs,
                        "at": target,
                    }
                )
    if "epsilon-krr" in groups:
        for n, k, epsilon0, target in _KRR_POINTS:
            out.append(
                {
                    "group": "epsilon-krr",
                    "name": f"n={n:g} k={k} eps0={epsilon0:g} delta={target:g}",
                    "call": "amplified_epsilon",
                    "args": [target],
                    "kwargs": {"n": n, "mechanism": "krr", "epsilon0": epsilon0, "domain_size": k},
                }
            )
    if "calibrate" in groups:
        for mechanism, n, epsilon, target, extra in _CALIBRATIONS:
            out.append(
                {
                    "group": "calibrate",
                    "name": f"{mechanism} n={n:g} eps={epsilon:g} delta={target:g} {extra}",
                    "call": "calibrate",
                    "args": [epsilon, target],
                    "kwargs": {"n": n, "mechanism": mechanism, **extra},
                }
            )
    if sizes is not None:
        out = [s for s in out if s["kwargs"]["n"] in sizes]
    return out


def _worker(clock: str) -> None:
    """Answer timing requests on stdin (JSON lines) with whichever shuffledp PYTHONPATH gives."""
    import shuffledp
    from shuffledp.accounting import amplified_epsilon, calibrate, delta

    calls: dict[str, Callable[..., Any]] = {
        "amplified_epsilon": amplified_epsilon,
        "delta": delta,
        "calibrate": calibrate,
    }
    import dataclasses

    from shuffledp.accounting.methods import Mechanism

    # A package from before k-RR's domain size was `domain_size` (--against an old
    # revision) spells it `k`.
    old_spelling = "k" in {f.name for f in dataclasses.fields(Mechanism)}

    def spelled(kwargs: dict[str, Any]) -> dict[str, Any]:
        if old_spelling and kwargs.get("mechanism") == "krr" and "domain_size" in kwargs:
            kwargs = {**kwargs, "k": kwargs["domain_size"]}
            del kwargs["domain_size"]
        return kwargs

    # Imports and first-call set-up are not what is measured.
    amplified_epsilon(1e-6, n=1000, epsilon0=1.0)
    amplified_epsilon(
        1e-6, **spelled({"n": 1000, "mechanism": "krr", "epsilon0": 1.0, "domain_size": 3})
    )
    print(json.dumps({"package": shuffledp.__file__}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        fn = calls[request["call"]]
        _cold()
        now = time.process_time if clock == "cpu" else time.perf_counter
        start = now()
        out = fn(*request["args"], **spelled(request["kwargs"]))
        seconds = now() - start
        row = out.result if request["call"] == "calibrate" else out
        answer = {
            "seconds": seconds,
            "epsilon": row.epsilon,
            "delta": row.delta,
            "method": row.method,
        }
        if request["call"] == "calibrate":
            answer["value"] = out.value
        print(json.dumps(answer), flush=True)


class _Worker:
    """One worker process importing the package from ``src``."""

    def __init__(self, src: Path, clock: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(src))
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--clock", clock],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        hello = json.loads(self._line())
        package = Path(hello["package"]).resolve()
        if not package.is_relative_to(src.resolve()):
            raise RuntimeError(f"worker for {src} imported shuffledp from {package}")

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("a worker process ended early")
        return line

    def ask(self, setting: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        request = {key: setting[key] for key in ("call", "args", "kwargs")}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self._line())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(_REPO), *args], check=True, capture_output=True).stdout


def _spread(ratios: list[float]) -> dict[str, float] | None:
    if not ratios:
        return None
    return {
        "min": round(min(ratios), 3),
        "median": round(statistics.median(ratios), 3),
        "max": round(max(ratios), 3),
    }


def _row(setting: dict[str, Any], old: _Worker, new: _Worker, repeats: int) -> dict[str, Any]:
    """Both codes' median time on one setting (alternating which goes first), and both answers."""
    if setting["call"] == "delta":
        # Both codes' δ at the ε the current code reports for this δ.
        found = new.ask({**setting, "call": "amplified_epsilon", "args": [setting["at"]]})
        if found["epsilon"] is None:
            return {}
        setting = {**setting, "args": [found["epsilon"]]}
    times: dict[str, list[float]] = {"old": [], "new": []}
    answers: dict[str, dict[str, Any]] = {}
    for r in range(repeats):
        pairs = [("old", old), ("new", new)]
        for label, worker in pairs if r % 2 == 0 else pairs[::-1]:
            answer = worker.ask(setting)
            times[label].append(answer.pop("seconds"))
            answers[label] = answer
    old_s, new_s = statistics.median(times["old"]), statistics.median(times["new"])
    return {
        "group": setting["group"],
        "name": setting["name"],
        "call": setting["call"],
        "args": setting["args"],
        "kwargs": setting["kwargs"],
        "old_seconds": round(old_s, 5),
        "new_seconds": round(new_s, 5),
        "ratio": round(new_s / old_s, 3),
        "old": answers["old"],
        "new": answers["new"],
    }


def _against(
    revision: str, repeats: int, groups: list[str], clock: str, sizes: set[int] | None = None
) -> dict[str, Any]:
    from shuffledp._progress import progress

    commit = _git("rev-parse", "--verify", f"{revision}^{{commit}}").decode().strip()
    head = _git("rev-parse", "HEAD").decode().strip()
    dirty = bool(_git("status", "--porcelain", "--", "src").strip())
    settings = _settings(groups, sizes)
    with tempfile.TemporaryDirectory(prefix="shuffledp-old-") as tmp:
        with tarfile.open(fileobj=BytesIO(_git("archive", commit, "src"))) as archive:
            archive.extractall(tmp, filter="data")
        old, new = _Worker(Path(tmp) / "src", clock), _Worker(_REPO / "src", clock)
        try:
            rows = [
                row
                for s in progress(settings, desc="settings")
                if (row := _row(s, old, new, repeats))
            ]
        finally:
            old.close()
            new.close()
    return {
        "against": revision,
        "old_commit": commit,
        "new": {"head": head, "src_modified": dirty},
        "repeats": repeats,
        "clock": clock,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "ratios": {g: _spread([r["ratio"] for r in rows if r["group"] == g]) for g in groups},
        "settings": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1e4,1e6,1e8", help="table mode: the n of each column")
    parser.add_argument("--against", metavar="REV", help="time old (REV) against new, alternating")
    parser.add_argument("--repeats", type=int, default=5, help="calls per setting and side")
    parser.add_argument(
        "--groups",
        default=",".join(GROUPS),
        help=f"comma-separated, from {', '.join(GROUPS)} (with --against)",
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="with --against: wall-clock seconds, or the worker's CPU seconds (steadier when "
        "other jobs share the machine)",
    )
    parser.add_argument(
        "--n",
        metavar="N,...",
        help="with --against: only the settings at these n (comma-separated, e.g. 1e7)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.clock)
        return
    if args.against is not None:
        groups = [g for g in args.groups.split(",") if g]
        unknown = sorted(set(groups) - set(GROUPS))
        if unknown:
            parser.error(f"unknown groups {unknown}; choose from {', '.join(GROUPS)}")
        if args.repeats < 1:
            parser.error("--repeats must be at least 1")
        only = None if args.n is None else {int(float(x)) for x in args.n.split(",") if x}
        print(json.dumps(_against(args.against, args.repeats, groups, args.clock, only), indent=2))
        return
    sizes = [int(float(x)) for x in args.sizes.split(",")]
    print(json.dumps(_table(sizes), indent=2))


if __name__ == "__main__":
    main()
