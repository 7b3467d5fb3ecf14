"""Helpers of the TypeScript client's tests (test_ts_client_*.py): build it, run node.

The package is clients/ts/. Its dependencies are installed from the lockfile (``npm ci``)
when node_modules/ is missing, and it is built (``npm run build``: schemas copied, tsc,
the browser bundle) when a source is newer than the build, once per session. Node itself
must be installed: a test fails, never skips, without it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "ts"
BUILD = PACKAGE / "build"
TOOL = BUILD / "test" / "tools" / "tool.js"
CLI = BUILD / "src" / "cli.js"
_SOURCES = ("src", "test", "scripts", "package.json", "package-lock.json", "tsconfig.json")
_built = False


def node() -> str:
    """The node executable (the test fails if there is none)."""
    path = shutil.which("node")
    if path is None:
        pytest.fail(
            "node is not installed: the TypeScript client's tests need Node >= 20", pytrace=False
        )
    return path


def _newest_source() -> float:
    newest = 0.0
    for name in _SOURCES:
        path = PACKAGE / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        newest = max([newest, *(p.stat().st_mtime for p in files)])
    return newest


def _npm(*args: str, timeout: float = 300) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is not installed: the TypeScript client's tests need it", pytrace=False)
    result = subprocess.run(
        [npm, *args], cwd=PACKAGE, capture_output=True, text=True, timeout=timeout, check=False
    )
    if result.returncode != 0:
        pytest.fail(
            f"npm {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )


def ensure_built() -> None:
    """Install the package's dependencies if missing and build it if a source changed."""
    global _built
    node()
    if _built:
        return
    if not (PACKAGE / "node_modules").is_dir():
        _npm("ci", "--no-audit", "--no-fund")
    stamp = BUILD / ".built"
    if not stamp.exists() or stamp.stat().st_mtime < _newest_source():
        _npm("run", "build")
        stamp.touch()
    _built = True


def run_node(
    *args: str | os.PathLike[str], stdin: str | None = None, timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``node ARGS`` to its end (killed at ``timeout``); fail the test on a non-zero exit."""
    ensure_built()
    result = subprocess.run(
        [node(), *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,
    )
    if result.returncode != 0:
        pytest.fail(
            f"node {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr[-4000:]}"
        )
    return result


def tool(*args: str | os.PathLike[str], stdin: str | None = None, timeout: float = 120) -> Any:
    """Run a subcommand of clients/ts/test/tools/tool.ts; return its JSON output."""
    return json.loads(run_node(TOOL, *args, stdin=stdin, timeout=timeout).stdout)


# -- end to end: what the analyzer counted and released ------------------------------------

#: False-failure rate of an end-to-end accuracy check (split over the domain's bins).
ACCURACY_FALSE_FAILURE = 1e-6


def read_receipts(stdout: str, task_id: str, users: int) -> list[dict[str, Any]]:
    """The CLI's (or page's) receipts: one valid ``submission`` document per user."""
    from shuffledp.schemas import validate

    receipts = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    assert len(receipts) == users
    for receipt in receipts:
        validate(receipt)
        assert receipt["task_id"] == task_id
    assert len({r["submission_id"] for r in receipts}) == users
    return receipts


def correlated_error_threshold(alpha: float, honest_shares: float, bins: int) -> int:
    """Smallest t with P(|A − A′| > t) ≤ ACCURACY_FALSE_FAILURE / bins, A, A′ ~ NB(s, α).

    The correlated estimate's error in a bin is exactly A − A′: the users' NB(1/m, α) shares
    of (j, +1) and (j, −1) summed over N users (s = N/m; the flooding cancels).
    """
    from scipy.stats import nbinom

    top = int(nbinom.isf(1e-18, honest_shares, 1 - alpha)) + 1
    pmf = nbinom.pmf(np.arange(top + 1), honest_shares, 1 - alpha)
    difference = np.convolve(pmf, pmf[::-1])  # index top + k: P(A − A′ = k)
    tail = ACCURACY_FALSE_FAILURE / bins
    for t in range(top + 1):
        outside = difference[: top - t].sum() + difference[top + t + 1 :].sum()
        if outside <= tail:
            return t
    return top


def bernstein_threshold(sd: float, bound: float, bins: int) -> float:
    """t with 2·exp(−t² / (2(σ² + M·t/3))) = ACCURACY_FALSE_FAILURE / bins (Bernstein).

    For a sum of independent terms each within ``bound`` = M of its mean, of standard
    deviation ``sd`` = σ: |sum − mean| > t with at most that probability.
    """
    log_term = math.log(2 * bins / ACCURACY_FALSE_FAILURE)
    a = bound * log_term / 3
    return a + math.sqrt(a * a + 2 * sd * sd * log_term)


def check_end_to_end(dep: Any, values: list[str], receipts: list[dict[str, Any]]) -> dict[str, Any]:
    """Every message counted, nothing undecryptable, the estimate within its stated error.

    Returns the release.
    """
    from _deploy import stored_counts

    users = len(values)
    dep.wait_aggregated(users)
    analyzer = dep.analyzer_metrics()
    assert analyzer["users_aggregated"] == users
    assert analyzer.get("messages_undecryptable", 0) == analyzer.get("messages_undecodable", 0) == 0
    counts = stored_counts(dep)
    assert int(counts.sum()) == sum(r["messages"] for r in receipts)
    release = dep.estimate().json()
    assert release["n"] == users
    task = dep.task
    truth = np.bincount([task.index_of(v) for v in values], minlength=task.domain_size)
    estimate = np.asarray(release["estimate"]["counts"], dtype=float)
    stderr = np.asarray(release["estimate"]["stderr"], dtype=float)
    d = task.domain_size
    if task.protocol == "correlated":
        alpha, shares = task.spec.alpha, users / task.spec.min_honest
        # The stated stderr is the law's: sd(A − A′) = √(2·(N/m)·α)/(1 − α).
        np.testing.assert_allclose(stderr, math.sqrt(2 * shares * alpha) / (1 - alpha), rtol=1e-12)
        threshold = correlated_error_threshold(alpha, shares, d) * np.ones(d)
    elif task.protocol == "krr":
        # The inverted count is (c_j − N·b)/(a − b), c_j a sum of N independent Bernoulli: its
        # stated stderr times (a − b) is c_j's standard deviation (each term within 1 of its
        # mean), so Bernstein's inequality turns the stated stderr into a threshold.
        from shuffledp.randomizers.krr import krr_probabilities

        a, b = krr_probabilities(task.spec.epsilon0, d)
        exact = np.sqrt(truth * a * (1 - a) + (users - truth) * b * (1 - b)) / (a - b)
        np.testing.assert_allclose(stderr, exact, rtol=0.25)  # the stated stderr is the law's
        threshold = np.array([bernstein_threshold(s * (a - b), 1.0, d) / (a - b) for s in stderr])
    else:  # pragma: no cover - the end-to-end tests run correlated and k-RR tasks
        raise AssertionError(f"no accuracy check for {task.protocol}")
    error = estimate - truth
    assert np.all(np.abs(error) <= threshold), (error.tolist(), threshold.tolist(), stderr.tolist())
    return release
