"""The TypeScript client refuses the task documents Python refuses, and pins the same digest.

Python writes every document: the eight task documents of tests/fixtures/v0_2/tasks (every
protocol and augmented variant), each mutated one field at a time (and a few mutations of
the text itself: a BOM, NaN, 1e400, a repeated key), and documents of shuffledp 0.1 (no
``schema`` key). For each document:

* Python's verdict is ``load_task``'s: ``json.loads`` then ``Task.from_dict`` (which runs
  every spec's ``check_task``);
* the schema's verdict is ``shuffledp.schemas.validate(document, "task")``, with the
  ``schema`` key a 0.1 document lacks put back (Python accepts such documents);
* the TS verdict is ``parseTask`` on the same text (clients/ts/test/tools/tool.ts
  ``check-tasks``).

The TS client accepts a document exactly when Python does AND the task schema does, and then
pins Python's digest. Python's ``Task.from_dict`` accepts no document the schema refuses (an
unknown field, a missing ``shuffledp_version``, integer labels, ``message_format`` true and
a null optional parameter are refused). The documents the schema accepts and Python refuses
(:data:`BEYOND_SCHEMA`) are refused by the TS client's reading of the schema (an integer is
not a float, a number is finite) or by its checks beyond it (task.ts ``checkBeyondSchema``).

SAGeo's β ≥ 1 − e^{−ε/2} is tested at the boundary for random ε: both compute it with
expm1, and V8's and the C library's expm1 may differ in the last bit (V8 is fdlibm, glibc's
x86-64 build has FMA variants), so at the two doubles next to the boundary, and only where
the two expm1 differ, the verdicts may differ; everywhere else they agree.
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Callable
from typing import Any

from _ts_client import ROOT, tool

from shuffledp.schemas import SchemaValidationError, validate
from shuffledp.service.task import TASK_SCHEMA, Task, TaskError

FIXTURES = sorted((ROOT / "tests" / "fixtures" / "v0_2" / "tasks").glob("task-*.json"))

Change = Callable[[dict[str, Any]], Any]


def _set(path: str, value: Any) -> Change:
    """Set a field (``parameters.q`` reaches into the parameters)."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = doc
        for part in parents:
            target = target[part]
        target[last] = value

    return change


def _drop(path: str) -> Change:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = doc
        for part in parents:
            target = target[part]
        target.pop(last, None)

    return change


def _raw(path: str, text: str | Callable[[Any], str]) -> Change:
    """Write the field's value as ``text`` (or ``text(old value)``) in the JSON text."""

    def change(doc: dict[str, Any]) -> str:
        *parents, last = path.split(".")
        target = doc
        for part in parents:
            target = target[part]
        old = target.get(last)
        target[last] = "@@RAW@@"
        new = text if isinstance(text, str) else text(old)
        return json.dumps(doc, indent=2).replace('"@@RAW@@"', new)

    return change


def _as_float(path: str) -> Change:
    """The integer field written as a float (``1000.0``)."""
    return _raw(path, lambda old: repr(float(old)))


def _both(*changes: Change) -> Change:
    def change(doc: dict[str, Any]) -> None:
        for item in changes:
            item(doc)

    return change


#: Mutations of every document: (kind, change). A change edits the parsed document in
#: place, or returns the text to use.
COMMON: list[tuple[str, Change]] = [
    ("unchanged", lambda d: None),
    ("0.1: no schema key", _drop("schema")),
    (
        "0.1: no schema key, version 0.1.0",
        _both(_drop("schema"), _set("shuffledp_version", "0.1.0")),
    ),
    ("schema null", _set("schema", None)),
    ("schema of another major", _set("schema", "urn:shuffledp:schema:task:2")),
    ("schema a number", _set("schema", 1)),
    ("format 2", _set("format", "shuffledp-task/2")),
    ("no format", _drop("format")),
    ("task_id uppercase", lambda d: d.update(task_id=d["task_id"].upper().replace("0", "A"))),
    ("task_id short", lambda d: d.update(task_id=d["task_id"][:31])),
    ("task_id a number", _set("task_id", 7)),
    ("no task_id", _drop("task_id")),
    ("protocol unknown", _set("protocol", "segmented")),
    ("protocol null", _set("protocol", None)),
    ("no protocol", _drop("protocol")),
    ("domain one label", _set("domain", ["a"])),
    ("domain empty", _set("domain", [])),
    ("domain repeats a label", lambda d: d.update(domain=[*d["domain"], d["domain"][0]])),
    ("domain two distinct labels", _set("domain", ["x", "y"])),
    ("domain labels differing in case", _set("domain", ["a", "A"])),
    ("domain empty and control-character labels", _set("domain", ["", "\x00", "é", "\u2028"])),
    ("domain label null", _set("domain", ["a", None])),
    ("domain label float", _set("domain", ["a", 1.5])),
    ("domain label true", _set("domain", ["a", True])),
    ("domain label list", _set("domain", ["a", ["b"]])),
    ("domain integer labels", _set("domain", [1, 2])),
    ("domain a string", _set("domain", "ab")),
    ("domain an object", _set("domain", {"a": 1, "b": 2})),
    ("domain null", _set("domain", None)),
    ("no domain", _drop("domain")),
    ("domain_source file", _set("domain_source", "file")),
    ("domain_source synthetic", _set("domain_source", "synthetic")),
    ("domain_source builtin:cities", _set("domain_source", "builtin:cities")),
    ("domain_source public:x", _set("domain_source", "public:x")),
    ("domain_source builtin: and a line end", _set("domain_source", "builtin:\n")),
    ("domain_source builtin: (no name)", _set("domain_source", "builtin:")),
    ("domain_source public: (no name)", _set("domain_source", "public:")),
    ("domain_source inferred-from-data", _set("domain_source", "inferred-from-data")),
    ("domain_source empty", _set("domain_source", "")),
    ("domain_source Declared", _set("domain_source", "Declared")),
    ("domain_source a number", _set("domain_source", 3)),
    ("no domain_source", _drop("domain_source")),
    ("parameters a list", _set("parameters", [])),
    ("parameters null", _set("parameters", None)),
    ("parameters empty", _set("parameters", {})),
    ("parameters with an extra field", _set("parameters.extra", 1)),
    ("no parameters", _drop("parameters")),
    ("epsilon 0", _set("epsilon", 0.0)),
    ("epsilon -1", _set("epsilon", -1.0)),
    ("epsilon an int", _set("epsilon", 1)),
    ("epsilon tiny", _set("epsilon", 5e-324)),
    ("epsilon a string", _set("epsilon", "1")),
    ("epsilon true", _set("epsilon", True)),
    ("epsilon null", _set("epsilon", None)),
    ("epsilon 1e400 (inf)", _raw("epsilon", "1e400")),
    ("epsilon NaN", _raw("epsilon", "NaN")),
    ("epsilon 1e-400 (0)", _raw("epsilon", "1e-400")),
    ("epsilon spelled 1E0", _raw("epsilon", "1E0")),
    ("no epsilon", _drop("epsilon")),
    ("delta 0", _set("delta", 0.0)),
    ("delta 1", _set("delta", 1)),
    ("delta 1.0", _set("delta", 1.0)),
    ("delta 0.5", _set("delta", 0.5)),
    ("delta subnormal", _set("delta", 5e-324)),
    ("delta true", _set("delta", True)),
    ("no delta", _drop("delta")),
    ("min_batch_users 1", _set("min_batch_users", 1)),
    ("min_batch_users 2.0", _as_float("min_batch_users")),
    ("min_batch_users 2**40", _set("min_batch_users", 2**40)),
    ("min_batch_users 2**40 + 1", _set("min_batch_users", 2**40 + 1)),
    ("min_batch_users 10**30", _set("min_batch_users", 10**30)),
    ("min_batch_users true", _set("min_batch_users", True)),
    ("min_batch_users a string", _set("min_batch_users", "1000")),
    ("no min_batch_users", _drop("min_batch_users")),
    ("max_messages_per_submission 0", _set("max_messages_per_submission", 0)),
    ("max_messages_per_submission 1", _set("max_messages_per_submission", 1)),
    ("max_messages_per_submission 2", _set("max_messages_per_submission", 2)),
    ("max_messages_per_submission 10**20", _set("max_messages_per_submission", 10**20)),
    ("max_messages_per_submission as a float", _as_float("max_messages_per_submission")),
    ("max_messages_per_submission true", _set("max_messages_per_submission", True)),
    ("one_submission_per_client true", _set("one_submission_per_client", True)),
    ("one_submission_per_client 1", _set("one_submission_per_client", 1)),
    ("one_submission_per_client a string", _set("one_submission_per_client", "false")),
    ("no one_submission_per_client", _drop("one_submission_per_client")),
    ("message_format 2", _set("message_format", 2)),
    ("message_format 1.0", _set("message_format", 1.0)),
    ("message_format true", _set("message_format", True)),
    ("message_format a string", _set("message_format", "1")),
    ("no message_format", _drop("message_format")),
    ("hpke another aead", _set("hpke.aead", "AES_128_GCM")),
    ("hpke with an extra key", _set("hpke.extra", "x")),
    ("hpke null", _set("hpke", None)),
    ("no hpke", _drop("hpke")),
    ("public_key short", lambda d: d.update(public_key=d["public_key"][:40] + "=")),
    ("public_key without padding", lambda d: d.update(public_key=d["public_key"][:43])),
    ("public_key with a bad character", lambda d: d.update(public_key="*" + d["public_key"][1:])),
    (
        "public_key non-canonical last bits",
        lambda d: d.update(public_key=_noncanonical(d["public_key"])),
    ),
    ("public_key 33 bytes", lambda d: d.update(public_key=d["public_key"][:43] + "AAAA")),
    ("public_key a number", _set("public_key", 5)),
    ("no public_key", _drop("public_key")),
    ("shuffledp_version another", _set("shuffledp_version", "9.9.9")),
    ("shuffledp_version a number", _set("shuffledp_version", 3)),
    ("shuffledp_version null", _set("shuffledp_version", None)),
    ("no shuffledp_version", _drop("shuffledp_version")),
    ("an extra field", _set("note", "x")),
    ("text: a BOM", lambda d: "\ufeff" + json.dumps(d)),
    ("text: trailing garbage", lambda d: json.dumps(d) + " x"),
    ("text: a list", lambda d: json.dumps([d])),
    (
        "text: compact, non-ASCII unescaped",
        lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False),
    ),
    (
        "text: epsilon repeated, the last valid",
        lambda d: "{" + '"epsilon": -1.0, ' + json.dumps(d)[1:],
    ),
    (
        "text: epsilon repeated, the last invalid",
        lambda d: json.dumps(d)[:-1] + ', "epsilon": -1.0}',
    ),
]


def _noncanonical(key: str) -> str:
    """The same 32 bytes with the unused low bits of the last base64 digit set."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(key[42])
    return key[:42] + alphabet[last | 0b0011] + "="


#: Mutations of one protocol's parameters, by the fixture's protocol (augmented: variant).
BY_PROTOCOL: dict[str, list[tuple[str, Change]]] = {
    "flip": [
        ("q 0", _set("parameters.q", 0.0)),
        ("q 0.5", _set("parameters.q", 0.5)),
        ("q just below 0.5", _set("parameters.q", math.nextafter(0.5, 0))),
        ("q subnormal", _set("parameters.q", 5e-324)),
        ("q -0.1", _set("parameters.q", -0.1)),
        ("q 0.7", _set("parameters.q", 0.7)),
        ("q true", _set("parameters.q", True)),
        ("q null", _set("parameters.q", None)),
        ("q a string", _set("parameters.q", "0.1")),
        ("fake_users -1", _set("parameters.fake_users", -1)),
        ("fake_users 0", _set("parameters.fake_users", 0)),
        ("fake_users as a float", _as_float("parameters.fake_users")),
        ("fake_users true", _set("parameters.fake_users", True)),
        ("fake_users 10**20", _set("parameters.fake_users", 10**20)),
        ("calibration paper", _set("parameters.calibration", "paper")),
        ("calibration fixed", _set("parameters.calibration", "fixed")),
        ("calibration a number", _set("parameters.calibration", 1)),
        ("no fake_users", _drop("parameters.fake_users")),
    ],
    "krr": [
        ("epsilon0 0", _set("parameters.epsilon0", 0.0)),
        ("epsilon0 an int", _set("parameters.epsilon0", 2)),
        ("epsilon0 -1", _set("parameters.epsilon0", -1.0)),
        ("epsilon0 1e308", _set("parameters.epsilon0", 1e308)),
        ("epsilon0 1e400 (inf)", _raw("parameters.epsilon0", "1e400")),
        ("epsilon0 true", _set("parameters.epsilon0", True)),
        ("estimator unknown", _set("parameters.estimator", "best")),
        ("estimator null", _set("parameters.estimator", None)),
        ("calibration any text", _set("parameters.calibration", "whatever")),
        ("calibration a number", _set("parameters.calibration", 3)),
        ("no estimator", _drop("parameters.estimator")),
    ],
    "correlated": [
        ("alpha 0", _set("parameters.alpha", 0.0)),
        ("alpha 1", _set("parameters.alpha", 1)),
        ("alpha 0.5", _set("parameters.alpha", 0.5)),
        ("alpha true", _set("parameters.alpha", True)),
        ("flood_r 0", _set("parameters.flood_r", 0)),
        ("flood_r -1", _set("parameters.flood_r", -1.0)),
        ("flood_r 1e308", _set("parameters.flood_r", 1e308)),
        ("flood_q 0", _set("parameters.flood_q", 0.0)),
        ("flood_q -0.0", _set("parameters.flood_q", -0.0)),
        ("flood_q 1", _set("parameters.flood_q", 1.0)),
        ("flood_q just below 1", _set("parameters.flood_q", math.nextafter(1.0, 0))),
        (
            "min_honest above min_batch_users",
            lambda d: d["parameters"].update(min_honest=d["min_batch_users"] + 1),
        ),
        (
            "min_honest below min_batch_users",
            lambda d: d["parameters"].update(min_honest=d["min_batch_users"] - 1),
        ),
        (
            "min_honest and min_batch_users both 2",
            _both(_set("parameters.min_honest", 2), _set("min_batch_users", 2)),
        ),
        ("min_honest as a float", _as_float("parameters.min_honest")),
        (
            "min_honest and min_batch_users both 1",
            _both(_set("parameters.min_honest", 1), _set("min_batch_users", 1)),
        ),
        ("neighbours unknown", _set("parameters.neighbours", "x")),
        ("slack null", _set("parameters.slack", None)),
        ("slack 0", _set("parameters.slack", 0.0)),
        ("slack -1", _set("parameters.slack", -1.0)),
        ("slack an int", _set("parameters.slack", 1)),
        ("slack true", _set("parameters.slack", True)),
        ("calibration a number", _set("parameters.calibration", 3)),
        ("no slack", _drop("parameters.slack")),
    ],
    "sageo": [
        ("beta 0", _set("parameters.beta", 0.0)),
        ("beta 1 (an int)", _set("parameters.beta", 1)),
        ("beta 1.5", _set("parameters.beta", 1.5)),
        ("beta 0.5, above 1 - e^(-epsilon/2)", _set("parameters.beta", 0.5)),
        ("beta 0.3, below 1 - e^(-epsilon/2)", _set("parameters.beta", 0.3)),
        ("beta 0.3 at epsilon 0.7", _both(_set("parameters.beta", 0.3), _set("epsilon", 0.7))),
        ("beta 0.3 at epsilon 0.72", _both(_set("parameters.beta", 0.3), _set("epsilon", 0.72))),
        ("beta 0.01 at epsilon 0.01", _both(_set("parameters.beta", 0.01), _set("epsilon", 0.01))),
        (
            "beta 0.004 at epsilon 0.01",
            _both(_set("parameters.beta", 0.004), _set("epsilon", 0.01)),
        ),
        ("beta null", _set("parameters.beta", None)),
        ("nu -1", _set("parameters.nu", -1)),
        ("nu 0", _set("parameters.nu", 0)),
        ("nu as a float", _as_float("parameters.nu")),
        ("nu null", _set("parameters.nu", None)),
        ("q_left 0", _set("parameters.q_left", 0.0)),
        ("q_left -0.0", _set("parameters.q_left", -0.0)),
        ("q_left 1", _set("parameters.q_left", 1.0)),
        ("q_left null", _set("parameters.q_left", None)),
        ("q_right 0", _set("parameters.q_right", 0.0)),
        ("q_right 1e-300", _set("parameters.q_right", 1e-300)),
        ("q_right just above 1e-300", _set("parameters.q_right", math.nextafter(1e-300, 1))),
        ("q_right 1e-299", _set("parameters.q_right", 1e-299)),
        ("q_right 1", _set("parameters.q_right", 1.0)),
        ("q_right an int", _set("parameters.q_right", 0)),
        ("trials too", _set("parameters.trials", 5)),
        ("trials null", _set("parameters.trials", None)),
        ("no nu", _drop("parameters.nu")),
        ("variant sbin", _set("parameters.variant", "sbin")),
        ("variant unknown", _set("parameters.variant", "geo")),
        ("calibration pure", _set("parameters.calibration", "pure")),
        ("calibration best", _set("parameters.calibration", "best")),
    ],
    "s1geo": [
        ("beta 0.01 (s1geo has no lower limit)", _set("parameters.beta", 0.01)),
        ("beta 0", _set("parameters.beta", 0.0)),
        (
            "variant sageo (the limit applies)",
            _both(_set("parameters.variant", "sageo"), _set("parameters.beta", 0.01)),
        ),
        ("max_messages_per_submission 2", _set("max_messages_per_submission", 2)),
    ],
    "sbin": [
        ("trials 0", _set("parameters.trials", 0)),
        ("trials 1", _set("parameters.trials", 1)),
        ("trials 10**9", _set("parameters.trials", 10**9)),
        ("trials 10**9 + 1", _set("parameters.trials", 10**9 + 1)),
        ("trials as a float", _as_float("parameters.trials")),
        ("trials null", _set("parameters.trials", None)),
        ("no trials", _drop("parameters.trials")),
        ("nu too", _set("parameters.nu", 2)),
        ("q_left null too", _set("parameters.q_left", None)),
        ("beta 0.01 (sbin has no lower limit)", _set("parameters.beta", 0.01)),
        ("variant sageo", _set("parameters.variant", "sageo")),
    ],
}

#: Documents the task schema accepts (as ``jsonschema`` reads it) and Python refuses: by
#: mutation kind. The TS client refuses them all.
BEYOND_SCHEMA = {
    # An integer written as a float: jsonschema's "integer" takes 1000.0, check_int does not
    # (the TS validator reads "integer" as Python's int, "number" as a finite one).
    "min_batch_users 2.0",
    "max_messages_per_submission as a float",
    "fake_users as a float",
    "min_honest as a float",
    "nu as a float",
    "trials as a float",
    # Python reads 1e400 as inf and NaN as nan; jsonschema takes both as numbers.
    "epsilon 1e400 (inf)",
    "epsilon NaN",
    "epsilon0 1e400 (inf)",
    # Rules no schema states (task.ts checkBeyondSchema).
    "domain_source builtin: (no name)",
    "domain_source public: (no name)",
    "domain_source inferred-from-data",
    "domain_source empty",
    "domain_source Declared",
    "min_batch_users 2**40 + 1",
    "min_batch_users 10**30",
    "min_batch_users 2**40",  # a correlated task's min_honest stays 1000
    "min_honest above min_batch_users",
    "min_honest below min_batch_users",
    "beta 0.3, below 1 - e^(-epsilon/2)",
    "beta 0.3 at epsilon 0.72",
    "beta 0.004 at epsilon 0.01",
    "variant sageo (the limit applies)",
    "q_right 1e-300",
    "trials 10**9 + 1",
}


def _kind_of(doc: dict[str, Any]) -> str:
    protocol = str(doc["protocol"])
    return str(doc["parameters"]["variant"]) if protocol == "augmented" else protocol


def _documents() -> list[tuple[str, str, str]]:
    """(name, kind, text) of every mutated document."""
    out = []
    for path in FIXTURES:
        base = json.loads(path.read_text(encoding="utf-8"))
        for kind, change in COMMON + BY_PROTOCOL[_kind_of(base)]:
            doc = copy.deepcopy(base)
            result = change(doc)
            text = result if isinstance(result, str) else json.dumps(doc, indent=2)
            out.append((f"{path.stem}: {kind}", kind, text))
    return out


def _python(text: str) -> tuple[bool, str | None, str]:
    """``load_task``'s verdict on the text: (accepted, digest, error)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return False, None, f"not JSON: {exc}"
    try:
        task = Task.from_dict(data)
    except TaskError as exc:
        return False, None, str(exc)
    return True, task.digest(), ""


def _schema(text: str) -> bool:
    """Whether the document is valid against the task schema (0.1: its schema key put back)."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    if isinstance(data, dict) and "schema" not in data:
        data = {"schema": TASK_SCHEMA, **data}
    try:
        validate(data, "task")
    except SchemaValidationError:
        return False
    return True


def _ts(documents: list[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    results = tool("check-tasks", stdin=json.dumps([{"name": n, "text": t} for n, t in documents]))
    return {r["name"]: r for r in results}


def test_the_ts_client_refuses_what_python_or_the_schema_refuses() -> None:
    documents = _documents()
    assert len(documents) > 900
    ts = _ts([(name, text) for name, _, text in documents])
    looser: set[str] = set()
    beyond: set[str] = set()
    wrong: list[tuple[Any, ...]] = []
    for name, kind, text in documents:
        accepted, digest, error = _python(text)
        valid = _schema(text)
        if accepted and not valid:
            looser.add(kind)
        if valid and not accepted:
            beyond.add(kind)
        verdict = ts[name]
        if verdict["ok"] != (accepted and valid):
            wrong.append((name, accepted, valid, verdict.get("error"), error))
        elif verdict["ok"] and verdict["digest"] != digest:
            wrong.append((name, "digest", verdict["digest"], digest))
    assert not wrong, "\n".join(map(str, wrong))
    # Python reads no document its own schema refuses (Task.from_dict checks its shape).
    assert not looser, sorted(looser)
    assert beyond == BEYOND_SCHEMA


def test_documents_of_shuffledp_0_1_load_with_their_digest() -> None:
    """No ``schema`` key (as 0.1 wrote them): accepted, digest of the document as written."""
    documents = []
    for path in FIXTURES:
        doc = json.loads(path.read_text(encoding="utf-8"))
        del doc["schema"]
        doc["shuffledp_version"] = "0.1.0"
        documents.append((path.stem, json.dumps(doc, indent=2)))
    ts = _ts(documents)
    for name, text in documents:
        accepted, digest, error = _python(text)
        assert accepted, error
        task = Task.from_dict(json.loads(text))
        assert task.schema is None and task.to_dict() == json.loads(text)
        assert ts[name]["ok"], ts[name].get("error")
        assert ts[name]["digest"] == digest, name


def test_sageo_beta_at_its_lower_limit() -> None:
    """β at and around Python's 1 − e^{−ε/2} for random ε: the same verdicts but in the
    one-ulp window where the two runtimes' expm1 differ."""
    base = json.loads(
        (
            ROOT / "tests" / "fixtures" / "v0_2" / "tasks" / "task-augmented-variant-sageo.json"
        ).read_text(encoding="utf-8")
    )
    rng = random.Random(20261122)
    documents = []
    for i in range(300):
        epsilon = math.exp(rng.uniform(math.log(1e-3), math.log(30.0)))
        low = -math.expm1(-epsilon / 2.0)  # check_beta's limit, in Python
        for where, beta in (
            ("at", low),
            ("1 below", math.nextafter(low, 0)),
            ("2 below", math.nextafter(math.nextafter(low, 0), 0)),
            ("1 above", math.nextafter(low, 2)),
        ):
            if not 0 < beta <= 1:
                continue
            doc = copy.deepcopy(base)
            doc["epsilon"], doc["parameters"]["beta"] = epsilon, beta
            documents.append((f"{i} {where}", epsilon, where, json.dumps(doc)))
    ts = _ts([(name, text) for name, _, _, text in documents])
    limits = dict(
        zip(
            [e for _, e, _, _ in documents],
            tool("min-beta", stdin=json.dumps([e for _, e, _, _ in documents])),
            strict=True,
        )
    )
    differ = set()
    for name, epsilon, where, text in documents:
        accepted, _, error = _python(text)
        assert accepted == (where in ("at", "1 above")), (name, error)
        low = -math.expm1(-epsilon / 2.0)
        assert abs(limits[epsilon] - low) <= math.ulp(low), (epsilon, limits[epsilon], low)
        if limits[epsilon] != low and where in ("at", "1 below"):
            differ.add(epsilon)  # within the one-ulp window of the two expm1
            continue
        assert ts[name]["ok"] == accepted, (name, ts[name].get("error"))
    print(f"{len(documents)} documents; the two expm1 differ at {len(differ)} of 300 epsilons")
