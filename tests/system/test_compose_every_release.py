"""Every release the package writes goes through ``account compose`` and ``shuffledp.compose``.

Each kind is composed with itself (two releases on the same users) and the
total is checked against numbers recomputed here: releases known only by
their (ε, δ) against the exact hockey-stick divergence of the product of two
Kairouz-Oh-Viswanath pairs, FLIP and k-RR against basic composition (above)
and one release's own certificate at the composed ε (below). Releases that
record different users need ``--same-users``; releases of different
neighbouring relations are refused with a message that says what to do.

Every guarantee is re-derived from the parameters its file records: an
untouched release enters at exactly its stated (ε, δ); one whose stated ε or δ
was lowered is refused, with what its parameters certify (recomputed here
from the untouched release's own numbers).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import shuffledp
from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.certificates.flip import flip_delta
from shuffledp.accounting.certificates.krr import krr_delta
from shuffledp.accounting.composition.compose import (
    compose,
    populations_from_json,
    reports_from_json,
)
from shuffledp.cli import main
from shuffledp.privacy import ApproxDP, BoundKind, PrivacyReport
from shuffledp.schemas import validate


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _ok(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    return out


def _kov_delta(epsilon: float, delta: float, at: float) -> float:
    """Exact δ(at) of the product of two (ε, δ) pairs of Kairouz, Oh & Viswanath (2015)."""
    e = math.exp(epsilon)
    p = np.array([delta, (1 - delta) * e / (1 + e), (1 - delta) / (1 + e), 0.0])
    q = p[::-1]
    pp, qq = np.outer(p, p).ravel(), np.outer(q, q).ravel()
    return float(np.maximum(pp - math.exp(at) * qq, 0.0).sum())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("releases")
    rng = np.random.default_rng(0)
    users = [f"u{i}" for i in range(2000)]
    values = rng.choice(list("ABC"), size=len(users))
    (root / "values.csv").write_text(
        "user,city\n" + "".join(f"{u},{v}\n" for u, v in zip(users, values, strict=True))
    )
    (root / "values_big.csv").write_text(
        "user,city\n" + "".join(f"x{i},{rng.choice(list('ABC'))}\n" for i in range(3000))
    )
    lines = ["user,item,level"]
    for i, u in enumerate(users):
        for item in rng.choice(list("ABCDE"), size=2, replace=False):
            lines.append(f"{u},{item},{('0.5', '1')[i % 2]}")
    (root / "sets.csv").write_text("\n".join(lines) + "\n")
    lines = ["user,cls,count"]
    for u in users[:300]:
        lines += [f"{u},{c},{rng.integers(1, 6)}" for c in "ABC"]
    (root / "counts.csv").write_text("\n".join(lines) + "\n")
    return root


def _run_args(files: Path, protocol: str, out: Path, data: str = "values.csv") -> list[str]:
    return [
        "run", protocol, "--input", str(files / data), "--column", "city",
        "--user-column", "user", "--domain", "A,B,C", "--epsilon", "1", "--delta", "1e-6",
        "--path", "count", "--output", str(out), "--quiet",
    ]  # fmt: skip


def _segmented(files: Path, out: Path, *extra: str) -> list[str]:
    return [
        "run", "segmented", "--input", str(files / "sets.csv"), "--user-column", "user",
        "--item-column", "item", "--level-column", "level", "--domain", "A,B,C,D,E",
        "--levels", "0.5,1", "--delta", "1e-6", "--items-per-user", "2", "--path", "count",
        "--output", str(out), "--quiet", *extra,
    ]  # fmt: skip


def _per_user(files: Path, out: Path) -> list[str]:
    return [
        "run", "per-user", "--input", str(files / "counts.csv"), "--user-column", "user",
        "--class-column", "cls", "--count-column", "count", "--domain", "A,B,C",
        "--epsilon", "1", "--epsilon1", "0.5", "--c", "0.5", "--clusters", "3",
        "--output", str(out.with_suffix(".csv")), "--report", str(out), "--quiet",
    ]  # fmt: skip


def _service(protocol: str, out: Path) -> None:
    from shuffledp.service.release import build_release
    from shuffledp.service.store import AggregateTotals
    from shuffledp.service.task import create_task

    task, _ = create_task(protocol, ["A", "B", "C"], 1.0, 1e-6, 2000)
    width = 6 if protocol == "correlated" else 3
    totals = AggregateTotals(
        counts=np.full(width, 700, dtype=np.int64),
        n_users=2000,
        n_messages=700 * width,
        n_batches=1,
        smallest_batch_users=2000,
        pending_batches=0,
    )
    out.write_text(json.dumps(build_release(task, totals)))


def _make(kind: str, files: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if kind in ("flip", "krr", "correlated", "augmented"):
        _ok(_run_args(files, kind, out), capsys)
    elif kind == "segmented":
        _ok(_segmented(files, out), capsys)
    elif kind == "segmented-dp-levels":
        _ok(_segmented(files, out, "--level-counts", "dp", "--level-epsilon", "0.5",
                        "--level-delta", "1e-7"), capsys)  # fmt: skip
    elif kind == "per-user":
        _ok(_per_user(files, out), capsys)
    elif kind == "demo":
        _ok(["demo", "--n", "2000", "--domain-size", "5", "--output-dir", str(out.parent / "d")],
            capsys)  # fmt: skip
        out.write_text((out.parent / "d" / "flip_demo.json").read_text())
    elif kind in ("simulate-flip", "simulate-krr"):
        protocol = kind.split("-")[1]
        _ok(["simulate", protocol, "--n", "2000", "--domain-size", "5", "--epsilon", "1",
             "--delta", "1e-6", "--output", str(out), "--quiet"], capsys)  # fmt: skip
    elif kind.startswith("service-"):
        _service(kind.split("-", 1)[1], out)
    else:  # pragma: no cover
        raise AssertionError(kind)


class _Quiet:
    """Stands in for capsys where a module fixture runs the CLI with its output redirected."""

    def __init__(self, out: io.StringIO, err: io.StringIO) -> None:
        self.out, self.err = out, err

    def readouterr(self) -> tuple[str, str]:
        out, err = self.out.getvalue(), self.err.getvalue()
        for buffer in (self.out, self.err):
            buffer.seek(0)
            buffer.truncate()
        return out, err


@pytest.fixture(scope="module")
def made(files: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Each kind of release made once for the module's tests (a function: kind -> its file).

    The tests only read the files (an edited copy goes to the test's own tmp_path).
    """
    root = tmp_path_factory.mktemp("made")
    cache: dict[str, Path] = {}

    def make(kind: str) -> Path:
        if kind not in cache:
            out = root / f"{kind}.json"
            printed, errors = io.StringIO(), io.StringIO()  # kept out of the test's capsys
            with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
                if kind == "composed":  # what account compose --json prints
                    flip, krr = str(make("flip")), str(make("krr"))
                    printed.seek(0)
                    printed.truncate()
                    assert main(["account", "compose", flip, krr, "--json"]) == 0
                    out.write_text(printed.getvalue())
                elif kind == "correlated-add-remove":
                    argv = [*_run_args(files, "correlated", out), "--neighbours", "add-remove"]
                    assert main([*argv, "--min-honest", "1000"]) == 0, errors.getvalue()
                else:
                    _make(kind, files, out, _Quiet(printed, errors))  # type: ignore[arg-type]
            cache[kind] = out
        return cache[kind]

    return make


KINDS = [
    "flip", "krr", "correlated", "augmented", "segmented", "segmented-dp-levels", "per-user",
    "demo", "simulate-flip", "simulate-krr", "service-flip", "service-krr",
    "service-correlated", "service-augmented",
]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_every_release_composes_with_itself(kind, made, capsys):
    release = made(kind)
    document = json.loads(release.read_text())
    out = _ok(["account", "compose", str(release), str(release), "--json"], capsys)
    composed = json.loads(out)
    validate(composed)
    assert composed["bound"] == "upper"
    same = composed["parameters"]["same_users"]
    assert same["basis"] == "recorded" and same["differences"] == [] and "n" in same["compared"]
    assert composed["assumptions"][0].startswith("the 2 releases are taken to be on the same users")
    # the release's own context is carried through
    privacy = document["privacy"]
    assert set(privacy["not_covered"]) <= set(composed["not_covered"])
    # what the release enters with: its (ε, δ), or its weakest level
    if "levels" in privacy:
        epsilon = max(level["epsilon"] for level in privacy["levels"])
        delta = max(level["delta"] for level in privacy["levels"])
    else:
        epsilon, delta = privacy["epsilon"], privacy["delta"]
    eps_c, delta_c = composed["epsilon"], composed["delta"]
    assert delta_c == pytest.approx(2 * delta, rel=1e-12)
    assert eps_c <= 2 * epsilon * (1 + 1e-12)  # never worse than basic composition
    method = privacy["method"]
    if method == "flip-exact":
        one = flip_delta(eps_c, privacy["parameters"]["q"], privacy["parameters"]["fake_users"],
                         privacy["n"])  # fmt: skip
        assert one <= delta_c  # two releases leak at least what one does
        assert eps_c < 2 * epsilon  # the dominating pair beats basic composition
    elif method == "krr-blanket":
        params = privacy["parameters"]
        assert krr_delta(eps_c, params["epsilon0"], params["domain_size"], privacy["n"]) <= delta_c
        assert eps_c < 2 * epsilon
    elif delta > 0:
        # known by (ε, δ) only: the exact optimal composition of two such guarantees
        assert _kov_delta(epsilon, delta, eps_c) <= delta_c * (1 + 1e-9)
    else:
        assert (eps_c, delta_c) == (2 * epsilon, 0.0)  # pure DP: the sum
    # the same through the Python API; each enters at exactly what it states (re-derived)
    reports = reports_from_json([document, document])
    assert (reports[0].epsilon, reports[0].delta) == (epsilon, delta)
    bases = [c["basis"] for c in composed["parameters"]["components"]]
    assert len(bases) == 1 and bases[0].startswith("re-derived")
    if "service" in document and method in ("flip-exact", "correlated-exact"):
        assert "plus the message bounds of 2,000 parties" in bases[0]
    again = shuffledp.compose(*reports, populations=populations_from_json([document, document]))
    assert (again.epsilon, again.delta) == (eps_c, delta_c)
    # and the text summary says what was assumed
    text = _ok(["account", "compose", str(release), str(release)], capsys)
    assert text.startswith("2 releases, taken to be on the same users (the same n")


def test_releases_on_different_users_need_same_users(files, made, tmp_path, capsys):
    small, big = made("flip"), tmp_path / "big.json"
    _ok(_run_args(files, "krr", big, data="values_big.csv"), capsys)
    code, out, err = _run(["account", "compose", str(small), str(big)], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "n (2,000, 3,000)" in err and "input (" in err and "--same-users" in err
    out = _ok(["account", "compose", str(small), str(big), "--same-users", "--json"], capsys)
    composed = json.loads(out)
    same = composed["parameters"]["same_users"]
    assert same["basis"] == "asserted" and len(same["differences"]) == 2
    assert "as the caller asserted" in composed["assumptions"][0]
    assert composed["n"] == 3000
    text = _ok(["account", "compose", str(small), str(big), "--same-users"], capsys)
    assert "because --same-users says so (they differ in n (2,000, 3,000)" in text.splitlines()[0]


@pytest.mark.parametrize(
    ("change", "word"),
    [
        (lambda d: d.update(domain=["A", "B", "D"]), "domain"),
        (lambda d: d["input"].update(user_column=None), "user column"),
        (lambda d: d["input"].update(file="other.csv"), "input"),
    ],
)
def test_same_n_but_other_users_is_refused(change: Callable[[dict], None], word, files,
                                           made, tmp_path, capsys):  # fmt: skip
    first = made("flip")
    document = json.loads(first.read_text())
    change(document)
    second = tmp_path / "b.json"
    second.write_text(json.dumps(document))
    code, _, err = _run(["account", "compose", str(first), str(second)], capsys)
    assert code == 2 and f"differ in {word} (" in err and "--same-users" in err
    _ok(["account", "compose", str(first), str(second), "--same-users"], capsys)


def test_bare_privacy_objects_compare_n_only(made, tmp_path, capsys):
    release = made("flip")
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(json.loads(release.read_text())["privacy"]))
    composed = json.loads(_ok(["account", "compose", str(release), str(bare), "--json"], capsys))
    same = composed["parameters"]["same_users"]
    assert same["compared"] == ["n"]
    assert same["not_recorded"] == ["domain", "user column", "input"]
    assert "not recorded by every release" in composed["assumptions"][0]


def test_other_relations_and_documents_are_refused_with_a_reason(made, tmp_path, capsys):
    flip, sets = made("flip"), made("segmented")
    code, _, err = _run(["account", "compose", str(flip), str(sets)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "different neighbouring relations" in err and "separately" in err
    table = tmp_path / "table.json"
    table.write_text(_ok(["account", "flip", "--n", "1000", "--domain-size", "3", "--epsilon",
                          "1", "--delta", "1e-6", "--json"], capsys))  # fmt: skip
    code, _, err = _run(["account", "compose", str(table)], capsys)
    assert code == 2 and "not a release" in err


def test_python_compose_of_different_n_and_of_a_personalized_release():
    def report(n: int, epsilon: float = 1.0) -> PrivacyReport:
        return PrivacyReport(ApproxDP(epsilon, 1e-6), "gaussian", BoundKind.UPPER, n)

    with pytest.raises(InvalidParameterError, match=r"differ in n \(1,000, 2,000\).*same_users"):
        compose(report(1000), report(2000))
    total = compose(report(1000), report(2000), same_users=True)
    assert total.parameters["same_users"]["basis"] == "asserted"
    assert "same_users=True" in total.assumptions[0]
    levels = (report(1000, 0.5), report(1000, 2.0))
    personalized = compose(levels, report(1000))
    assert personalized.parameters["components"][0]["parameters"]["level_epsilons"] == [0.5, 2.0]
    assert personalized.epsilon <= 3.0 and personalized.delta == pytest.approx(2e-6)


# -- an edited guarantee is refused -----------------------------------------------------------


def _edited(document: dict, field: str) -> tuple[dict, float]:
    """The document with its (weakest level's) stated ε or δ lowered; returns the original."""
    privacy = document.get("privacy", document)
    target = max(privacy["levels"], key=lambda lv: lv[field]) if "levels" in privacy else privacy
    original = target[field]
    target[field] = original / 100 if field == "epsilon" else original / 1000
    return document, original


def _number_after(text: str, prefix: str) -> float:
    return float(text.split(prefix, 1)[1].split(" ", 1)[0].rstrip(",;"))


EDITED_KINDS = [*KINDS, "composed", "correlated-add-remove"]
#: Releases whose delta is 0 (pure DP): it cannot be lowered (raising it is tested).
PURE_KINDS = {"per-user"}
EDITS = [
    (kind, field)
    for kind in EDITED_KINDS
    for field in ("epsilon", "delta")
    if not (field == "delta" and kind in PURE_KINDS)
]


def test_the_pure_kinds_are_the_releases_with_delta_zero(made):
    for kind in EDITED_KINDS:
        document = json.loads(made(kind).read_text())
        pure = document.get("privacy", document).get("delta") == 0.0
        assert pure == (kind in PURE_KINDS), kind


@pytest.mark.parametrize(("kind", "field"), EDITS)
def test_a_release_whose_stated_guarantee_was_lowered_is_refused(kind, field, made, tmp_path,
                                                                  capsys):  # fmt: skip
    document = json.loads(made(kind).read_text())
    edited, original = _edited(document, field)
    path = tmp_path / f"edited-{kind}.json"
    path.write_text(json.dumps(edited))
    code, out, err = _run(["account", "compose", str(path), str(made(kind))], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"{path} " in err and "states (" in err and "below what its" in err
    privacy = edited.get("privacy", edited)
    if field == "epsilon" and "levels" not in privacy:
        stated_delta = privacy["delta"]
        if stated_delta == 0.0:  # per-user: pure, its scales certify the original epsilon
            assert _number_after(err, "give epsilon = ") == pytest.approx(original, rel=1e-9)
        else:  # the certified epsilon at the stated delta is the release's own (rounded up)
            prefix = ", and epsilon = " if ", and epsilon = " in err else "give epsilon = "
            certified = _number_after(err, prefix)
            assert original * (1 - 1e-9) <= certified <= original * (1 + 2e-4)
    elif field == "delta" and "levels" not in privacy and privacy["method"] != "pld-composition":
        # the certified delta at the stated epsilon is the release's own stated delta
        assert _number_after(err, "gives delta = ") == pytest.approx(original, rel=5e-3)
    # the same refusal from Python, naming the object
    with pytest.raises(InvalidParameterError, match=r"privacy object #1 .*states \("):
        reports_from_json([edited])


@pytest.mark.parametrize("kind", ["flip", "service-flip", "per-user", "segmented", "composed"])
def test_a_weaker_stated_guarantee_composes_as_stated(kind, made, tmp_path, capsys):
    """Raising a stated epsilon or delta claims less: it stays true and enters as stated."""
    document = json.loads(made(kind).read_text())
    privacy = document.get("privacy", document)
    target = privacy["levels"][0] if "levels" in privacy else privacy
    target["epsilon"] = 2 * target["epsilon"]
    target["delta"] = max(2 * target["delta"], 1e-5)
    path = tmp_path / "weaker.json"
    path.write_text(json.dumps(document))
    (report,) = reports_from_json([document])
    if "levels" in privacy:
        expected = (max(lv["epsilon"] for lv in privacy["levels"]),
                    max(lv["delta"] for lv in privacy["levels"]))  # fmt: skip
    else:
        expected = (target["epsilon"], target["delta"])
    assert (report.epsilon, report.delta) == expected
    composed = json.loads(_ok(["account", "compose", str(path), "--json"], capsys))
    assert composed["delta"] == expected[1] and composed["epsilon"] <= expected[0]


def test_what_a_release_records_twice_must_agree(made, tmp_path, capsys):
    flip = json.loads(made("flip").read_text())
    changes = {
        "n": (lambda d: d["privacy"].update(n=10**6), "certified for n=1000000 users"),
        "q": (lambda d: d["parameters"].update(q=0.01), "records q=0.000"),
    }
    for change, message in changes.values():
        document = json.loads(json.dumps(flip))
        change(document)
        path = tmp_path / "changed.json"
        path.write_text(json.dumps(document))
        code, _, err = _run(["account", "compose", str(path)], capsys)
        assert code == 2 and message in err, err
    krr = json.loads(made("krr").read_text())
    krr["privacy"]["parameters"]["domain_size"] = 30
    krr["parameters"]["domain_size"] = 30
    with pytest.raises(InvalidParameterError, match="domain_size=30 but a domain of 3 labels"):
        reports_from_json([krr])
    service = json.loads(made("service-krr").read_text())
    service["service"]["min_batch_users"] = 1000
    with pytest.raises(InvalidParameterError, match=r"service\.min_batch_users is 1000"):
        reports_from_json([service])


def test_a_bare_segmented_privacy_object_is_refused_with_what_to_give(made):
    privacy = json.loads(made("segmented").read_text())["privacy"]
    with pytest.raises(InvalidParameterError, match="give the whole release"):
        reports_from_json([privacy])


def test_an_unknown_method_needs_accept_stated(made, tmp_path, capsys):
    other = {"epsilon": 0.5, "delta": 1e-7, "method": "gaussian", "bound": "upper", "n": 2000,
             "parameters": {"sigma": 3.0}}  # fmt: skip
    path = tmp_path / "gaussian.json"
    path.write_text(json.dumps(other))
    flip = str(made("flip"))
    code, _, err = _run(["account", "compose", flip, str(path)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"{path} states (0.5, 1e-07)" in err and "--accept-stated" in err
    assert "accept_stated" not in err
    text = _ok(["account", "compose", flip, str(path), "--accept-stated"], capsys)
    assert f"{path}: (0.5, 1.000e-07) [gaussian; taken as stated (--accept-stated)]" in text
    assert "[flip-exact; re-derived from its parameters]" in text
    composed = json.loads(_ok(["account", "compose", flip, str(path), "--accept-stated",
                               "--json"], capsys))  # fmt: skip
    assumptions = composed["assumptions"]
    stated = "1 release of the 2 ('gaussian') enters at the (epsilon, delta) it states"
    assert stated in assumptions[1]
    assert any(f"{path} (gaussian) is taken at the (epsilon, delta) it states" in a
               and "(--accept-stated)" in a for a in assumptions)  # fmt: skip
    bases = {c["method"]: c["basis"] for c in composed["parameters"]["components"]}
    assert bases["gaussian"] == "stated" and bases["flip-exact"].startswith(
        "re-derived: flip_delta with q="
    )
