"""Task documents, key files and tokens."""

from __future__ import annotations

import json
import os
import stat

import pytest

from shuffledp._validation import InvalidParameterError
from shuffledp.service.task import (
    TASK_FORMAT,
    TASK_SCHEMA,
    Task,
    TaskError,
    build_protocol,
    create_task,
    load_private_key,
    load_task,
    save_private_key,
    save_task,
)
from shuffledp.service.tokens import (
    TokenError,
    issue_token,
    issue_tokens,
    load_token_key,
    new_token_key,
    save_token_key,
    verify_token,
)
from shuffledp.specs import FlipSpec, KRRSpec

DOMAIN = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def flip_task():
    return create_task("flip", DOMAIN, 1.0, 1e-6, 500)


@pytest.fixture(scope="module")
def krr_task():
    return create_task("krr", DOMAIN, 1.0, 1e-6, 500, one_submission_per_client=True)


@pytest.mark.parametrize("which", ["flip_task", "krr_task"])
def test_json_round_trip(which, request, tmp_path):
    task, _ = request.getfixturevalue(which)
    assert Task.from_dict(json.loads(task.to_json())) == task
    save_task(task, tmp_path / "task.json")
    assert load_task(tmp_path / "task.json") == task
    assert load_task(tmp_path / "task.json").digest() == task.digest()
    assert stat.S_IMODE(os.stat(tmp_path / "task.json").st_mode) == 0o644
    doc = task.to_dict()
    assert doc["format"] == TASK_FORMAT
    assert doc["hpke"] == {"kem": "X25519", "kdf": "HKDF_SHA256", "aead": "CHACHA20_POLY1305"}
    assert len(task.task_id) == 32 and int(task.task_id, 16) >= 0


def test_task_holds_calibrated_parameters(flip_task, krr_task):
    flip, _ = flip_task
    assert flip.protocol == "flip" and flip.spec.fake_users == 100 and 0 < flip.spec.q < 0.5
    assert flip.min_batch_users == 500
    krr, _ = krr_task
    assert krr.protocol == "krr" and krr.spec.epsilon0 > 1.0 and krr.one_submission_per_client
    assert krr.max_messages_per_submission == 1


@pytest.mark.parametrize("which", ["flip_task", "krr_task"])
def test_guarantee_holds_for_every_batch_of_at_least_min_users(which, request):
    task, _ = request.getfixturevalue(which)
    deltas = [build_protocol(task, n).privacy_report().delta for n in (500, 501, 800, 5000)]
    assert all(d <= task.delta for d in deltas)
    assert build_protocol(task, 500).privacy_report().epsilon == task.epsilon


def test_private_key_is_never_in_the_document(flip_task, tmp_path):
    task, key = flip_task
    raw = key.private_bytes_raw()
    text = task.to_json()
    import base64

    assert base64.b64encode(raw).decode() not in text and raw.hex() not in text
    path = save_private_key(key, tmp_path / "analyzer.key")
    assert base64.b64encode(raw).decode() in path.read_text()


def test_key_file_mode_0600_and_never_overwritten(flip_task, tmp_path):
    task, key = flip_task
    old = os.umask(0)  # even with a permissive umask
    try:
        path = save_private_key(key, tmp_path / "analyzer.key")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before = path.read_bytes()
    with pytest.raises(InvalidParameterError, match="already exists"):
        save_private_key(key, path)
    assert path.read_bytes() == before
    assert load_private_key(path, task).private_bytes_raw() == key.private_bytes_raw()


def test_key_of_another_task_is_refused(flip_task, krr_task, tmp_path):
    _, key = krr_task
    path = save_private_key(key, tmp_path / "other.key")
    with pytest.raises(TaskError, match="not the analyzer key"):
        load_private_key(path, flip_task[0])


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"format": "shuffledp-task/2"}, "format"),
        ({"task_id": "xyz"}, "task_id"),
        ({"protocol": "laplace"}, "protocol"),
        ({"domain": ["a"]}, "two labels"),
        ({"domain": ["a", "a"]}, "repeats"),
        ({"epsilon": -1}, "epsilon"),
        ({"delta": 2}, "delta"),
        ({"min_batch_users": 1}, "min_batch_users"),
        ({"public_key": "abc"}, "public key"),
        ({"hpke": {"kem": "P256"}}, "hpke"),
        ({"parameters": {"calibration": "exact", "q": 0.7, "fake_users": 100}}, "q"),
        ({"message_format": 2}, "message_format"),
        ({"schema": "urn:shuffledp:schema:task:2"}, "task schema must be"),
        ({"schema": None}, "task schema must be"),
        # The schema's shape (Python reads no document its own schema refuses).
        ({"comment": "hello"}, "unknown field 'comment'"),
        ({"shuffledp_version": 3}, "shuffledp_version must be a string, got 3"),
        ({"shuffledp_version": None}, "shuffledp_version must be a string"),
        ({"domain": ["a", 2]}, "domain label 1 must be a string, got 2"),
        ({"domain": "ab"}, "domain must be a list of labels, got a str"),
        ({"domain": {"a": 1, "b": 2}}, "domain must be a list of labels, got a dict"),
        ({"message_format": True}, "message_format must be 1, got True"),
    ],
)
def test_bad_documents_are_refused(flip_task, change, fragment):
    doc = {**flip_task[0].to_dict(), **change}
    with pytest.raises(TaskError, match=fragment):
        Task.from_dict(doc)


def test_a_document_written_by_0_1_loads_and_keeps_its_digest(krr_task, tmp_path):
    import hashlib

    doc = {k: v for k, v in krr_task[0].to_dict().items() if k != "schema"}
    doc["shuffledp_version"] = "0.1.0"
    (tmp_path / "old.json").write_text(json.dumps(doc, indent=2))
    task = load_task(tmp_path / "old.json")
    assert task.schema is None and task.to_dict() == doc
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    assert task.digest() == hashlib.sha256(canonical).hexdigest()
    assert krr_task[0].schema == TASK_SCHEMA and next(iter(krr_task[0].to_dict())) == "schema"


def test_missing_field_and_non_object(flip_task):
    doc = flip_task[0].to_dict()
    del doc["min_batch_users"]
    with pytest.raises(TaskError, match="min_batch_users"):
        Task.from_dict(doc)
    with pytest.raises(TaskError):
        Task.from_dict([1, 2])
    doc = flip_task[0].to_dict()
    del doc["shuffledp_version"]  # every version since 0.1 wrote it
    with pytest.raises(TaskError, match="no field 'shuffledp_version'"):
        Task.from_dict(doc)


def test_an_optional_parameter_written_as_null_is_refused():
    """Left out, an optional parameter does not apply; written as null it is refused (as the
    augmented spec's schema does), not read as absent."""
    task, _ = create_task("augmented", ["a", "b", "c"], 1.0, 1e-6, 3000, variant="sageo")
    doc = task.to_dict()
    assert "trials" not in doc["parameters"]
    assert Task.from_dict(doc).digest() == task.digest()
    doc["parameters"]["trials"] = None
    with pytest.raises(TaskError, match="trials is null"):
        Task.from_dict(doc)


def test_flip_message_bound_is_a_far_tail():
    from scipy.stats import binom

    d, q, k = 4, 0.004, 100
    bound = FlipSpec(q, k).max_messages(d)
    trials = (k + 1) * d - 1
    assert binom.sf(bound - 1, trials, q) <= 1e-30 < binom.sf(bound - 2, trials, q)
    assert KRRSpec(1.0).max_messages(10) == 1


def test_tokens(tmp_path):
    key = new_token_key()
    path = save_token_key(key, tmp_path / "token.key")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_token_key(path) == key
    task_id = "ab" * 16
    token = issue_token(key, task_id)
    client_id = verify_token(key, task_id, token)
    assert token.startswith(client_id + ".")
    tokens = issue_tokens(key, task_id, 50)
    assert len({verify_token(key, task_id, t) for t in tokens}) == 50
    with pytest.raises(TokenError):
        verify_token(key, "cd" * 16, token)  # another task
    with pytest.raises(TokenError):
        verify_token(new_token_key(), task_id, token)  # another key
    forged = token[:-1] + ("0" if token[-1] != "0" else "1")
    with pytest.raises(TokenError):
        verify_token(key, task_id, forged)
    for bad in ("", "x" * 97, None, 5, client_id):
        with pytest.raises(TokenError):
            verify_token(key, task_id, bad)


@pytest.mark.parametrize("as_path", [False, True], ids=["task", "path"])
def test_client_takes_a_task_or_the_path_of_its_file(flip_task, tmp_path, as_path):
    from shuffledp.service.client import Client
    from shuffledp.service.wire import MessageOpener

    task, key = flip_task
    save_task(task, tmp_path / "task.json")
    source = str(tmp_path / "task.json") if as_path else task
    with Client(source, "http://127.0.0.1:9", seed=3) as client:
        assert client.task == task
        assert client.url.endswith(f"/v1/tasks/{task.task_id}/submissions")
        submission = client.prepare("c")
    opener = MessageOpener(key, task.task_id, task.message_domain_size)
    opened = [opener.open(c) for c in submission.ciphertexts]
    assert opened == submission.messages.tolist() and len(opened) >= 1


def test_client_refuses_a_missing_or_bad_task_file_and_other_types(flip_task, krr_task, tmp_path):
    from shuffledp._validation import DataError
    from shuffledp.service.client import Client

    with pytest.raises(FileNotFoundError, match="does not exist"):
        Client(tmp_path / "absent.json", "http://127.0.0.1:9")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TaskError, match="not JSON"):
        Client(str(tmp_path / "bad.json"), "http://127.0.0.1:9")
    with pytest.raises(InvalidParameterError, match="Task or the path"):
        Client(flip_task[0].to_dict(), "http://127.0.0.1:9")  # type: ignore[arg-type]
    save_task(krr_task[0], tmp_path / "krr.json")
    with pytest.raises(DataError, match="token"):
        Client(tmp_path / "krr.json", "http://127.0.0.1:9")
