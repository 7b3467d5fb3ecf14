"""Each ``shuffledp run`` command imports its protocol and what that protocol needs, no more.

Issue 24: ``run flip`` on a 100,000-row file spent 83% of its time importing.
``shuffledp.protocols`` imported every protocol, so FLIP loaded the correlated
certificate (scipy.signal) and, through the augmented one, the accountant's
questions layer (scipy.optimize); ``shuffledp.randomizers`` and
``shuffledp.accounting`` did the same one level down, the expected ℓ∞ error
integrated with scipy.integrate (which imports scipy.optimize), and pyarrow
imported pandas when the labels' indices were converted. FLIP needs none of
them: its accountant is numpy and its error a Gauss-Legendre sum, so a FLIP
run loads no scipy at all. ``benchmarks/cli_startup.py`` measures the time.

Each command runs in a fresh interpreter (``shuffledp.cli.main``), which then
lists the modules it holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from shuffledp.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.__stdout__)
"""

#: The protocol and randomizer modules each command may load: its own, and the ones
#: its protocol is built on (the contract in base, which prepares values with values;
#: the segmented protocol counts levels with k-RR in segmented_levels).
OWN: dict[str, tuple[set[str], set[str]]] = {
    "flip": ({"base", "values", "flip"}, {"bitflip"}),
    "krr": ({"base", "values", "krr"}, {"krr"}),
    "correlated": ({"base", "values", "correlated"}, {"correlated"}),
    "augmented": ({"base", "values", "augmented"}, {"augmented"}),
    "segmented": (
        {"base", "values", "krr", "segmented", "segmented_levels"},
        {"krr", "poisson"},
    ),
    "per-user": ({"base", "values", "per_user"}, {"laplace"}),
}

#: What a FLIP run must not load (with its sub-modules): the issue's two, and the rest
#: of scipy, pandas and the plotting library, none of which FLIP uses.
NOT_FOR_FLIP = (
    "scipy.signal",
    "scipy.optimize",
    "scipy",
    "pandas",
    "matplotlib",
    "sklearn",
    "dp_accounting",
    "shuffledp.accounting.api",
    "shuffledp.accounting.methods",
    "shuffledp.shuffler.grouped",
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    cities = "ABC"
    (root / "values.csv").write_text(
        "user,city\n" + "".join(f"u{i},{cities[i * 7 % 3]}\n" for i in range(2000))
    )
    lines = ["user,item,level"]
    for i in range(2000):
        lines += [f"u{i},{'ABCDE'[i % 5]},{('0.5', '1')[i % 2]}"]
        lines += [f"u{i},{'ABCDE'[(i + 2) % 5]},{('0.5', '1')[i % 2]}"]
    (root / "sets.csv").write_text("\n".join(lines) + "\n")
    lines = ["user,cls,count"]
    for i in range(300):
        lines += [f"u{i},{c},{1 + (i + j) % 5}" for j, c in enumerate(cities)]
    (root / "counts.csv").write_text("\n".join(lines) + "\n")
    return root


def _argv(command: str, root: Path) -> list[str]:
    out = str(root / f"{command}.json")
    if command == "segmented":
        return [
            "run", "segmented", "--input", str(root / "sets.csv"), "--user-column", "user",
            "--item-column", "item", "--level-column", "level", "--domain", "A,B,C,D,E",
            "--levels", "0.5,1", "--delta", "1e-6", "--items-per-user", "2", "--blanket", "1",
            "--output", out, "--quiet",
        ]  # fmt: skip
    if command == "per-user":
        return [
            "run", "per-user", "--input", str(root / "counts.csv"), "--user-column", "user",
            "--class-column", "cls", "--count-column", "count", "--domain", "A,B,C",
            "--epsilon", "1", "--epsilon1", "0.5", "--c", "0.5", "--clusters", "3",
            "--output", str(root / "per-user.csv"), "--report", out, "--quiet",
        ]  # fmt: skip
    return [
        "run", command, "--input", str(root / "values.csv"), "--column", "city",
        "--domain", "A,B,C", "--epsilon", "1", "--delta", "1e-6", "--output", out, "--quiet",
    ]  # fmt: skip


def _loaded_by(argv: list[str]) -> list[str]:
    """The modules a fresh interpreter holds after ``shuffledp <argv>`` ran (and succeeded)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0, done.stderr
    modules: list[str] = result["modules"]
    return modules


def _under(modules: list[str], package: str) -> set[str]:
    """The direct sub-modules of ``package`` among ``modules``, by their last name."""
    prefix = package + "."
    return {
        m.removeprefix(prefix)
        for m in modules
        if m.startswith(prefix) and "." not in m[len(prefix) :]
    }


@pytest.mark.parametrize("command", list(OWN))
def test_a_run_command_loads_only_its_protocol(command: str, inputs: Path) -> None:
    modules = _loaded_by(_argv(command, inputs))
    protocols, randomizers = OWN[command]
    assert _under(modules, "shuffledp.protocols") == protocols
    assert _under(modules, "shuffledp.randomizers") == randomizers


@pytest.mark.parametrize("path", ["message", "count"])
def test_a_flip_run_loads_no_scipy_pandas_or_matplotlib(path: str, inputs: Path) -> None:
    modules = _loaded_by([*_argv("flip", inputs), "--path", path])
    assert "shuffledp.protocols.flip" in modules and "pyarrow.csv" in modules  # it ran, fast CSV
    heavy = [m for m in modules if any(m == f or m.startswith(f + ".") for f in NOT_FOR_FLIP)]
    assert heavy == []


def test_the_protocols_package_alone_loads_no_protocol() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, shuffledp.protocols; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    modules = json.loads(done.stdout)
    assert _under(modules, "shuffledp.protocols") == set()
    assert not any(m == "scipy" or m.startswith("scipy.") for m in modules)
