"""``run flip|krr|correlated|augmented`` calibrate through their spec, never the protocol.

One calibration path serves ``run`` and ``task create``: the spec's
``calibrated``. Read from the source (imports at module level, inside
functions and under ``TYPE_CHECKING``): no module of ``cli/run/`` imports a
protocol class or a calibration of the four protocols a spec describes (a
type alias and the check of ``--min-honest`` against n are all it may take from
them), and each of the four commands calls ``calibrated`` on its spec class,
imported from ``shuffledp.specs``, which loads that spec's module alone.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shuffledp.specs import SPECS

SRC = Path(__file__).resolve().parents[2] / "src"
RUN = SRC / "shuffledp" / "cli" / "run"

#: The protocol modules whose protocols a spec calibrates.
SPEC_PROTOCOLS = {f"shuffledp.protocols.{name}" for name in SPECS}

#: What a run module may import from them: no protocol, no calibration.
ALLOWED = {
    "shuffledp.protocols.correlated": {
        "MinHonest",  # --min-honest's type
        "resolve_min_honest",  # --min-honest checked against n (shared with account correlated)
    },
    "shuffledp.protocols.augmented": {"Calibration"},  # --calibration's type
}


def _package(path: Path) -> list[str]:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return parts if path.name == "__init__.py" else parts[:-1]


def calibrating_imports(source: str, package: list[str]) -> list[str]:
    """Every import in ``source`` of a spec's protocol module other than :data:`ALLOWED`.

    ``import shuffledp.protocols[.x]``, ``from shuffledp import protocols`` and
    ``from shuffledp.protocols import FlipProtocol`` (the lazy re-exports) count too.
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"import {alias.name}"
                for alias in node.names
                if alias.name == "shuffledp.protocols" or alias.name in SPEC_PROTOCOLS
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names = [alias.name for alias in node.names]
            if module in SPEC_PROTOCOLS:
                found += [
                    f"from {module} import {name}"
                    for name in names
                    if name not in ALLOWED.get(module, set())
                ]
            elif module == "shuffledp.protocols":
                found += [f"from {module} import {name}" for name in names]
            elif module == "shuffledp" and "protocols" in names:
                found.append("from shuffledp import protocols")
    return found


def test_no_run_module_imports_a_protocol_to_calibrate() -> None:
    offenders = {
        path.name: found
        for path in sorted(RUN.glob("*.py"))
        if (found := calibrating_imports(path.read_text(encoding="utf-8"), _package(path)))
    }
    assert offenders == {}


def test_the_import_finder_finds_each_way_of_importing_a_protocol() -> None:
    package = ["shuffledp", "cli", "run"]
    found = calibrating_imports(
        "from shuffledp.protocols.flip import FlipProtocol\n"
        "from ...protocols.krr import calibrate_krr\n"
        "import shuffledp.protocols.augmented\n"
        "from shuffledp.protocols import CorrelatedProtocol\n"
        "from shuffledp import protocols\n"
        "def f():\n"
        "    from shuffledp.protocols.correlated import CorrelatedProtocol, MinHonest\n"
        "from shuffledp.protocols.correlated import resolve_min_honest\n"
        "from shuffledp.protocols.base import ProtocolRun\n"
        "from shuffledp.protocols.segmented import run_segmented\n",
        package,
    )
    assert found == [
        "from shuffledp.protocols.flip import FlipProtocol",
        "from shuffledp.protocols.krr import calibrate_krr",
        "import shuffledp.protocols.augmented",
        "from shuffledp.protocols import CorrelatedProtocol",
        "from shuffledp import protocols",
        "from shuffledp.protocols.correlated import CorrelatedProtocol",
    ]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_run_command_calls_calibrated_on_its_spec_from_the_specs_package(name: str) -> None:
    spec = SPECS[name].__name__
    tree = ast.parse((RUN / f"{name}.py").read_text(encoding="utf-8"))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "shuffledp.specs"
        for alias in node.names
    }
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "calibrated"
        and isinstance(node.func.value, ast.Name)
    ]
    assert spec in imported
    assert [call.func.value.id for call in calls] == [spec]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(SPECS))
def test_importing_a_spec_from_the_package_loads_no_other_spec(name: str) -> None:
    """``from shuffledp.specs import XSpec`` (what ``run x`` does) loads X's spec module only.

    (``test_run_imports`` checks the protocols and randomizers a whole run loads.)
    """
    probe = (
        f"import json, sys\nfrom shuffledp.specs import {SPECS[name].__name__}\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = json.loads(done.stdout)
    assert {m for m in loaded if m.startswith("shuffledp.specs.")} == {
        "shuffledp.specs.base",
        f"shuffledp.specs.{name}",
    }
