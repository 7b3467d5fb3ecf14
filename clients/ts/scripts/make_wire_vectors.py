"""Write the shared vectors the TypeScript client's tests read: test/vectors/wire.json.

Everything in the file is computed here, by the Python package (the reference):

* a fixed X25519 key pair (derived from a fixed seed: these keys protect nothing);
* the HPKE ``info`` of a task id and the 5-byte plaintexts of chosen indices
  (``shuffledp.service.wire``);
* ciphertexts sealed by Python's ``MessageSealer`` (fresh encapsulations: the TS tests
  open them with the private key and check the plaintexts), and one sealed for another
  task id, which must not open under this task's info;
* task documents (text, as a file would hold it) with Python's ``Task.digest()`` and the
  canonical JSON it hashes: non-ASCII and control-character labels, floats that ``repr``
  writes in exponent form, integers where the spec wants a float.

Run from the repository root: ``.venv/bin/python clients/ts/scripts/make_wire_vectors.py``.
tests/service/test_ts_client_wire.py checks the committed file still matches Python.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from shuffledp.service.task import TASK_FORMAT, TASK_SCHEMA, Task
from shuffledp.service.wire import (
    SUITE_NAMES,
    WIRE_VERSION,
    MessageSealer,
    b64encode,
    encode_plaintext,
    hpke_info,
    private_key_to_b64,
    public_key_to_b64,
)

OUT = Path(__file__).resolve().parents[1] / "test" / "vectors" / "wire.json"
TASK_ID = "00112233445566778899aabbccddeeff"
OTHER_TASK_ID = "ffeeddccbbaa99887766554433221100"
#: (index, message domain size) pairs: the uint32's byte order and both ends of its range.
INDICES = [(0, 5), (4, 5), (1, 10), (255, 512), (256, 512), (65_535, 2**17), (2**32 - 1, 2**32)]


def fixed_key() -> X25519PrivateKey:
    """The vectors' key pair: fixed, so the file changes only when the format does."""
    return X25519PrivateKey.from_private_bytes(hashlib.sha256(b"shuffledp ts vectors").digest())


def document(
    public_key: str, protocol: str, domain: list[str], parameters: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    """A task document of this protocol under the vectors' key, ``fields`` replaced."""
    doc = {
        "schema": TASK_SCHEMA,
        "format": TASK_FORMAT,
        "task_id": TASK_ID,
        "protocol": protocol,
        "domain": domain,
        "domain_source": "declared",
        "parameters": parameters,
        "epsilon": 1.0,
        "delta": 1e-6,
        "min_batch_users": 100,
        "max_messages_per_submission": 1,
        "one_submission_per_client": False,
        "message_format": WIRE_VERSION,
        "hpke": dict(SUITE_NAMES),
        "public_key": public_key,
        "shuffledp_version": "0.3.0",
    }
    doc.update(fields)
    return doc


def task_vectors(public_key: str) -> list[dict[str, Any]]:
    """Task documents as text, with Python's digest and the canonical JSON it hashes."""
    labels = ["caf\u00e9", "\u65e5\u672c", "\U0001f600", 'quote"', "back\\slash", "tab\there",
              "del\u007fete", "\u00a0nbsp", "plain"]  # fmt: skip
    cases: list[tuple[str, str]] = [
        ("non-ASCII and escaped labels (ensure_ascii)", json.dumps(
            document(public_key, "krr", labels, {"epsilon0": 2.5, "estimator": "inversion",
                                                 "calibration": "exact"}),
            indent=2, ensure_ascii=False)),
        ("correlated: slack null, floats of every repr form", json.dumps(
            document(public_key, "correlated", ["a", "b", "c"],
                     {"alpha": 0.6342253320600151, "flood_r": 15.762249441942016,
                      "flood_q": 0.9507356856424147, "min_honest": 1000,
                      "neighbours": "replacement", "slack": None, "calibration": "exact"},
                     min_batch_users=1000, max_messages_per_submission=3067,
                     epsilon=1e-05, delta=5e-324), indent=2)),
        ("flip: q in exponent form, big epsilon", json.dumps(
            document(public_key, "flip", ["x", "y"],
                     {"q": 4.2598270539284086e-05, "fake_users": 100, "calibration": "exact"},
                     epsilon=1e16, delta=0.0001, max_messages_per_submission=19), indent=2)),
        ("augmented sbin: beta written as the integer 1 (a float to Python's spec)",
         json.dumps(document(public_key, "augmented", ["p", "q", "r"],
                             {"variant": "sbin", "beta": 1.0, "trials": 40, "calibration": "fixed"},
                             epsilon=1.0, min_batch_users=2, one_submission_per_client=True))
         .replace('"beta": 1.0', '"beta": 1').replace('"epsilon": 1.0', '"epsilon": 1')
         .replace('"delta": 1e-06', '"delta": 1E-6')),
        ("augmented sageo: q_left written as 0, a key repeated (the last one counts)",
         json.dumps(document(public_key, "augmented", ["u", "v"],
                             {"variant": "sageo", "beta": 0.75, "nu": 3, "q_left": 0.5,
                              "q_right": 0.5, "calibration": "fixed"}), indent=1)
         .replace('"q_left": 0.5', '"q_left": 7, "q_left": 0')),
    ]  # fmt: skip
    out = []
    for name, text in cases:
        task = Task.from_dict(json.loads(text))
        canonical = json.dumps(task.to_dict(), sort_keys=True, separators=(",", ":"))
        assert hashlib.sha256(canonical.encode()).hexdigest() == task.digest()
        out.append({"name": name, "text": text, "canonical": canonical, "digest": task.digest()})
    return out


def main() -> int:
    """Write test/vectors/wire.json."""
    key = fixed_key()
    public_key = public_key_to_b64(key.public_key())
    sealed = []
    for index, size in INDICES:
        sealer = MessageSealer(key.public_key(), TASK_ID, size)
        sealed.append({
            "index": index,
            "domain_size": size,
            "plaintext_hex": encode_plaintext(index, size).hex(),
            "ciphertext": b64encode(sealer.seal(index)),
        })  # fmt: skip
    other = MessageSealer(key.public_key(), OTHER_TASK_ID, 5).seal(2)
    vectors = {
        "about": "Written by clients/ts/scripts/make_wire_vectors.py (Python's "
        "shuffledp.service.wire "
        "and Task.digest); the key pair is fixed and protects nothing.",
        "private_key": private_key_to_b64(key),
        "public_key": public_key,
        "task_id": TASK_ID,
        "info_hex": hpke_info(TASK_ID).hex(),
        "sealed": sealed,
        "other_task": {"task_id": OTHER_TASK_ID, "index": 2, "ciphertext": b64encode(other)},
        "tasks": task_vectors(public_key),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(vectors, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
