"""Packages that re-export lazily (PEP 562) keep every public name, for Python and for mypy.

Each such package lists its names in ``__all__``, maps each to its module in
``_LAZY`` (imported on first use) and imports the same names under ``if
TYPE_CHECKING:`` so that mypy sees them. These checks keep the three in step,
and check that importing the package alone imports none of the modules it maps.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

LAZY_PACKAGES = (
    "shuffledp",
    "shuffledp.accounting",
    "shuffledp.data",
    "shuffledp.protocols",
    "shuffledp.randomizers",
    "shuffledp.shuffler",
    "shuffledp.specs",
)


def _type_checking_imports(package: ModuleType) -> dict[str, str]:
    """Name -> module of the ``from X import name`` under ``if TYPE_CHECKING:``."""
    assert package.__file__ is not None
    tree = ast.parse(Path(package.__file__).read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.body:
                assert isinstance(child, ast.ImportFrom) and child.module is not None
                found.update({alias.name: child.module for alias in child.names})
    return found


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_all_lazy_map_and_type_checking_imports_agree(name: str) -> None:
    package = importlib.import_module(name)
    lazy: dict[str, str] = package._LAZY
    eager = {n for n in package.__all__ if n not in lazy}  # defined in the package itself
    assert all(n in vars(package) for n in eager), eager
    assert set(lazy) <= set(package.__all__)
    typed = _type_checking_imports(package)
    # mypy sees each lazy name from its real home (or a package re-exporting it there).
    assert set(typed) == set(lazy)
    for attr, module in lazy.items():
        home = importlib.import_module(module)
        assert getattr(package, attr) is getattr(home, attr), attr
        assert getattr(importlib.import_module(typed[attr]), attr) is getattr(home, attr), attr
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        package.not_a_name  # noqa: B018


@pytest.mark.parametrize("name", LAZY_PACKAGES[1:])
def test_importing_a_lazy_package_imports_none_of_its_names_modules(name: str) -> None:
    package = importlib.import_module(name)
    probe = f"import json, sys, {name}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(json.loads(done.stdout))
    mapped = set(package._LAZY.values()) - {name}
    assert sorted(mapped & loaded) == []


def test_star_import_gives_every_public_name() -> None:
    for name in LAZY_PACKAGES:
        package = importlib.import_module(name)
        scope: dict[str, object] = {}
        exec(f"from {name} import *", scope)
        assert set(package.__all__) <= set(scope), name
