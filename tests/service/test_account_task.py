"""``account task``: a task document's guarantee re-derived from its spec, not taken as stated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shuffledp.cli import main
from shuffledp.service.task import create_task, save_task

DOMAIN = ["a", "b", "c", "d"]


def _account(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["account", "task", *argv, "--json"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else {}), captured.err


@pytest.mark.parametrize("protocol", ["flip", "krr", "correlated", "augmented"])
def test_a_task_meets_its_target_as_the_service_certifies_it(
    protocol: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task, _ = create_task(protocol, DOMAIN, 1.0, 1e-6, 300)
    save_task(task, tmp_path / "task.json")
    code, out, _ = _account(capsys, "--task", str(tmp_path / "task.json"))
    assert code == 0 and out["meets_target"] and out["delta"] <= 1e-6
    assert out["digest"] == task.digest() and out["parameters"] == task.spec.to_dict()
    # The same numbers the analyzer publishes: the certificate at min_batch_users.
    expected = task.build_protocol(300).privacy_report()
    assert out["certificate_delta"] == expected.delta
    assert out["message_bounds_delta"] == task.cap_delta()


def test_an_edited_parameter_is_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A task whose epsilon0 was raised after calibration states a target it does not meet."""
    task, _ = create_task("krr", DOMAIN, 1.0, 1e-6, 300)
    document = task.to_dict()
    document["parameters"]["epsilon0"] *= 1.5
    path = tmp_path / "task.json"
    path.write_text(json.dumps(document))
    code, out, _ = _account(capsys, "--task", str(path))
    assert code == 0 and not out["meets_target"] and out["delta"] > 1e-6


def test_fewer_users_than_the_task_promises_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task, _ = create_task("flip", DOMAIN, 1.0, 1e-6, 300)
    save_task(task, tmp_path / "task.json")
    code, _, err = _account(capsys, "--task", str(tmp_path / "task.json"), "--n", "299")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--n 299" in err
    code, more, _ = _account(capsys, "--task", str(tmp_path / "task.json"), "--n", "3000")
    assert code == 0 and more["n"] == 3000 and more["meets_target"]
