"""Which package may import which: the arrows the design fixes stay one way.

Imports are read from the source (module level and inside functions, the way
Python runs them); an import under ``if TYPE_CHECKING:`` never runs, so it
does not count towards a cycle, but it does count as an arrow between
packages.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "shuffledp"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, *, type_checking: bool) -> set[str]:
    """Every module (and ``module.name``) ``path`` imports, relative imports resolved."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child) and not type_checking:
                for stmt in child.orelse:
                    visit_one(stmt)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        visit(node)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _graph(prefixes: tuple[str, ...], *, type_checking: bool = False) -> dict[str, set[str]]:
    """Imports between the modules whose names start with one of ``prefixes``.

    Runtime imports only, unless ``type_checking`` adds those under ``if TYPE_CHECKING:``.
    """
    modules = _modules()
    inside = {name for name in modules if name.startswith(prefixes)}
    return {
        name: {m for m in _imports(modules[name], type_checking=type_checking) if m in inside}
        - {name}
        for name in inside
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_service_never_imports_backends() -> None:
    """backends/ sits above service/: it reads the store, the wire format and the task."""
    offenders = {
        name: sorted(
            m for m in _imports(path, type_checking=True) if m.startswith("shuffledp.backends")
        )
        for name, path in _modules().items()
        if name.startswith("shuffledp.service")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_backends_import_service_only_through_its_interfaces() -> None:
    """What the backends take from the services: store interfaces, wire format, task."""
    allowed = (
        "shuffledp.service.store_protocols",
        "shuffledp.service.wire",
        "shuffledp.service.task",
    )
    used = {
        m
        for name, path in _modules().items()
        if name.startswith("shuffledp.backends")
        for m in _imports(path, type_checking=True)
        if m.startswith("shuffledp.service")
    }
    assert used and all(m.startswith(allowed) for m in used), sorted(used)


def test_store_modules_import_one_way() -> None:
    """The factory imports the stores; the stores import the helpers and the interfaces.

    The backends' modules (sqlite_store + sqlite_slots, postgres_store) build on the
    stores written once (sql_store) over the dialect interface (sql_dialect), which
    imports no backend at run time.
    """
    graph = _graph(("shuffledp.service",))
    protocols = "shuffledp.service.store_protocols"
    common = "shuffledp.service.store_common"
    dialect = "shuffledp.service.sql_dialect"
    written_once = "shuffledp.service.sql_store"
    backends = {
        "shuffledp.service.sqlite_store",
        "shuffledp.service.sqlite_slots",
        "shuffledp.service.postgres_store",
    }
    assert not graph[protocols] & {m for m in graph if "store" in m}
    assert "shuffledp.service.store" not in graph[common]
    for store in (*sorted(backends), written_once, dialect):
        assert "shuffledp.service.store" not in graph[store]
        assert protocols in graph[store]
    assert not (graph[written_once] | graph[dialect]) & backends
    assert dialect in graph[written_once]
    assert {written_once, dialect} <= graph["shuffledp.service.sqlite_store"]
    assert {written_once, dialect} <= graph["shuffledp.service.postgres_store"]


def test_no_import_cycle_anywhere_in_the_package() -> None:
    """No cycle of runtime imports between any two files of the package."""
    graph = _graph(("shuffledp",))
    assert len(graph) > 150  # the walk saw the whole package
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a two-module and a three-module circle are found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def test_the_guarantee_types_do_not_import_the_accountant() -> None:
    """shuffledp.privacy sits below the accountant (composition is shuffledp.compose)."""
    imported = _imports(PACKAGE / "privacy.py", type_checking=True)
    assert not [m for m in imported if m.startswith("shuffledp.accounting")]


def _in(package: str, module: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_randomizers_never_import_the_accountant() -> None:
    """randomizers/ sits below accounting/, even for the type checker.

    The accountant imports what the randomizers draw from (k-RR's probabilities,
    CorrelatedNoise, the augmented dummy laws and check_beta, the Laplace
    copies' scales) and re-exports it; a randomizer imports nothing of the
    accountant, not even under ``if TYPE_CHECKING:``.
    """
    offenders = {
        name: sorted(
            m for m in _imports(path, type_checking=True) if _in("shuffledp.accounting", m)
        )
        for name, path in _modules().items()
        if _in("shuffledp.randomizers", name)
    }
    assert len(offenders) >= 7  # the package and its modules were seen
    assert {name: found for name, found in offenders.items() if found} == {}


def test_importing_a_randomizer_loads_neither_the_accountant_nor_scipy() -> None:
    """What the first test says file by file, at run time: nothing below pulls them in."""
    names = sorted(name for name in _modules() if _in("shuffledp.randomizers", name))
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith("
        "('scipy.', 'shuffledp.accounting'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


#: The accountant's groups, lowest first, and the groups each may import.
_ACCOUNTING = "shuffledp.accounting"
_MAY_IMPORT: dict[str, set[str]] = {
    "numerics": {"numerics"},
    "published": {"numerics", "published"},
    "certificates": {"numerics", "published", "certificates"},
    "reproductions": {"numerics", "published", "certificates", "reproductions"},
    "composition": {"numerics", "published", "certificates", "composition"},
}


def _accounting_group(module: str) -> str | None:
    """The group of an accountant module: a subpackage, ``top`` or ``None`` (elsewhere)."""
    if module != _ACCOUNTING and not module.startswith(_ACCOUNTING + "."):
        return None
    rest = module[len(_ACCOUNTING) + 1 :].split(".")
    return rest[0] if rest[0] in _MAY_IMPORT and len(rest) > 1 else "top"


def test_accounting_groups_import_downwards_only() -> None:
    """numerics < published < certificates < reproductions, composition < the questions layer.

    A module of a group imports modules of the groups it may (and its own);
    nothing below the questions layer imports ``api``, ``methods``,
    ``calibration`` or the package itself, and no certificate, published or
    numerical module imports a reproduction.
    """
    modules = _modules()
    offenders = []
    for name, path in modules.items():
        group = _accounting_group(name)
        if group is None or group == "top" or name.rsplit(".", 1)[-1] == group:
            continue
        for target in _imports(path, type_checking=True):
            if target not in modules:
                continue
            other = _accounting_group(target)
            if other is not None and other not in _MAY_IMPORT[group]:
                offenders.append(f"{name} -> {target}")
    assert offenders == []


def test_every_accountant_module_is_in_a_group_its_docstring_names() -> None:
    """Each module under shuffledp/accounting says which group it belongs to."""
    for path in (PACKAGE / "accounting").rglob("*.py"):
        if path.name == "__init__.py" or path.name == "_moved.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        assert "Group:" in doc, path


def test_randomizers_and_protocols_check_values_in_the_data_package() -> None:
    """Bin indices and histograms are checked by shuffledp.data.checks, not by one randomizer."""
    modules = _modules()
    for name, path in modules.items():
        if name.startswith(("shuffledp.protocols", "shuffledp.randomizers")):
            imported = _imports(path, type_checking=True)
            assert "shuffledp.randomizers.bitflip.check_values" not in imported, name


#: The most lines a module of the package may have.
MAX_LINES = 1000
#: TEMPORARY: modules over MAX_LINES that are to be split, each by the engineer who owns
#: it. The test fails for a listed module that is already within the limit (or gone),
#: so an entry is removed as soon as its split lands and the list cannot go stale.
_BEING_SPLIT: set[str] = set()


def test_no_module_is_over_a_thousand_lines() -> None:
    """Every module of the package has at most MAX_LINES lines (a split says what it holds)."""
    sizes = {
        path.relative_to(SRC).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert len(sizes) > 150  # the walk saw the whole package
    over = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert {name: lines for name, lines in over.items() if name not in _BEING_SPLIT} == {}
    split = sorted(name for name in _BEING_SPLIT if name not in over)
    assert split == [], f"within {MAX_LINES} lines (or gone): remove from _BEING_SPLIT"


def test_no_import_cycle_among_experiments_even_for_the_type_checker() -> None:
    """Experiments modules import one way, imports under ``if TYPE_CHECKING:`` included.

    A figures module takes the types it draws from a module both it and the runs
    import (near_central_grid for near_central and near_central_plots), never
    from the runs that call it.
    """
    graph = _graph(("shuffledp.experiments",), type_checking=True)
    assert "shuffledp.experiments.near_central_plots" in graph
    assert _cycles(graph) == []


def test_releases_are_built_below_the_command_line_and_the_services() -> None:
    """shuffledp.release builds every release; it imports neither cli/ nor service/, and
    service/ (which publishes releases) imports nothing of cli/."""
    for name, path in _modules().items():
        imported = _imports(path, type_checking=True)
        if name.startswith("shuffledp.release"):
            assert not [m for m in imported if m.startswith(("shuffledp.cli", "shuffledp.service"))]
        if name.startswith("shuffledp.service"):
            assert not [m for m in imported if m.startswith("shuffledp.cli")], name


#: The one module below specs/ that reads a protocol's name: the accountant re-derives a
#: service release's message bounds from the name its document records
#: (test_compose_rederive checks its table against every spec).
_NAME_TABLES = {"shuffledp.accounting.composition.rederive"}


def _compares_a_protocol_name(node: ast.AST) -> bool:
    """``x.protocol == "flip"``, ``protocol in ("flip", ...)`` and the like."""
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    named = any(
        (isinstance(side, ast.Name) and side.id == "protocol")
        or (isinstance(side, ast.Attribute) and side.attr == "protocol")
        for side in sides
    )
    literal = any(isinstance(side, ast.Constant | ast.Tuple | ast.List | ast.Set) for side in sides)
    return named and literal


def test_a_protocol_name_is_branched_on_only_in_the_spec_registry() -> None:
    """Every layer asks the spec; no module compares a protocol's name with a literal."""
    offenders = []
    for name, path in _modules().items():
        if name.startswith("shuffledp.specs") or name in _NAME_TABLES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [
            f"{name}:{node.lineno}" for node in ast.walk(tree) if _compares_a_protocol_name(node)
        ]
    assert offenders == []


def test_the_name_branch_finder_finds_one() -> None:
    tree = ast.parse('if task.protocol == "flip" or protocol in ("krr", "augmented"): pass')
    assert sum(_compares_a_protocol_name(node) for node in ast.walk(tree)) == 2
