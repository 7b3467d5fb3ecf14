"""Start-up of the command line: what it imports, what ``--help`` lists, Ctrl-C during imports.

``shuffledp --version`` used to import scipy's optimizers and the accountant
(0.6-1.6 s). Importing the package and building the parser now load none of
the heavy machinery; each command imports what it uses when it runs
(``benchmarks/cli_startup.py`` measures the times).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import shuffledp
import shuffledp.cli
from shuffledp.cli._common import Parser
from shuffledp.cli._registry import command_modules

EXE = str(Path(sys.executable).with_name("shuffledp"))

#: Modules (with their sub-modules) that the parser must not load: the issue's four, and
#: everything else a command pulls in only when it runs.
FORBIDDEN = (
    "scipy.optimize",
    "pandas",
    "pyspark",
    "matplotlib",
    "scipy",
    "numpy",
    "pyarrow",
    "tqdm",
    "dp_accounting",
    "httpx",
    "starlette",
    "uvicorn",
    "shuffledp.accounting",
    "shuffledp.protocols",
    "shuffledp.randomizers",
    "shuffledp.analyzers",
    "shuffledp.shuffler",
    "shuffledp.experiments",
    "shuffledp.backends",
    "shuffledp.service.client",
)


def _loaded_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    modules: list[str] = json.loads(out.splitlines()[-1])
    return modules


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]


def test_import_of_the_cli_loads_no_heavy_module() -> None:
    modules = _loaded_after("import shuffledp.cli")
    assert "shuffledp.cli" in modules
    assert _heavy(modules) == []


def test_building_every_command_of_the_parser_loads_no_heavy_module() -> None:
    modules = _loaded_after("from shuffledp.cli import build_parser\nbuild_parser()")
    assert "shuffledp.cli.run.flip" in modules and "shuffledp.cli.account.delta" in modules
    assert _heavy(modules) == [], "import these inside the command's handler"


def test_import_shuffledp_is_light_and_every_public_name_still_imports() -> None:
    assert _heavy(_loaded_after("import shuffledp")) == []
    code = (
        "import shuffledp\n"
        "from shuffledp import *\n"
        "missing = [n for n in shuffledp.__all__ if n not in globals()]\n"
        "assert not missing, missing\n"
        "assert set(shuffledp.__all__) <= set(dir(shuffledp))\n"
        "from shuffledp import FlipProtocol, secure_permutation, compose\n"
        "assert FlipProtocol.__module__ == 'shuffledp.protocols.flip'\n"
    )
    assert "shuffledp.protocols.flip" in _loaded_after(code)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        shuffledp.not_a_name  # noqa: B018


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EXE, *argv], capture_output=True, text=True, timeout=60, check=False)


def test_help_lists_every_command_and_every_family_lists_its_commands() -> None:
    top = _run("--help")
    assert top.returncode == 0, top.stderr
    families = command_modules(shuffledp.cli)
    assert len(families) >= 9
    for family in families:
        assert f"    {family.NAME}" in top.stdout, family.NAME
        if not hasattr(family, "__path__"):  # a single command such as demo
            continue
        listed = _run(family.NAME, "--help")
        assert listed.returncode == 0, listed.stderr
        for module in command_modules(family):  # type: ignore[arg-type]
            assert f"    {module.NAME}" in listed.stdout, (family.NAME, module.NAME)


def test_version_and_python_dash_m() -> None:
    expected = f"shuffledp {shuffledp.__version__}\n"
    assert _run("--version").stdout == expected
    module = subprocess.run(
        [sys.executable, "-m", "shuffledp", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (module.returncode, module.stdout) == (0, expected)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: A command whose imports (numpy, scipy, the accountant) take most of its time.
KRR = ["account", "krr", "--n", "1000", "--domain-size", "10", "--epsilon", "1", "--delta", "1e-6"]

#: CPU seconds at which to interrupt: past the interpreter's start and ``import
#: shuffledp.cli`` (about 0.04 s of CPU), inside the command's own imports of numpy,
#: scipy and the accountant (which end at about 0.7 s of CPU).
DURING_IMPORTS = (0.12, 0.25, 0.45)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("cpu", DURING_IMPORTS)
def test_ctrl_c_while_a_command_imports_is_one_line_and_exit_130(cpu: float) -> None:
    process = subprocess.Popen(
        [EXE, *KRR],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        while process.poll() is None and _cpu_seconds(process.pid) < cpu:
            time.sleep(0.005)
    except OSError:
        pass  # it ended meanwhile
    try:
        late = _cpu_seconds(process.pid) > 0.6
    except OSError:
        late = True
    if process.poll() is not None or late:
        # On a busy machine this process may wake up after the command's imports (or
        # even its work, after which Ctrl-C is ignored): nothing left to test here.
        pytest.skip("the command was past its imports before the interrupt")
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (130, "shuffledp: interrupted\n")


def _raising(exc: BaseException) -> Parser:
    parser = Parser(prog="shuffledp")

    def handler(_: object) -> int:
        raise exc

    parser.set_defaults(handler=handler)
    return parser


def _import_error_from_ctrl_c() -> ImportError:
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise ImportError("initialization failed") from interrupt
    except ImportError as wrapped:
        return wrapped


@pytest.mark.parametrize(
    "exc",
    [_import_error_from_ctrl_c(), OSError(5, "Input/output error")],
    ids=["import-error-caused-by-ctrl-c", "oserror-in-handling-ctrl-c"],
)
def test_an_error_caused_by_ctrl_c_is_an_interrupt(
    exc: BaseException, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SIGINT inside a C extension's module init surfaces as ``ImportError`` (seen in CI
    when ``scipy.fft``'s pocketfft initialised); it is still Ctrl-C: one line, 130."""
    if isinstance(exc, OSError):
        exc.__context__ = KeyboardInterrupt()
    monkeypatch.setattr(shuffledp.cli, "build_parser", lambda argv=None: _raising(exc))
    assert shuffledp.cli.main([]) == 130
    assert capsys.readouterr().err == "shuffledp: interrupted\n"


def test_an_error_not_caused_by_ctrl_c_keeps_its_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = ImportError("a real missing module")
    monkeypatch.setattr(shuffledp.cli, "build_parser", lambda argv=None: _raising(plain))
    with pytest.raises(ImportError, match="a real missing module"):
        shuffledp.cli.main([])


_FAILING_EXTENSION = (
    "try:\n"
    "    raise KeyboardInterrupt\n"
    "except KeyboardInterrupt as interrupt:\n"
    "    raise ImportError('initialization failed') from interrupt\n"
)


def test_require_passes_ctrl_c_on_instead_of_blaming_a_missing_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shuffledp._optional import MissingExtraError, require

    (tmp_path / "interrupted_extension.py").write_text(_FAILING_EXTENSION)
    (tmp_path / "broken_extension.py").write_text("raise ImportError('no such thing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        require("interrupted_extension", extra="service")
    with pytest.raises(MissingExtraError, match=r"pip install 'shuffledp\[service\]'"):
        require("broken_extension", extra="service")


def test_a_missing_extra_error_caused_by_ctrl_c_is_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from shuffledp._optional import MissingExtraError

    try:
        try:
            raise _import_error_from_ctrl_c()
        except ImportError:
            raise MissingExtraError("httptools is required for this") from None
    except MissingExtraError as wrapped:
        error = wrapped
    monkeypatch.setattr(shuffledp.cli, "build_parser", lambda argv=None: _raising(error))
    assert shuffledp.cli.main([]) == 130
    assert capsys.readouterr().err == "shuffledp: interrupted\n"


#: Installed through ``sitecustomize`` (imported by ``site`` before any script runs): a
#: finder that sends this process SIGINT when the module named by SHUFFLEDP_SIGINT_AT is
#: first looked up, so the interrupt lands at a chosen point of the start-up, every time.
_SIGINT_AT_IMPORT = """
import os, signal, sys

class _InterruptAt:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["SHUFFLEDP_SIGINT_AT"]:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _InterruptAt())
"""

#: Modules first imported, in this order, after the package's first line (its
#: ``__init__`` imports ``shuffledp._optional`` right after ``shuffledp._interrupts``):
#: the package, the command line, the parser, a command family, the command's own imports.
#: numpy's C core imports ``datetime`` through ``PyCapsule_Import``, which replaces the
#: KeyboardInterrupt by an ImportError that does not chain it (it was exit 1 and a
#: traceback telling the user to reinstall numpy).
START_UP_MODULES = (
    "shuffledp._optional",
    "shuffledp.cli",
    "argparse",
    "shuffledp.cli._registry",
    "shuffledp.cli.account",
    "numpy",
    "datetime",
    "scipy.special",
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("module", START_UP_MODULES)
@pytest.mark.parametrize("entry", ["console-script", "python-m"])
def test_ctrl_c_at_any_point_of_the_start_up_is_one_line_and_exit_130(
    module: str, entry: str, tmp_path: Path
) -> None:
    """Issue 24: within about 1 s of the start a Ctrl-C gave a traceback and an exit by
    signal; the command now handles it from the package's first line."""
    (tmp_path / "sitecustomize.py").write_text(_SIGINT_AT_IMPORT)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "SHUFFLEDP_SIGINT_AT": module}
    command = [EXE] if entry == "console-script" else [sys.executable, "-m", "shuffledp"]
    done = subprocess.run(
        [*command, *KRR], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert (done.returncode, done.stderr) == (130, "shuffledp: interrupted\n"), done.stderr
    assert done.stdout == ""


def test_importing_the_cli_elsewhere_changes_no_signal_handler() -> None:
    """Only the command takes Ctrl-C over at import: a program that imports the CLI keeps
    Python's own handler (KeyboardInterrupt) until it calls main()."""
    code = (
        "import signal\n"
        "import shuffledp.cli\n"
        "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
