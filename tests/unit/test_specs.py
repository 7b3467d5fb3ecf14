"""Protocol specs: one typed value per protocol, its JSON form, its schema and its functions.

Every spec's JSON form matches its own schema (the one the task document's
``parameters`` refer to), reads back to an equal value, and is refused with
an error naming the field when a field is missing, unknown, mistyped or out
of range. The functions that go with a spec are checked against independent
computations: FLIP's message bound against the binomial tail, the capped
parties against what the calibration reserves, the randomizer's messages
against the spec's bound.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from scipy.stats import binom

from shuffledp.schemas import SchemaValidationError, schema_for, validate
from shuffledp.service.task import Task, TaskError, create_task
from shuffledp.specs import (
    SPECS,
    AugmentedSpec,
    CorrelatedSpec,
    FlipSpec,
    KRRSpec,
    ProtocolSpec,
    SpecError,
    spec_class,
    spec_from_dict,
)

LABELS = ("a", "b", "c", "d")

EXAMPLES: dict[str, ProtocolSpec] = {
    "flip": FlipSpec(q=0.01, fake_users=20, calibration="paper"),
    "krr": KRRSpec(epsilon0=3.5, estimator="clip", calibration="exact"),
    "correlated": CorrelatedSpec(0.4, 2.0, 0.5, min_honest=50, neighbours="add-remove", slack=0.1),
    "augmented-sageo": AugmentedSpec("sageo", 0.9, nu=30, q_left=0.2, q_right=0.6),
    "augmented-sbin": AugmentedSpec("sbin", 1.0, trials=400, calibration="fixed"),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_json_form_matches_its_schema_and_reads_back(name: str) -> None:
    spec = EXAMPLES[name]
    document = json.loads(json.dumps(spec.to_dict()))
    validate(document, spec.schema())
    again = spec_from_dict(spec.name, document)
    assert again == spec and type(again) is type(spec)
    assert spec.schema() == f"urn:shuffledp:schema:{spec.name}-spec:1"
    assert schema_for(spec.schema())["$id"] == spec.schema()


def test_the_registry_holds_every_protocol_a_task_runs_and_its_schema_lists_them() -> None:
    task_schema = schema_for("task")
    assert set(SPECS) == set(task_schema["properties"]["protocol"]["enum"])
    referenced = {
        block["then"]["properties"]["parameters"]["$ref"] for block in task_schema["allOf"]
    }
    assert referenced == {spec.schema() for spec in SPECS.values()}
    for name, spec in SPECS.items():
        assert spec.name == name and spec_class(name) is spec


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_field_of_the_schema_is_a_field_of_the_spec(name: str) -> None:
    spec = EXAMPLES[name]
    properties = set(schema_for(spec.schema())["properties"])
    assert properties == set(type(spec).fields)


@pytest.mark.parametrize(
    ("protocol", "parameters", "message"),
    [
        ("flip", {"q": 0.01, "k": 20, "calibration": "exact"}, "no field 'k'"),
        ("flip", {"q": 0.01, "calibration": "exact"}, "need fake_users"),
        ("flip", {"q": 0.6, "fake_users": 1, "calibration": "exact"}, "q"),
        ("flip", {"q": True, "fake_users": 1, "calibration": "exact"}, "'q' must be a number"),
        ("flip", {"q": 0.01, "fake_users": 2.0, "calibration": "exact"}, "fake_users"),
        ("flip", {"q": 0.01, "fake_users": 2, "calibration": "guess"}, "calibration"),
        ("krr", {"epsilon0": -1, "estimator": "raw", "calibration": "exact"}, "epsilon0"),
        ("krr", {"epsilon0": 1, "estimator": "mle", "calibration": "exact"}, "estimator"),
        ("correlated", {**EXAMPLES["correlated"].to_dict(), "alpha": 1.0}, "alpha"),
        ("correlated", {**EXAMPLES["correlated"].to_dict(), "neighbours": "swap"}, "neighbours"),
        ("correlated", {**EXAMPLES["correlated"].to_dict(), "slack": 0}, "slack"),
        ("correlated", {**EXAMPLES["correlated"].to_dict(), "min_honest": 0}, "min_honest"),
        ("augmented", {"variant": "sbin", "beta": 1, "calibration": "fixed"}, "trials"),
        (
            "augmented",
            {"variant": "sbin", "beta": 1, "trials": 9, "nu": 3, "calibration": "fixed"},
            "no parameters nu",
        ),
        ("augmented", {**EXAMPLES["augmented-sageo"].to_dict(), "beta": 0}, "beta"),
        ("augmented", {**EXAMPLES["augmented-sageo"].to_dict(), "variant": "geo"}, "variant"),
        ("shuffle", {}, "protocol must be one of"),
    ],
)
def test_a_bad_json_form_is_refused_naming_the_field(
    protocol: str, parameters: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        spec_from_dict(protocol, parameters)
    # The schema refuses it too (but for an integral float: JSON Schema's integers include
    # 2.0, which the spec refuses, as every count in the package).
    if protocol in SPECS and not isinstance(parameters.get("fake_users"), float):
        with pytest.raises(SchemaValidationError):
            validate(parameters, spec_class(protocol).schema())


@pytest.mark.parametrize(("d", "q", "k"), [(4, 0.004, 100), (2, 0.2, 0), (50, 0.001, 3)])
def test_the_flip_message_bound_is_the_far_tail_of_the_binomial(d: int, q: float, k: int) -> None:
    bound = FlipSpec(q, k).max_messages(d)
    trials = (k + 1) * d - 1  # 1 + Bin((k + 1)d - 1, q) dominates the count
    assert binom.sf(bound - 1, trials, q) <= 1e-30
    assert bound == 1 or binom.sf(bound - 2, trials, q) > 1e-30


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_randomizer_stays_within_the_message_bound(name: str) -> None:
    spec = EXAMPLES[name]
    d = len(LABELS)
    values = np.random.default_rng(7).integers(0, d, 2000)
    batch = spec.randomizer(d).randomize(values, seed=11)
    per_user = np.bincount(batch.sender, minlength=values.size)
    assert per_user.max() <= spec.max_messages(d)
    assert per_user.min() >= min(1, spec.fewest_messages_per_user())
    assert batch.payload.max() < spec.message_domain_size(d)


#: Who can exceed a message bound (the message_bounds argument): every FLIP and correlated
#: client of a batch; no k-RR client (one message); the augmented shuffler's one dummy draw
#: (SAGeo, S1Geo) or none (SBin's count is at most M).
CAPPED = {
    "flip": lambda users: users,
    "correlated": lambda users: users,
    "krr": lambda users: 0,
    "augmented-sageo": lambda users: 1,
    "augmented-sbin": lambda users: 0,
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_capped_parties_are_who_can_exceed_a_bound_and_what_calibration_reserves(
    name: str,
) -> None:
    spec = EXAMPLES[name]
    options = {"variant": spec.variant} if isinstance(spec, AugmentedSpec) else {}
    for users in (1, 2, 1000):
        assert spec.capped_parties(users) == CAPPED[name](users)
        assert type(spec).capped_parties_when_calibrated(users, options) == CAPPED[name](users)


def test_a_task_holds_its_spec_and_its_document_is_the_spec_s_json_form() -> None:
    task, _ = create_task("flip", list(LABELS), 1.0, 1e-6, 500, fake_users=10)
    assert isinstance(task.spec, FlipSpec) and task.spec.fake_users == 10
    document = task.to_dict()
    assert document["protocol"] == "flip" and document["parameters"] == task.spec.to_dict()
    validate(document, "task")
    assert Task.from_dict(document) == task
    assert task.max_messages_per_submission == task.spec.max_messages(len(LABELS))


def test_a_given_spec_is_certified_as_it_is_or_refused() -> None:
    calibrated, _ = create_task("krr", list(LABELS), 1.0, 1e-6, 2000)
    assert isinstance(calibrated.spec, KRRSpec)
    again, _ = create_task(calibrated.spec, list(LABELS), 1.0, 1e-6, 2000)
    assert again.spec == calibrated.spec
    louder = KRRSpec(calibrated.spec.epsilon0 * 1.5)
    with pytest.raises(ValueError, match="certify delta"):
        create_task(louder, list(LABELS), 1.0, 1e-6, 2000)
    with pytest.raises(ValueError, match="does not apply when the spec is given"):
        create_task(calibrated.spec, list(LABELS), 1.0, 1e-6, 2000, estimator="raw")


def test_a_task_whose_fields_contradict_its_spec_is_refused() -> None:
    task, _ = create_task("correlated", list(LABELS), 1.0, 1e-6, 100)
    document = task.to_dict()
    document["parameters"]["min_honest"] = 101
    with pytest.raises(TaskError, match="min_honest must equal its min_batch_users"):
        Task.from_dict(document)
    assert math.isfinite(task.spec.max_messages(len(LABELS)))


@pytest.mark.parametrize("name", ["flip", "krr"])
def test_the_accountant_s_mechanism_certifies_what_the_protocol_reports(name: str) -> None:
    from shuffledp import accounting

    spec = EXAMPLES[name]
    assert isinstance(spec, FlipSpec | KRRSpec)
    n, labels = 3000, LABELS
    mechanism = spec.mechanism(n, len(labels))
    inputs = mechanism.inputs()
    kind = inputs.pop("mechanism")
    report = spec.protocol(n, labels, 1.0, 1e-6).privacy_report()
    # A report names its certificate as the accounting registry does (one name each).
    again = accounting.delta(1.0, mechanism=kind, method=report.method, **inputs)
    assert again.delta == report.delta and again.certified
