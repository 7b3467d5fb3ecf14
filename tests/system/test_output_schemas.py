"""Every JSON document the command line writes matches its packaged JSON Schema.

The schemas ship in ``shuffledp.schemas`` (draft 2020-12, references resolved
in a local registry, nothing fetched). Each command below runs on small inputs
and its real output is validated with ``jsonschema``; the experiment summaries
are validated in their own tests (``test_segmented_experiment.py``,
``test_per_user_experiment.py``) and ``client submit`` and ``demo --deploy``
in ``tests/service/test_service_cli.py``, where those already run.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from shuffledp.cli import main
from shuffledp.schemas import (
    SCHEMA_IDS,
    SCHEMA_PREFIX,
    SCHEMA_VERSIONS,
    SchemaValidationError,
    registry,
    schema_for,
    schema_id,
    validate,
)

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = "Lyon,Nice,Paris,Rome"


def _validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        schema_for(name),
        registry=registry(),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


def _check(document: dict[str, Any], name: str) -> None:
    """The document names its schema and matches it (jsonschema directly, then the helper)."""
    assert document["schema"] == schema_id(name)
    _validator(name).validate(document)
    validate(document)


# ---------------------------------------------------------------------------- the schema files


def _packaged() -> dict[str, dict[str, Any]]:
    files = resources.files("shuffledp.schemas")
    return {
        entry.name.removesuffix(".schema.json"): json.loads(entry.read_text(encoding="utf-8"))
        for entry in files.iterdir()
        if entry.name.endswith(".schema.json")
    }


def test_every_schema_file_is_a_valid_draft_2020_12_schema_with_its_id() -> None:
    packaged = _packaged()
    assert set(packaged) == set(SCHEMA_IDS)
    ids = [schema["$id"] for schema in packaged.values()]
    assert len(set(ids)) == len(ids)
    for name, schema in packaged.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == SCHEMA_IDS[name] == f"{SCHEMA_PREFIX}{name}:{SCHEMA_VERSIONS[name]}"
        assert schema["title"] and schema["description"]
        # Every document schema pins its own id in the `schema` key; defs and the protocol
        # specs (a task's `parameters`, tests/unit/test_specs.py) are parts of documents.
        if name != "defs" and not name.endswith("-spec"):
            assert schema["properties"]["schema"] == {"const": SCHEMA_IDS[name]}


def test_every_reference_resolves_in_the_local_registry() -> None:
    def refs(node: Any) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return found + [ref for value in node.values() for ref in refs(value)]
        if isinstance(node, list):
            return [ref for value in node for ref in refs(value)]
        return []

    reg = registry()
    checked = 0
    for name, schema in _packaged().items():
        resolver = reg.resolver(base_uri=schema["$id"])
        for ref in refs(schema):
            assert ref.startswith(("#/", SCHEMA_PREFIX)), f"{name}: {ref} is not local"
            resolver.lookup(ref)  # raises if it does not resolve
            checked += 1
    assert checked > 50


def test_docs_page_lists_every_schema() -> None:
    page = (ROOT / "docs" / "schemas.md").read_text(encoding="utf-8")
    for schema in SCHEMA_IDS.values():
        assert f"`{schema}`" in page, f"docs/schemas.md does not list {schema}"


# ---------------------------------------------------------------------------- real outputs


def _cli(argv: list[Any]) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    assert code == 0, err.getvalue()
    return out.getvalue()


def _json(argv: list[Any]) -> dict[str, Any]:
    text = _cli(argv)
    assert text.count("\n") >= 1
    document: dict[str, Any] = json.loads(text)
    return document


def _inputs(tmp: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    cities = np.array(["Lyon", "Paris", "Nice", "Rome"])[
        rng.choice(4, size=2000, p=[0.1, 0.5, 0.3, 0.1])
    ]
    users = tmp / "users.csv"
    users.write_text("user,city\n" + "".join(f"{i},{c}\n" for i, c in enumerate(cities)))
    lines = ["user,item,level"]
    for u in range(600):
        for item in rng.choice(list("ABCDEF"), size=rng.integers(1, 4), replace=False):
            lines.append(f"user{u},{item},{('0.5', '1', '2')[u % 3]}")
    sets = tmp / "sets.csv"
    sets.write_text("\n".join(lines) + "\n")
    counts = rng.integers(0, 6, size=(150, 5))
    counts[:, 0] += 1  # every user has a histogram
    rows = [
        f"u{i},{'ABCDE'[j]},{c}" for i, row in enumerate(counts) for j, c in enumerate(row) if c
    ]
    long = tmp / "long.csv"
    long.write_text("user,cls,n\n" + "\n".join(rows) + "\n")
    return {"users": users, "sets": sets, "long": long}


def _fill_analyzer_store(task_path: Path, key_path: Path, store_path: Path) -> None:
    """Two sealed, permuted batches of 100 and 120 users, aggregated (as the services do)."""
    from shuffledp.service.analyzer import Aggregator
    from shuffledp.service.shuffler import permute_messages
    from shuffledp.service.sqlite_store import SQLiteAnalyzerStore, content_digest
    from shuffledp.service.store import ReceivedBatch
    from shuffledp.service.task import build_randomizer, load_private_key, load_task, new_id
    from shuffledp.service.wire import CIPHERTEXT_LENGTH, MessageSealer, public_key_from_b64

    task = load_task(task_path)
    key = load_private_key(key_path, task)
    sealer = MessageSealer(public_key_from_b64(task.public_key), task.task_id, task.domain_size)
    randomizer = build_randomizer(task)
    rng = np.random.default_rng(1)
    store = SQLiteAnalyzerStore(store_path, task.task_id)
    try:
        for users in (100, 120):
            bins = randomizer.randomize(rng.integers(0, task.domain_size, size=users), rng).payload
            payload = permute_messages(b"".join(sealer.seal(int(b)) for b in bins))
            digest = content_digest(payload, CIPHERTEXT_LENGTH)
            assert store.add_batch(ReceivedBatch(new_id(), payload, users, len(bins), digest))
        assert Aggregator(task, key, store).step()
    finally:
        store.close()


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, dict[str, Any]]]:
    """Case → (schema name, the document the command wrote), every command run once."""
    tmp = tmp_path_factory.mktemp("outputs")
    data = _inputs(tmp)
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    run = ["--input", data["users"], "--column", "city", "--epsilon", "1", "--delta", "1e-6"]
    run += ["--seed", "1", "--quiet"]

    _cli(
        ["run", "flip", *run, "--domain", DOMAIN, "--fake-users", "20", "--output", tmp / "f.json"]
    )
    out["run flip"] = ("release", json.loads((tmp / "f.json").read_text()))
    out["run krr"] = (
        "release",
        _json(["run", "krr", *run, "--domain", DOMAIN, "--user-column", "user"]),
    )
    out["run krr, domain from the data, count path"] = (
        "release",
        _json(["run", "krr", *run, "--unsafe-domain-from-data", "--path", "count"]),
    )
    segmented = ["run", "segmented", "--input", data["sets"], "--user-column", "user"]
    segmented += ["--item-column", "item", "--level-column", "level", "--levels", "0.5,1,2"]
    segmented += ["--delta", "1e-5", "--items-per-user", "2", "--domain", "A,B,C,D,E,F"]
    segmented += ["--blanket", "1.5", "--padding", "--seed", "4", "--quiet"]
    out["run segmented"] = ("segmented-release", _json(segmented))
    out["run segmented, dp level counts, dummy"] = (
        "segmented-release",
        _json([*segmented, "--level-counts", "dp", "--level-epsilon", "1", "--level-delta", "1e-6",
               "--variant", "dummy", "--path", "count"]),
    )  # fmt: skip
    _cli(["run", "per-user", "--input", data["long"], "--user-column", "user", "--class-column",
          "cls", "--count-column", "n", "--domain", "A,B,C,D,E", "--epsilon", "4", "--epsilon1",
          "1", "--c", "0.1", "--clusters", "3", "--seed", "1", "--output", tmp / "est.csv",
          "--report", tmp / "report.json", "--quiet"])  # fmt: skip
    out["run per-user"] = ("per-user-report", json.loads((tmp / "report.json").read_text()))

    out["account delta"] = (
        "account-bounds",
        _json(["account", "delta", "--epsilon", "0.5", "--epsilon0", "2", "--n", "2000", "--json"]),
    )
    out["account amplify"] = (
        "account-bounds",
        _json(["account", "amplify", "--epsilon0", "2", "--n", "2000", "--delta", "1e-6",
               "--mechanism", "krr", "--k", "10", "--json"]),
    )  # fmt: skip
    calibrate = ["account", "calibrate", "--epsilon", "1", "--delta", "1e-6", "--n", "1000"]
    calibrate += ["--mechanism", "krr", "--k", "4", "--json"]
    out["account calibrate"] = ("account-calibrate", _json(calibrate))
    out["account calibrate --method all"] = (
        "account-calibrate",
        _json([*calibrate, "--method", "all"]),
    )
    out["account compose"] = (
        "account-compose",
        _json(["account", "compose", tmp / "f.json", tmp / "f.json", "--json"]),
    )
    flip = ["account", "flip", "--n", "2000", "--domain-size", "10", "--epsilon", "1", "--json"]
    out["account flip"] = ("account-flip", _json([*flip, "--delta", "1e-6"]))
    out["account flip, paper unavailable"] = ("account-flip", _json([*flip, "--delta", "0.1"]))
    out["account krr"] = (
        "account-krr",
        _json(["account", "krr", "--n", "2000", "--k", "10", "--epsilon", "1", "--delta", "1e-6",
               "--json"]),
    )  # fmt: skip
    out["account segmented"] = (
        "account-segmented",
        _json(["account", "segmented", "--n", "2000", "--domain-size", "16", "--levels", "0.5,1,2",
               "--shares", "0.25,0.5,0.25", "--items-per-user", "2", "--delta", "1e-5",
               "--blanket", "1.5", "--json"]),
    )  # fmt: skip

    augmented = ["account", "augmented", "--n", "2000", "--domain-size", "4", "--epsilon", "1"]
    out["account augmented"] = (
        "account-augmented",
        _json([*augmented, "--delta", "1e-6", "--json"]),
    )
    out["account augmented, sbin at fixed trials"] = (
        "account-augmented",
        _json([*augmented, "--delta", "1e-6", "--variant", "sbin", "--trials", "300", "--json"]),
    )
    out["run augmented"] = (
        "augmented-release",
        _json(["run", "augmented", *run, "--domain", DOMAIN, "--beta", "0.8"]),
    )
    out["run augmented, sbin, count path"] = (
        "augmented-release",
        _json(
            ["run", "augmented", *run, "--domain", DOMAIN, "--variant", "sbin", "--path", "count"]
        ),
    )
    correlated = ["account", "correlated", "--n", "2000", "--domain-size", "4", "--epsilon", "1"]
    out["account correlated"] = (
        "account-correlated",
        _json([*correlated, "--delta", "1e-6", "--min-honest", "0.9", "--json"]),
    )
    out["run correlated, count path, add-remove"] = (
        "correlated-release",
        _json(["run", "correlated", *run, "--domain", DOMAIN, "--path", "count",
               "--neighbours", "add-remove"]),
    )  # fmt: skip

    simulate = ["--epsilon", "1", "--delta", "1e-6", "--seed", "1", "--quiet"]
    out["simulate flip"] = (
        "simulation",
        _json(["simulate", "flip", "--n", "3000", "--domain-size", "8", "--fake-users", "20",
               "--replicates", "2", *simulate]),
    )  # fmt: skip
    out["simulate krr"] = (
        "simulation",
        _json(["simulate", "krr", "--n", "3000", "--domain", "a,b,c", *simulate]),
    )
    _cli(
        ["demo", "--n", "2000", "--domain-size", "10", "--seed", "1", "--output-dir", tmp / "demo"]
    )
    out["demo"] = ("demo", json.loads((tmp / "demo" / "flip_demo.json").read_text()))

    task = ["task", "create", "--domain", "red,green,blue", "--epsilon", "1", "--delta", "1e-6"]
    task += ["--min-batch-users", "100"]
    _cli([*task, "--protocol", "krr", "--out", tmp / "krr.json", "--key-out", tmp / "krr.key"])
    out["task create krr"] = ("task", json.loads((tmp / "krr.json").read_text()))
    _cli([*task, "--protocol", "flip", "--fake-users", "5", "--out", tmp / "task.json",
          "--key-out", tmp / "analyzer.key"])  # fmt: skip
    out["task create flip"] = ("task", json.loads((tmp / "task.json").read_text()))
    out["account task"] = (
        "account-task",
        _json(["account", "task", "--task", tmp / "task.json", "--json"]),
    )

    _fill_analyzer_store(tmp / "task.json", tmp / "analyzer.key", tmp / "analyzer.db")
    service = ["--task", tmp / "task.json"]
    store = ["--store", f"sqlite:///{tmp / 'analyzer.db'}", "--quiet"]
    out["analyzer publish"] = ("release", _json(["analyzer", "publish", *service, *store]))
    _cli(["analyzer", "export", *service, *store, "--output", tmp / "dataset"])
    out["analyzer export (_shuffledp.json)"] = (
        "message-dataset",
        json.loads((tmp / "dataset" / "_shuffledp.json").read_text()),
    )
    out["analyzer aggregate"] = (
        "release",
        _json(["analyzer", "aggregate", *service, "--key", tmp / "analyzer.key",
               "--input", tmp / "dataset", "--quiet"]),
    )  # fmt: skip
    return out


CASES = [
    "run flip",
    "run krr",
    "run krr, domain from the data, count path",
    "run segmented",
    "run segmented, dp level counts, dummy",
    "run per-user",
    "account delta",
    "account amplify",
    "account calibrate",
    "account calibrate --method all",
    "account compose",
    "account flip",
    "account flip, paper unavailable",
    "account krr",
    "account segmented",
    "simulate flip",
    "simulate krr",
    "demo",
    "task create krr",
    "task create flip",
    "account task",
    "analyzer publish",
    "analyzer export (_shuffledp.json)",
    "analyzer aggregate",
    "account augmented",
    "account augmented, sbin at fixed trials",
    "run augmented",
    "run augmented, sbin, count path",
    "account correlated",
    "run correlated, count path, add-remove",
]


@pytest.mark.parametrize("case", CASES)
def test_output_matches_its_schema(documents, case: str) -> None:
    name, document = documents[case]
    _check(document, name)


def test_every_case_ran_and_every_document_schema_is_covered(documents) -> None:
    assert sorted(documents) == sorted(CASES)
    covered = {name for name, _ in documents.values()}
    # Validated by each experiment's own tests (near-central: test_near_central_experiment).
    experiments = {
        "experiment-segmented-summary",
        "experiment-per-user-summary",
        "experiment-near-central-summary",
    }
    elsewhere = {"submission"}  # tests/service/test_service_cli.py
    specs = {name for name in SCHEMA_IDS if name.endswith("-spec")}  # test_specs.py
    assert covered | experiments | elsewhere | specs | {"defs"} == set(SCHEMA_IDS)


def test_the_cases_cover_the_documents_variants(documents) -> None:
    assert documents["analyzer aggregate"][1] == documents["analyzer publish"][1]
    assert "service" in documents["analyzer publish"][1]
    assert documents["run krr, domain from the data, count path"][1]["privacy"]["not_covered"]
    rows = documents["account calibrate --method all"][1]["rows"]
    assert len(rows) > 1
    assert documents["account flip, paper unavailable"][1]["paper"] is None
    levels = documents["run segmented, dp level counts, dummy"][1]["privacy"]["level_counts"]
    assert levels["mode"] == "dp" and levels["privacy"] is not None


# ---------------------------------------------------------------------------- what is refused


def _mutated(document: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    copied = copy.deepcopy(document)
    change(copied)
    return copied


def test_a_release_without_its_privacy_block_or_with_a_string_epsilon_fails(documents) -> None:
    release = documents["run flip"][1]
    no_privacy = _mutated(release, lambda d: d.pop("privacy"))
    with pytest.raises(jsonschema.ValidationError, match="'privacy' is a required property"):
        _validator("release").validate(no_privacy)
    with pytest.raises(SchemaValidationError, match="'privacy' is a required property"):
        validate(no_privacy)
    text_epsilon = _mutated(release, lambda d: d["privacy"].__setitem__("epsilon", "1.0"))
    with pytest.raises(
        jsonschema.ValidationError, match=re.escape("'1.0' is not of type 'number'")
    ):
        _validator("release").validate(text_epsilon)
    with pytest.raises(SchemaValidationError, match="at privacy/epsilon"):
        validate(text_epsilon)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split("/")

    def change(document: dict[str, Any]) -> None:
        node: Any = document
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is _DELETE:
            del node[last]
        else:
            node[int(last) if isinstance(node, list) else last] = value

    return change


_DELETE = object()


@pytest.mark.parametrize(
    ("case", "path", "value", "fragment"),
    [
        ("run flip", "privacy/bound", "lower", "privacy/bound"),
        ("run flip", "privacy/not_covered", _DELETE, "'not_covered' is a required"),
        ("run flip", "privacy/assumptions", "one user per row", "privacy/assumptions"),
        ("run flip", "privacy/delta", 1.5, "privacy/delta"),
        ("run flip", "privacy/n", 0, "privacy/n"),
        ("run flip", "privacy/method", "", "privacy/method"),
        ("run flip", "privacy/extra", 1, "'extra' was unexpected"),
        ("run flip", "extra", 1, "'extra' was unexpected"),
        ("run flip", "estimate/counts/0", "12", "estimate/counts/0"),
        ("run flip", "parameters/q", _DELETE, "'q' is a required"),
        ("run flip", "schema", "urn:shuffledp:schema:simulation:2", "schema"),
        (
            "analyzer publish",
            "input",
            {"file": "x", "column": "c", "user_column": None},
            "valid under each of",
        ),
        ("run segmented", "privacy/levels/0/delta", _DELETE, "'delta' is a required"),
        ("run segmented", "privacy/level_counts/covered", True, "level_counts/covered"),
        ("run per-user", "privacy/epsilon", None, "privacy/epsilon"),
        ("account delta", "rows/0/bound", "guess", "rows/0/bound"),
        ("account compose", "bound", "reproduction", "bound"),
        ("account flip, paper unavailable", "paper_unavailable", _DELETE, "paper_unavailable"),
        ("simulate flip", "simulation", _DELETE, "'simulation' is a required"),
        ("demo", "true_counts", _DELETE, "'true_counts' is a required"),
        ("task create krr", "parameters/q", 0.1, "'q' was unexpected"),
        ("task create flip", "task_id", "XYZ", "task_id"),
        ("analyzer export (_shuffledp.json)", "message_bytes", 5, "message_bytes"),
        ("account correlated", "flooding/q", 1.0, "flooding/q"),
        ("run correlated, count path, add-remove", "protocol", "flip", "protocol"),
        ("run correlated, count path, add-remove", "accuracy", _DELETE, "'accuracy' is a required"),
    ],
)
def test_a_broken_document_is_refused(documents, case, path, value, fragment) -> None:
    name, document = documents[case]
    broken = _mutated(document, _set(path, value))
    with pytest.raises(jsonschema.ValidationError):
        _validator(name).validate(broken)
    with pytest.raises(SchemaValidationError, match=re.escape(fragment)):
        validate(broken, name)


def test_validate_needs_a_known_schema(documents) -> None:
    release = documents["run flip"][1]
    with pytest.raises(SchemaValidationError, match="no 'schema' key"):
        validate(_mutated(release, lambda d: d.pop("schema")))
    with pytest.raises(SchemaValidationError, match="a different major version"):
        validate(_mutated(release, _set("schema", f"{SCHEMA_PREFIX}release:3")))
    with pytest.raises(SchemaValidationError, match="no schema named 'releases'"):
        validate(release, "releases")
    validate(release, "release")
    validate(release, schema_id("release"))


def test_metadata_of_an_older_export_loads_and_a_foreign_schema_is_refused(documents, tmp_path):
    from shuffledp._validation import DataError
    from shuffledp.backends.dataset import METADATA_FILE, open_dataset

    metadata = documents["analyzer export (_shuffledp.json)"][1]
    (tmp_path / METADATA_FILE).write_text(
        json.dumps({k: v for k, v in metadata.items() if k != "schema"})
    )
    assert open_dataset(tmp_path).n_users == 220
    (tmp_path / METADATA_FILE).write_text(json.dumps({**metadata, "schema": "urn:x:1"}))
    with pytest.raises(DataError, match="schema must be"):
        open_dataset(tmp_path)
