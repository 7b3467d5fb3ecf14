"""Cheap errors first: the parser checks every number before any command imports numpy.

Issue 24: ``--epsilon 0`` took 1.8-2.2 s to fail (the command imported scipy and
the accountant before checking it) against 0.15 s for ``--epsilon abc``;
``--delta -1e-6`` said "expected one argument"; the parser's errors started
``error: shuffledp ...`` and the others ``shuffledp: error: ...``. The times are
measured by ``benchmarks/cli_cheap_errors.py``; these tests check what makes
them equal: the process that refuses a number has loaded no heavy module.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.cli import build_parser, main
from shuffledp.cli._common import byte_size

PREFIX = "shuffledp: error: "

#: What the handlers import; none of it may load before a number is refused.
HEAVY = ("numpy", "scipy", "pandas", "pyarrow", "dp_accounting", "httpx", "shuffledp.accounting")

_RUN = ["--input", "data.csv", "--column", "city", "--domain", "a,b"]
_TARGET = ["--epsilon", "1", "--delta", "1e-6"]
_ACCOUNT = ["--n", "1000", "--domain-size", "10", *_TARGET]

#: (command line, the message's fragment): one bad number per command family and option kind.
BAD_NUMBERS = [
    (["run", "krr", *_RUN, "--epsilon", "0", "--delta", "1e-6"],
     "--epsilon must be a finite number > 0, got 0.0"),
    (["run", "correlated", *_RUN, "--epsilon", "1", "--delta", "-1e-6"],
     "--delta must be in the open interval (0, 1), got -1e-06"),
    (["run", "flip", *_RUN, *_TARGET, "--delta", "-2.5E-3"],
     "--delta must be in the open interval (0, 1), got -0.0025"),
    (["run", "flip", *_RUN, *_TARGET, "--fake-users", "-1"],
     "--fake-users must be an integer >= 0, got -1"),
    (["run", "krr", *_RUN, *_TARGET, "--epsilon0", "-inf"],
     "--epsilon0 must be a finite number > 0, got -inf"),
    (["run", "correlated", *_RUN, *_TARGET, "--slack", "nan"],
     "--slack must be a finite number > 0, got nan"),
    (["run", "augmented", *_RUN, *_TARGET, "--trials", "0"],
     "--trials must be an integer >= 1, got 0"),
    (["run", "krr", *_RUN, *_TARGET, "--seed", "-3"], "--seed must be an integer >= 0, got -3"),
    (["run", "segmented", "--input", "s.csv", "--user-column", "u", "--item-column", "i",
      "--level-column", "l", "--levels", "1", "--domain", "a,b", "--delta", "1e-5",
      "--items-per-user", "0"], "--items-per-user must be an integer >= 1, got 0"),
    (["run", "per-user", "--input", "p.csv", "--domain", "a,b", "--epsilon", "1",
      "--epsilon1", "0.5", "--c", "1.5", "--output", "o.csv"],
     "--c must be a number in (0, 1], got 1.5"),
    (["account", "krr", *_ACCOUNT[:2], "--domain-size", "1", *_TARGET],
     "--domain-size must be an integer >= 2, got 1"),
    (["account", "delta", "--n", "0", "--epsilon", "1", "--epsilon0", "1"],
     "--n must be an integer >= 1, got 0"),
    (["account", "correlated", *_ACCOUNT, "--gamma", "1.5"],
     "--gamma must be in the open interval (0, 1), got 1.5"),
    (["simulate", "flip", "--n", "0", "--domain-size", "5", *_TARGET],
     "--n must be an integer >= 1, got 0"),
    (["task", "create", "--protocol", "krr", "--domain", "a,b", *_TARGET,
      "--min-batch-users", "1", "--out", "t.json", "--key-out", "k"],
     "--min-batch-users must be an integer >= 2, got 1"),
    (["client", "submit", "--task", "t.json", "--shuffler", "http://127.0.0.1:9",
      "--values-file", "v.txt", "--retry-seconds", "-1"],
     "--retry-seconds must be a finite number >= 0, got -1.0"),
    (["demo", "--epsilon", "0"], "--epsilon must be a finite number > 0, got 0.0"),
    (["experiment", "near-central", "--repetitions", "1"],
     "--repetitions must be an integer >= 2, got 1"),
]  # fmt: skip


def _refusal_in_a_fresh_process(argv: list[str], cwd: Path) -> tuple[int, str, list[str]]:
    """Run ``main(argv)`` in a new interpreter; return its code, stderr and heavy modules."""
    probe = (
        "import json, sys\n"
        "from shuffledp.cli import main\n"
        f"code = main({argv!r})\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
        f"or any(m.startswith(h) for h in {HEAVY!r}))\n"
        "print(json.dumps([code, heavy]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    code, heavy = json.loads(done.stdout.splitlines()[-1])
    return code, done.stderr, heavy


@pytest.mark.parametrize(("argv", "fragment"), BAD_NUMBERS, ids=lambda v: " ".join(v[:2]))
def test_a_bad_number_is_refused_before_any_heavy_import(
    argv: list[str], fragment: str, tmp_path: Path
) -> None:
    code, err, heavy = _refusal_in_a_fresh_process(argv, tmp_path)
    assert code == 2, err
    assert err == PREFIX + fragment + "\n"
    assert heavy == [], f"{heavy} loaded before the parser refused the number"


def test_a_bad_number_fails_the_same_way_whatever_it_is(tmp_path: Path) -> None:
    """``--epsilon 0`` and ``--epsilon abc``: both refused by the parser, neither imports."""
    base = ["run", "correlated", *_RUN, "--delta", "1e-6", "--epsilon"]
    for value, fragment in (
        ("0", "--epsilon must be a finite number > 0, got 0.0"),
        ("abc", "run correlated: argument --epsilon: expected a number, got 'abc'"),
    ):
        code, err, heavy = _refusal_in_a_fresh_process([*base, value], tmp_path)
        assert (code, err, heavy) == (2, PREFIX + fragment + "\n", [])


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("-1e-6", -1e-6), ("-1", -1.0), ("-.5", -0.5), ("-2.5E+3", -2500.0), ("-inf", -float("inf"))],
)
def test_a_negative_number_is_a_value_not_an_option(value: str, parsed: float) -> None:
    """argparse's own pattern takes ``-1e-6`` for an option ("expected one argument")."""
    argv = ["run", "krr", *_RUN, "--epsilon", "1", "--delta", value]
    with pytest.raises(InvalidParameterError) as info:
        build_parser(argv).parse_args(argv)
    assert str(info.value) == f"--delta must be in the open interval (0, 1), got {parsed!r}"


def test_every_error_starts_with_one_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The parser's errors, the checks', a missing file's and a service's: one line each."""
    data = tmp_path / "d.csv"
    data.write_text("city\na\nb\n")
    task = tmp_path / "task.json"
    lines = {}
    cases = {
        "parser: missing options": ["run", "krr"],
        "parser: unknown option": ["account", "krr", *_ACCOUNT, "--nope"],
        "parser: bad choice": ["run", "krr", *_RUN, *_TARGET, "--path", "fast"],
        "parser: no command": [],
        "check": ["run", "krr", *_RUN, "--epsilon", "0", "--delta", "1e-6"],
        "missing file": ["run", "krr", *_RUN[2:], "--input", str(tmp_path / "no.csv"), *_TARGET],
        "service: task not found": [
            "client", "submit", "--task", str(task), "--shuffler", "http://127.0.0.1:9",
            "--value", "a",
        ],
    }  # fmt: skip
    for name, argv in cases.items():
        assert main(argv) == 2, name
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and err.startswith(PREFIX), (name, err)
        lines[name] = err
    assert lines["parser: missing options"] == (
        PREFIX + "run krr: the following arguments are required: --input, --column, "
        "--epsilon, --delta\n"
    )
    assert lines["parser: unknown option"] == PREFIX + "unrecognized arguments: --nope\n"
    assert "run krr: argument --path: invalid choice: 'fast'" in lines["parser: bad choice"]


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("512M", 512 * 2**20),
        ("2G", 2 * 2**30),
        ("2g", 2 * 2**30),
        ("1.5GiB", 3 * 2**29),
        ("800MB", 800 * 10**6),
        ("123456789", 123456789),
        ("1e9", 10**9),
        ("64 KiB", 64 * 1024),
    ],
)
def test_memory_sizes(text: str, size: int) -> None:
    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "2X", "-1G", "0", "0.2", "1.5.2G", "inf"])
def test_bad_memory_sizes(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=repr(text).replace("\\", "\\\\")):
        byte_size(text)
