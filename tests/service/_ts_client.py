"""Helpers of the TypeScript client's tests (test_ts_client_*.py): build it, run node.

The package is clients/ts/. Its dependencies are installed from the lockfile (``npm ci``)
when node_modules/ is missing, and it is built (``npm run build``: schemas copied, tsc,
the browser bundle) when a source is newer than the build, once per session. Node itself
must be installed: a test fails, never skips, without it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

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
