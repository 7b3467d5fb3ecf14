"""Seeded runs give the same outputs as the reference commit, bit for bit.

Every command whose output a seed fixes (``run`` of each protocol, ``simulate``,
``demo``, the deterministic ``account`` questions) and a script of seeded Python
API runs (tests/fixtures/seeded/api_runs.py) are run here with the code under
test, and each JSON document (and the per-user table) is compared with the one
the reference commit wrote: tests/fixtures/seeded/*.json, made by
tests/fixtures/seeded/make_fixtures.sh (it runs this file as a script, with the
reference commit's ``shuffledp`` first on PYTHONPATH; see there).

Numbers are compared exactly: every value is compared by its JSON text, so
0.1 and 0.10000000000000002 differ, and so do 1 and 1.0 (only the order of an
object's keys is not compared). A failure lists every differing path with both
values. Two things may legitimately differ and are listed below, explicitly:

- ``IGNORED``: fields that change from one version or one execution to the
  next (the version string, wall-clock durations);
- ``RENAMED``: a field deliberately renamed, old path -> new path, and
  ``CHANGED_VALUES``: a value deliberately changed (a schema's major version),
  and ``PREPENDED``: an item deliberately added to a list (an assumption);
  the fixture is rewritten accordingly before comparing. CHANGELOG.md states
  each.

Each case runs in its own temporary directory holding copies of its inputs,
under their bare names, so the paths a document records (``input.file``) are
the same on both sides and are compared like everything else. The commands run
as ``shuffledp.cli.main(argv)`` in two spawned worker processes rather than one
interpreter each (about 6 s instead of 25 s of CPU); the fixtures written that
way and by ``python -m shuffledp`` per command were checked to be identical.

``python tests/system/test_seeded_outputs.py --write DIR`` writes every case's
outputs into DIR, with whichever ``shuffledp`` this interpreter imports (the
workers import the same one).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import multiprocessing
import os
import runpy
import shlex
import shutil
import sys
import tempfile
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import shuffledp
from shuffledp.privacy import TRUSTED_SHUFFLER

TESTS = Path(__file__).resolve().parents[1]
FIXTURES = TESTS / "fixtures" / "seeded"
V0_2 = TESTS / "fixtures" / "v0_2"
API_SCRIPT = FIXTURES / "api_runs.py"

#: Fields that legitimately differ between versions or executions, as
#: (fixture file pattern, JSON path); a ``*`` segment matches any key or index.
IGNORED: tuple[tuple[str, str], ...] = (
    ("*", "shuffledp_version"),  # the package's version string
    ("simulate-*", "simulation/seconds"),  # wall-clock time of the simulation
    ("simulate-*", "simulation/startup_seconds"),  # wall-clock time of its start-up
)

#: Deliberate renames: (fixture file pattern, old JSON path) -> new JSON path.
#: The value found at the old path of a matching fixture is moved to the new path
#: before comparing. E.g. {("run-flip*.json", "parameters/k"): "parameters/fake_users"}.
RENAMED: dict[tuple[str, str], str] = {
    # Issue 25: FLIP's fake users are `fake_users` everywhere (`k` is k-RR's domain size).
    **{
        (pattern, f"{where}/k"): f"{where}/fake_users"
        for pattern in ("run-flip*.json", "simulate-flip.json", "demo.json")
        for where in ("parameters", "privacy/parameters")
    },
    ("account-flip.json", "exact/k"): "exact/fake_users",
    ("account-flip.json", "paper/k"): "paper/fake_users",
    **{
        ("api-runs.json", f"{run}/privacy/parameters/k"): f"{run}/privacy/parameters/fake_users"
        for run in ("flip-count", "flip-fixed-q", "flip-labels")
    },
    # k-RR's domain size is `domain_size`, the one name the package gives it (was `k`).
    **{
        (pattern, f"{where}/k"): f"{where}/domain_size"
        for pattern in ("run-krr*.json", "simulate-krr*.json")
        for where in ("parameters", "privacy/parameters")
    },
    **{
        ("api-runs.json", f"{run}/privacy/parameters/k"): f"{run}/privacy/parameters/domain_size"
        for run in ("krr-counts", "krr-indices", "krr-simplex")
    },
    ("account-krr.json", "exact/k"): "exact/domain_size",
    ("account-krr.json", "paper_setting/k"): "paper_setting/domain_size",
    # the accountant's inputs held both names (the same number): domain_size stays
    ("account-amplify-krr.json", "rows/*/inputs/k"): "rows/*/inputs/domain_size",
}

#: Deliberate changes of a value: (fixture file pattern, JSON path, old value) -> new
#: value, applied to the fixture before comparing (a value elsewhere is compared as it is).
CHANGED_VALUES: dict[tuple[str, str, str], Any] = {
    # Issue 25: the documents that held FLIP's `k` have a new major version.
    ("*", "schema", "urn:shuffledp:schema:release:1"): "urn:shuffledp:schema:release:2",
    ("*", "schema", "urn:shuffledp:schema:simulation:1"): "urn:shuffledp:schema:simulation:2",
    ("*", "schema", "urn:shuffledp:schema:demo:1"): "urn:shuffledp:schema:demo:2",
    ("*", "schema", "urn:shuffledp:schema:account-flip:1"): "urn:shuffledp:schema:account-flip:2",
    ("*", "schema", "urn:shuffledp:schema:account-krr:1"): "urn:shuffledp:schema:account-krr:2",
    # FLIP's certificate is named as the accounting method is (`flip-exact`), not
    # `flip-exact-fake-blanket`: one name per certificate. (account-compose composes 0.2
    # releases, and states their method as they wrote it.)
    ("*", "privacy/method", "flip-exact-fake-blanket"): "flip-exact",
    ("api-runs.json", "*/privacy/method", "flip-exact-fake-blanket"): "flip-exact",
}

#: Deliberate additions to a list: (fixture file pattern, JSON path of the list) -> the
#: item now first in it, inserted into the fixture before comparing.
PREPENDED: dict[tuple[str, str], Any] = {
    # Issue 25: a FLIP or k-RR report states the trusted shuffler itself, so a library run
    # states what the command's release states (and a simulation and the demo state it too).
    **{
        (pattern, "privacy/assumptions"): TRUSTED_SHUFFLER
        for pattern in ("simulate-flip.json", "simulate-krr*.json", "demo.json")
    },
    **{
        ("api-runs.json", f"{run}/privacy/assumptions"): TRUSTED_SHUFFLER
        for run in ("flip-count", "flip-fixed-q", "flip-labels", "krr-*")
    },
}

#: Commands run at most this many at a time (the machine's two cores).
WORKERS = 2

_USERS = "--input users.csv --column city --domain Lyon,Nice,Paris,Rome --epsilon 1 --delta 1e-6"
_SETS = (
    "--input sets.csv --user-column user --item-column item --level-column level "
    "--domain a,b,c,d,e --levels 0.5,1 --delta 1e-6 --items-per-user 2 --blanket 1"
)
_PER_USER = (
    "--input per_user.csv --user-column user --class-column item --count-column count "
    "--domain a,b,c --epsilon 1 --epsilon1 0.5 --c 0.5 --quiet --output table.csv "
    "--report report.json"
)
_SIMULATE = "--n 3000 --domain-size 10 --epsilon 1 --delta 1e-6 --replicates 3 --seed 5"
_TARGET = "--n 3000 --domain-size 4 --epsilon 1 --delta 1e-6 --json"
_COMPOSED = tuple(
    V0_2 / "releases" / f"run-{p}.json" for p in ("flip", "krr", "correlated", "augmented")
)


@dataclass(frozen=True)
class Case:
    """One seeded command and the documents it writes.

    Attributes:
        name: The case's name (the test's id).
        argv: Arguments after ``python -m shuffledp`` (or after the API script).
        outputs: Fixture file name -> the file the command writes in its working
            directory, ``"-"`` for its standard output.
        inputs: Files copied into the working directory first (bare names).
        api: Run tests/fixtures/seeded/api_runs.py instead of the command.
    """

    name: str
    argv: tuple[str, ...]
    outputs: Mapping[str, str]
    inputs: tuple[Path, ...] = ()
    api: bool = False


def _stdout(name: str, command: str, inputs: tuple[Path, ...] = ()) -> Case:
    """A case whose document, ``NAME.json``, is its standard output."""
    return Case(name, tuple(shlex.split(command)), {f"{name}.json": "-"}, inputs)


def _run(name: str, command: str, inputs: tuple[Path, ...] = (V0_2 / "users.csv",)) -> Case:
    """A ``run`` case writing its release to ``out.json``."""
    return Case(
        name,
        tuple(shlex.split(f"run {command} --quiet --output out.json")),
        {f"{name}.json": "out.json"},
        inputs,
    )


_SETS_CSV = (V0_2 / "sets.csv",)
_PER_USER_CSV = (V0_2 / "per_user.csv",)

CASES: tuple[Case, ...] = (
    _run("run-flip", f"flip {_USERS} --seed 7"),
    _run("run-flip-count-paper", f"flip {_USERS} --seed 8 --path count --calibration paper"),
    _run("run-krr", f"krr {_USERS} --seed 7"),
    _run("run-krr-simplex-count", f"krr {_USERS} --seed 9 --estimator simplex --path count"),
    _run("run-correlated", f"correlated {_USERS} --seed 7"),
    _run("run-correlated-add-remove", f"correlated {_USERS} --seed 10 --neighbours add-remove"),
    _run("run-augmented", f"augmented {_USERS} --seed 7"),
    _run("run-augmented-sbin-count", f"augmented {_USERS} --seed 11 --variant sbin --path count"),
    _run("run-augmented-s1geo", f"augmented {_USERS} --seed 12 --variant s1geo"),
    _run("run-segmented", f"segmented {_SETS} --seed 7", _SETS_CSV),
    _run(
        "run-segmented-dummy-count",
        f"segmented {_SETS} --seed 13 --variant dummy --path count",
        _SETS_CSV,
    ),
    Case(
        "run-per-user",
        tuple(shlex.split(f"run per-user {_PER_USER} --clusters 4 --seed 7")),
        {"run-per-user.json": "report.json", "run-per-user-table.csv": "table.csv"},
        _PER_USER_CSV,
    ),
    Case(
        "run-per-user-dbscan-r",
        tuple(
            shlex.split(
                f"run per-user {_PER_USER} --clustering dbscan --eps-radius 0.3 --release r "
                "--seed 14"
            )
        ),
        {
            "run-per-user-dbscan-r.json": "report.json",
            "run-per-user-dbscan-r-table.csv": "table.csv",
        },
        _PER_USER_CSV,
    ),
    Case(
        "simulate-flip",
        tuple(shlex.split(f"simulate flip {_SIMULATE} --quiet --output out.json")),
        {"simulate-flip.json": "out.json"},
    ),
    Case(
        "simulate-krr-uniform",
        tuple(shlex.split(f"simulate krr {_SIMULATE} --data uniform --quiet --output out.json")),
        {"simulate-krr-uniform.json": "out.json"},
    ),
    Case(
        "demo",
        tuple(shlex.split("demo --n 2000 --domain-size 10 --seed 3 --output-dir demo")),
        {"demo.json": "demo/flip_demo.json"},
    ),
    _stdout(
        "account-amplify-generic",
        "account amplify --delta 1e-6 --n 10000 --epsilon0 2 --method all --json",
    ),
    _stdout(
        "account-amplify-krr",
        "account amplify --delta 1e-6 --n 10000 --mechanism krr --epsilon0 2 --domain-size 10 "
        "--method all --json",
    ),
    _stdout(
        "account-amplify-flip",
        "account amplify --delta 1e-6 --n 10000 --mechanism flip --q 0.001 --fake-users 100 "
        "--domain-size 10 --method all --json",
    ),
    _stdout(
        "account-amplify-poisson",
        "account amplify --delta 1e-6 --n 10000 --mechanism poisson --report-probability 0.5 "
        "--blanket-messages 20 --blanket-probability 0.5 --items 1 --domain-size 10 "
        "--method all --json",
    ),
    _stdout(
        "account-delta-generic",
        "account delta --epsilon 1 --n 10000 --epsilon0 2 --method all --json",
    ),
    _stdout(
        "account-calibrate-generic",
        "account calibrate --epsilon 1 --delta 1e-6 --n 10000 --method all --json",
    ),
    _stdout("account-flip", f"account flip {_TARGET}"),
    _stdout("account-krr", f"account krr {_TARGET}"),
    _stdout("account-correlated", f"account correlated {_TARGET}"),
    _stdout("account-augmented", f"account augmented {_TARGET}"),
    _stdout(
        "account-segmented",
        "account segmented --n 3000 --domain-size 5 --levels 0.5,1 --shares 0.5,0.5 "
        "--items-per-user 2 --delta 1e-6 --blanket 1 --json",
    ),
    _stdout(
        "account-compose",
        "account compose " + " ".join(p.name for p in _COMPOSED) + " --json",
        _COMPOSED,
    ),
    _stdout(
        "account-compose-segmented-epsilon",
        "account compose run-segmented.json run-segmented.json --epsilon 2 --json",
        (V0_2 / "releases" / "run-segmented.json",),
    ),
    Case("api-runs", (), {"api-runs.json": "-"}, api=True),
)


def run_case(case: Case, workdir: Path) -> dict[str, str]:
    """Run one case in ``workdir`` in this process; return its outputs' text by fixture name.

    The command runs as ``shuffledp.cli.main(argv)`` (the API script as its
    ``__main__``) with the working directory and the file descriptors 1 and 2
    pointed at ``workdir``: what ``python -m shuffledp`` does, without starting
    an interpreter per case. Run it in a worker process (:func:`run_cases`).

    Raises:
        RuntimeError: If the command fails (its stderr in the message).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    for source in case.inputs:
        shutil.copyfile(source, workdir / source.name)
    stdout, stderr = workdir / ".stdout", workdir / ".stderr"
    previous = os.getcwd()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        os.chdir(workdir)
        try:
            code = _invoke(case)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            os.chdir(previous)
    if code != 0:
        message = stderr.read_text(encoding="utf-8", errors="replace")
        raise RuntimeError(f"{case.name} exited with {code}:\n{message}")
    return {
        name: (stdout if source == "-" else workdir / source).read_text(encoding="utf-8")
        for name, source in case.outputs.items()
    }


def _invoke(case: Case) -> int:
    """The case's exit code (a traceback goes to the case's stderr, code 1)."""
    try:
        if case.api:
            runpy.run_path(str(API_SCRIPT), run_name="__main__")
            return 0
        from shuffledp.cli import main

        return main(list(case.argv))
    except SystemExit as exit_:  # sys.exit(None) is a success, sys.exit("text") a failure
        return 0 if exit_.code is None else exit_.code if isinstance(exit_.code, int) else 1
    except Exception:
        traceback.print_exc()
        return 1


def _run_one(job: tuple[Case, Path]) -> tuple[str, dict[str, str] | str]:
    """A worker's job: the ``shuffledp`` it imports, and the case's outputs or why it failed."""
    case, workdir = job
    try:
        return shuffledp.__file__, run_case(case, workdir)
    except Exception as error:
        return shuffledp.__file__, f"{type(error).__name__}: {error}"


def run_cases(cases: tuple[Case, ...], root: Path) -> dict[str, dict[str, str] | str]:
    """Run every case, each in its own directory under ``root``: outputs or an error by name.

    ``WORKERS`` spawned processes share the cases; they import the ``shuffledp``
    this process imports (a spawned child gets its parent's ``sys.path``: checked)
    and end with the pool.

    Raises:
        RuntimeError: If a worker imported another ``shuffledp``.
    """
    jobs = [(case, root / case.name) for case in cases]
    with multiprocessing.get_context("spawn").Pool(WORKERS) as pool:
        results = pool.map(_run_one, jobs, chunksize=1)
        pool.close()
        pool.join()
    for package, _ in results:
        if Path(package).resolve() != Path(shuffledp.__file__).resolve():
            raise RuntimeError(f"a worker ran shuffledp from {package}, not {shuffledp.__file__}")
    return {case.name: result for case, (_, result) in zip(cases, results, strict=True)}


# -- comparing ------------------------------------------------------------------------------


def _split(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


def _matches(document: Any, parts: list[str]) -> Iterator[tuple[Any, str | int]]:
    """(container, key) of every place ``parts`` names in ``document`` (``*``: any key)."""
    if not parts:
        return
    head, rest = parts[0], parts[1:]
    if isinstance(document, dict):
        keys: list[str | int] = (
            list(document) if head == "*" else [head] if head in document else []
        )
    elif isinstance(document, list):
        indices = range(len(document))
        keys = (
            list(indices)
            if head == "*"
            else [int(head)]
            if head.isdigit() and int(head) < len(document)
            else []
        )
    else:
        return
    for key in keys:
        if rest:
            yield from _matches(document[key], rest)
        else:
            yield document, key


def _drop_ignored(name: str, document: Any) -> None:
    for pattern, path in IGNORED:
        if fnmatch.fnmatch(name, pattern):
            for container, key in list(_matches(document, _split(path))):
                del container[key]


def _apply_renames(name: str, document: Any) -> None:
    for (pattern, old), new in RENAMED.items():
        if not fnmatch.fnmatch(name, pattern):
            continue
        *old_parents, _ = _split(old)
        *parents, last = _split(new)
        for container, key in list(_matches(document, _split(old))):
            value = container.pop(key)
            if parents == old_parents:  # a key renamed where it is (``*`` allowed)
                container[last] = value
                continue
            target = document
            for part in parents:
                target = target.setdefault(part, {})
            target[last] = value


def _apply_value_changes(name: str, document: Any) -> None:
    for (pattern, path, old), new in CHANGED_VALUES.items():
        if not fnmatch.fnmatch(name, pattern):
            continue
        for container, key in list(_matches(document, _split(path))):
            if container[key] == old:
                container[key] = new


def _apply_prepended(name: str, document: Any) -> None:
    for (pattern, path), item in PREPENDED.items():
        if not fnmatch.fnmatch(name, pattern):
            continue
        for part in _expanded(document, _split(path)):
            container, key = part
            if isinstance(container[key], list):
                container[key].insert(0, item)


def _expanded(document: Any, parts: list[str]) -> Iterator[tuple[Any, str | int]]:
    """Like :func:`_matches`, a segment with ``*`` matching keys by pattern (``krr-*``)."""
    if not parts:
        return
    head, rest = parts[0], parts[1:]
    if not isinstance(document, dict):
        yield from _matches(document, parts)
        return
    for key in [k for k in document if fnmatch.fnmatch(k, head)]:
        if rest:
            yield from _expanded(document[key], rest)
        else:
            yield document, key


def _differences(old: Any, new: Any, path: str = "") -> Iterator[str]:
    """Every path where two parsed documents differ (exact values, types included)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            where = f"{path}/{key}"
            if key not in new:
                yield f"{where}: only in the fixture ({json.dumps(old[key])[:80]})"
            elif key not in old:
                yield f"{where}: only in the new output ({json.dumps(new[key])[:80]})"
            else:
                yield from _differences(old[key], new[key], where)
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            yield f"{path}: {len(old)} items in the fixture, {len(new)} now"
        for i, (a, b) in enumerate(zip(old, new, strict=False)):
            yield from _differences(a, b, f"{path}/{i}")
    elif json.dumps(old) != json.dumps(new):  # 1 vs 1.0 and every float bit count
        yield f"{path or '/'}: fixture {json.dumps(old)[:80]}, now {json.dumps(new)[:80]}"


def compare(name: str, fixture_text: str, new_text: str) -> list[str]:
    """The differences between a fixture and a new output (empty: identical).

    JSON documents are compared field by field after ``IGNORED`` and ``RENAMED``;
    any other file (the per-user table) must be the same text.
    """
    if not name.endswith(".json"):
        return [] if fixture_text == new_text else [f"{name}: the text differs"]
    old, new = json.loads(fixture_text), json.loads(new_text)
    _apply_renames(name, old)
    _apply_value_changes(name, old)
    _apply_prepended(name, old)
    _drop_ignored(name, old)
    _drop_ignored(name, new)
    return list(_differences(old, new))


# -- the test -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str] | str]:
    """Every case run once with the code under test (two at a time)."""
    return run_cases(CASES, tmp_path_factory.mktemp("seeded"))


def test_every_fixture_belongs_to_a_case() -> None:
    """No stale fixture: every output file in the fixture directory is some case's."""
    expected = {name for case in CASES for name in case.outputs}
    present = {p.name for p in FIXTURES.iterdir() if p.suffix in (".json", ".csv")}
    assert present == expected


def test_ignored_and_renamed_do_what_they_say() -> None:
    """A rename moves a value before comparing; an ignored field is dropped on both sides."""
    assert (
        compare(
            "x.json", '{"a": 1, "shuffledp_version": "0"}', '{"a": 1, "shuffledp_version": "9"}'
        )
        == []
    )
    assert compare("x.json", '{"a": 1.0}', '{"a": 1}') != []  # types and bits are compared
    assert compare("x.json", '{"a": [0.1]}', '{"a": [0.10000000000000002]}') != []
    RENAMED[("x.json", "p/old")] = "p/new"
    try:
        assert compare("x.json", '{"p": {"old": 2}}', '{"p": {"new": 2}}') == []
        assert compare("x.json", '{"p": {"old": 2}}', '{"p": {"new": 3}}') != []
    finally:
        del RENAMED[("x.json", "p/old")]
    CHANGED_VALUES[("x.json", "s", "v1")] = "v2"
    try:
        assert compare("x.json", '{"s": "v1", "t": "v1"}', '{"s": "v2", "t": "v1"}') == []
        assert compare("x.json", '{"s": "v1", "t": "v1"}', '{"s": "v2", "t": "v2"}') != []
    finally:
        del CHANGED_VALUES[("x.json", "s", "v1")]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_seeded_output_unchanged(case: Case, outputs: dict[str, dict[str, str] | str]) -> None:
    """The case's documents equal the reference commit's, bit for bit."""
    result = outputs[case.name]
    if isinstance(result, str):
        pytest.fail(f"{case.name} failed: {result}", pytrace=False)
    problems = []
    for name, text in result.items():
        fixture = FIXTURES / name
        assert fixture.is_file(), f"no fixture {name}: run tests/fixtures/seeded/make_fixtures.sh"
        problems += [
            f"{name}: {d}" for d in compare(name, fixture.read_text(encoding="utf-8"), text)
        ]
    assert not problems, f"{case.name} differs from the reference:\n" + "\n".join(problems[:40])


def main() -> None:
    """Write every case's outputs into a directory (what make_fixtures.sh runs)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--write", type=Path, required=True, help="directory for the outputs")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    args = parser.parse_args()
    cases = tuple(c for c in CASES if args.case is None or c.name in args.case)
    print(f"shuffledp from {Path(shuffledp.__file__).parent}", file=sys.stderr)
    args.write.mkdir(parents=True, exist_ok=True)
    failed = False
    with tempfile.TemporaryDirectory() as scratch:
        for name, result in run_cases(cases, Path(scratch)).items():
            if isinstance(result, str):
                print(f"FAILED {name}: {result}", file=sys.stderr)
                failed = True
                continue
            for file_name, text in result.items():
                (args.write / file_name).write_text(text, encoding="utf-8")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
