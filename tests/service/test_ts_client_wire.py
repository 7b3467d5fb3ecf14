"""The TypeScript client speaks Python's wire format and reads Python's task documents.

* The schema copies the TS package reads are the Python package's files.
* The committed vectors (clients/ts/test/vectors/wire.json, read by the TS tests) are still
  what Python computes: its ciphertexts open, its plaintexts, info strings and task digests.
* Ciphertexts sealed by the TS package (both X25519 implementations) open in Python.
* Python's float repr and task digests, on random doubles and on tasks Python created.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from _ts_client import PACKAGE, ROOT, tool

from shuffledp.service.task import Task, create_task, save_task
from shuffledp.service.wire import (
    CIPHERTEXT_LENGTH,
    MessageOpener,
    encode_plaintext,
    hpke_info,
    private_key_from_b64,
    public_key_to_b64,
)

VECTORS = json.loads((PACKAGE / "test" / "vectors" / "wire.json").read_text(encoding="utf-8"))
SCHEMA_FILES = [
    "task.schema.json",
    "defs.schema.json",
    "flip-spec.schema.json",
    "krr-spec.schema.json",
    "correlated-spec.schema.json",
    "augmented-spec.schema.json",
    "submission.schema.json",
]


def test_schema_copies_are_the_python_packages_files():
    for name in SCHEMA_FILES:
        copy = (PACKAGE / "schemas" / name).read_bytes()
        assert copy == (ROOT / "src" / "shuffledp" / "schemas" / name).read_bytes(), name


def test_committed_vectors_are_what_python_computes():
    key = private_key_from_b64(VECTORS["private_key"])
    assert public_key_to_b64(key.public_key()) == VECTORS["public_key"]
    assert hpke_info(VECTORS["task_id"]).hex() == VECTORS["info_hex"]
    for item in VECTORS["sealed"]:
        opener = MessageOpener(key, VECTORS["task_id"], item["domain_size"])
        ciphertext = base64.b64decode(item["ciphertext"])
        assert opener.open(ciphertext) == item["index"]
        assert encode_plaintext(item["index"], item["domain_size"]).hex() == item["plaintext_hex"]
    other = VECTORS["other_task"]
    assert MessageOpener(key, other["task_id"], 5).open(base64.b64decode(other["ciphertext"])) == 2
    for vector in VECTORS["tasks"]:
        task = Task.from_dict(json.loads(vector["text"]))
        assert task.digest() == vector["digest"], vector["name"]
        assert (
            json.dumps(task.to_dict(), sort_keys=True, separators=(",", ":")) == vector["canonical"]
        )


@pytest.mark.parametrize("kem", ["webcrypto", "pure-js"])
def test_python_opens_what_the_ts_package_seals(tmp_path: Path, kem: str):
    vector = VECTORS["tasks"][1]  # a correlated task (2d = 6 messages) under the fixed key
    path = tmp_path / "task.json"
    path.write_text(vector["text"], encoding="utf-8")
    task = Task.from_dict(json.loads(vector["text"]))
    indices = [i % task.message_domain_size for i in range(4 * task.message_domain_size)]
    sealed = tool("seal", path, kem, stdin=json.dumps(indices))
    assert sealed["kem"] == kem
    ciphertexts = [base64.b64decode(c, validate=True) for c in sealed["ciphertexts"]]
    assert all(len(c) == CIPHERTEXT_LENGTH for c in ciphertexts)
    assert len({c[:32] for c in ciphertexts}) == len(ciphertexts)  # a fresh encapsulation each
    opener = MessageOpener(private_key_from_b64(VECTORS["private_key"]), task.task_id,
                           task.message_domain_size)  # fmt: skip
    assert [opener.open(c) for c in ciphertexts] == indices
    # Bound to this task: another task id does not open them.
    stranger = MessageOpener(private_key_from_b64(VECTORS["private_key"]), "0" * 32, 6)
    assert stranger.open_payload(b"".join(ciphertexts)).undecryptable == len(ciphertexts)


def test_float_repr_is_pythons():
    rng = np.random.default_rng()
    bits = rng.integers(0, 2**64, size=4000, dtype=np.uint64)
    doubles = [x for x in bits.view(np.float64).tolist() if math.isfinite(x)]
    # Every decimal exponent Python's repr switches form around, and the extremes.
    doubles += [10.0**e for e in range(-10, 20)] + [-(10.0**e) * 1.5 for e in range(-10, 20)]
    doubles += [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1 / 3]
    doubles += [2.0**53, 2.0**63, 9999999999999998.0, 0.0001, 0.00009999999999999999, 1e-5]
    doubles += [
        struct.unpack("<d", struct.pack("<d", rng.normal() * 10.0**k))[0] for k in range(-30, 30)
    ]
    assert tool("repr", stdin=json.dumps(doubles)) == [repr(x) for x in doubles]


@pytest.mark.parametrize(
    ("protocol", "domain"),
    [
        ("krr", ["caf\u00e9", "na\u00efve", "\u4e2d\u6587", "\U0001f600 smile"]),
        ("flip", ["a", "b", "c"]),
    ],
)
def test_ts_digest_of_a_task_python_created(tmp_path: Path, protocol: str, domain: list[str]):
    task, _ = create_task(protocol, domain, 1.0, 1e-6, 200)
    save_task(task, tmp_path / "task.json")
    read = tool("digest", tmp_path / "task.json")
    assert read["digest"] == task.digest()
    assert read["canonical"] == json.dumps(task.to_dict(), sort_keys=True, separators=(",", ":"))


def test_ts_reads_and_writes_json_as_python_does() -> None:
    """``parseJson`` then ``pythonDumps`` equals ``json.dumps(json.loads(text), sort_keys=True,
    separators=(",", ":"))`` on random documents: strings of every kind of UTF-16 code unit
    (controls, DEL, non-ASCII, paired and lone surrogates, every escape), written raw or
    escaped; and both refuse the same malformed strings."""
    rng = np.random.default_rng(26)
    pools = [
        list(range(0x20)),
        [0x22, 0x2F, 0x5C, 0x7E, 0x7F, 0x80, 0xFF, 0x2028, 0xFEFF, 0xFFFF],
        list(range(0x20, 0x7F)),
        [0xD800, 0xDBFF, 0xDC00, 0xDFFF],  # lone surrogates
    ]

    def text() -> str:
        units = []
        for _ in range(int(rng.integers(0, 12))):
            pool = pools[int(rng.integers(len(pools)))]
            units.append(chr(pool[int(rng.integers(len(pool)))]))
        if rng.random() < 0.3:
            units.append("\U0001f600")  # a pair in UTF-16
        return "".join(units)

    texts = []
    for _ in range(400):
        doc = {text(): [text(), {text(): text()}] for _ in range(3)}
        texts.append(json.dumps(doc))  # escaped (ensure_ascii)
        raw = json.dumps(doc, ensure_ascii=False)
        if all(not 0xD800 <= ord(c) <= 0xDFFF for c in raw):  # UTF-8 cannot carry lone ones
            texts.append(raw)
    bad = ['"\x01"', '"abc', '"\\x"', '"\\u12"', '"\\u12G4"', '["a",]']
    out = tool("dumps", stdin=json.dumps(texts + bad))
    expected = [json.dumps(json.loads(t), sort_keys=True, separators=(",", ":")) for t in texts]
    assert out[: len(texts)] == expected
    for t, got in zip(bad, out[len(texts) :], strict=True):
        with pytest.raises(ValueError):
            json.loads(t)
        assert isinstance(got, dict) and "error" in got, (t, got)
