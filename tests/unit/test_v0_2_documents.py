"""Documents written by shuffledp 0.2.0 still load (tests/fixtures/v0_2, made by make_fixtures.sh).

Every task document loads with its parameters intact and still builds its randomizer and its
release; every release composes with its guarantee re-derived from the parameters it records,
except where the guarantee 0.2 stated no longer holds: its correlated add/remove releases
certified a relation in which an absent user still sent its noise shares, and are refused,
saying what their parameters certify.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.accounting.composition.compose import reports_from_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "v0_2"
TASKS = sorted((FIXTURES / "tasks").glob("*.json"))
RELEASES = sorted((FIXTURES / "releases").glob("*.json")) + sorted(
    (FIXTURES / "service-releases").glob("*.json")
)
REFUSED = {"run-correlated-add-remove.json", "service-correlated-neighbours-add-remove.json"}


def test_every_kind_of_document_is_there():
    assert {p.stem.split("-")[1] for p in TASKS} == {"flip", "krr", "correlated", "augmented"}
    kinds = {p.stem for p in RELEASES}
    for kind in ("run-flip", "run-krr", "run-correlated", "run-augmented", "run-segmented",
                 "run-per-user", "demo", "account-compose", "simulate-flip", "simulate-krr",
                 "service-flip", "service-krr", "service-correlated",
                 "service-augmented-variant-sbin"):  # fmt: skip
        assert kind in kinds


@pytest.mark.parametrize("path", TASKS, ids=lambda p: p.stem)
def test_a_0_2_task_loads_with_its_parameters(path):
    from shuffledp.service.task import build_randomizer, load_task

    written = json.loads(path.read_text())
    task = load_task(path)
    again = task.to_dict()
    for key, value in written.items():
        if key in again:
            assert again[key] == value, key
    assert task.protocol == written["protocol"]
    randomizer = build_randomizer(task)
    assert randomizer is not None


@pytest.mark.parametrize("path", TASKS, ids=lambda p: p.stem)
def test_a_0_2_task_still_publishes_a_release_that_states_its_real_delta(path):
    from shuffledp.service.release import build_release
    from shuffledp.service.store_protocols import AggregateTotals
    from shuffledp.service.task import load_task

    task = load_task(path)
    d = task.domain_size
    width = 2 * d if task.protocol == "correlated" else d
    counts = np.arange(300, 300 + 50 * width, 50, dtype=np.int64)
    totals = AggregateTotals(counts=counts, n_users=1200, n_messages=int(counts.sum()),
                             n_batches=1, smallest_batch_users=1200, pending_batches=0)  # fmt: skip
    release = build_release(task, totals)
    privacy = release["privacy"]
    assert privacy["epsilon"] == task.epsilon
    if privacy["delta"] > task.delta:
        # Only a 0.2 task can end above its target, and the release says why.
        assert "above the task's target" in privacy["notes"]
    if path.name == "task-correlated-neighbours-add-remove.json":
        assert privacy["delta"] > task.delta
        assert "an absent user still sent its noise shares" in privacy["notes"]


@pytest.mark.parametrize("path", RELEASES, ids=lambda p: p.stem)
def test_a_0_2_release_composes_with_its_guarantee_re_derived(path):
    document = json.loads(path.read_text())
    if path.name in REFUSED:
        with pytest.raises(InvalidParameterError, match="below what its parameters certify"):
            reports_from_json(document)
        return
    reports = reports_from_json(document)
    assert reports
    stated = document.get("privacy", document)
    if "epsilon" in stated and "delta" in stated:
        assert reports[0].epsilon <= stated["epsilon"] * (1 + 1e-9)
